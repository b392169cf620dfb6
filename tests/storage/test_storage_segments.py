"""Segments, indexes and checkpoints read by lbparse.storage: the real data
directories of the shared `short` run against Liftbridge's own reading
(bin/lbtruth) entry by entry, every historical generation built per the
facts, and every kind of damage reported with its file and position while
everything readable is still read."""

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

import pytest
from support.storage import (  # noqa: F401 (a fixture)
    LISTING,
    Msg,
    build_segment,
    lbtruth,
    messages,
    short_data,
    write_partition,
)

from lbparse.storage import (
    check_partition,
    compare_replicas,
    detect_format,
    entry_json,
    find_partitions,
    read_index,
    read_segment,
    read_segment_bytes,
)
from lbparse.storage.checkpoints import parse_high_watermark, parse_leader_epochs
from lbparse.storage.errors import StorageError
from lbparse.storage.formats import CURRENT, SEGMENT_FORMATS_BY_NAME
from lbparse.storage.index import CURRENT_INDEX

# --- the real data directories ------------------------------------------------


def test_real_segments_equal_lbtruth_entry_by_entry(short_data: Path) -> None:
    logs = sorted(short_data.glob("node*/streams/*/*/*.log"))
    assert len(logs) == 21
    total = 0
    for log in logs:
        reading = read_segment(log)
        assert reading.damage == []
        truth = [json.loads(line) for line in lbtruth("segment", str(log))]
        ours = [entry_json(e, reading.format) for e in reading.entries]
        assert len(ours) == len(truth), log
        for o, t in zip(ours, truth):
            assert {k: o[k] for k in t} == t
        total += len(ours)
    assert total == 255


@pytest.mark.slow
def test_real_indexes_equal_lbtruth(short_data: Path) -> None:
    for path in sorted(short_data.glob("node*/streams/*/*/*.index")):
        reading = read_index(path)
        truth = [json.loads(line) for line in lbtruth("index", str(path))]
        ours = [
            {
                "rel_offset": e.rel_offset,
                "timestamp": e.timestamp,
                "position": e.position,
                "size": e.size,
            }
            for e in reading.entries
        ]
        assert ours == truth, path
        assert reading.damage == []


def test_real_directories_match_the_independent_listing(short_data: Path) -> None:
    """data-short.listing.txt was counted by a parser independent of lbparse."""
    if not LISTING.is_file():
        pytest.skip(f"shared material missing: {LISTING}")
    for line in LISTING.read_text().splitlines():
        m = re.match(r"\./(\S+\.log)\s.*?(\d+) entries.*crc failures (\d+)", line)
        if m:
            reading = read_segment(short_data / m.group(1))
            assert len(reading) == int(m.group(2)), line
            assert sum(not e.crc_ok for e in reading.entries) == int(m.group(3))
        m = re.match(r"\./(\S+\.index)\s.*\s(\d+) index entries", line)
        if m:
            assert len(read_index(short_data / m.group(1)).entries) == int(m.group(2)), line
        m = re.match(r"\./(\S+/replication-offset-checkpoint)\s.*content: (\S+)", line)
        if m:
            assert parse_high_watermark((short_data / m.group(1)).read_bytes()) == int(m.group(2))
        m = re.match(r"\./(\S+/leader-epoch-checkpoint)\s.*content: 0 (\d+) (.*)", line)
        if m:
            epochs = parse_leader_epochs((short_data / m.group(1)).read_bytes())
            nums = [int(x) for x in m.group(3).split()]
            assert [(e.epoch, e.start_offset) for e in epochs] == list(zip(nums[::2], nums[1::2]))


@pytest.mark.slow
def test_real_directories_verify_clean_and_replicas_agree(short_data: Path) -> None:
    parts = find_partitions([short_data / "node1", short_data / "node2", short_data / "node3"])
    assert len(parts) == 21
    assert {p.node for p in parts} == {"node1", "node2", "node3"}  # from DATA/liftbridge
    checks = [check_partition(p, keep_digests=True) for p in parts]
    assert [f.line() for c in checks for f in c.findings] == []
    assert compare_replicas(checks) == []


