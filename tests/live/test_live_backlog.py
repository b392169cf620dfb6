"""`lbparse record`/`tap` keep to --backlog-mb (issue #27: a flood reached
587 MB RSS with the default 64): the backlog's messages held in memory,
measured by tracemalloc, stay within its max_bytes whatever their size; the
rest goes to the spill file, in order, and comes back whole."""

from __future__ import annotations

import tracemalloc

import pytest

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
