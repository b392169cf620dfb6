"""lbparse.storage's fast readers agree with the Kaitai parsers and construct
declarations generated from spec/segment.ksy, segment_index.ksy,
checkpoint.ksy and bbolt.ksy: on real files, on files built per the facts
for every generation, and on damaged and arbitrary bytes (where all three
must reject the same bytes)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.storage import (
    Msg,
    build_index,
    build_segment,
    messages,
    short_data,  # noqa: F401 (a fixture)
)
from support.storage_reference import (
    BAD,
    PARSERS,
    bbolt_page,
    checkpoint,
    index_entries,
    segment_entries,
)

from lbparse.storage.bbolt import PAGE_HEADER
from lbparse.storage.formats import INDEX_FORMATS_BY_NAME, SEGMENT_FORMATS_BY_NAME

FORMATS = list(SEGMENT_FORMATS_BY_NAME)


def _agree(results: dict[str, object]) -> None:
    first = results["lbparse"]
    for name, got in results.items():
        assert got == first, f"{name} says {got!r:.300}, lbparse says {first!r:.300}"


def _segment_agrees(data: bytes, fmt: str) -> object:
    got = {p: segment_entries(data, fmt, p) for p in PARSERS}
    _agree(got)
    return got["lbparse"]


def _varied(fmt: str, n: int = 12, seed: int = 1) -> list[Msg]:
    rnd = random.Random(seed)
    msgs = messages(n, first=100)
    for m in msgs:
        m.magic = rnd.choice([0, 1, 2]) if fmt == "v2018_04" else rnd.choice([1, 1, 2])
        m.key = rnd.choice([None, b"", b"key-" + bytes([rnd.randrange(256)])])
        m.value = rnd.choice([None, b"", rnd.randbytes(rnd.randrange(1, 300))])
        m.headers = [
            (f"h{i}", rnd.randbytes(rnd.randrange(0, 20))) for i in range(rnd.randrange(0, 4))
        ]
    return msgs


@pytest.mark.parametrize("fmt", FORMATS)
def test_segment_parsers_agree_on_every_generation(fmt: str) -> None:
    data = build_segment(_varied(fmt), fmt)
    got = _segment_agrees(data, fmt)
    assert isinstance(got, list) and len(got) == 12


def test_segment_parsers_agree_on_real_segments(short_data) -> None:
    logs = sorted(short_data.glob("node*/streams/*/*/*.log"))
    assert len(logs) == 21
    for log in logs:
        got = _segment_agrees(log.read_bytes(), "v2020_02")
        assert got != BAD, log


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_segment_parsers_agree_on_damaged_bytes(fmt: str, data: st.DataObject) -> None:
    """Flipped, cut, inserted bytes: the same verdict and, when read, the same entries."""
    seg = bytearray(build_segment(_varied(fmt, 4, data.draw(st.integers(0, 99))), fmt))
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        at = data.draw(st.integers(0, max(len(seg) - 1, 0)))
        if kind == "flip" and seg:
            seg[at] ^= data.draw(st.integers(1, 255))
        elif kind == "cut":
            del seg[at:]
        elif kind == "insert":
            seg[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        elif seg:
            del seg[at : at + data.draw(st.integers(1, 8))]
    _segment_agrees(bytes(seg), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=examples(60), deadline=None)
@given(raw=st.binary(max_size=200))
def test_segment_parsers_agree_on_random_bytes(fmt: str, raw: bytes) -> None:
    _segment_agrees(raw, fmt)


@pytest.mark.parametrize("fmt", list(INDEX_FORMATS_BY_NAME))
def test_index_parsers_agree_on_built_indexes(fmt: str) -> None:
    seg_fmt = next(f for f in FORMATS if SEGMENT_FORMATS_BY_NAME[f].index.name == fmt)
    msgs = messages(9, first=40)
    seg = build_segment(msgs, seg_fmt)
    idx = build_index(msgs, seg, 40, seg_fmt, preallocate=400)
    got = {p: index_entries(idx, fmt, p) for p in PARSERS}
    _agree(got)
    assert len(got["lbparse"]) == 400 // INDEX_FORMATS_BY_NAME[fmt].entry.size


def test_index_parsers_agree_on_real_indexes(short_data) -> None:
    for path in sorted(short_data.glob("node*/streams/*/*/*.index")):
        data = path.read_bytes()[:4096]
        _agree({p: index_entries(data, "v2018_08", p) for p in PARSERS})


@settings(max_examples=examples(200), deadline=None)
@given(raw=st.binary(max_size=130), fmt=st.sampled_from(list(INDEX_FORMATS_BY_NAME)))
def test_index_parsers_agree_on_random_bytes(raw: bytes, fmt: str) -> None:
    _agree({p: index_entries(raw, fmt, p) for p in PARSERS})


@pytest.mark.parametrize(
    "text,kind",
    [
        (b"23", "replication_offset"),
        (b"-1", "replication_offset"),
        (b"", "replication_offset"),
        (b"0\n1\n12 0\n", "leader_epoch"),
        (b"0\n2\n5 -1\n7 40\n", "leader_epoch"),
        (b"0\n0\n", "leader_epoch"),
        (b"1\n1\n5 0\n", "leader_epoch"),
        (b"0\n1\n5 0", "leader_epoch"),
        (b"0\n1\n5\n", "leader_epoch"),
        (b"0", "leader_epoch"),
    ],
)
def test_checkpoint_parsers_agree(text: bytes, kind: str) -> None:
    got = {p: checkpoint(text, kind, p) for p in ("kaitai", "construct")}
    assert got["kaitai"] == got["construct"]


def test_bbolt_parsers_agree_on_real_pages(short_data) -> None:
    for db in sorted(short_data.glob("node*/raft/raft.db")):
        data = db.read_bytes()
        for at in range(0, len(data), 4096):
            page = data[at : at + 4096]
            got = {p: bbolt_page(page, p) for p in PARSERS}
            _agree(got)


@settings(max_examples=examples(150), deadline=None)
@given(data=st.data())
def test_bbolt_parsers_agree_on_damaged_pages(short_data, data: st.DataObject) -> None:
    db = (short_data / "node1" / "raft" / "raft.db").read_bytes()
    n = data.draw(st.integers(0, 10))
    page = bytearray(db[n * 4096 : (n + 1) * 4096])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, 200))
        page[at] ^= data.draw(st.integers(1, 255))
    page = page[: data.draw(st.integers(0, 4096))]
    _agree({p: bbolt_page(bytes(page), p) for p in PARSERS})


@settings(max_examples=examples(200), deadline=None)
@given(
    head=st.tuples(
        st.integers(0, 2**64 - 1),
        st.sampled_from([1, 2, 4, 16, 3, 0]),
        st.integers(0, 6),
        st.integers(0, 2),
    ),
    tail=st.binary(max_size=150),
)
def test_bbolt_parsers_agree_on_made_pages(head: tuple[int, int, int, int], tail: bytes) -> None:
    page = PAGE_HEADER.pack(*head) + tail
    _agree({p: bbolt_page(page, p) for p in PARSERS})
