"""The segment reader's C entry loop (lbparse/storage/_scan.c, when built)
equals the Python loop: the same entries, positions and CRC verdicts, and
it stops where the Python loop raises, on real, built, damaged and random
segments of every generation it reads."""

from __future__ import annotations

import os
import zlib

import crc32c
import pytest
from hypothesis import given, settings, strategies as st

from lbparse.commitlog import CommitLogEntry
from lbparse.errors import EnvelopeError
from lbparse.storage import segment as seg
from lbparse.storage.formats import SEGMENT_FORMATS_BY_NAME
from support.segment_builder import build_segment, messages
from support.storage_fixtures import short_data  # noqa: F401 (a fixture)

native = pytest.mark.skipif(seg._native is None,
                            reason="pure-Python install: the C module was not built")
NATIVE_FORMATS = [n for n, f in SEGMENT_FORMATS_BY_NAME.items() if seg.native_layout(f)]


def test_built_when_expected() -> None:
    if os.environ.get("LBPARSE_EXPECT_COMPILED"):
        assert seg._native is not None


def test_the_c_loop_reads_every_generation_with_todays_body() -> None:
    assert NATIVE_FORMATS == ["v2018_08", "v2019_07", "v2020_02"]


def _run(data: bytes, fmt_name: str, native: bool) -> tuple:
    fmt = SEGMENT_FORMATS_BY_NAME[fmt_name]
    entries: list[CommitLogEntry] = []
    positions: list[int] = []
    error = None
    try:
        seg._scan(data, 0, len(data), entries, positions, fmt, native=native)
    except EnvelopeError as exc:
        error = (exc.kind, str(exc), exc.offset)
    rows = [(e.offset, e.timestamp, e.leader_epoch, e.size, e.crc32c, e.crc_ok, e.magic,
             e.attributes, e.key, e.value, e.headers) for e in entries]
    return rows, positions, error


def _equal(data: bytes, fmt_name: str) -> None:
    assert _run(data, fmt_name, True) == _run(data, fmt_name, False)


@native
def test_real_segments(short_data) -> None:
    for log in sorted(short_data.glob("node*/streams/*/*/*.log")):
        _equal(log.read_bytes(), "v2020_02")


@native
@pytest.mark.parametrize("fmt", NATIVE_FORMATS)
def test_built_segments(fmt: str) -> None:
    msgs = messages(30)
    msgs[3].key = None
    msgs[4].value = None
    msgs[5].headers = [("ü-key", b"\x00\xff"), ("", b"")]
    msgs[6].value = b"x" * 5000
    _equal(build_segment(msgs, fmt), fmt)


@native
@settings(max_examples=300, deadline=None)
@given(data=st.data(), fmt=st.sampled_from(NATIVE_FORMATS))
def test_damaged_segments(data: st.DataObject, fmt: str) -> None:
    raw = bytearray(build_segment(messages(5), fmt))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    raw = raw[:data.draw(st.integers(0, len(raw)))]
    _equal(bytes(raw), fmt)


@native
@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=120), fmt=st.sampled_from(NATIVE_FORMATS))
def test_random_bytes(raw: bytes, fmt: str) -> None:
    _equal(raw, fmt)


@native
@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=300))
def test_crcs(raw: bytes) -> None:
    assert seg._native.crc(raw, 0) == crc32c.crc32c(raw)
    assert seg._native.crc(raw, 1) == zlib.crc32(raw)
