"""lbparse's output for people (tables, summaries, terminal lines), in one place.

- A message without a MsgType (a layout whose byte 7 is not one, a
  headerless payload) is shown as `NO_MSG_TYPE` in every table, summary and
  chart, never as Python's `None`. JSON and data columns keep a null.
- Text that came from the input (subjects, header keys and values, server
  ids, file and stream names) reaches a terminal only through `printable`:
  a control character (C0, DEL, C1) is written as jq writes it, `\\u001b`,
  so an input cannot move the cursor, retitle the window, clear the screen
  or break a table's lines.
- A file name that is not UTF-8 (an old system's Latin-1 name: Python keeps
  its bytes as lone surrogates) is text only through `utf8_text`: each such
  byte written `\\xNN`, as Python shows bytes, in every table, report and
  JSON; Arrow, Parquet and JSON hold UTF-8 alone.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["NO_MSG_TYPE", "msg_type_word", "printable", "utf8_text", "utf8_values"]

NO_MSG_TYPE = "(none)"

# C0 controls (NUL, BEL, ESC, newline...), DEL, and the C1 controls (U+0080-
# U+009F: CSI U+009B starts an escape sequence on many terminals as ESC [ does).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def msg_type_word(name: str | None) -> str:
    """A MsgType name for people: `NO_MSG_TYPE` when there is none.

    Args:
        name: The MsgType's name, or None (a headerless payload, a layout
            whose byte 7 is not one).

    Returns:
        `name` itself, or `NO_MSG_TYPE` for None.
    """
    return NO_MSG_TYPE if name is None else name


def _escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def printable(text: str) -> str:
    r"""`text` with every control character written as jq writes it (`\u001b`).

    Args:
        text: Text from the input (a subject, a header value), shown on a
            terminal.

    Returns:
        The same text, each control character replaced by its `\uXXXX` escape.
    """
    return _CONTROL.sub(_escape, text)


# Lone surrogates: U+DC80-U+DCFF is a byte that was not UTF-8 (os.fsdecode's
# surrogateescape); any other came from escaped JSON text.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _byte(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"\\u{c:04x}"


def utf8_text(text: str) -> str:
    r"""`text` as UTF-8 can hold it: a byte that was not UTF-8 written `\xNN`.

    Args:
        text: Text that may hold lone surrogates (a file name from the
            operating system, `os.fsdecode`'s).

    Returns:
        `text` itself when it has none; else each U+DC80-U+DCFF as the byte it
        stands for (`\xff`), any other lone surrogate as `\udNNN`.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(_byte, text)
    return text


def utf8_values(value: Any) -> Any:
    """`value` with every string in it, key or value, through `utf8_text`.

    A report's model, say: plain JSON values (dicts, lists, strings, numbers).

    Args:
        value: A JSON value, nested as deep as it is.

    Returns:
        The same structure; new containers only where a string changed.
    """
    if isinstance(value, (dict, list)) and _all_utf8(value):
        return value  # the common case, a whole model, in one C pass
    return _utf8_values(value)


def _all_utf8(value: Any) -> bool:
    """Whether no string of a JSON value holds a lone surrogate (one pass in C,
    a third of the time of the walk below on a report's model)."""
    try:
        json.dumps(value, ensure_ascii=False, check_circular=False).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError, RecursionError):  # a surrogate; not JSON
        return False
    return True


def _utf8_values(value: Any) -> Any:
    if isinstance(value, str):
        return utf8_text(value)
    if isinstance(value, dict):
        items = [(_utf8_values(k), _utf8_values(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, list):
        out = [_utf8_values(v) for v in value]
        return value if all(a is b for a, b in zip(out, value)) else out
    return value
