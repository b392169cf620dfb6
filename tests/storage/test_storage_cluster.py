"""A fresh `full` run of a real 3-node Liftbridge cluster (two failovers, nodes
SIGKILLed and restarted): its data directories read by lbparse.storage
entry by entry as Liftbridge's own reader reads them (bin/lbtruth), every
check of --verify holding across the three nodes, and each node's raft.db
read whole, its log showing the failovers.

The cluster (~90 s) runs once per test run (tests/conftest.py's
`liftbridge_full`, tests/support/cluster.py), shared with the capture tests.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.cli import LBPARSE
from support.storage import lbtruth

from lbparse.storage import (
    check_partition,
    compare_replicas,
    entry_json,
    find_partitions,
    read_index,
    read_segment,
)
from lbparse.storage.raftdb import read_raft_db

pytestmark = pytest.mark.slow


def _nodes(run: Any) -> list[Path]:
    nodes = sorted(p for p in run.data.iterdir() if p.is_dir())
    assert [p.name for p in nodes] == ["node1", "node2", "node3"]
    return nodes


def test_every_segment_and_index_equals_lbtruth(liftbridge_full: Any) -> None:
    logs = sorted(liftbridge_full.data.glob("node*/streams/*/*/*.log"))
    assert len(logs) >= 21
    entries = 0
    for log in logs:
        reading = read_segment(log)
        assert reading.damage == [], [f.line() for f in reading.damage]
        truth = [json.loads(line) for line in lbtruth("segment", str(log))]
        ours = [entry_json(e, reading.format) for e in reading.entries]
        assert len(ours) == len(truth), log
        assert [{k: o[k] for k in t} for o, t in zip(ours, truth)] == truth, log
        entries += len(ours)
        index = log.with_suffix(".index")
        truth_idx = [json.loads(line) for line in lbtruth("index", str(index))]
        got = [
            {
                "rel_offset": e.rel_offset,
                "timestamp": e.timestamp,
                "position": e.position,
                "size": e.size,
            }
            for e in read_index(index).entries
        ]
        assert got == truth_idx, index
    assert entries > 500


def test_verify_holds_across_the_three_nodes(liftbridge_full: Any) -> None:
    parts = find_partitions(_nodes(liftbridge_full))
    assert {p.node for p in parts} == {"node1", "node2", "node3"}
    checks = [check_partition(p, keep_digests=True) for p in parts]
    findings = [f.line() for c in checks for f in c.findings]
    findings += [f.line() for f in compare_replicas(checks)]
    assert findings == []
    res = subprocess.run(
        [*LBPARSE, "segments", "--verify", *map(str, _nodes(liftbridge_full))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "replicas compared across node1, node2, node3: 0 finding(s)" in res.stderr


def test_raft_db_of_every_node(liftbridge_full: Any) -> None:
    names: set[str] = set()
    for node in _nodes(liftbridge_full):
        store = read_raft_db(node / "raft" / "raft.db")
        assert store.findings == []
        assert store.logs and all(log.entry is not None for log in store.logs)
        indexes = [log.index for log in store.logs]
        assert indexes == sorted(indexes) and len(set(indexes)) == len(indexes)
        assert isinstance(store.stable["CurrentTerm"], int) and store.stable["CurrentTerm"] >= 2
        names |= {
            log.entry.command.name
            for log in store.logs
            if log.entry is not None and log.entry.command is not None
        }
    # The metadata leader and a partition leader were killed: new leaders, ISRs shrunk.
    assert {"CreateStream", "ChangeLeader", "ShrinkISR"} <= names
