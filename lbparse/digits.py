"""Whole numbers written in ASCII digits: the only ones lbparse reads from text.

`str.isdigit()` also takes '²' and the digits of other scripts, which `int()`
then refuses ('²') or reads ('٣' is 3): a check and a conversion that
disagree, on text that came from the input (a header value, a subject, a
file name, an option). Every place that turns such text into a number asks
`ascii_int`, which says None for anything but ASCII digits, and for a
number past the bound its caller gives, rather than raising.
"""

from __future__ import annotations

import re

__all__ = ["ascii_int"]

MAX_DIGITS = 20  # a u64 (a segment's base offset in its file name) has at most 20
_DIGITS = re.compile(f"[0-9]{{1,{MAX_DIGITS}}}")


def ascii_int(text: str, most: int | None = None) -> int | None:
    """`text` as a whole number, or None.

    Args:
        text: 1 to MAX_DIGITS ASCII digits, nothing else (no sign, no space:
            strip it first where spaces are allowed).
        most: the largest number taken (None: any of MAX_DIGITS digits).

    Returns:
        The number, or None when `text` is not such digits or the number is
        past `most`.
    """
    if not _DIGITS.fullmatch(text):
        return None
    value = int(text)
    return None if most is not None and value > most else value
