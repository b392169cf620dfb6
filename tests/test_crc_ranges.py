"""The batch CRC-32C (C module, when built) equals crc32c.crc32c range by range."""

from __future__ import annotations

import os

import crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbparse.pipeline import crc as crc_mod
from lbparse.pipeline.crc import crc32c_ranges, crc32c_ranges_python

native = pytest.mark.skipif(crc_mod._native is None,
                            reason="pure-Python install: the C module was not built")


def test_built_when_expected() -> None:
    if os.environ.get("LBPARSE_EXPECT_COMPILED"):
        assert crc_mod.implementation() != "python"


@st.composite
def buffers_and_ranges(draw: st.DrawFn) -> tuple[bytes, list[int], list[int]]:
    data = draw(st.binary(min_size=0, max_size=600))
    n = draw(st.integers(0, 12))
    starts, ends = [], []
    for _ in range(n):
        a = draw(st.integers(0, len(data)))
        b = draw(st.integers(a, len(data)))
        starts.append(a)
        ends.append(b)
    return data, starts, ends


@settings(max_examples=400, deadline=None)
@given(buffers_and_ranges())
def test_every_range_as_crc32c_gives_it(case: tuple[bytes, list[int], list[int]]) -> None:
    data, starts, ends = case
    want = [crc32c.crc32c(data[a:b]) for a, b in zip(starts, ends)]
    arr = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    s, e = np.array(starts, np.int64), np.array(ends, np.int64)
    assert crc32c_ranges(arr, s, e).tolist() == want
    assert crc32c_ranges_python(arr, s, e).tolist() == want


@native
@pytest.mark.parametrize("portable", [False, True])
def test_both_c_implementations_agree_with_the_reference(portable: bool) -> None:
    """The CPU's path (sse4.2 where it has it) and the table-driven one, on
    unaligned ranges of every length up to 2.5 KB (every tail after whole words)."""
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 5000, dtype=np.uint8)
    starts = rng.integers(0, 2500, 2000)
    ends = starts + rng.integers(0, 2500, 2000)
    out = np.empty(len(starts), np.uint32)
    crc_mod._native.ranges(data, starts.astype(np.int64), ends.astype(np.int64), out, portable)
    assert out.tolist() == [crc32c.crc32c(data[a:b].tobytes()) for a, b in zip(starts, ends)]
    assert crc_mod.implementation() in ("sse4.2", "slicing-by-8")


@pytest.mark.parametrize("fn", [crc32c_ranges, crc32c_ranges_python])
@pytest.mark.parametrize("start,end", [(-1, 3), (5, 4), (0, 11)])
def test_a_range_outside_the_data_is_refused(fn, start: int, end: int) -> None:
    data = np.arange(10, dtype=np.uint8)
    with pytest.raises(ValueError, match=r"range 1 is \[" + str(start)):
        fn(data, np.array([0, start]), np.array([1, end]))


@native
def test_mismatched_lengths_are_refused() -> None:
    out = np.empty(2, np.uint32)
    with pytest.raises(ValueError, match="starts and ends need n int64"):
        crc_mod._native.ranges(np.zeros(4, np.uint8), np.zeros(2, np.int64),
                               np.zeros(3, np.int64), out)
