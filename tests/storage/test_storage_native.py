"""The segment reader's C entry loop (lbparse/storage/_scan.c, when built)
equals the Python loop: the same entries, positions and CRC verdicts, and
it stops where the Python loop raises, on real, built, damaged and random
segments of every generation it reads."""

from __future__ import annotations

import os
import zlib

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.storage import (
    build_segment,
    messages,
    short_data,  # noqa: F401 (a fixture)
)

from lbparse.codec.commitlog import CommitLogEntry
from lbparse.errors import EnvelopeError
from lbparse.storage import segment as seg
from lbparse.storage.formats import SEGMENT_FORMATS_BY_NAME

native = pytest.mark.skipif(
    seg._native is None, reason="pure-Python install: the C module was not built"
)
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
    rows = [
        (
            e.offset,
            e.timestamp,
            e.leader_epoch,
            e.size,
            e.crc32c,
            e.crc_ok,
            e.magic,
            e.attributes,
            e.key,
            e.value,
            e.headers,
        )
        for e in entries
    ]
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


@pytest.mark.slow
@native
@settings(max_examples=300, deadline=None)
@given(data=st.data(), fmt=st.sampled_from(NATIVE_FORMATS))
def test_damaged_segments(data: st.DataObject, fmt: str) -> None:
    raw = bytearray(build_segment(messages(5), fmt))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))]
    _equal(bytes(raw), fmt)


@native
@settings(max_examples=examples(300), deadline=None)
@given(raw=st.binary(max_size=120), fmt=st.sampled_from(NATIVE_FORMATS))
def test_random_bytes(raw: bytes, fmt: str) -> None:
    _equal(raw, fmt)


@native
@settings(max_examples=examples(200), deadline=None)
@given(raw=st.binary(max_size=300))
def test_crcs(raw: bytes) -> None:
    assert seg._native.crc(raw, 0) == crc32c.crc32c(raw)
    assert seg._native.crc(raw, 1) == zlib.crc32(raw)


def _jsonl_reference(head: dict, positions: list[int], entries: list) -> list[dict]:
    from lbparse.storage.segment import entry_json

    fmt = SEGMENT_FORMATS_BY_NAME["v2020_02"]
    return [{**head, "position": p, **entry_json(e, fmt)} for p, e in zip(positions, entries)]


@native
@settings(max_examples=200, deadline=None)
@given(
    entries=st.lists(
        st.builds(
            CommitLogEntry,
            offset=st.integers(0, 2**64 - 1),
            timestamp=st.integers(-(2**63), 2**63 - 1),
            leader_epoch=st.integers(0, 2**64 - 1),
            key=st.none() | st.binary(max_size=8),
            value=st.none() | st.binary(max_size=20),
            headers=st.lists(
                st.tuples(
                    st.sampled_from(["subject", "a", 'ü"\n\x01\t\\', "😀", "\x7f\u2028"]),
                    st.binary(max_size=4),
                ),
                max_size=4,
            ),
            magic=st.integers(0, 255),
            attributes=st.integers(0, 255),
            crc32c=st.integers(0, 2**32 - 1),
            size=st.integers(0, 2**32 - 1),
        ),
        max_size=5,
    ),
    crc=st.lists(st.booleans(), min_size=5, max_size=5),
)
@pytest.mark.slow
def test_jsonl_formatter_equals_json_dumps(entries: list, crc: list[bool]) -> None:
    """The C JSON Lines of `lbparse segments --format jsonl` parse to what
    lbparse.codec.jsonform.dumps of the Python records gives (valid JSON; offset,
    timestamp and leader_epoch as decimal strings, every digit kept)."""
    import json

    from lbparse.codec import jsonform

    for e, ok in zip(entries, crc):
        e._crc_ok = ok
    head = {
        "node": "n1",
        "file": "/d/ü.log",
        "stream": 's"',
        "partition": 0,
        "segment": 7,
        "format": "v2020_02",
    }
    prefix = (json.dumps(head, ensure_ascii=False)[:-1] + ", ").encode()
    positions = list(range(0, 100 * len(entries), 100))
    out = seg._native.jsonl(prefix, positions, entries).decode("utf-8")
    expected = _jsonl_reference(head, positions, entries)
    got = [json.loads(line) for line in out.split("\n")[:-1]]  # not splitlines: U+2028
    assert got == jsonform.to_json_value(expected)
    for line, e in zip(got, entries):
        assert (line["offset"], line["timestamp"], line["leader_epoch"]) == (
            str(e.offset),
            str(e.timestamp),
            str(e.leader_epoch),
        )
    assert out == "".join(jsonform.dumps(r) + "\n" for r in expected)


@native
def test_jsonl_formatter_on_real_segments(short_data) -> None:
    import json

    from lbparse.codec import jsonform

    for log in sorted(short_data.glob("node*/streams/*/*/*.log")):
        reading = seg.read_segment(log)
        head = {"file": str(log)}
        out = seg._native.jsonl(
            (json.dumps(head)[:-1] + ", ").encode(), reading.positions, reading.entries
        ).decode()
        assert out == "".join(
            jsonform.dumps(r) + "\n"
            for r in _jsonl_reference(head, reading.positions, reading.entries)
        )
