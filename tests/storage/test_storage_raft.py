"""raft.db read by lbparse.storage's bbolt reader: every bucket pair equal to
an independent walk over the generated Kaitai parser of spec/bbolt.ksy, the
log decoded by lbparse.raft, the stable store, and damage reported."""

from __future__ import annotations

import json
import subprocess
from io import BytesIO
from pathlib import Path

import pytest
from kaitaistruct import KaitaiStream
from support.cli import LBPARSE
from support.storage import short_data  # noqa: F401 (a fixture)

from lbparse.storage.bbolt import BoltDB, fnv1a64
from lbparse.storage.errors import StorageError
from lbparse.storage.raftdb import read_raft_db, read_raft_db_bytes
from lbparse_generated.kaitai.bbolt_page import BboltPage


def _kaitai_walk(
    data: bytes, page_size: int, root: int, inline: bytes | None = None
) -> list[tuple[int, bytes, bytes]]:
    """A bucket's (flags, key, value) pairs, walking pages with the Kaitai parser only."""
    if inline is not None:
        page = BboltPage(KaitaiStream(BytesIO(inline)))
    else:
        at = root * page_size
        head = BboltPage(KaitaiStream(BytesIO(data[at : at + page_size])))
        page = BboltPage(KaitaiStream(BytesIO(data[at : at + (head.overflow + 1) * page_size])))
    if page.flags == BboltPage.PageType.branch:
        return [kv for e in page.branch_elements for kv in _kaitai_walk(data, page_size, e.pgid)]
    return [(e.flags, e.key, e.value) for e in page.leaf_elements]


def _kaitai_bucket(data: bytes, name: bytes) -> list[tuple[int, bytes, bytes]]:
    metas = [BboltPage(KaitaiStream(BytesIO(data[at : at + 4096]))).meta for at in (0, 4096)]
    meta = max(metas, key=lambda m: m.txid)
    for _flags, key, value in _kaitai_walk(data, meta.page_size, meta.root.root):
        if key == name:
            b = BboltPage.Bucket(KaitaiStream(BytesIO(value)))
            inline = value[16:] if b.header.root == 0 else None
            return _kaitai_walk(data, meta.page_size, b.header.root, inline)
    raise AssertionError(f"no bucket {name!r}")


def test_bucket_pairs_equal_an_independent_kaitai_walk(short_data: Path) -> None:
    for path in sorted(short_data.glob("node*/raft/raft.db")):
        data = path.read_bytes()
        db = BoltDB(data, str(path))
        assert db.buckets() == [b"conf", b"logs"]
        for name in (b"conf", b"logs"):
            ours = [(e.flags, e.key, e.value) for e in db.bucket(name)]
            assert ours == _kaitai_bucket(data, name)
        assert db.findings == []


def test_meta_checksum_is_fnv1a(short_data: Path) -> None:
    data = (short_data / "node1" / "raft" / "raft.db").read_bytes()
    db = BoltDB(data)
    assert all(m.checksum_ok for m in db.metas) and len(db.metas) == 2
    assert db.meta.txid == max(m.txid for m in db.metas)
    assert fnv1a64(b"") == 0xCBF29CE484222325 and fnv1a64(b"a") == 0xAF63DC4C8601EC8C


def test_raft_log_and_stable_store(short_data: Path) -> None:
    for node in ("node1", "node2", "node3"):
        store = read_raft_db(short_data / node / "raft" / "raft.db")
        assert store.findings == []
        assert [log.index for log in store.logs] == list(range(1, len(store.logs) + 1))
        assert all(log.entry is not None and log.entry.index == log.index for log in store.logs)
        first = store.logs[0].entry
        assert first is not None and first.type_name == "LogConfiguration"
        assert [s.id for s in first.configuration.servers] == ["node1", "node2", "node3"]
        names = {
            log.entry.command.name
            for log in store.logs
            if log.entry is not None and log.entry.command is not None
        }
        assert {"CreateStream", "PublishActivity"} <= names
        assert store.stable["CurrentTerm"] == 2 and store.stable["LastVoteTerm"] == 2
        assert store.stable["LastVoteCand"] in (b"node1", b"node2", b"node3")


def test_damaged_meta_falls_back_to_the_other(short_data: Path) -> None:
    data = bytearray((short_data / "node1" / "raft" / "raft.db").read_bytes())
    good = BoltDB(bytes(data))
    at = good.meta.page * 4096 + 16 + 40  # the current meta's txid
    data[at] ^= 0xFF
    db = BoltDB(bytes(data))
    assert db.meta.page != good.meta.page
    assert [f.kind for f in db.findings] == ["bad_page"]
    assert db.findings[0].position == good.meta.page * 4096


def test_a_damaged_page_is_reported_and_the_rest_read(short_data: Path) -> None:
    data = bytearray((short_data / "node1" / "raft" / "raft.db").read_bytes())
    db = BoltDB(bytes(data))
    logs_root = next(
        db._open_bucket(e.value)[0] for e in db.items(db.meta.root) if e.key == b"logs"
    )
    branch = db.page(logs_root)
    lost = branch.elements[0].pgid
    assert lost is not None
    data[lost * 4096] ^= 0x40  # the first leaf's page id
    store = read_raft_db_bytes(bytes(data), "raft.db")
    assert [f.kind for f in store.findings] == ["bad_page"]
    assert store.findings[0].position == lost * 4096
    assert "says it is page" in store.findings[0].message
    assert store.logs and store.logs[0].index is not None and store.logs[0].index > 1
    assert store.stable["CurrentTerm"] == 2


def test_not_a_bbolt_file() -> None:
    with pytest.raises(StorageError, match="no valid bbolt meta page"):
        read_raft_db_bytes(bytes(8192), "x.db")


def _lbparse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LBPARSE, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_raft_command_table_and_jsonl(short_data: Path) -> None:
    res = _lbparse("raft", str(short_data / "node1"))
    assert res.returncode == 0, res.stderr
    assert "CurrentTerm 2  LastVoteTerm 2  LastVoteCand node1" in res.stdout
    assert "CreateStream" in res.stdout and "LogConfiguration" in res.stdout
    res = _lbparse(
        "raft",
        str(short_data / "node2" / "raft" / "raft.db"),
        "--format",
        "jsonl",
        "--from-index",
        "5",
        "--to-index",
        "9",
    )
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    # 64-bit integers (terms, indexes, txid) are decimal strings (lbparse.codec.jsonform)
    assert lines[0]["stable"]["CurrentTerm"] == "2" and lines[0]["meta"]["page_size"] == 4096
    assert lines[0]["meta"]["txid"] == str(int(lines[0]["meta"]["txid"]))
    assert [x["index"] for x in lines[1:]] == ["5", "6", "7", "8", "9"]
    assert lines[1]["term"] == "2" and lines[1]["type"] == 0
    assert lines[1]["command"]["name"] == "CreateStream"


@pytest.mark.slow
def test_raft_command_exit_codes(short_data: Path, tmp_path: Path) -> None:
    assert _lbparse("raft", str(tmp_path / "none")).returncode == 2
    (tmp_path / "x.db").write_bytes(bytes(100))
    res = _lbparse("raft", str(tmp_path / "x.db"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    data = bytearray((short_data / "node1" / "raft" / "raft.db").read_bytes())
    data[2 * 4096] ^= 0x40
    (tmp_path / "damaged.db").write_bytes(bytes(data))
    res = _lbparse("raft", str(tmp_path / "damaged.db"))
    assert res.returncode == 1 and "damaged.db:8192: bad_page" in res.stderr
