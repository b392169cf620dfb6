"""The commit-log readers linear in their input, memory bounded (issue #27,
part 1): each class as a timing-growth test at 1x, 2x, 4x (minima of
interleaved rounds, tests/support/growth.py; exponent < 1.3) with the
peak memory of the largest run measured against the smallest."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.growth import assert_linear, peak_bytes
from support.storage import Msg, build_segment, messages, write_partition

from lbparse.codec.commitlog import CommitLogEntry
from lbparse.storage import segment
from lbparse.storage.datadir import PartitionDir, find_partitions
from lbparse.storage.segment import read_segment_bytes
from lbparse.storage.verify import check_partition

MAX_EXPONENT = 1.3


def _check(
    make: Callable[[int], Any],
    run: Callable[[Any], object],
    sizes: list[int],
    memory_growth: float = 4.0,
) -> None:
    """Time linear from sizes[0] to sizes[-1]; peak memory of the largest no
    more than `memory_growth` x that of the smallest (4x the input: linear)."""
    inputs = {n: make(n) for n in sizes}
    assert_linear(lambda n: run(inputs[n]), sizes, max_exponent=MAX_EXPONENT)
    small, big = (peak_bytes(lambda n=n: run(inputs[n])) for n in (sizes[0], sizes[-1]))
    assert big <= memory_growth * max(small, 1 << 16), (small, big)


def eof_claims(n: int) -> bytes:
    """One good entry, then `n` entry headers back to back, the first declaring
    more than the file, each other a body running to the end of the file."""
    good = build_segment([Msg(0)])
    total = len(good) + n * 28
    out = bytearray(good)
    for i in range(n):
        size = total - len(out) - 28 if i else 0xFFFFFFF0
        out += struct.pack(">QqQI", i + 1, 0, 0, size)
    return bytes(out)


@pytest.mark.slow
def test_resync_over_headers_claiming_the_rest_is_linear() -> None:
    """segment._next_entry took each candidate's CRC over its body before
    parsing it (commitlog._parse_body): every header declaring a body to the
    end of the file cost a pass over the rest (0.88 MB: 6.1 s)."""
    _check(eof_claims, lambda d: read_segment_bytes(d), [2_000, 4_000, 8_000])


def test_resync_over_headers_claiming_the_rest_takes_no_crc_per_candidate() -> None:
    """The fast check of the class above: no CRC taken over a body that does
    not parse (the Python path's cost was the CRC of each candidate)."""
    taken: list[int] = []
    real = segment.CURRENT.crc

    def counting(data: bytes) -> int:
        taken.append(len(data))
        return real(data)

    data = eof_claims(2_000)
    fmt = segment.CURRENT
    object.__setattr__(fmt, "crc", counting)
    try:
        reading = read_segment_bytes(data)
    finally:
        object.__setattr__(fmt, "crc", real)
    assert len(reading) == 1
    assert sum(taken) < 4 * len(data), f"{sum(taken):,} bytes CRC'd for {len(data):,}"


def _with_zeros(mb: int) -> bytes:
    return build_segment(messages(5)) + bytes(mb << 20) + build_segment(messages(5, first=5))


@pytest.mark.slow
def test_a_run_of_zeros_is_skipped_in_linear_time() -> None:
    """Zeros between entries were tried as an entry byte by byte in Python
    (64 MB: 34.9 s)."""
    _check(
        _with_zeros, lambda d: read_segment_bytes(d), [8, 16, 32], memory_growth=4.0 * 8 * 2
    )  # the input itself is in memory: bytes, not a map


def test_a_run_of_zeros_costs_no_try_per_byte() -> None:
    data = _with_zeros(64)
    calls = 0
    real = segment._whole_entry

    def counted(*a: Any) -> bool:
        nonlocal calls
        calls += 1
        return real(*a)

    segment._whole_entry = counted  # type: ignore[assignment]
    try:
        reading = read_segment_bytes(data)
    finally:
        segment._whole_entry = real  # type: ignore[assignment]
    assert len(reading) == 10 and [f.kind for f in reading.damage] == ["zeros"]
    assert calls < 100


def _epoch_partition(folder: Path, lines: int) -> PartitionDir:
    """1,000 entries, each of its own epoch, and `lines` checkpoint lines
    (main's check: 1,000 x `lines` steps)."""
    msgs = [Msg(o, leader_epoch=o) for o in range(1_000)]
    write_partition(folder / str(lines) / "s" / "0", [msgs], epochs=[(i, i) for i in range(lines)])
    (part,) = find_partitions([folder / str(lines) / "s" / "0"])
    return part


@pytest.mark.slow
def test_the_epoch_check_is_linear_in_the_checkpoint(tmp_path: Path) -> None:
    """verify._check_epoch walked every checkpoint line per entry (1,000
    entries x 100,000 lines: 30.9 s)."""

    def run(part: PartitionDir) -> None:
        assert check_partition(part).findings == []

    _check(lambda n: _epoch_partition(tmp_path, n), run, [10_000, 20_000, 40_000])


def _keys(n: int) -> list[CommitLogEntry]:
    e = CommitLogEntry(0, 0, 0, headers=[(f"k{i}", b"v") for i in range(n)])
    e.crc32c, e.size = 0, 0
    return [e]


@pytest.mark.slow
@pytest.mark.skipif(segment._native is None, reason="the C JSON Lines writer is not built")
def test_the_c_jsonl_writer_is_linear_in_header_keys() -> None:
    """_scan.c put_headers compared every key with every other (one entry of
    32,767 keys: 28.5 s)."""
    _check(_keys, lambda es: segment._native.jsonl(b"{", [0], es), [8_000, 16_000, 32_000])