def test_every_way_of_naming_the_data(short_data: Path) -> None:
    n1 = short_data / "node1"
    assert len(find_partitions([short_data])) == 21  # a folder of data directories
    assert len(find_partitions([n1])) == 7
    assert len(find_partitions([n1 / "streams"])) == 7
    orders = find_partitions([n1 / "streams" / "orders"])
    assert [(p.node, p.stream, p.partition) for p in orders] == [
        ("node1", "orders", 0),
        ("node1", "orders", 1),
        ("node1", "orders", 2),
    ]
    one = find_partitions([n1 / "streams" / "orders" / "1"])
    assert [(p.stream, p.partition, len(p.segments)) for p in one] == [("orders", 1, 1)]
    log = n1 / "streams" / "orders" / "1" / "00000000000000000000.log"
    files = find_partitions([log, log.with_suffix(".index")])
    assert len(files) == 1 and files[0].only_files and files[0].segments[0].index is not None
    with pytest.raises(StorageError, match="no such file"):
        find_partitions([short_data / "nope"])
    with pytest.raises(StorageError, match="not a segment file"):
        find_partitions([n1 / "liftbridge"])


# --- historical generations ---------------------------------------------------


@pytest.mark.parametrize("fmt", list(SEGMENT_FORMATS_BY_NAME))
def test_every_generation_is_told_apart_and_read(fmt: str) -> None:
    msgs = messages(6, first=10)
    msgs[2].key = None
    msgs[3].value = None
    msgs[4].headers = []
    if fmt == "v2018_04":
        msgs[1].magic = 0  # no timestamp, no headers
        msgs[5].magic = 2  # timestamp and headers
    data = build_segment(msgs, fmt)
    assert detect_format(data).name == fmt
    reading = read_segment_bytes(data)
    assert reading.damage == [] and reading.format.name == fmt
    got = [entry_json(e, reading.format) for e in reading.entries]
    assert [g["offset"] for g in got] == list(range(10, 16))
    assert all(g["crc_ok"] for g in got)
    assert got[2]["key_hex"] is None and got[3]["value_hex"] is None
    has_epoch = fmt in ("v2019_07", "v2020_02")
    assert [g["leader_epoch"] for g in got] == [3 if has_epoch else None] * 6
    for m, g in zip(msgs, got):
        no_ts = fmt == "v2018_04" and m.magic == 0
        # the first generations kept milliseconds: the ns timestamp loses nothing here
        assert g["timestamp"] == (None if no_ts else m.timestamp)
        with_headers = not (fmt == "v2018_04" and m.magic < 2)
        assert g["headers_hex"] == ({k: v.hex() for k, v in m.headers} if with_headers else {})


def test_crc_algorithm_tells_2019_from_2020() -> None:
    """Same layout, CRC-32 (IEEE) before Feb 2020, CRC-32C after."""
    msgs = messages(3)
    old, new = build_segment(msgs, "v2019_07"), build_segment(msgs, "v2020_02")
    assert detect_format(old).name == "v2019_07" and detect_format(new).name == "v2020_02"
    forced = read_segment_bytes(old, fmt=SEGMENT_FORMATS_BY_NAME["v2020_02"])
    assert [e.crc_ok for e in forced.entries] == [False] * 3  # read, but every CRC wrong


# --- damage -------------------------------------------------------------------

# Sizes and offsets from the spec's structs (no layout written here by hand).
W = CURRENT_INDEX.entry.size  # an index entry
HL = CURRENT.header_len  # an entry header


def _index_field(name: str) -> slice:
    """Where a field sits in an index entry."""
    i = CURRENT_INDEX.fields.index(name)
    fmt = CURRENT_INDEX.entry.format
    start = struct.calcsize(fmt[: 1 + i])
    return slice(start, start + struct.calcsize(fmt[0] + fmt[1 + i]))


def _set(data: bytearray, entry: int, name: str, value: int) -> None:
    f = _index_field(name)
    at = slice(entry * W + f.start, entry * W + f.stop)
    data[at] = value.to_bytes(f.stop - f.start, "big", signed=True)


