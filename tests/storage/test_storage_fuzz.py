"""Any bytes, in any of Liftbridge's files: lbparse.storage answers, reports
damage, or raises its own StorageError, never anything else; and it reads
every entry that is whole, whatever surrounds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.storage import (
    build_segment,
    messages,
    short_data,  # noqa: F401 (a fixture)
    write_partition,
)

from lbparse.storage import check_partition, find_partitions, read_index_bytes, read_segment_bytes
from lbparse.storage.bbolt import BoltDB
from lbparse.storage.checkpoints import parse_high_watermark, parse_leader_epochs
from lbparse.storage.errors import StorageError
from lbparse.storage.formats import SEGMENT_FORMATS_BY_NAME
from lbparse.storage.raftdb import read_raft_db_bytes

FORMATS = st.sampled_from([None, *SEGMENT_FORMATS_BY_NAME.values()])
SETTINGS = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@SETTINGS
@given(raw=st.binary(max_size=400), fmt=FORMATS)
@example(raw=bytes(28), fmt=None)
@example(raw=b"\xff" * 40, fmt=None)
def test_any_bytes_as_a_segment(raw: bytes, fmt) -> None:
    reading = read_segment_bytes(raw, "x.log", fmt)  # never raises
    covered = sum(1 for _ in reading)
    assert covered == len(reading.entries) == len(reading.positions)
    for f in reading.damage:
        assert f.path == "x.log" and f.position is not None and 0 <= f.position <= len(raw)


@SETTINGS
@given(
    prefix=st.binary(max_size=60),
    suffix=st.binary(max_size=60),
    fmt=st.sampled_from(list(SEGMENT_FORMATS_BY_NAME)),
)
def test_whole_entries_are_found_between_any_bytes(prefix: bytes, suffix: bytes, fmt: str) -> None:
    """Garbage before, entries, garbage after: every entry is read (a resync
    finds the first whole entry with a good CRC)."""
    msgs = messages(4, first=50)
    good = build_segment(msgs, fmt)
    reading = read_segment_bytes(
        prefix + good + suffix, "x.log", SEGMENT_FORMATS_BY_NAME[fmt], base_offset=50
    )
    offsets = [e.offset for e in reading.entries if e.crc_ok]
    assert offsets[-4:] == [50, 51, 52, 53] or set(range(50, 54)) <= set(offsets)


@SETTINGS
@given(raw=st.binary(max_size=300), base=st.integers(0, 2**40))
def test_any_bytes_as_an_index(raw: bytes, base: int) -> None:
    reading = read_index_bytes(raw, "x.index", base)
    width = reading.format.entry.size
    assert all(e.index_position % width == 0 for e in reading.entries + reading.after_tail)


@SETTINGS
@given(raw=st.binary(max_size=60))
@example(raw=b"0\n1\n5 0\n")
@example(raw=b"9223372036854775808")
def test_any_bytes_as_checkpoints(raw: bytes) -> None:
    for parse in (parse_high_watermark, parse_leader_epochs):
        try:
            parse(raw, "cp")
        except StorageError as exc:
            assert exc.path == "cp" and exc.kind == "bad_checkpoint"


@SETTINGS
@given(raw=st.binary(max_size=9000))
def test_any_bytes_as_raft_db(raw: bytes) -> None:
    try:
        store = read_raft_db_bytes(raw, "raft.db")
    except StorageError:
        return
    assert store.meta.valid


@SETTINGS
@given(data=st.data())
def test_damaged_real_raft_db(short_data: Path, data: st.DataObject) -> None:
    db = bytearray((short_data / "node2" / "raft" / "raft.db").read_bytes())
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(db) - 1))
        db[at] = data.draw(st.integers(0, 255))
    db = db[: data.draw(st.integers(0, len(db)))]
    try:
        store = read_raft_db_bytes(bytes(db), "raft.db")
    except StorageError:
        return
    BoltDB(bytes(db)).buckets()
    for f in store.findings:
        assert f.path == "raft.db"


@pytest.mark.slow
@SETTINGS
@given(
    files=st.dictionaries(
        st.sampled_from(
            [
                "00000000000000000000.log",
                "00000000000000000000.index",
                "00000000000000000003.log",
                "replication-offset-checkpoint",
                "leader-epoch-checkpoint",
                "junk",
            ]
        ),
        st.binary(max_size=120),
        min_size=1,
    )
)
def test_any_partition_directory_verifies_without_raising(tmp_path_factory, files) -> None:
    folder = tmp_path_factory.mktemp("d") / "DATA" / "streams" / "s" / "0"
    write_partition(folder, [messages(3)], hw=2, epochs=[(3, 0)])
    for name, content in files.items():
        (folder / name).write_bytes(content)
    (part,) = find_partitions([folder])
    check = check_partition(part, keep_digests=True)
    for f in check.findings:
        assert Path(f.path).parent == folder or f.path.startswith(str(folder))


@pytest.mark.slow
@SETTINGS
@given(data=st.data(), fmt=st.sampled_from(list(SEGMENT_FORMATS_BY_NAME)))
def test_reading_in_parts_equals_reading_whole(data: st.DataObject, fmt: str) -> None:
    """iter_segment (a stream of parts, as the pipeline and the command read)
    gives the entries, positions and findings of one whole reading."""
    from lbparse.storage.segment import iter_segment_bytes

    raw = bytearray(build_segment(messages(12, first=7), fmt))
    for _ in range(data.draw(st.integers(0, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        kind = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        if kind == "flip":
            raw[at] ^= data.draw(st.integers(1, 255))
        elif kind == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=40))
        else:
            del raw[at : at + data.draw(st.integers(1, 40))]
    whole = read_segment_bytes(bytes(raw), "x.log", base_offset=7)
    part_bytes = data.draw(st.integers(1, 400))
    entries, positions, lines = [], [], []
    for part in iter_segment_bytes(bytes(raw), "x.log", base_offset=7, part_bytes=part_bytes):
        entries += part.entries
        positions += part.positions
        lines += [f.line() for f in part.damage]
    assert entries == whole.entries and positions == whole.positions
    assert lines == [f.line() for f in whole.damage]
