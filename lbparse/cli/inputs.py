"""The inputs of `lbparse decode` and `lbparse check`: arguments, files, stdin, lines.

An input that cannot be read does not stop the run: it comes out as an
`Input` with a `problem` (the message, naming the file and line) and the
exit status it deserves, and the commands report it and go on, as jq does
with a bad line.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from lbparse.cli.status import DATA, OK, USAGE
from lbparse.errors import InputError

__all__ = ["STDIN", "Input", "add_input_arguments", "parse_base64", "parse_hex", "read_inputs"]

STDIN = "-"
_SHOWN = 40  # characters of a bad line quoted in its message


@dataclass(frozen=True)
class Input:
    """One input: its bytes and where they came from, or why there are none.

    Attributes:
        where: "argument", "stdin", a file name, or FILE:LINE.
        data: The input's bytes (empty when there is a problem).
        problem: What was wrong, where: printed as it is; None if nothing.
        status: The exit status it deserves: DATA for a bad line, USAGE for a
            bad argument or file, OK otherwise.
    """

    where: str  # "argument", "stdin", a file name, or FILE:LINE
    data: bytes = b""
    problem: str | None = None  # what was wrong, where: printed as it is
    status: int = OK  # DATA for a bad line, USAGE for a bad argument or file


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """INPUT... with --hex / --base64, as `read_inputs` reads them.

    Args:
        parser: The command's parser.
    """
    parser.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="hex string, or file of raw bytes ('-' = stdin); default: stdin",
    )
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument(
        "--hex",
        dest="mode",
        action="store_const",
        const="hex",
        help="inputs are text files ('-' = stdin, the default) with one hex "
        "envelope per line; a bad line is reported with its number and skipped",
    )
    fmt.add_argument(
        "--base64",
        dest="mode",
        action="store_const",
        const="base64",
        help="inputs are text files ('-' = stdin, the default) with one base64 "
        "envelope per line; a bad line is reported with its number and skipped",
    )
    parser.set_defaults(mode="auto")


def parse_hex(text: str, where: str) -> bytes:
    """The bytes of a hex string (white space and a 0x prefix allowed).

    Args:
        text: The hex text.
        where: Where it came from, for the error's message.

    Returns:
        The bytes.

    Raises:
        InputError: It is not hex (the message names `where` and quotes it).
    """
    clean = "".join(text.split())
    if clean.startswith(("0x", "0X")):
        clean = clean[2:]
    try:
        return bytes.fromhex(clean)
    except ValueError as exc:
        raise InputError(
            "bad_input", f"{where}: not hex ({exc}): {text.strip()[:_SHOWN]!r}"
        ) from None


def parse_base64(text: str, where: str) -> bytes:
    """The bytes of a base64 string (surrounding white space allowed).

    Args:
        text: The base64 text.
        where: Where it came from, for the error's message.

    Returns:
        The bytes.

    Raises:
        InputError: It is not base64 (the message names `where` and quotes it).
    """
    try:
        return base64.b64decode(text.strip(), validate=True)
    except binascii.Error as exc:
        raise InputError(
            "bad_input", f"{where}: not base64 ({exc}): {text.strip()[:_SHOWN]!r}"
        ) from None


def read_inputs(items: list[str], mode: str) -> Iterator[Input]:
    """Each input, in order.

    An input that cannot be read comes out as an Input with its problem and
    status; the run goes on.

    Args:
        items: The command's INPUT arguments.
        mode: "auto": each item is a file (`-`: stdin) of raw bytes, else a hex
            string; no items reads raw stdin. "hex" and "base64": the items
            are text files (`-` or none: stdin), one input per line; blank
            lines and lines starting with `#` are skipped.

    Yields:
        One Input per input (per line in hex and base64 modes).
    """
    if mode == "auto":
        for item in items or [STDIN]:
            yield _raw_input(item)
        return
    parse = parse_hex if mode == "hex" else parse_base64
    for name in items or [STDIN]:
        yield from _lines(name, parse)


def _raw_input(item: str) -> Input:
    if item == STDIN:
        return Input("stdin", sys.stdin.buffer.read())
    if os.path.isfile(item):
        try:
            with open(item, "rb") as f:
                return Input(item, f.read())
        except OSError as exc:
            return Input(item, problem=f"{item}: cannot read: {exc.strerror}", status=USAGE)
    try:
        return Input("argument", parse_hex(item, "argument"))
    except ValueError:
        what = "a directory" if os.path.isdir(item) else "neither a file nor hex"
        return Input("argument", problem=f"argument {item[:_SHOWN]!r} is {what}", status=USAGE)


def _lines(name: str, parse: Callable[[str, str], bytes]) -> Iterator[Input]:
    shown = "stdin" if name == STDIN else name
    if name == STDIN:
        stream: BinaryIO = sys.stdin.buffer
    else:
        try:
            stream = open(name, "rb")
        except OSError as exc:
            yield Input(shown, problem=f"{name}: cannot open: {exc.strerror}", status=USAGE)
            return
    try:
        for lineno, raw in enumerate(stream, 1):
            item = _line(raw, f"{shown}:{lineno}", parse)
            if item is not None:
                yield item
    finally:
        if name != STDIN:
            stream.close()


def _line(raw: bytes, where: str, parse: Callable[[str, str], bytes]) -> Input | None:
    """The input on one line; None for a blank line or a # comment."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as exc:
        return Input(
            where,
            problem=f"{where}: not ASCII text (byte 0x{raw[exc.start]:02x} at "
            f"column {exc.start + 1})",
            status=DATA,
        )
    if not text.strip() or text.lstrip().startswith("#"):
        return None
    try:
        return Input(where, parse(text, where))
    except ValueError as exc:
        return Input(where, problem=str(exc), status=DATA)