def _partition(tmp_path: Path, n_segments: int = 2, per: int = 5, **kw) -> Path:
    segs = [messages(per, first=i * per) for i in range(n_segments)]
    last = n_segments * per - 1
    kw.setdefault("hw", last)
    kw.setdefault("epochs", [(3, 0)])
    return write_partition(tmp_path / "DATA" / "streams" / "s" / "0", segs, **kw)


def _findings(folder: Path) -> list[tuple[str, str, int | None]]:
    (part,) = find_partitions([folder])
    return [(Path(f.path).name, f.kind, f.position) for f in check_partition(part).findings]


def _seg(folder: Path, base: int, suffix: str = ".log") -> Path:
    return folder / f"{base:020d}{suffix}"


def test_made_partition_verifies_clean(tmp_path: Path) -> None:
    folder = _partition(tmp_path, preallocate_last=100 * W)
    assert _findings(folder) == []


def test_truncated_segment_is_a_torn_entry(tmp_path: Path) -> None:
    folder = _partition(tmp_path)
    log = _seg(folder, 5)
    data = log.read_bytes()
    last = read_segment(log).positions[-1]
    log.write_bytes(data[:-7])
    reading = read_segment(log)
    assert [e.offset for e in reading.entries] == [5, 6, 7, 8]
    assert "cut short" in reading.damage[0].message
    found = _findings(folder)
    assert (log.name, "torn_entry", last) in found
    # the index still locates the lost message, where no whole entry starts
    assert (log.with_suffix(".index").name, "index_mismatch", 4 * W) in found
    assert ("replication-offset-checkpoint", "hw_past_end", 0) in found


def test_segment_cut_between_entries_leaves_the_index_past_the_end(tmp_path: Path) -> None:
    folder = _partition(tmp_path)
    log = _seg(folder, 5)
    log.write_bytes(log.read_bytes()[: read_segment(log).positions[-1]])
    found = _findings(folder)
    assert (log.with_suffix(".index").name, "index_past_end", 4 * W) in found
    assert ("replication-offset-checkpoint", "hw_past_end", 0) in found
    assert not any(k == "torn_entry" for _, k, _ in found)


def test_flipped_byte_is_a_crc_mismatch(tmp_path: Path) -> None:
    folder = _partition(tmp_path)
    log = _seg(folder, 0)
    data = bytearray(log.read_bytes())
    reading = read_segment(log)
    at = data.find(b'{"i": 2}') + 2  # in the 3rd entry's value
    data[at] ^= 0x20
    log.write_bytes(bytes(data))
    assert _findings(folder) == [(log.name, "crc_mismatch", reading.positions[2])]


def test_garbage_in_the_middle_is_skipped_and_reading_resumes(tmp_path: Path) -> None:
    folder = _partition(tmp_path, n_segments=1, per=6)
    log = _seg(folder, 0)
    reading = read_segment(log)
    cut = reading.positions[3]
    data = log.read_bytes()
    log.write_bytes(data[:cut] + b"\xde\xad\xbe\xef" * 9 + data[cut:])
    after = read_segment(log)
    assert [e.offset for e in after.entries] == [0, 1, 2, 3, 4, 5]  # nothing lost
    assert [(f.kind, f.position) for f in after.damage] == [("garbage", cut)]
    assert "36 bytes" in after.damage[0].message
    found = _findings(folder)
    assert (log.name, "garbage", cut) in found
    # the index entries of the moved entries no longer point at them
    assert any(k == "index_mismatch" for _, k, _ in found)


def test_zeros_in_the_middle_and_at_the_end(tmp_path: Path) -> None:
    folder = _partition(tmp_path, n_segments=1, per=4)
    log = _seg(folder, 0)
    reading = read_segment(log)
    data = log.read_bytes()
    cut = reading.positions[2]
    log.write_bytes(data[:cut] + bytes(64) + data[cut:] + bytes(100))
    after = read_segment(log)
    assert [e.offset for e in after.entries] == [0, 1, 2, 3]
    assert [(f.kind, f.position) for f in after.damage] == [
        ("zeros", cut),
        ("zeros", len(data) + 64),
    ]


