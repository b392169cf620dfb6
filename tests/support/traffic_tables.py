"""The wide row's traffic columns rebuilt from the three traffic tables
(lbparse.columnar.tables: traffic, raft_rpcs, raft_entries), checking on the
way that each entry joins one RPC, each RPC one traffic row, in order, and
that an entry's typed command columns are upb's reading of its command_data
(the payload tables' Python reference: protobuf objects into the builder),
which the wide row does not hold. The JSON text columns (traffic_json,
fields_json, command_json) come along where the tables have them
(DecodeOptions.json_columns)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from google.protobuf.message import DecodeError

from lbparse.codec.payloads import descriptor_of, message_class
from lbparse.columnar.columns import struct_builder
from lbparse.columnar.commands import RAFT_LOG, command_fields
from lbparse.columnar.tables import RAFT_ENTRIES, RAFT_RPCS, TRAFFIC

TRAFFIC_COLUMNS = ("traffic", "traffic_node", "raft_rpcs")
COMMAND_COLUMNS = tuple(f.name for f in command_fields())


def upb_command(data: bytes | None, emit_defaults: bool = True) -> dict[str, Any]:
    """The typed command columns of an entry whose command_data is `data`, by
    upb and the payload tables' builder: all null unless upb reads a RaftLog."""
    none = dict.fromkeys(COMMAND_COLUMNS)
    if data is None:
        return none
    cls = message_class(RAFT_LOG)
    try:
        log = cls.FromString(data)
    except DecodeError:
        return none
    typ = pa.struct(list(command_fields()))
    row: dict[str, Any] = (
        struct_builder(descriptor_of(cls), typ, emit_defaults).build([log]).to_pylist()[0]
    )
    return row


def traffic_back(tables: Mapping[str, pa.Table]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """(source, position) -> the wide row's traffic columns, for every traffic row."""
    entries: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for e in _rows(tables, RAFT_ENTRIES):
        key = (e.pop("source"), e.pop("position"), e.pop("rpc_seq"))
        assert e.pop("entry_seq") == len(entries.setdefault(key, []))  # in order, from 0
        command = {c: e.pop(c) for c in COMMAND_COLUMNS}
        assert command == upb_command(e["command_data"]), (key, e)
        entries[key].append(e)
    rpcs: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in _rows(tables, RAFT_RPCS):
        key = (r.pop("source"), r.pop("position"))
        assert r.pop("rpc_seq") == len(rpcs.setdefault(key, []))
        r["entries"] = entries.pop((*key, len(rpcs[key])), [])
        rpcs[key].append(r)
    assert not entries, "every entry joins an RPC"
    out = {}
    for t in _rows(tables, TRAFFIC):
        key = (t["source"], t["position"])
        out[key] = {
            "traffic": t["kind"],
            "traffic_node": t["node"],
            "raft_rpcs": rpcs.pop(key, []),
            **({"traffic_json": t["traffic_json"]} if "traffic_json" in t else {}),
        }
    assert not rpcs, "every RPC joins a traffic row"
    return out


def _rows(tables: Mapping[str, pa.Table], name: str) -> list[dict[str, Any]]:
    table = tables.get(name)
    rows = table.to_pylist() if table is not None else []
    # Files of a directory come in any order: sort as the tables were written.
    seq = [k for k in ("rpc_seq", "entry_seq") if rows and k in rows[0]]
    return sorted(rows, key=lambda r: (r["source"], r["position"], *(r[k] for k in seq)))
