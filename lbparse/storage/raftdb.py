"""A node's metadata Raft log and stable store, as raft-boltdb keeps them in raft.db.

raft-boltdb (v2, the one Liftbridge v1.9.0 uses) holds two buckets
(spec/bbolt.ksy `-raft-boltdb`): `logs`, one hashicorp/raft `Log` per key
(the index as a big-endian u64, the value msgpack), decoded by
lbparse.raft (the same decoder that reads the AppendEntries of captures);
and `conf`, the stable store: CurrentTerm, LastVoteTerm (big-endian u64)
and LastVoteCand (the voted-for server).

The file is mapped, not read (lbparse.storage.bbolt): what is kept is
copied out of it within `limits.max_raft_db` bytes (lbparse.codec.limits); past
that the log keys left are counted and said in one Finding("limit"), and
the stable store is still read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbparse.codec.jsonform import Int64
from lbparse.codec.limits import DEFAULT, Limits
from lbparse.raft import LogEntry, RaftError, decode_log_entry
from lbparse.storage.bbolt import BoltDB, Buffer, Element, Meta, map_file
from lbparse.storage.errors import Finding, StorageError
from lbparse_generated.storage_layouts import BBOLT

__all__ = ["RaftStore", "StoredLog", "read_raft_db", "read_raft_db_bytes"]

NAMES: dict[str, Any] = BBOLT["raft_boltdb"]
U64_BE = struct.Struct(BBOLT["u64_be"]["format"])


@dataclass
class StoredLog:
    """One key of the `logs` bucket: the index its key says, the entry or why not.

    Attributes:
        index: The log index its key says, None when the key is not 8 bytes.
        key: The key's bytes.
        entry: The decoded log entry, None when it did not decode.
        error: Why it did not decode (or disagrees with its key), else None.
    """

    index: int | None
    key: bytes
    entry: LogEntry | None = None
    error: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        """The log as a JSON-ready dict.

        Returns:
            The entry's JSON when it decoded; else index, key_hex and error.
        """
        if self.entry is not None:
            return self.entry.to_json_dict()
        return {
            "index": None if self.index is None else Int64(self.index),
            "key_hex": self.key.hex(),
            "error": self.error,
        }


@dataclass
class RaftStore:
    """What raft.db holds: the log, the stable store, and what could not be read.

    Attributes:
        path: How findings name the file.
        meta: The bbolt meta page in use.
        logs: The `logs` bucket's keys, in key order.
        stable: The stable store: CurrentTerm and LastVoteTerm (ints),
            LastVoteCand (bytes); None for one missing or unreadable.
        findings: What could not be read, or past a limit.
    """

    path: str
    meta: Meta
    logs: list[StoredLog] = field(default_factory=list)
    stable: dict[str, int | bytes | None] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def stable_json(self) -> dict[str, Any]:
        """The stable store for JSON.

        Terms (u64) as Int64, decimal strings in lbparse's JSON
        (lbparse.codec.jsonform); the voted-for server as text.

        Returns:
            A new dict, the stable store's keys to their JSON values.
        """
        return {
            k: (
                v.decode("utf-8", "replace")
                if isinstance(v, bytes)
                else Int64(v)
                if isinstance(v, int)
                else v
            )
            for k, v in self.stable.items()
        }


def read_raft_db(path: str | Path, limits: Limits | None = None) -> RaftStore:
    """raft.db at `path`, mapped (a sparse file's holes are never read).

    Args:
        path: The raft.db file.
        limits: Resource limits; max_raft_db bounds what is copied out
            (default: lbparse.codec.limits.DEFAULT).

    Returns:
        The RaftStore.

    Raises:
        StorageError: As `read_raft_db_bytes`.
        OSError: The file cannot be opened.
    """
    return read_raft_db_bytes(map_file(path), str(path), limits)


def read_raft_db_bytes(
    data: Buffer, path: str = "<bytes>", limits: Limits | None = None
) -> RaftStore:
    """Read raft.db's log and stable store.

    Args:
        data: The file's bytes, or its map.
        path: How findings name it.
        limits: Resource limits; max_raft_db bounds what is copied out
            (default: lbparse.codec.limits.DEFAULT).

    Returns:
        The RaftStore; pages, keys and entries that cannot be read are its
        findings.

    Raises:
        StorageError: It is no bbolt file (no valid meta page).
    """
    db = BoltDB(data, path)
    store = RaftStore(path, db.meta)
    budget = _Budget((limits or DEFAULT).max_raft_db)
    _read_logs(db, store, budget)
    _read_stable(db, store, budget)
    store.findings[:0] = db.findings
    return store


class _Budget:
    """Bytes that may still be copied out of the file (Limits.max_raft_db)."""

    def __init__(self, size: int) -> None:
        self.size = self.left = size

    def take(self, n: int) -> bool:
        if n > self.left:
            return False
        self.left -= n
        return True


def _read_logs(db: BoltDB, store: RaftStore, budget: _Budget) -> None:
    first: Element | None = None  # the first element past the budget
    left = 0  # elements from it on: counted, not copied (the walk goes on for its findings)
    try:
        for e in db.bucket(NAMES["logs_bucket"].encode()):
            if first is None and budget.take(len(e.key) + len(e.value)):
                _read_log(e, store)
            else:
                first = first or e
                left += 1
    except StorageError as exc:
        store.findings.append(Finding(store.path, exc.position, "bad_page", exc.detail))
    if first is not None:
        store.findings.append(
            Finding(
                store.path,
                None,
                "limit",
                (
                    f"log key {_key_text(first.key)}: the {budget.size} bytes of keys and values "
                    "lbparse reads of raft.db are spent (max_raft_db); this key and the "
                    f"{left - 1} after it are not decoded (--max-raft-db raises the limit)"
                ),
            )
        )


def _key_text(k: memoryview) -> str:
    """A key for a message: its hex, cut (a hostile key may be any length)."""
    return k[:16].hex() + ("..." if len(k) > 16 else "")


def _read_log(e: Element, store: RaftStore) -> None:
    index = U64_BE.unpack(e.key)[0] if len(e.key) == U64_BE.size else None
    log = StoredLog(index, bytes(e.key))
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
        store.findings.append(
            Finding(store.path, None, "bad_log_entry", f"log key {_key_text(e.key)}: {log.error}")
        )
    elif log.entry is not None:  # data kept as bytes, keys missing: said, not only in JSON
        store.findings += [
            Finding(store.path, None, "bad_log_entry", f"log index {index}: {w}")
            for w in log.entry.warnings
        ]
    store.logs.append(log)


def _read_stable(db: BoltDB, store: RaftStore, budget: _Budget) -> None:
    """The stable store's keys raft-boltdb writes; the bucket's other keys are
    not copied (a hostile bucket may hold any number)."""
    wanted = {n.encode() for n in (*NAMES["stable_uint64_keys"], *NAMES["stable_bytes_keys"])}
    items: dict[bytes, bytes] = {}
    try:
        for e in db.bucket(NAMES["conf_bucket"].encode()):
            k = bytes(e.key) if len(e.key) <= 32 else b""
            if k not in wanted or k in items:
                continue
            if not budget.take(len(e.value)):
                store.findings.append(
                    Finding(
                        store.path,
                        None,
                        "limit",
                        (
                            f"stable store {k.decode()} is {len(e.value)} bytes, past what is left "
                            f"of the {budget.size} bytes lbparse reads of raft.db (max_raft_db): "
                            "not read"
                        ),
                    )
                )
                continue
            items[k] = bytes(e.value)
    except StorageError as exc:
        store.findings.append(Finding(store.path, exc.position, "bad_page", exc.detail))
        return
    for name in NAMES["stable_uint64_keys"]:
        raw = items.get(name.encode())
        if raw is not None and len(raw) != U64_BE.size:
            store.findings.append(
                Finding(
                    store.path,
                    None,
                    "bad_page",
                    f"stable store {name} is {len(raw)} bytes, not {U64_BE.size}",
                )
            )
            raw = None
        store.stable[name] = None if raw is None else U64_BE.unpack(raw)[0]
    for name in NAMES["stable_bytes_keys"]:
        store.stable[name] = items.get(name.encode())
