"""Helpers shared by the command modules: input reading, JSON output."""

from __future__ import annotations

import base64
import contextlib
import binascii
import json
import os
import sys
from typing import Any, Iterator

from lbparse.dispatch import LAYOUTS


def layout_choices() -> list[str]:
    from lbparse.layouts import DECODERS

    return list(DECODERS)


def add_layout_argument(parser: Any, default: str = "v0") -> None:
    parser.add_argument("--layout", default=default, choices=layout_choices(),
                        help=f"envelope generation to decode as (default: {default})")


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
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


__all__ = ["LAYOUTS", "add_layout_argument", "parse_hex", "print_json", "read_inputs"]
