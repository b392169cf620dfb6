"""How the commands print: JSON lines, and times in tables (RFC 3339, UTC)."""

from __future__ import annotations

import datetime
import json
import sys
from typing import Any

__all__ = ["print_json", "rfc3339"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def print_json(obj: Any) -> None:
    """One JSON object on one line (UTF-8 as it is, not \\u escapes)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def rfc3339(ts: float | int, *, nanoseconds: bool = False) -> str:
    """A capture time as RFC 3339 in UTC: 2026-05-01T22:06:20.302883Z.

    `ts` is seconds since the epoch, or with `nanoseconds` an integer count
    of nanoseconds, written with all nine digits. A time no calendar date
    can hold (a damaged capture's clock can say anything) is written as
    the number it is."""
    try:
        ns = int(ts) if nanoseconds else round(ts * 1_000_000) * 1000
        when = _EPOCH + datetime.timedelta(microseconds=ns // 1000)
        if not 1 <= when.year <= 9999:
            raise OverflowError
    except (OverflowError, ValueError):
        return f"{ts}{'ns' if nanoseconds else 's'}"
    fraction = f"{ns % 1_000_000_000:09d}" if nanoseconds else f"{ns // 1000 % 1_000_000:06d}"
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + fraction + "Z"
