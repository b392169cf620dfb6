"""Options shared by the command modules: --layout, the resource limits, subjects,
and --format's default where the output goes."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from lbparse.cli.output import add_format_arguments
from lbparse.codec.dispatch import DECODERS
from lbparse.codec.limits import (
    COUNT_LIMITS,
    DEFAULT,
    GRPC_LIMITS,
    LIMIT_NAMES,
    PROTOBUF_MAX_DEPTH,
    Limits,
    parse_size,
)
from lbparse.digits import ascii_int


def layout_choices() -> list[str]:
    """The envelope layouts `--layout` accepts.

    Returns:
        The decoders' names, in their order ("v0", ..., "auto").
    """
    return list(DECODERS)


def add_layout_argument(parser: Any, default: str = "v0") -> None:
    """Add `--layout` to a parser.

    Args:
        parser: The command's parser (or an argument group).
        default: The layout used when the option is not given.
    """
    parser.add_argument(
        "--layout",
        default=default,
        choices=layout_choices(),
        metavar="LAYOUT",  # the choices are in the help, wrapped there
        help=f"envelope generation to decode as: {', '.join(layout_choices())} "
        f"(default: {default})",
    )


_LIMIT_HELP = {
    "max_payload": "refuse payloads longer than SIZE (bytes; k, M, G suffixes) as bad_payload",
    "max_frame": "refuse NATS messages that declare more than SIZE bytes, without buffering them",
    "max_depth": "refuse protobuf payloads nested deeper than N levels (1..100)",
    "max_reassembly": "bytes one TCP direction may hold behind a hole before it is declared lost",
    "max_raft_db": "bytes of raft.db's keys and values decoded in all; the log past it is "
    "counted, not decoded",
    "max_grpc_elements": "protobuf fields one gRPC message may decode to; past it the message "
    "is not decoded",
    "max_grpc_inflate": "bytes gzip may add to a capture's gRPC messages, in all; past it "
    "compressed messages that would grow are not decompressed",
    "max_grpc_headers": "bytes of long header values (over 256 bytes) gRPC call records keep, "
    "in all; past it they are not kept",
    "max_open_calls": "gRPC calls open at once, all connections together; past it the oldest "
    "is given up",
}


def _size(text: str) -> int:
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a limit of {text!r} bytes would refuse everything")
    return value


def _depth(text: str) -> int:
    depth = ascii_int(text.strip(), PROTOBUF_MAX_DEPTH)
    if not depth:
        raise argparse.ArgumentTypeError(f"a depth is 1..{PROTOBUF_MAX_DEPTH}, not {text!r}")
    return depth


def add_limit_arguments(parser: Any, names: tuple[str, ...]) -> None:
    """--max-payload and friends: lbparse.codec.limits.Limits fields, defaults shown.

    A command that reads captures (one that takes max_reassembly) reads their
    gRPC too, and takes GRPC_LIMITS with it.

    Args:
        parser: The command's parser.
        names: The Limits fields to offer, as options (max_payload ->
            --max-payload).
    """
    group = parser.add_argument_group("resource limits (each reported when hit)")
    if "max_reassembly" in names:
        names = names + tuple(n for n in GRPC_LIMITS if n not in names)
    for name in names:
        default = getattr(DEFAULT, name)
        group.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=default,
            type=_depth if name == "max_depth" else _size,
            metavar="N" if name in COUNT_LIMITS else "SIZE",
            help=f"{_LIMIT_HELP[name]} (default: {default})",
        )


def limits_from(args: Any) -> Limits | None:
    """The Limits the options ask for; None when they are the defaults.

    Args:
        args: The parsed command line (its limit options, where it has them).

    Returns:
        The Limits, or None.
    """
    chosen = {n: getattr(args, n) for n in LIMIT_NAMES if hasattr(args, n)}
    limits = Limits(**chosen)
    return None if limits == DEFAULT else limits


def subject(text: str) -> str:
    """A NATS subject to subscribe to (argparse type).

    Dot-separated tokens, none empty, no white space; `*` matches one token,
    `>` the rest (last only).

    Args:
        text: The option's value.

    Returns:
        The subject, unchanged.

    Raises:
        ArgumentTypeError: It is not a valid subject.
    """
    tokens = text.split(".")
    if not text or any(not t or any(c.isspace() for c in t) for t in tokens):
        raise argparse.ArgumentTypeError(
            f"invalid subject {text!r}: tokens separated by '.', none empty, no white space"
        )
    if ">" in tokens[:-1]:
        raise argparse.ArgumentTypeError(
            f"invalid subject {text!r}: '>' may only be the last token"
        )
    return text


# --format when it is not given: a table for a person at a terminal, JSON
# Lines for a program (a pipe, the -o file), as `ls` prints columns only to a
# terminal. The words are the option's help; the value is chosen at run time.
FORMAT_BY_TERMINAL = "a table on a terminal, else jsonl"


def add_terminal_format_arguments(p: argparse.ArgumentParser, jsonl: str, table: str) -> None:
    """--format jsonl|table (and --json) whose default is `format_for_output`'s choice.

    Args:
        p: The command's parser.
        jsonl: The help's words for jsonl.
        table: The help's words for table.
    """
    add_format_arguments(p, FORMAT_BY_TERMINAL, jsonl=jsonl, table=table)
    p.set_defaults(format=None)  # not given: said by format_for_output


def format_for_output(args: argparse.Namespace, out: TextIO | None = None) -> str:
    """args.format, set when it was not given.

    "table" if the output is a terminal, else "jsonl".

    Args:
        args: The parsed command line; its format is set if it was None.
        out: The output to test; None for sys.stdout (the -o file while a
            command runs).

    Returns:
        The format: "table", "jsonl" or what was given.
    """
    if args.format is None:
        stream = sys.stdout if out is None else out
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):  # closed, or not a file at all
            tty = False
        args.format = "table" if tty else "jsonl"
    return str(args.format)


NATS_SCHEMES = ("nats", "tls", "ws", "wss")


def server_url(text: str) -> str:
    """A NATS server URL (argparse type).

    nats://HOST:PORT, tls://, ws://, wss://, or HOST:PORT (nats:// is then
    assumed, as the nats CLI does).

    Args:
        text: The option's value.

    Returns:
        The URL, with nats:// added when no scheme was given.

    Raises:
        ArgumentTypeError: It is not such a URL (unknown scheme, no host, a
            port that is not 0..65535, white space).
    """
    from urllib.parse import urlsplit

    url = text if "://" in text else f"nats://{text}"
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError when it is not a number 0..65535
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid server URL {text!r}: {exc}") from None
    if parts.scheme not in NATS_SCHEMES or not parts.hostname or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(
            f"invalid server URL {text!r}: expected nats://HOST[:PORT] "
            f"(or {', '.join(f'{s}://' for s in NATS_SCHEMES[1:])})"
        )
    del port
    return url


__all__ = [
    "FORMAT_BY_TERMINAL",
    "NATS_SCHEMES",
    "add_layout_argument",
    "add_limit_arguments",
    "add_terminal_format_arguments",
    "format_for_output",
    "layout_choices",
    "limits_from",
    "server_url",
    "subject",
]
