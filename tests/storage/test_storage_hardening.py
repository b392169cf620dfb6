"""The commit-log readers and `lbparse segments` under attack (issue #27):
one bad file is one finding, Liftbridge's reading of what it accepts, and
(in tests/storage/test_storage_growth.py) linear time and bounded memory."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import tracemalloc
from pathlib import Path

import crc32c
import pytest
from support.cli import LBPARSE
from support.storage import (  # noqa: F401 (a fixture)
    Msg,
    build_entry,
    build_index,
    build_segment,
    lbtruth,
    messages,
    short_data,
)

from lbparse.storage.checkpoints import LeaderEpoch, parse_high_watermark, parse_leader_epochs
from lbparse.storage.errors import StorageError
from lbparse.storage.index import read_index
from lbparse.storage.segment import read_segment

HUGE = "9" * 5_000  # past Python's 4,300-digit limit of int()


def _segments(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LBPARSE, "segments", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "text",
    [HUGE, "-" + HUGE, "1" * 21, "0" * 4_400 + "7"],
    ids=["5000-nines", "negative", "21-digits", "leading-zeros"],
)
def test_a_checkpoint_number_of_thousands_of_digits_is_a_bad_checkpoint(text: str) -> None:
    with pytest.raises(StorageError, match="not a decimal 64-bit integer") as hw:
        parse_high_watermark(text.encode() + b"\n", "hw")
    assert hw.value.kind == "bad_checkpoint" and len(str(hw.value)) < 200
    with pytest.raises(StorageError, match="not a decimal 64-bit integer") as ep:
        parse_leader_epochs(f"0\n1\n{text} 0\n".encode(), "epochs")
    assert ep.value.kind == "bad_checkpoint" and ep.value.position == 4


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_a_damaged_three_node_data_directory_is_verified_whole(
    short_data: Path,
    tmp_path: Path,
) -> None:
    """Every node damaged in a different file; every damage one finding with
    its file, none stopping the others, the exit status 1 (findings)."""
    data = tmp_path / "data"
    shutil.copytree(short_data, data)
    n1, n2, n3 = (data / f"node{i}" / "streams" for i in (1, 2, 3))
    _flip(n1 / "events" / "0" / "00000000000000000000.log", 40)  # a body byte: CRC
    (n2 / "orders" / "0" / "replication-offset-checkpoint").write_text(HUGE)
    (n3 / "orders" / "1" / "leader-epoch-checkpoint").write_text(f"0\n{HUGE}\n")
    (n3 / "orders" / "2" / "00000000000000000000.index").write_bytes(b"\x01" * 7)
    (n2 / "events" / "0" / "leader-epoch-checkpoint").write_bytes(b"\xff\xfe\n")
    garbage = n3 / "orders" / "0" / "00000000000000000000.log"
    garbage.write_bytes(garbage.read_bytes() + b"\x07" * 50)
    res = _segments("--verify", "--format", "jsonl", *(str(data / f"node{i}") for i in (1, 2, 3)))
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr and "finding(s)" in res.stderr
    found = {
        (str(Path(f["file"]).relative_to(data)), f["kind"])
        for f in map(json.loads, res.stdout.splitlines())
    }
    assert {
        ("node1/streams/events/0/00000000000000000000.log", "crc_mismatch"),
        ("node2/streams/orders/0/replication-offset-checkpoint", "bad_checkpoint"),
        ("node3/streams/orders/1/leader-epoch-checkpoint", "bad_checkpoint"),
        ("node3/streams/orders/2/00000000000000000000.index", "index_tail"),
        ("node2/streams/events/0/leader-epoch-checkpoint", "bad_checkpoint"),
        ("node3/streams/orders/0/00000000000000000000.log", "garbage"),
    } <= found, found


def _naive_against(epochs: list[LeaderEpoch], offset: int, epoch: int) -> bool:
    """The epoch check as it was written first: every line, for every entry."""
    return any(
        (offset > ep.start_offset and epoch < ep.epoch)
        or (offset < ep.start_offset and epoch >= ep.epoch)
        for ep in epochs
    )


@pytest.mark.parametrize("seed", range(30))
def test_the_epoch_index_finds_what_every_line_finds(seed: int) -> None:
    from lbparse.storage.verify import _EpochIndex

    rnd = random.Random(seed)
    epochs = [LeaderEpoch(rnd.randrange(6), rnd.randrange(30)) for _ in range(rnd.randrange(8))]
    index = _EpochIndex(epochs)
    for offset in range(-1, 32):
        for epoch in range(-1, 7):
            ep = index.against(offset, epoch)
            assert (ep is not None) == _naive_against(epochs, offset, epoch)
            if ep is not None:
                assert _naive_against([ep], offset, epoch)


FAR = ((2 << 30) - 4096) // 20 * 20


def test_a_sparse_index_of_gigabytes_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """read_index read the whole file (`segments --verify` on a 6 GB sparse
    .index: MemoryError); it is mapped and its holes skipped."""
    msgs = messages(5)
    seg = build_segment(msgs)
    path = tmp_path / "00000000000000000000.index"
    with open(path, "wb") as f:
        f.write(build_index(msgs, seg, 0))
        f.truncate(2 << 30)
        f.seek(FAR)
        f.write(b"\x01" * 20)  # one entry of garbage far past the zero tail
    tracemalloc.start()
    try:
        reading = read_index(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(reading.entries) == 5 and reading.zero_tail == 5 * 20
    assert [f.kind for f in reading.damage] == ["index_tail"]
    assert reading.damage[0].position == FAR
    assert peak < 8 << 20, f"{peak >> 20} MiB"


BAD_KEYS = [b"\xff", b"\xe2\x82", b"ok\xed\xa0\x80", b"\xc3", b"a\xf0\x9f\x98"]
PLACEHOLDERS = ["@", "#%", "ok!!!", "$", "a&&&"]  # as long as the keys, found nowhere else


def _with_raw_keys(msgs: list[Msg], raw: dict[str, bytes]) -> bytes:
    """A segment whose header keys named in `raw` (placeholders of the same
    length) hold those bytes instead, each entry's CRC made again."""
    out = bytearray()
    for m in msgs:
        entry = bytearray(build_entry(m, "v2020_02"))
        for placeholder, raw_key in raw.items():
            at = entry.find(placeholder.encode(), 34)  # past the header and the body's head
            if at >= 0:
                entry[at : at + len(raw_key)] = raw_key
        # The body starts after the 28-byte header; its CRC covers what follows it.
        entry[28:32] = crc32c.crc32c(bytes(entry[32:])).to_bytes(4, "big")
        out += entry
    return bytes(out)


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_segments_read_what_liftbridge_reads(tmp_path: Path) -> None:
    """Header keys that are not UTF-8 (Liftbridge: U+FFFD per bad byte, the
    entry read; lbparse: bad_entry) and offsets >= 2^63 (Liftbridge: int64;
    lbparse: unsigned), compared with lbtruth entry by entry."""
    placeholders = dict(zip(PLACEHOLDERS, BAD_KEYS))
    msgs = [
        Msg(0, headers=[(p, b"v") for p in placeholders] + [("fine", b"1")]),
        Msg(1 << 63, leader_epoch=(1 << 64) - 1),
        Msg((1 << 64) - 1, headers=[(next(iter(placeholders)), b"")]),
    ]
    log = tmp_path / "s" / "0" / "00000000000000000000.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(_with_raw_keys(msgs, placeholders))
    truth = [json.loads(line) for line in lbtruth("segment", str(log))]
    res = _segments("--format", "jsonl", str(log))
    assert res.stderr == ""
    mine = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(truth) == len(mine) == 3
    for t, m in zip(truth, mine):
        assert {
            k: int(m[k]) if k in ("offset", "timestamp", "leader_epoch") else m[k] for k in t
        } == t
    reading = read_segment(log)
    assert reading.entries[0].header_keys_raw == [*BAD_KEYS, b"fine"]
    assert reading.entries[1].header_keys_raw is None


def test_decode_keeps_every_entry_of_a_response_with_a_key_not_utf8() -> None:
    import lbparse
    from lbparse.codec.commitlog import CommitLogEntry, ReplicationResponse

    rr = ReplicationResponse(
        1,
        2,
        [
            CommitLogEntry(5, 6, 7, b"k", b"v", [("h", b"x")]),
            CommitLogEntry(6, 6, 7, b"k", b"v", [("Z", b"y")]),
        ],
    )
    data = bytearray(lbparse.encode(rr, layout="v0"))
    data[data.rindex(b"Z")] = 0xFF
    got = lbparse.decode(bytes(data), "v0")
    entries = got.message.entries
    assert [e.offset for e in entries] == [5, 6]
    assert entries[1].headers == [("\ufffd", b"y")] and entries[1].header_keys_raw == [b"\xff"]
