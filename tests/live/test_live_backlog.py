"""`lbparse record`/`tap` keep to --backlog-mb (issue #27: a flood reached
587 MB RSS with the default 64): the backlog's messages held in memory,
measured by tracemalloc, stay within its max_bytes whatever their size; the
rest goes to the spill file, in order, and comes back whole."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from lbparse.live import subscriber
from lbparse.live.backlog import Backlog, Raw

SERVER, LOCAL = "127.0.0.1:4222", "127.0.0.1:40000"  # one connection's, shared


def _raw(i: int, size: int) -> Raw:
    return Raw(
        1_763_700_000_000_000_000 + i,
        SERVER,
        LOCAL,
        f"load.x{i % 10}",
        None,
        "1",
        None,
        bytes([i & 255]) * size,
    )


@pytest.mark.slow
@pytest.mark.parametrize("size", [0, 10, 100, 1000, 20_000])
def test_memory_held_keeps_to_max_bytes(size: int) -> None:
    limit = 1 << 20
    n = max(3 * limit // (size + 50), 100)  # three times what fits
    tracemalloc.start()
    try:
        backlog = Backlog(max_bytes=limit)
        for i in range(n):
            backlog.put(_raw(i, size))
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert backlog.spilled > 0
    # The spill file's buffer and the Backlog itself are a few KiB besides.
    assert held <= limit * 1.05 + (64 << 10), (
        f"{held >> 10} KiB held for a {limit >> 10} KiB backlog"
    )
    got = [backlog.get() for _ in range(n)]
    assert got == [_raw(i, size) for i in range(n)]
    backlog.close()
    assert backlog.get() is None


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _worker(backlog: Backlog) -> subscriber._Worker:
    return subscriber._Worker(backlog, lambda raw: _spin(0.0003), lambda: None)


def test_the_worker_gives_a_busy_reader_its_turn() -> None:
    """Under a flood the network reader and the worker both want the GIL, and
    shared half and half the reader took ~45k msg/s on a busy machine (the
    server slows the publisher to what the reader takes). The worker pauses
    after each turn in which the reader handed messages on."""
    backlog = Backlog()
    worker = _worker(backlog)
    worker.start()
    for i in range(150):  # a reader with work all along: a message every 0.2 ms
        backlog.put(_raw(i, 10))
        _spin(0.0002)
    backlog.close()
    worker.join(timeout=30)
    assert worker.written == 150
    assert worker.turns_given >= 2


def test_the_worker_pauses_for_no_reader_that_is_idle() -> None:
    """What was received before is written at full speed: no pauses."""
    backlog = Backlog()
    for i in range(60):
        backlog.put(_raw(i, 10))
    backlog.close()
    worker = _worker(backlog)
    worker.start()
    worker.join(timeout=30)
    assert worker.written == 60
    assert worker.turns_given == 0


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_arrival_rate_is_the_windows_and_holds_a_slice_per_tenth_of_a_second() -> None:
    """The rate an outage's missed messages are estimated at: arrivals over
    the last RATE_WINDOW (10) seconds. A flood's every arrival time was kept
    (32 bytes a message: 32 MB at 100k msg/s); now a count per slice."""
    clock = _Clock()
    rate = subscriber._Rate(clock)
    clock.now += 2.0
    for _ in range(1000):  # 1,000 in the first 2 s: 500 a second
        rate.tick()
    assert rate.rate() == pytest.approx(500.0)
    for _ in range(40_000):  # 20 s at 2,000 a second, a tick each 0.5 ms
        clock.now += 0.0005
        rate.tick()
    assert len(rate.slices) <= subscriber.RATE_SLICES
    assert rate.rate() == pytest.approx(2_000.0, rel=0.011)  # the window's edge: a slice
    clock.now += 5.0  # quiet for half the window
    assert rate.rate() == pytest.approx(1_000.0, rel=0.021)
    clock.now += 10.0
    assert rate.rate() == 0.0 and not rate.slices
