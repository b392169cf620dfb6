"""Latency histograms of bounded size: log-linear buckets, exact count, min, max.

A duration in nanoseconds falls into octave `o = floor(log2(ns))` and one of
`SUB` (8) equal parts of it, so a bucket is at most 1/8 of its lower
bound wide, and a histogram of any number of samples between 1 ns and a
year has at most ~60 * SUB buckets.
Percentiles are read off the buckets (the geometric middle of the bucket
holding the rank), clamped to the exact min and max.
"""

from __future__ import annotations

import math
from typing import Any

SUB_BITS = 3
SUB = 1 << SUB_BITS


def bucket_of(ns: int) -> int:
    """The bucket of a duration (0 for anything below 1 ns).

    Args:
        ns: The duration in nanoseconds.

    Returns:
        The bucket's index: exact below 8 ns, then 8 buckets per octave.
    """
    if ns < SUB:
        return ns if ns > 0 else 0
    bl = ns.bit_length()
    return (bl - 1 - SUB_BITS) * SUB + ((ns >> (bl - 1 - SUB_BITS)) & (SUB - 1)) + SUB


def bucket_bounds(b: int) -> tuple[int, int]:
    """[lo, hi) of bucket b in nanoseconds.

    Args:
        b: A bucket index, as bucket_of returns it.

    Returns:
        The bucket's lower (inclusive) and upper (exclusive) bound in nanoseconds.
    """
    if b < SUB:
        return b, b + 1
    octave, part = divmod(b - SUB, SUB)
    base = 1 << (octave + SUB_BITS)
    step = base >> SUB_BITS
    return base + part * step, base + (part + 1) * step


class Histogram:
    """A latency histogram of bounded size: log-linear buckets, count, min, max, total.

    Quantiles are exact within one bucket's width (8 buckets per octave).
    """

    __slots__ = ("buckets", "count", "min", "max", "total")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.min: int | None = None
        self.max: int | None = None
        self.total = 0

    def add(self, ns: int) -> None:
        """Count one duration.

        Args:
            ns: The duration in nanoseconds.
        """
        b = bucket_of(ns)
        self.buckets[b] = self.buckets.get(b, 0) + 1
        self.count += 1
        self.total += ns
        if self.min is None or ns < self.min:
            self.min = ns
        if self.max is None or ns > self.max:
            self.max = ns

    def merge(self, other: Histogram) -> None:
        """Add another histogram's counts into this one.

        Args:
            other: The histogram to add (left unchanged).
        """
        for b, n in other.buckets.items():
            self.buckets[b] = self.buckets.get(b, 0) + n
        self.count += other.count
        self.total += other.total
        if other.min is not None and (self.min is None or other.min < self.min):
            self.min = other.min
        if other.max is not None and (self.max is None or other.max > self.max):
            self.max = other.max

    def quantile(self, q: float) -> int | None:
        """The q-quantile (0..1) in nanoseconds, within one bucket's width.

        Args:
            q: The quantile, 0..1 (0.5 for the median).

        Returns:
            The quantile in nanoseconds (clamped to min..max), or None if empty.
        """
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for b in sorted(self.buckets):
            seen += self.buckets[b]
            if seen >= rank:
                lo, hi = bucket_bounds(b)
                mid = int(math.sqrt(lo * max(hi - 1, lo))) if lo > 0 else 0
                assert self.min is not None and self.max is not None
                return min(max(mid, self.min), self.max)
        return self.max

    def summary_ms(self) -> dict[str, Any]:
        """count, mean, p50, p90, p99, min, max (milliseconds).

        Returns:
            A dict of count, mean_ms, p50_ms, p90_ms, p99_ms, min_ms and max_ms
            (milliseconds rounded to the microsecond; None when empty).
        """

        def ms(ns: int | None) -> float | None:
            return None if ns is None else round(ns / 1e6, 3)

        return {
            "count": self.count,
            "mean_ms": ms(self.total // self.count) if self.count else None,
            "p50_ms": ms(self.quantile(0.5)),
            "p90_ms": ms(self.quantile(0.9)),
            "p99_ms": ms(self.quantile(0.99)),
            "min_ms": ms(self.min),
            "max_ms": ms(self.max),
        }

    def bucket_rows(self, merge: int = 4) -> list[dict[str, Any]]:
        """One row per non-empty bucket, `merge` neighbours of an octave taken together.

        Args:
            merge: How many neighbouring buckets of an octave make one row (4: two
                bars per octave, wide enough to see on a log axis).

        Returns:
            Dicts of lo_ms, hi_ms (the row's bounds in ms) and count, by bound.
        """
        merged: dict[int, int] = {}
        for b, n in self.buckets.items():
            key = b if b < SUB else SUB + (b - SUB) // merge * merge
            merged[key] = merged.get(key, 0) + n
        out = []
        for b in sorted(merged):
            lo = bucket_bounds(b)[0]
            hi = bucket_bounds(b if b < SUB else b + merge - 1)[1]
            out.append({"lo_ms": lo / 1e6, "hi_ms": hi / 1e6, "count": merged[b]})
        return out