def test_malformed_entry_is_reported_and_the_next_read(tmp_path: Path) -> None:
    folder = _partition(tmp_path, n_segments=1, per=4)
    log = _seg(folder, 0)
    reading = read_segment(log)
    data = bytearray(log.read_bytes())
    key_len_at = reading.positions[1] + HL + CURRENT.body_head.size  # the key length
    data[key_len_at : key_len_at + 4] = (0x7FFF0000).to_bytes(4, "big")  # key past the body
    log.write_bytes(bytes(data))
    after = read_segment(log)
    assert [e.offset for e in after.entries] == [0, 2, 3]
    assert [(f.kind, f.position) for f in after.damage] == [("bad_entry", reading.positions[1])]
    assert after.damaged_headers[reading.positions[1]]["offset"] == 1


def test_missing_segment(tmp_path: Path) -> None:
    folder = _partition(tmp_path, n_segments=3)
    _seg(folder, 5).unlink()
    found = _findings(folder)
    assert (_seg(folder, 5, ".index").name, "missing_segment", None) in found
    assert (_seg(folder, 10).name, "missing_segment", 0) in found  # offsets 5..9 in no segment


def test_index_past_the_end_and_pointing_nowhere(tmp_path: Path) -> None:
    folder = _partition(tmp_path, n_segments=1)
    idx = _seg(folder, 0, ".index")
    data = bytearray(idx.read_bytes())
    _set(data, 1, "position", 10_000)  # 2nd entry: position past the end
    _set(data, 2, "position", 3)  # 3rd entry: inside an entry
    idx.write_bytes(bytes(data))
    found = _findings(folder)
    assert (idx.name, "index_past_end", W) in found
    assert (idx.name, "index_mismatch", 2 * W) in found
    assert (
        _seg(folder, 0).name,
        "index_missing",
        read_segment(_seg(folder, 0)).positions[1],
    ) in found


def test_zero_filled_index_with_and_without_entries_after_the_zeros(tmp_path: Path) -> None:
    folder = _partition(tmp_path, n_segments=1, preallocate_last=2000)
    idx = _seg(folder, 0, ".index")
    assert _findings(folder) == []  # the preallocated zero tail is fine
    data = bytearray(idx.read_bytes())
    data[50 * W : 51 * W] = data[0:W]  # an entry after the zeros
    idx.write_bytes(bytes(data))
    reading = read_index(idx)
    assert len(reading.entries) == 5 and reading.zero_tail == 5 * W
    assert [e.index_position for e in reading.after_tail] == [50 * W]
    assert _findings(folder) == [(idx.name, "index_tail", 50 * W)]


def test_index_entry_that_disagrees_with_its_entry(tmp_path: Path) -> None:
    folder = _partition(tmp_path, n_segments=1)
    idx = _seg(folder, 0, ".index")
    data = bytearray(idx.read_bytes())
    _set(data, 3, "timestamp", 1)  # 4th entry: another timestamp
    idx.write_bytes(bytes(data))
    found = check_partition(find_partitions([folder])[0]).findings
    assert [(f.kind, f.position) for f in found] == [("index_mismatch", 3 * W)]
    assert "timestamp 1" in found[0].message


def test_offsets_timestamps_and_epochs_going_backwards(tmp_path: Path) -> None:
    msgs = messages(5)
    msgs[2] = Msg(7, msgs[2].timestamp, 3)  # offset skips
    msgs[3] = Msg(8, msgs[0].timestamp - 5, 3)  # timestamp backwards
    msgs[4] = Msg(9, msgs[4].timestamp, 1)  # epoch backwards
    folder = write_partition(
        tmp_path / "p" / "streams" / "s" / "0", [msgs], hw=9, epochs=[(1, 0), (3, 0)]
    )
    kinds = [k for _, k, _ in _findings(folder)]
    assert kinds.count("offset_gap") == 1
    assert "timestamp_backwards" in kinds and "epoch_backwards" in kinds
    assert "epoch_checkpoint" in kinds


