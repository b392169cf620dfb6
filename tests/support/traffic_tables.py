"""The wide row's traffic columns rebuilt from the three traffic tables
(lbparse.columnar.tables: traffic, raft_rpcs, raft_entries), checking on the
way that each entry joins one RPC, each RPC one traffic row, in order. The
JSON text columns (traffic_json, fields_json, command_json) come along where
the tables have them (DecodeOptions.json_columns)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from lbparse.columnar.tables import RAFT_ENTRIES, RAFT_RPCS, TRAFFIC

TRAFFIC_COLUMNS = ("traffic", "traffic_node", "raft_rpcs")


def traffic_back(tables: Mapping[str, pa.Table]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """(source, position) -> the wide row's traffic columns, for every traffic row."""
    entries: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for e in _rows(tables, RAFT_ENTRIES):
        key = (e.pop("source"), e.pop("position"), e.pop("rpc_seq"))
        assert e.pop("entry_seq") == len(entries.setdefault(key, []))  # in order, from 0
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
