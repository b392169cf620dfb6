"""A node's metadata Raft log and stable store, as raft-boltdb keeps them in raft.db.

raft-boltdb (v2, the one Liftbridge v1.9.0 uses) holds two buckets
(spec/bbolt.ksy `-raft-boltdb`): `logs`, one hashicorp/raft `Log` per key
(the index as a big-endian u64, the value msgpack), decoded by
lbparse.raft (the same decoder that reads the AppendEntries of captures);
and `conf`, the stable store: CurrentTerm, LastVoteTerm (big-endian u64)
and LastVoteCand (the voted-for server).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbparse.jsonform import Int64
from lbparse.raft import LogEntry, RaftError, decode_log_entry
from lbparse.storage.bbolt import BoltDB, Meta
from lbparse.storage.errors import Finding, StorageError
from lbparse_generated.storage_layouts import BBOLT

__all__ = ["RaftStore", "StoredLog", "read_raft_db", "read_raft_db_bytes"]

NAMES: dict[str, Any] = BBOLT["raft_boltdb"]
U64_BE = struct.Struct(BBOLT["u64_be"]["format"])


@dataclass
class StoredLog:
    """One key of the `logs` bucket: the index its key says, the entry or why not."""

    index: int | None
    key: bytes
    entry: LogEntry | None = None
    error: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        if self.entry is not None:
            return self.entry.to_json_dict()
        return {"index": None if self.index is None else Int64(self.index),
                "key_hex": self.key.hex(), "error": self.error}


@dataclass
class RaftStore:
    """What raft.db holds: the log, the stable store, and what could not be read."""

    path: str
    meta: Meta
    logs: list[StoredLog] = field(default_factory=list)
    stable: dict[str, int | bytes | None] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def stable_json(self) -> dict[str, Any]:
        """The stable store for JSON: terms (u64) as Int64, decimal strings in
        lbparse's JSON (lbparse.jsonform); the voted-for server as text."""
        return {k: (v.decode("utf-8", "replace") if isinstance(v, bytes)
                    else Int64(v) if isinstance(v, int) else v)
                for k, v in self.stable.items()}


def read_raft_db(path: str | Path) -> RaftStore:
    return read_raft_db_bytes(Path(path).read_bytes(), str(path))


def read_raft_db_bytes(data: bytes, path: str = "<bytes>") -> RaftStore:
    """Read raft.db's log and stable store; StorageError if it is no bbolt file."""
    db = BoltDB(data, path)
    store = RaftStore(path, db.meta)
    _read_logs(db, store)
    _read_stable(db, store)
    store.findings[:0] = db.findings
    return store


def _read_logs(db: BoltDB, store: RaftStore) -> None:
    try:
        items = list(db.bucket(NAMES["logs_bucket"].encode()))
    except StorageError as exc:
        store.findings.append(Finding(store.path, exc.position, "bad_page", exc.detail))
        return
    for e in items:
        index = U64_BE.unpack(e.key)[0] if len(e.key) == U64_BE.size else None
        log = StoredLog(index, e.key)
        if index is None:
            log.error = f"key of {len(e.key)} bytes, a log index is {U64_BE.size}"
        else:
            try:
                log.entry = decode_log_entry(e.value)
            except RaftError as exc:
                log.error = f"{exc.kind}: {exc.message}"
            else:
                if log.entry.index != index:
                    log.error = f"the entry says index {log.entry.index}, its key {index}"
        if log.error is not None:
            store.findings.append(Finding(store.path, None, "bad_log_entry",
                                          f"log key {e.key.hex()}: {log.error}"))
        store.logs.append(log)


def _read_stable(db: BoltDB, store: RaftStore) -> None:
    try:
        items = {e.key: e.value for e in db.bucket(NAMES["conf_bucket"].encode())}
    except StorageError as exc:
        store.findings.append(Finding(store.path, exc.position, "bad_page", exc.detail))
        return
    for name in NAMES["stable_uint64_keys"]:
        raw = items.get(name.encode())
        if raw is not None and len(raw) != U64_BE.size:
            store.findings.append(Finding(store.path, None, "bad_page",
                                          f"stable store {name} is {len(raw)} bytes, "
                                          f"not {U64_BE.size}"))
            raw = None
        store.stable[name] = None if raw is None else U64_BE.unpack(raw)[0]
    for name in NAMES["stable_bytes_keys"]:
        store.stable[name] = items.get(name.encode())
