"""lbparse's output for people (tables, summaries, terminal lines), in one place.

- A message without a MsgType (a layout whose byte 7 is not one, a
  headerless payload) is shown as `NO_MSG_TYPE` in every table, summary and
  chart, never as Python's `None`. JSON and data columns keep a null.
- Text that came from the input (subjects, header keys and values, server
  ids, file and stream names) reaches a terminal only through `printable`:
  a control character (C0, DEL, C1) is written as jq writes it, `\\u001b`,
  so an input cannot move the cursor, retitle the window, clear the screen
  or break a table's lines.
"""

from __future__ import annotations

import re

__all__ = ["NO_MSG_TYPE", "msg_type_word", "printable"]

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
