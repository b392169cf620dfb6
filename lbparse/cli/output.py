"""How the commands print: JSON lines (lbparse's JSON convention), and times
in tables (RFC 3339, UTC)."""

from __future__ import annotations

import datetime
import sys
from typing import Any

from lbparse import jsonform

__all__ = ["print_json", "rfc3339"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_NS_PER_S = 1_000_000_000


def print_json(obj: Any) -> None:
    """One JSON object on one line, by lbparse.jsonform (64-bit integers as
    decimal strings, UTF-8 as it is, not \\u escapes)."""
    sys.stdout.write(jsonform.dumps(obj) + "\n")


def rfc3339(ns: int) -> str:
    """A time (integer nanoseconds since the Unix epoch, as every time lbparse
    gives) as RFC 3339 in UTC with all nine digits: 2026-05-01T22:06:20.302883000Z.
    A time no calendar date can hold (a damaged capture's clock can say
    anything) is written as the number of seconds it says: `1e+20s`."""
    seconds, fraction = divmod(ns, _NS_PER_S)
    try:
        when = _EPOCH + datetime.timedelta(seconds=seconds)
        if not 1 <= when.year <= 9999:
            raise OverflowError
    except OverflowError:
        return f"{ns / _NS_PER_S:g}s"
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{fraction:09d}Z"
