"""Helpers shared by the command modules: input reading, JSON output."""

from __future__ import annotations

import base64
import contextlib
import binascii
import os
import sys
from typing import Any, Iterator

from lbparse import jsonform
from lbparse.layouts import LAYOUTS
from lbparse.limits import DEFAULT, Limits, parse_size


def layout_choices() -> list[str]:
    from lbparse.dispatch import DECODERS

    return list(DECODERS)


def add_layout_argument(parser: Any, default: str = "v0") -> None:
    parser.add_argument("--layout", default=default, choices=layout_choices(),
                        help=f"envelope generation to decode as (default: {default})")


_LIMIT_HELP = {
    "max_payload": "refuse payloads longer than SIZE (bytes; k, M, G suffixes) as bad_payload",
    "max_frame": "refuse NATS messages that declare more than SIZE bytes, without buffering them",
    "max_depth": "refuse protobuf payloads nested deeper than N levels (1..100)",
    "max_reassembly": "bytes one TCP direction may hold behind a hole before it is declared lost",
}


def _size(text: str) -> int:
    import argparse

    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a limit of {text!r} bytes would refuse everything")
    return value


def _depth(text: str) -> int:
    import argparse

    from lbparse.limits import PROTOBUF_MAX_DEPTH

    if not text.strip().isdigit() or not 1 <= int(text) <= PROTOBUF_MAX_DEPTH:
        raise argparse.ArgumentTypeError(f"a depth is 1..{PROTOBUF_MAX_DEPTH}, not {text!r}")
    return int(text)


def add_limit_arguments(parser: Any, names: tuple[str, ...]) -> None:
    """--max-payload and friends: lbparse.limits.Limits fields, defaults shown."""
    group = parser.add_argument_group("resource limits (each reported when hit)")
    for name in names:
        default = getattr(DEFAULT, name)
        group.add_argument("--" + name.replace("_", "-"), dest=name, default=default,
                           type=_depth if name == "max_depth" else _size,
                           metavar="N" if name == "max_depth" else "SIZE",
                           help=f"{_LIMIT_HELP[name]} (default: {default})")


def limits_from(args: Any) -> Limits | None:
    """The Limits the options ask for; None when they are the defaults."""
    chosen = {n: getattr(args, n) for n in ("max_payload", "max_frame", "max_depth",
                                            "max_reassembly") if hasattr(args, n)}
    limits = Limits(**chosen)
    return None if limits == DEFAULT else limits


def add_input_arguments(parser: Any) -> None:
    """INPUT... with --hex / --base64, as `read_inputs` reads them."""
    parser.add_argument("inputs", nargs="*", metavar="INPUT",
                        help="hex string, or file of raw bytes ('-' = stdin); default: stdin")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--hex", dest="mode", action="store_const", const="hex",
                     help="inputs are text files (or stdin) with one hex envelope per line")
    fmt.add_argument("--base64", dest="mode", action="store_const", const="base64",
                     help="inputs are text files (or stdin) with one base64 envelope per line")
    parser.set_defaults(mode="auto")


def parse_hex(text: str, where: str) -> bytes:
    clean = "".join(text.split())
    if clean.startswith(("0x", "0X")):
        clean = clean[2:]
    try:
        return bytes.fromhex(clean)
    except ValueError:
        raise ValueError(f"{where}: not hex: {text[:40]!r}") from None


def parse_base64(text: str, where: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except binascii.Error:
        raise ValueError(f"{where}: not base64: {text[:40]!r}") from None


def read_inputs(items: list[str], mode: str) -> Iterator[tuple[str, bytes]]:
    """Yield (where, bytes) for each input.

    mode "auto": each item is a file (or `-` for stdin) holding raw bytes,
    else a hex string; no items reads raw stdin. Modes "hex" and "base64"
    read the items (files or `-`; stdin when none) as one input per line.
    """
    if mode == "auto":
        if not items:
            yield "stdin", sys.stdin.buffer.read()
        for item in items:
            if item == "-":
                yield "stdin", sys.stdin.buffer.read()
            elif os.path.isfile(item):
                with open(item, "rb") as f:
                    yield item, f.read()
            else:
                yield "argument", parse_hex(item, "argument")
        return
    parse = parse_hex if mode == "hex" else parse_base64
    for name in items or ["-"]:
        stream = sys.stdin if name == "-" else open(name, encoding="ascii")
        with contextlib.nullcontext(stream) if name == "-" else stream:
            for lineno, line in enumerate(stream, 1):
                if line.strip() and not line.lstrip().startswith("#"):
                    where = f"{'stdin' if name == '-' else name}:{lineno}"
                    yield where, parse(line, where)


def print_json(obj: Any) -> None:
    sys.stdout.write(jsonform.dumps(obj) + "\n")


__all__ = ["LAYOUTS", "add_input_arguments", "add_layout_argument", "add_limit_arguments", "limits_from", "parse_hex",
           "print_json", "read_inputs"]
