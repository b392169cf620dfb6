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
    """The bucket of a duration (0 for anything below 1 ns)."""
    if ns < SUB:
        return ns if ns > 0 else 0
    bl = ns.bit_length()
    return (bl - 1 - SUB_BITS) * SUB + ((ns >> (bl - 1 - SUB_BITS)) & (SUB - 1)) + SUB


def bucket_bounds(b: int) -> tuple[int, int]:
    """[lo, hi) of bucket b in nanoseconds."""
    if b < SUB:
        return b, b + 1
    octave, part = divmod(b - SUB, SUB)
    base = 1 << (octave + SUB_BITS)
    step = base >> SUB_BITS
    return base + part * step, base + (part + 1) * step


class Histogram:
    __slots__ = ("buckets", "count", "min", "max", "total")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.min: int | None = None
        self.max: int | None = None
        self.total = 0

    def add(self, ns: int) -> None:
        b = bucket_of(ns)
        self.buckets[b] = self.buckets.get(b, 0) + 1
        self.count += 1
        self.total += ns
        if self.min is None or ns < self.min:
            self.min = ns
        if self.max is None or ns > self.max:
            self.max = ns

    def merge(self, other: Histogram) -> None:
        for b, n in other.buckets.items():
            self.buckets[b] = self.buckets.get(b, 0) + n
        self.count += other.count
        self.total += other.total
        if other.min is not None and (self.min is None or other.min < self.min):
            self.min = other.min
        if other.max is not None and (self.max is None or other.max > self.max):
            self.max = other.max

    def quantile(self, q: float) -> int | None:
        """The q-quantile (0..1) in nanoseconds, within one bucket's width."""
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
        """count, mean, p50, p90, p99, min, max (milliseconds)."""

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
        """One row per non-empty bucket, `merge` neighbours of an octave taken
        together (4: two bars per octave, wide enough to see on a log axis):
        its bounds in ms and its count."""
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
