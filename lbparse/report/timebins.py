"""Time bins whose width grows with the time span, for a streaming pass.

The span of the input is not known until it has been read, so counts are
kept per bin of the current width and, when the span would need more than
`MAX_BINS` bins, every series is re-keyed to the next wider width of
`WIDTHS` (each a whole multiple of the one before, so a bin of the old
width falls into exactly one bin of the new). Memory and the report's
size are then bounded by MAX_BINS whatever the input's length.

A bin is an integer index: its start is `index * width_ns` nanoseconds
since the Unix epoch. Times stay integer nanoseconds (as records carry
them) until the model: chart coordinates are milliseconds (what Vega-Lite
reads as a time), exact times are nanoseconds (`jsonform.Int64`) with their
readable UTC text (`utc_text`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, Protocol

from lbparse.codec.jsonform import Int64

MS = 1_000_000
S = 1_000 * MS
# Each width divides the next: 1 ms ... 1 week.
WIDTHS: tuple[int, ...] = (
    1 * MS,
    2 * MS,
    10 * MS,
    20 * MS,
    100 * MS,
    200 * MS,
    1 * S,
    2 * S,
    10 * S,
    20 * S,
    60 * S,
    120 * S,
    600 * S,
    1200 * S,
    3600 * S,
    7200 * S,
    21600 * S,
    43200 * S,
    86400 * S,
    604800 * S,
)
MAX_BINS = 600
OTHER = "(other)"


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def utc_text(ns: int | None) -> str | None:
    """`ns` (integer nanoseconds since the epoch) as ISO 8601 UTC text to the nanosecond.

    Computed in integers (no float seconds): 2026-09-21T08:00:00.123456789Z.

    Args:
        ns: The time in integer nanoseconds since the epoch, or None.

    Returns:
        The text; None for None; "N ns since the epoch" for a time beyond
        datetime's range.
    """
    if ns is None:
        return None
    secs, frac = divmod(int(ns), S)
    try:
        when = _EPOCH + datetime.timedelta(seconds=secs)
    except OverflowError:
        return f"{ns} ns since the epoch"
    return when.strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def exact_time(prefix: str, ns: int | None) -> dict[str, Any]:
    """The model's fields of one exact time.

    Args:
        prefix: The fields' name prefix ("start", "t"...).
        ns: The time in integer nanoseconds since the epoch, or None.

    Returns:
        {`<prefix>_ns`: an Int64 (a decimal string in --json) or None,
        `<prefix>_utc`: its text (utc_text)}.
    """
    return {f"{prefix}_ns": None if ns is None else Int64(ns), f"{prefix}_utc": utc_text(ns)}


class Rekeyable(Protocol):
    """A per-bin series that follows its TimeAxis when the bins widen."""

    def rekey(self, factor: int) -> None:
        """Move the series' values to bins `factor` times wider.

        Args:
            factor: How many old bins make one new bin.
        """
        ...


class TimeAxis:
    """The bin width in force, and the series that must follow it when it grows.

    Bins start at WIDTHS[0] wide and widen to the next width whenever the span
    seen would need more than `max_bins` bins; registered series are rekeyed.

    Args:
        max_bins: The most bins the span may take before the bins widen.
    """

    def __init__(self, max_bins: int = MAX_BINS) -> None:
        self.max_bins = max_bins
        self.level = 0
        self.width = WIDTHS[0]
        self.lo = 1  # lowest and highest bin index seen (lo > hi: none yet)
        self.hi = 0
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self._series: list[Rekeyable] = []

    def register(self, series: Rekeyable) -> None:
        """Have a series rekeyed whenever the bins widen.

        Args:
            series: The per-bin series (Counts, Maxima, AckLatency...).
        """
        self._series.append(series)

    def index(self, ns: int) -> int:
        """The bin of time `ns`, widening every bin first when the span needs it.

        Also widens first_ns / last_ns to cover `ns`.

        Args:
            ns: The time in integer nanoseconds since the epoch.

        Returns:
            The bin's index at the width in force after the call.
        """
        i = ns // self.width
        lo, hi = self.lo, self.hi
        if self.first_ns is None or self.last_ns is None:
            self.lo = self.hi = i
            self.first_ns = self.last_ns = ns
            return i
        if i < lo or i > hi:
            lo, hi = min(lo, i), max(hi, i)
            while hi - lo >= self.max_bins and self.level + 1 < len(WIDTHS):
                factor = WIDTHS[self.level + 1] // self.width
                self._grow(factor)
                lo, hi, i = lo // factor, hi // factor, i // factor
            self.lo, self.hi = lo, hi
        if ns < self.first_ns:
            self.first_ns = ns
        elif ns > self.last_ns:
            self.last_ns = ns
        return i

    def _grow(self, factor: int) -> None:
        self.level += 1
        self.width = WIDTHS[self.level]
        for s in self._series:
            s.rekey(factor)

    def start_ms(self, i: int) -> float:
        """Start of bin `i` in milliseconds since the epoch (what Vega-Lite reads as a time).

        Args:
            i: The bin's index.

        Returns:
            The bin's start in milliseconds since the epoch.
        """
        return i * self.width / MS

    @property
    def width_s(self) -> float:
        """The bin width in force, in seconds."""
        return self.width / S


class Counts:
    """A count per (bin, key): messages per MsgType and bin, say.

    Args:
        axis: The time axis it follows (it registers to be rekeyed).
    """

    def __init__(self, axis: TimeAxis) -> None:
        self.axis = axis
        self.data: dict[tuple[int, str], int] = {}
        axis.register(self)

    def add(self, i: int, key: str, n: int = 1) -> None:
        """Count `n` more of `key` in bin `i`.

        Args:
            i: The bin's index.
            key: What is counted (a MsgType, a stream...).
            n: How many.
        """
        k = (i, key)
        self.data[k] = self.data.get(k, 0) + n

    def rekey(self, factor: int) -> None:
        """Sum the counts into bins `factor` times wider.

        Args:
            factor: How many old bins make one new bin (bin i becomes i // factor).
        """
        old, self.data = self.data, {}
        for (i, key), n in old.items():
            self.add(i // factor, key, n)

    def rows(
        self,
        name: str,
        value: str = "count",
        extra: Callable[[int, str, int], dict[str, Any]] | None = None,
        top: int | None = None,
    ) -> list[dict[str, Any]]:
        """Long-format rows, by time then key: {t, <name>: key, <value>: n}.

        Args:
            name: The key's column name.
            value: The count's column name.
            extra: Called with (bin, key, count) for more columns of each row, if given.
            top: Keep the `top` largest keys (by total); the rest are summed as OTHER.

        Returns:
            The rows, t being the bin's start in epoch milliseconds.
        """
        data = self.data
        if top is not None:
            totals = self.totals()
            if len(totals) > top:
                kept = set(sorted(totals, key=lambda k: (-totals[k], k))[:top])
                data = {}
                for (i, key), n in self.data.items():
                    k = (i, key if key in kept else OTHER)
                    data[k] = data.get(k, 0) + n
        out = []
        for (i, key), n in sorted(data.items()):
            row: dict[str, Any] = {"t": self.axis.start_ms(i), name: key, value: n}
            if extra is not None:
                row.update(extra(i, key, n))
            out.append(row)
        return out

    def totals(self) -> dict[str, int]:
        """Each key's count over all bins.

        Returns:
            key -> total count.
        """
        out: dict[str, int] = {}
        for (_, key), n in self.data.items():
            out[key] = out.get(key, 0) + n
        return out


class Maxima:
    """The largest value per (bin, key): a follower's worst lag in a bin, say.

    Args:
        axis: The time axis it follows (it registers to be rekeyed).
    """

    def __init__(self, axis: TimeAxis) -> None:
        self.axis = axis
        self.data: dict[tuple[int, str], int] = {}
        axis.register(self)

    def add(self, i: int, key: str, value: int) -> None:
        """Keep `value` if it is the largest of `key` in bin `i` so far.

        Args:
            i: The bin's index.
            key: The series (a partition and follower, say).
            value: The value seen.
        """
        k = (i, key)
        old = self.data.get(k)
        if old is None or value > old:
            self.data[k] = value

    def rekey(self, factor: int) -> None:
        """Keep each key's largest value in bins `factor` times wider.

        Args:
            factor: How many old bins make one new bin (bin i becomes i // factor).
        """
        old, self.data = self.data, {}
        for (i, key), v in old.items():
            self.add(i // factor, key, v)

    def rows(self, name: str, value: str) -> list[dict[str, Any]]:
        """Long-format rows, by time then key: {t, <name>: key, <value>: max}.

        Args:
            name: The key's column name.
            value: The maximum's column name.

        Returns:
            The rows, t being the bin's start in epoch milliseconds.
        """
        return [
            {"t": self.axis.start_ms(i), name: key, value: v}
            for (i, key), v in sorted(self.data.items())
        ]
