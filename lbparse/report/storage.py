"""Liftbridge data directories as report inputs (read with lbparse.storage).

What a node keeps on disk says, with times of its own:

- each partition replica's segments: every stored message's offset, its
  timestamp and the leader epoch it was written in, so messages stored per
  second by stream, and when each leader epoch began (its first entry);
- its checkpoints: the high watermark and the leader epochs with their
  start offsets;
- raft.db: the metadata Raft log (each entry's append time and Liftbridge
  op: CreateStream, ChangeLeader, ShrinkISR, ExpandISR...) and the stable
  store (current term, last vote).

The Raft log's entries go to the same place as those decoded from the Raft
transport (`raft_events`), each counted once by its index; leader epochs
seen in segments join the partitions' leader timeline, named by the
ChangeLeader/CreateStream op of the same epoch. Damage is each a problem
(`storage:KIND`), read past as lbparse.storage reads past it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lbparse.codec.limits import Limits
from lbparse.errors import InputError
from lbparse.report.partitions import Partitions
from lbparse.report.problems import Problems
from lbparse.report.timebins import MS, Counts, TimeAxis
from lbparse.storage import StorageError, find_partitions, read_high_watermark, read_leader_epochs
from lbparse.storage.datadir import is_data_dir, node_name
from lbparse.storage.raftdb import read_raft_db
from lbparse.storage.segment import iter_segment

RAFT_DB = Path("raft") / "raft.db"


class Storage:
    """The data directories' part of the report.

    It feeds the aggregator's axis, partitions, Raft events and problems (the
    aggregator makes it on first use: Aggregator.storage). Damage and unreadable
    files are counted as findings and reported as `storage:KIND` notices.

    Args:
        axis: The report's time axis (stored messages are counted per bin).
        partitions: The partitions' part, given each epoch's first and last
            stored entry.
        raft: The RaftEvents given raft.db's log entries, or None when the Raft
            part was not asked for.
        problems: Where findings go, as notices.
    """

    def __init__(
        self, axis: TimeAxis, partitions: Partitions, raft: Any, problems: Problems
    ) -> None:
        self.axis, self.partitions, self.raft, self.problems = axis, partitions, raft, problems
        self.stored = Counts(axis)  # stored messages by stream
        self.replicas: list[dict[str, Any]] = []
        self.raft_dbs: list[dict[str, Any]] = []
        self.findings = 0

    def partition(self, part: Any) -> None:
        """Read one replica's segments and checkpoints into the model.

        Args:
            part: A partition replica as lbparse.storage.find_partitions finds it.
        """
        axis, stored, key = self.axis, self.stored, f"{part.stream}/{part.partition}"
        epochs: dict[int, list[int]] = {}  # epoch -> [first ns, last ns]
        row: dict[str, Any] = {
            "node": part.node,
            "partition_key": key,
            "entries": 0,
            "first_offset": None,
            "last_offset": None,
            "first": None,
            "last": None,
            "damage": 0,
        }
        for seg in part.segments:
            if seg.log is None:
                continue
            try:
                for reading in iter_segment(seg.log):
                    self._damage(reading.damage, row)
                    for e in reading.entries:
                        ns = e.timestamp
                        i = axis.index(ns)
                        k = (i, part.stream)
                        stored.data[k] = stored.data.get(k, 0) + 1
                        span = epochs.get(e.leader_epoch)
                        if span is None:
                            epochs[e.leader_epoch] = [ns, ns]
                        else:
                            span[0], span[1] = min(span[0], ns), max(span[1], ns)
                        row["entries"] += 1
                        if row["first_offset"] is None:
                            row["first_offset"], row["first"] = e.offset, ns / MS
                        row["last_offset"], row["last"] = e.offset, ns / MS
            except StorageError as exc:
                self._problem("unreadable", str(seg.log), str(exc))
                row["damage"] += 1
        if part.partition is not None:
            for epoch, (first, last) in epochs.items():
                for ns in (first, last):
                    self.partitions._observe(
                        part.stream, part.partition, epoch, ns, source="segments"
                    )
        row["hw"], row["epochs"] = self._checkpoints(part)
        self.replicas.append(row)

    def _checkpoints(self, part: Any) -> tuple[int | None, list[list[int]]]:
        hw, epochs = None, []
        try:
            if part.hw_file is not None:
                hw = read_high_watermark(part.hw_file)
            if part.epoch_file is not None:
                epochs = [[e.epoch, e.start_offset] for e in read_leader_epochs(part.epoch_file)]
        except StorageError as exc:
            self._problem("bad_checkpoint", str(part.path), str(exc))
        return hw, epochs

    def raft_db(self, data_dir: Path, node: str, limits: Limits | None = None) -> None:
        """Read a node's raft.db (if it has one): its log entries and stable store.

        Args:
            data_dir: The node's data directory.
            node: The node's name.
            limits: The run's limits (max_raft_db); None for the defaults.
        """
        path = data_dir / RAFT_DB
        if not path.is_file():
            return
        try:
            store = read_raft_db(path, limits)
        except StorageError as exc:
            self._problem("unreadable", str(path), str(exc))
            return
        raft = self.raft
        entries = 0
        for log in store.logs:
            entry = log.entry
            if entry is None:
                continue
            entries += 1
            if raft is None:
                continue
            if entry.appended_at:
                raft._entry(entry.appended_at, self.axis.index(entry.appended_at), entry)
                raft.db_entry_time(entry.term, entry.appended_at)
            else:
                raft.untimed_entry(entry)
        for f in store.findings:
            self._problem(
                f.kind,
                f"{f.path}" + (f" offset {f.position}" if f.position is not None else ""),
                f.message,
            )
        vote = store.stable.get("LastVoteCand")
        self.raft_dbs.append(
            {
                "node": node,
                "path": str(path),
                "entries": entries,
                "stable": {k: v for k, v in store.stable.items() if isinstance(v, int)},
                # whom the node last voted for (in LastVoteTerm): the
                # votes a term's winner got, as the voters kept them
                "last_vote_candidate": vote.decode(errors="replace")
                if isinstance(vote, bytes) and vote
                else None,
            }
        )

    def _damage(self, findings: list[Any], row: dict[str, Any]) -> None:
        for f in findings:
            row["damage"] += 1
            where = f"{f.path}" + (f" offset {f.position}" if f.position is not None else "")
            self._problem(f.kind, where, f.message)

    def _problem(self, kind: str, where: str, message: str) -> None:
        self.findings += 1
        self.problems.notice(f"storage:{kind}", None, where, message)

    def model(self) -> dict[str, Any]:
        """The storage section's data.

        Returns:
            A JSON-ready dict: replicas, stored_by_stream, raft_dbs and findings.
        """
        return {
            "replicas": sorted(self.replicas, key=lambda r: (r["partition_key"], r["node"])),
            "stored_by_stream": self.stored.rows("stream", "count", top=12),
            "raft_dbs": self.raft_dbs,
            "findings": self.findings,
        }


def read_data_dir(path: str, storage: Storage, limits: Limits | None = None) -> dict[str, Any]:
    """Every node's partitions and raft.db under `path` into `storage`.

    Args:
        path: A node's data directory, or a folder of them.
        storage: The report's Storage.
        limits: The run's limits (raft.db's max_raft_db); None for the defaults.

    Returns:
        The input's summary: path, format, counts, stored_messages,
        partitions and nodes.

    Raises:
        InputError: The partitions could not be found (a StorageError, said
            with the path).
    """
    root = Path(path)
    try:
        parts = find_partitions([root])
    except StorageError as exc:
        raise InputError("bad_input", f"{path}: {exc}") from None
    before = sum(r["entries"] for r in storage.replicas)
    for part in parts:
        storage.partition(part)
    dirs = (
        [root]
        if is_data_dir(root)
        else sorted(p for p in root.iterdir() if p.is_dir() and is_data_dir(p))
    )
    for d in dirs:
        storage.raft_db(d, node_name(d), limits)
    entries = sum(r["entries"] for r in storage.replicas) - before
    return {
        "path": path,
        "format": "data directory",
        "messages": 0,
        "problems": 0,
        "stored_messages": entries,
        "partitions": len(parts),
        "nodes": len(dirs),
    }