def test_epochs_disagreeing_with_the_checkpoint(tmp_path: Path) -> None:
    folder = _partition(tmp_path, n_segments=1, epochs=[(2, -1), (5, 2)])
    found = _findings(folder)
    # offsets 3 and 4 (epoch 3) come after epoch 5 started at 2
    assert [(k, p) for _, k, p in found if k == "epoch_checkpoint"][:1] == [
        ("epoch_checkpoint", read_segment(_seg(folder, 0)).positions[0])
    ]
    # A leader records a new epoch at the offset of the last message before it.
    ok = _partition(tmp_path / "ok", n_segments=1, epochs=[(1, -1), (3, -1), (7, 4)])
    assert _findings(ok) == []
    late = _partition(tmp_path / "late", n_segments=1, epochs=[(1, -1), (3, -1), (7, 3)])
    assert [k for _, k, _ in _findings(late)] == ["epoch_checkpoint"]  # offset 4 in epoch 3 < 7


def test_bad_checkpoints(tmp_path: Path) -> None:
    folder = _partition(tmp_path, n_segments=1)
    (folder / "replication-offset-checkpoint").write_text("12x")
    (folder / "leader-epoch-checkpoint").write_text("0\n2\n3 0\n")
    found = _findings(folder)
    assert ("replication-offset-checkpoint", "bad_checkpoint", 0) in found
    assert ("leader-epoch-checkpoint", "bad_checkpoint", 2) in found


def test_replicas_compared_up_to_the_smallest_hw(tmp_path: Path) -> None:
    msgs = messages(6)
    for node in ("n1", "n2", "n3"):
        write_partition(tmp_path / node / "streams" / "s" / "0", [msgs], hw=4, epochs=[(3, 0)])
        (tmp_path / node / "liftbridge").write_bytes(b"\x0a\x02" + node.encode())
    # n3 diverges at offset 5, above the HW: fine; n2 at offset 2: not
    other = [Msg(m.offset, m.timestamp, m.leader_epoch, m.key, b"changed") for m in msgs]
    write_partition(
        tmp_path / "n3" / "streams" / "s" / "0", [msgs[:5] + other[5:]], hw=4, epochs=[(3, 0)]
    )
    write_partition(
        tmp_path / "n2" / "streams" / "s" / "0", [msgs[:2] + other[2:]], hw=4, epochs=[(3, 0)]
    )
    parts = find_partitions([tmp_path / "n1", tmp_path / "n2", tmp_path / "n3"])
    found = compare_replicas([check_partition(p, keep_digests=True) for p in parts])
    assert len(found) == 1 and found[0].kind == "replica_mismatch"
    assert "offset 2 differs from n1's" in found[0].message and "/n2/" in found[0].path
    assert (
        found[0].position
        == read_segment(_seg(tmp_path / "n2" / "streams" / "s" / "0", 0)).positions[2]
    )


def test_copy_of_real_data_with_damage_is_read_as_far_as_it_goes(
    short_data: Path, tmp_path: Path
) -> None:
    data = tmp_path / "node1"
    shutil.copytree(short_data / "node1", data)
    log = data / "streams" / "orders" / "0" / "00000000000000000000.log"
    raw = log.read_bytes()
    log.write_bytes(raw[:1000] + b"\x00garbage\xff" * 3 + raw[1000:-20])
    reading = read_segment(log)
    truth = [json.loads(line) for line in lbtruth("segment", str(log), panics=True)]
    assert len(truth) < 8  # Liftbridge's reader stops (or panics) at the damage
    assert [e.offset for e in reading.entries] == list(range(0, 23))[:6] + list(range(7, 23))
    assert [f.kind for f in reading.damage] == ["garbage", "torn_entry"]


@pytest.mark.parametrize("fmt", list(SEGMENT_FORMATS_BY_NAME))
def test_partitions_of_every_generation_verify_clean(tmp_path: Path, fmt: str) -> None:
    """Segments and indexes of each generation (the 8-byte index before Aug
    2018) pass every check; a flipped value byte is found in each."""
    segs = [messages(4, first=0), messages(4, first=4)]
    folder = write_partition(
        tmp_path / "D" / "streams" / "s" / "0",
        segs,
        hw=7,
        epochs=[(3, 0)] if fmt in ("v2019_07", "v2020_02") else None,
        fmt_name=fmt,
    )
    assert _findings(folder) == []
    log = _seg(folder, 4)
    data = bytearray(log.read_bytes())
    data[data.find(b'{"i": 6}') + 2] ^= 0x01
    log.write_bytes(bytes(data))
    assert [k for _, k, _ in _findings(folder)] == ["crc_mismatch"]
