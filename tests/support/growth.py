"""Timing-growth checks: does the time of a parser grow linearly with its input?

`assert_linear(run, sizes)` times `run(n)` for the first and the last size
(the sizes between only to explain a failure), both once per round,
`rounds` rounds interleaved, and keeps each size's minimum: load from
other processes only ever adds time, so the minimum is the best estimate
of the work, and interleaving gives every size the same chances. The
growth exponent from the first to the last size must stay below
`max_exponent`: 1 is linear, 2 quadratic; the default 1.4 lets an 8x
input take up to 18x the time (caches, allocation), where a quadratic
parser takes 64x.

The time is the process's CPU time (time.process_time), not the wall
clock's. On two cores shared with a JVM and the other pytest worker, a
run of 100 ms was preempted in each of its six rounds while the 20 ms
runs of the smallest size slipped between: a CI run failed a linear
segment reader at size^1.31 (17.5 ms at 2,000 headers, 107.7 ms at
8,000, which take 75 ms unloaded). Waiting for a core is no work of the
parser's, and the longer run always waits more.

The cyclic garbage collector is paused while a run is timed (and a
collection made before it): its full collections land on whichever run
crosses a threshold, which made one size of a linear parser look 10x
slower; CPython keeps them amortized linear by design, so leaving them out
measures the parser's own growth. What the process holds when the
timings start is frozen (gc.freeze), so that each of those collections
walks only the objects made since: in a pytest worker that has run a few
hundred tests each took up to a second, and the growth tests spent five
times their work collecting (125 s of a `make test` against 30 s on their
own). It stays frozen: gc.unfreeze would thaw the session's heap too,
which conftest froze after collection.
"""

from __future__ import annotations

import gc
import math
import time
import tracemalloc
from collections.abc import Callable, Sequence


def timings(run: Callable[[int], object], sizes: Sequence[int], rounds: int = 3) -> list[float]:
    """The minimum CPU seconds of `run(n)` over `rounds` interleaved rounds, per size."""
    best = [math.inf] * len(sizes)
    enabled = gc.isenabled()
    gc.freeze()  # for good (see above)
    try:
        for _ in range(rounds):
            for i, n in enumerate(sizes):
                gc.collect()
                gc.disable()
                t = time.process_time()
                run(n)
                best[i] = min(best[i], time.process_time() - t)
                if enabled:
                    gc.enable()
    finally:
        if enabled:
            gc.enable()
    return best


def assert_linear(
    run: Callable[[int], object],
    sizes: Sequence[int],
    *,
    rounds: int = 3,
    max_exponent: float = 1.4,
    floor: float = 0.002,
    retries: int = 3,
) -> list[float]:
    """Fail if time grows faster than linearly from sizes[0] to sizes[-1].

    Only the first and the last size are timed, the exponent being theirs.
    An exponent over the bound is timed again (`rounds` more rounds, each
    size keeping its minimum over all), up to `retries` times, before it
    fails: CPU time too varies on this shared host (the same 0.87 MB read
    took 1.18 s of CPU, then 1.70 s; a CI run timed a linear reader at
    size^1.36 from two draws a size), and the minimum of a few draws is
    near the work, where a parser that is really worse than linear is as
    slow every time (each retry only costs when the first verdict was over
    the bound). The sizes between are timed, once, to say how the time grew
    when it fails.
    `floor`: seconds below which a timing is noise (the first size is raised
    to it, which can only make the check more lenient)."""
    ends = [sizes[0], sizes[-1]]
    best = timings(run, ends, rounds)
    for _ in range(retries):
        if _exponent(best, ends, floor) < max_exponent:
            break
        best = [min(a, b) for a, b in zip(best, timings(run, ends, rounds))]
    exponent = _exponent(best, ends, floor)
    if exponent >= max_exponent:
        between = timings(run, sizes[1:-1], 1) if len(sizes) > 2 else []
        steps = ", ".join(
            f"{n}: {t * 1e3:.1f} ms" for n, t in zip(sizes, [best[0], *between, best[-1]])
        )
        raise AssertionError(f"time grows as size^{exponent:.2f} (worse than linear): {steps}")
    return best


def _exponent(best: Sequence[float], ends: Sequence[int], floor: float) -> float:
    first = max(best[0], floor)
    return math.log(max(best[-1], first) / first) / math.log(ends[-1] / ends[0])


def peak_bytes(run: Callable[[], object]) -> int:
    """Bytes at the peak of Python's allocations while `run` runs (tracemalloc)."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
