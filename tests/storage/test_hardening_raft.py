"""raft.db under attack (issue #27): memory bounded by the limits, sparse
files mapped rather than read, each page problem named for what it is,
every problem said in every output format, time and memory linear.

The files are crafted page by page (tests/support/storage.py). The
timing and memory-growth tests are `slow`; the others are not.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import storage as bb
from support.cli import LBPARSE
from support.growth import assert_linear, peak_bytes

from lbparse.codec.limits import Limits
from lbparse.storage.bbolt import LEAF, MAX_DEPTH, PAGE_HEADER, PAGE_TYPES, BoltDB
from lbparse.storage.raftdb import read_raft_db, read_raft_db_bytes

SMALL = Limits(max_raft_db=4 << 20)


def _aliased(count: int, value_bytes: int) -> bytes:
    """A raft.db whose one leaf page holds `count` keys all pointing at one
    log entry of `value_bytes` bytes of data."""
    value = bb.log_value(1, data=b"\x01" * value_bytes)
    return bb.raft_db({4: bb.aliased_leaf(4, count, bb.key(1), value)}, logs_root=4)


def _lbparse(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LBPARSE, *args], capture_output=True, text=True, timeout=300, **kw)


def _max_rss_kb(*args: str) -> tuple[int, subprocess.CompletedProcess[str]]:
    """`lbparse ARGS` run under a fresh parent: its peak RSS (KiB) and its run."""
    probe = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stderr.write(p.stderr); sys.stdout.write(p.stdout)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe, *LBPARSE, *args], capture_output=True, text=True, timeout=300
    )
    rss, rc = res.stdout.splitlines()[-1].split()
    return int(rss), subprocess.CompletedProcess(args, int(rc), res.stdout, res.stderr)


# -- 1. keys that share one value: referenced, copied within the budget --------------


def test_keys_sharing_one_value_are_copied_within_the_budget() -> None:
    """lbparse/storage/bbolt.py copied every element's key and value out of
    the page: 65,535 keys pointing at one 1 MB value asked for 64 GB. Now
    they are views of the file, and what the store keeps is copied within
    Limits.max_raft_db, the rest counted and said."""
    data = _aliased(4096, 256 << 10)  # 1.3 MB of file, 1 GiB if each key were copied
    stores = []
    peak = peak_bytes(lambda: stores.append(read_raft_db_bytes(data, "raft.db", SMALL)))
    store = stores[0]
    assert peak < 4 * SMALL.max_raft_db + 2 * len(data), f"{peak >> 20} MiB"
    kinds = [f.kind for f in store.findings]
    assert kinds.count("limit") == 1 and "bad_page" in kinds
    limit = next(f for f in store.findings if f.kind == "limit")
    decoded = len(store.logs)
    assert 0 < decoded < 4096 and f"the {4096 - decoded - 1} after it" in limit.message
    assert "max_raft_db" in limit.message
    overlap = next(f for f in store.findings if f.kind == "bad_page")
    assert "overlap" in overlap.message and overlap.position == 4 * bb.PAGE
    assert store.stable["CurrentTerm"] == 2  # read on past the limit


@pytest.mark.slow
def test_the_crafted_file_of_the_issue_stays_bounded(tmp_path: Path) -> None:
    """The issue's file: one leaf page of 65,535 keys pointing at one 1 MB
    region (2 MB on disk). `lbparse raft` ran out of memory at 3 GB; now it
    stays within the default budget, says the limit and exits 1."""
    path = tmp_path / "raft.db"
    path.write_bytes(_aliased(65_535, 1 << 20))
    rss, res = _max_rss_kb("raft", str(path))
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert ": limit: " in res.stderr and "65279 after it" in res.stderr, res.stderr[-2000:]
    assert rss < 1_200_000, f"peak RSS {rss >> 10} MiB"


@pytest.mark.slow
def test_the_budget_is_an_option_of_the_command(tmp_path: Path) -> None:
    path = tmp_path / "raft.db"
    path.write_bytes(_aliased(64, 64 << 10))
    assert _lbparse("raft", str(path), "--max-raft-db", "1M").returncode == 1
    res = _lbparse("raft", str(path), "--max-raft-db", "1M", "--format", "jsonl")
    assert ": limit: " in res.stderr and len(res.stdout.splitlines()) - 1 == 15, res.stderr
    res = _lbparse("raft", str(path), "--max-raft-db", "0")
    assert res.returncode == 2 and "Traceback" not in res.stderr


# -- 2. sparse files: mapped, never read whole ---------------------------------------


def _sparse(path: Path, size: int, entries: int = 3) -> Path:
    """A real raft.db of `entries` entries (24 KiB) followed by a hole to `size` bytes."""
    data = bb.raft_db(
        {4: bb.leaf(4, [(0, bb.key(i), bb.log_value(i)) for i in range(1, entries + 1)])},
        logs_root=4,
    )
    bb.write_sparse(str(path), data, size)
    return path


def test_a_sparse_raft_db_is_not_read_whole(tmp_path: Path) -> None:
    """read_raft_db read the whole file (Path.read_bytes): 1 GB of hole cost
    1 GB, 8 GB a MemoryError. It is mapped: only the pages walked are read."""
    path = _sparse(tmp_path / "raft.db", 1 << 30)
    stores = []
    peak = peak_bytes(lambda: stores.append(read_raft_db(path)))
    assert peak < 8 << 20, f"{peak >> 20} MiB"
    assert [log.index for log in stores[0].logs] == [1, 2, 3] and stores[0].findings == []


@pytest.mark.slow
def test_an_8_gb_sparse_raft_db_costs_no_memory(tmp_path: Path) -> None:
    path = _sparse(tmp_path / "raft.db", 8 << 30)
    rss, res = _max_rss_kb("raft", str(path))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "3 log entries" in res.stdout
    assert rss < 200_000, f"peak RSS {rss >> 10} MiB"


def test_a_value_claiming_the_hole_is_refused_by_the_budget(tmp_path: Path) -> None:
    """A leaf page whose overflow spans 3 GiB of hole and whose one value
    claims it all: the budget refuses it before anything is copied."""
    claim = 3 << 30
    page = (
        PAGE_HEADER.pack(4, PAGE_TYPES["leaf"], 1, claim // bb.PAGE + 1)
        + LEAF.pack(0, LEAF.size, 8, claim)
        + bb.key(1)
    )
    data = bb.raft_db({4: page.ljust(bb.PAGE, b"\0")}, logs_root=4)
    path = tmp_path / "raft.db"
    bb.write_sparse(str(path), data, 4 * bb.PAGE + claim + bb.PAGE)
    stores = []
    peak = peak_bytes(lambda: stores.append(read_raft_db(path)))
    assert peak < 8 << 20, f"{peak >> 20} MiB"
    assert [f.kind for f in stores[0].findings] == ["limit"] and stores[0].logs == []


# -- 4. words that are right: depth limits, pages reached twice, loops ---------------


def _tree(pages: dict[int, bytes], root: int) -> BoltDB:
    db = BoltDB(bb.raft_db(pages, logs_root=root))
    return db


def _leaf5() -> bytes:
    return bb.leaf(5, [(0, bb.key(1), bb.log_value(1))])


def test_a_deep_chain_is_said_to_pass_the_depth_limit() -> None:
    """A chain of branch pages deeper than MAX_DEPTH was 'reached twice (a loop)'."""
    depth = MAX_DEPTH + 6
    pages = {10 + i: bb.branch(10 + i, [(bb.key(1), 11 + i)]) for i in range(depth)}
    pages[10 + depth] = bb.leaf(10 + depth, [(0, bb.key(1), bb.log_value(1))])
    db = _tree(pages, 10)
    assert list(db.bucket(b"logs")) == []
    [f] = db.findings
    assert "depth limit of 64" in f.message and "loop" not in f.message and "twice" not in f.message
    assert f.position == (10 + MAX_DEPTH) * bb.PAGE


def test_a_chain_within_the_depth_limit_is_read() -> None:
    pages = {10 + i: bb.branch(10 + i, [(bb.key(1), 11 + i)]) for i in range(MAX_DEPTH - 1)}
    last = 10 + MAX_DEPTH - 1
    pages[last] = bb.leaf(last, [(0, bb.key(1), bb.log_value(1))])
    db = _tree(pages, 10)
    assert [bytes(e.key) for e in db.bucket(b"logs")] == [bb.key(1)] and db.findings == []


def test_a_page_reached_twice_is_not_called_a_loop() -> None:
    """A branch whose children share a page (a DAG, not a loop)."""
    db = _tree({4: bb.branch(4, [(bb.key(1), 5), (bb.key(2), 5), (bb.key(3), 5)]), 5: _leaf5()}, 4)
    assert [bytes(e.key) for e in db.bucket(b"logs")] == [bb.key(1)]
    assert len(db.findings) == 2
    for f in db.findings:
        assert "reached a second time (from branch page 4)" in f.message
        assert "loop" not in f.message and f.position == 5 * bb.PAGE


def test_a_real_loop_is_called_a_loop() -> None:
    db = _tree(
        {
            4: bb.branch(4, [(bb.key(1), 6)]),
            6: bb.branch(6, [(bb.key(1), 5), (bb.key(2), 4)]),
            5: _leaf5(),
        },
        4,
    )
    assert [bytes(e.key) for e in db.bucket(b"logs")] == [bb.key(1)]
    [f] = db.findings
    assert "page 4 is its own ancestor, a loop (4 -> 6 -> 4)" in f.message


# -- 4. every problem in every format, and the exit status ---------------------------


@pytest.mark.slow
def test_a_command_that_is_not_a_raftlog_shows_in_the_table_and_the_status(tmp_path: Path) -> None:
    """The table showed a LogCommand that is not a RaftLog as an empty row,
    exit status 0 (the warning was only in JSON Lines)."""
    path = tmp_path / "raft.db"
    path.write_bytes(
        bb.raft_db(
            {
                4: bb.leaf(
                    4,
                    [
                        (0, bb.key(1), bb.log_value(1, data=b"\xff")),
                        (0, bb.key(2), bb.log_value(2, data=b"")),
                    ],
                )
            },
            logs_root=4,
        )
    )
    for fmt in ("table", "jsonl"):
        res = _lbparse("raft", str(path), "--format", fmt)
        assert res.returncode == 1, (fmt, res.stderr)
        [line] = res.stderr.splitlines()
        assert (
            line.startswith(f"{path}: bad_log_entry: log index 1: LogCommand data kept as bytes")
            and "not a protocol.RaftLog" in line
        )
    table = _lbparse("raft", str(path)).stdout
    row = next(x for x in table.splitlines() if x.lstrip().startswith("1 "))
    assert "warning: LogCommand data kept as bytes" in row
    assert "1 problem found in this file (listed on stderr)" in table
    jsonl = [
        json.loads(x) for x in _lbparse("raft", str(path), "--format", "jsonl").stdout.splitlines()
    ]
    assert "not a protocol.RaftLog" in jsonl[1]["warnings"][0] and "warnings" not in jsonl[2]


# -- 3. linear time and memory -------------------------------------------------------


def _memory_exponent(
    make: Callable[[int], bytes], sizes: list[int], read: Callable[[bytes], object]
) -> float:
    """How the traced peak grows with the input from sizes[0] to sizes[-1]."""
    inputs = {n: make(n) for n in sizes}
    peaks = [peak_bytes(lambda n=n: read(inputs[n])) for n in sizes]
    first = max(peaks[0], 1)
    return math.log(max(peaks[-1], first) / first) / math.log(sizes[-1] / sizes[0])


def _many_entries(n: int) -> bytes:
    """n distinct log entries in leaves of ~100 under one branch page."""
    per = 100
    leaves = {}
    for k, start in enumerate(range(1, n + 1, per)):
        leaves[10 + k] = bb.leaf(
            10 + k, [(0, bb.key(i), bb.log_value(i)) for i in range(start, min(start + per, n + 1))]
        )
    root = bb.branch(4, [(bb.key(1 + (p - 10) * per), p) for p in leaves])
    return bb.raft_db({4: root, **leaves}, logs_root=4)


def _aliased_grown(n: int) -> bytes:
    """Keys and the one value they share both grow with n: the copies grew as n^2."""
    return _aliased(n, n * 64)


def _wide_dag(n: int) -> bytes:
    """A branch page of n elements pointing at one leaf."""
    return bb.raft_db(
        {4: bb.branch(4, [(bb.key(i), 5) for i in range(n)]), 5: _leaf5()}, logs_root=4
    )


CLASSES: dict[str, tuple[Callable[[int], bytes], list[int]]] = {
    "entries": (_many_entries, [2_000, 4_000, 8_000]),
    "aliased": (_aliased_grown, [1_024, 2_048, 4_096]),
    "wide_dag": (_wide_dag, [12_000, 24_000, 48_000]),
}


def _read(data: bytes) -> object:
    return read_raft_db_bytes(data, "raft.db", SMALL)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CLASSES))
def test_raft_db_reads_in_linear_time(name: str) -> None:
    make, sizes = CLASSES[name]
    inputs = {n: make(n) for n in sizes}
    assert_linear(lambda n: _read(inputs[n]), sizes, max_exponent=1.3)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CLASSES))
def test_raft_db_reads_in_linear_memory(name: str) -> None:
    make, sizes = CLASSES[name]
    exponent = _memory_exponent(make, sizes, _read)
    assert exponent < 1.3, f"{name}: peak memory grows as size^{exponent:.2f}"


@pytest.mark.slow
def test_sparse_files_cost_the_same_whatever_their_size(tmp_path: Path) -> None:
    """The hole grows 1x, 2x, 4x: time and memory stay those of the data."""
    paths = {n: _sparse(tmp_path / f"raft{n}.db", n << 30) for n in (1, 2, 4)}
    assert_linear(lambda n: read_raft_db(paths[n]), [1, 2, 4], max_exponent=0.3, floor=0.01)
    peaks = [peak_bytes(lambda n=n: read_raft_db(paths[n])) for n in (1, 2, 4)]
    assert max(peaks) < 2 * min(peaks) + (1 << 20), peaks
