"""Timing-growth checks: does the time of a parser grow linearly with its input?

`assert_linear(run, sizes)` times `run(n)` for each size (doublings), all
sizes once per round, `rounds` rounds interleaved, and keeps each size's
minimum: load from other processes only ever adds time, so the minimum is
the best estimate of the work, and interleaving gives every size the same
chances. The growth exponent from the first to the last size must stay
below `max_exponent`: 1 is linear, 2 quadratic; the default 1.4 lets an
8x input take up to 18x the time (caches, allocation), where a quadratic
parser takes 64x.

The cyclic garbage collector is paused while a run is timed (and a
collection made before it): its full collections land on whichever run
crosses a threshold, which made one size of a linear parser look 10x
slower; CPython keeps them amortized linear by design, so leaving them out
measures the parser's own growth.
"""

from __future__ import annotations

import gc
import math
import time
import tracemalloc
from typing import Callable, Sequence


def timings(run: Callable[[int], object], sizes: Sequence[int], rounds: int = 3) -> list[float]:
    """The minimum seconds of `run(n)` over `rounds` interleaved rounds, per size."""
    best = [math.inf] * len(sizes)
    enabled = gc.isenabled()
    try:
        for _ in range(rounds):
            for i, n in enumerate(sizes):
                gc.collect()
                gc.disable()
                t = time.perf_counter()
                run(n)
                best[i] = min(best[i], time.perf_counter() - t)
                if enabled:
                    gc.enable()
    finally:
        if enabled:
            gc.enable()
    return best


def assert_linear(run: Callable[[int], object], sizes: Sequence[int], *, rounds: int = 3,
                  max_exponent: float = 1.4, floor: float = 0.002) -> list[float]:
    """Fail if time grows faster than linearly from sizes[0] to sizes[-1].

    `floor`: seconds below which a timing is noise (the first size is
    raised to it, which can only make the check more lenient)."""
    best = timings(run, sizes, rounds)
    first = max(best[0], floor)
    exponent = math.log(max(best[-1], first) / first) / math.log(sizes[-1] / sizes[0])
    steps = ", ".join(f"{n}: {t * 1e3:.1f} ms" for n, t in zip(sizes, best))
    assert exponent < max_exponent, \
        f"time grows as size^{exponent:.2f} (worse than linear): {steps}"
    return best


def peak_bytes(run: Callable[[], object]) -> int:
    """Bytes at the peak of Python's allocations while `run` runs (tracemalloc)."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
