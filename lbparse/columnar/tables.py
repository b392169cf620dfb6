"""Decoded rows as narrow tables: one `messages` table, one table per payload type.

Zeek writes one log per event type, joined by a shared id; so do we. A
decoded batch (`Decoded`: the fixed columns in input order, and per payload
type the rows that have one with their struct values) becomes:

- `messages`: one row per input row, in input order: where it came from,
  the message as captured, the envelope header, msg_type_name and
  payload_type, the error. No payload struct columns.
- one table per payload type (`proto_Message`, `protocol_PropagatedRequest`,
  `commitlog_ReplicationResponse`, ...): the rows of that type only, the
  join keys first, then the payload's own fields as top-level columns
  (lists and structs only where the payload itself nests).
- Liftbridge's own traffic that is not an envelope (lbparse.capture.traffic: the
  metadata Raft group's transport, its handshakes): `messages` names its kind
  (`traffic`); `traffic` holds one row per such message (its node), `raft_rpcs`
  one row per Raft RPC a message completed (`rpc_seq` its place in the
  message, from 0) and `raft_entries` one row per log entry of an RPC
  (`entry_seq` its place in the RPC), joined to its RPC on
  `(source, position, rpc_seq)`, a LogCommand's RaftLog in typed columns
  after its bytes (lbparse.columnar.commands). With DecodeOptions.json_columns each of
  the three ends with a JSON text column: all of the message
  (`traffic_json`), the RPC's fields (`fields_json`), the entry's RaftLog
  command (`command_json`).

The join keys are `(source, position)`; a table of payloads that did not
come from a file (`decode_tables`) has `position` alone (BARE_KEYS), and
its `messages` none of the capture's columns (CAPTURE_COLUMNS: when, where
from, the subject, the traffic kind).

The client's side, gRPC over HTTP/2 (lbparse.columnar.grpctables, for
`lbparse capture --tables` and `read_capture_tables`; not yet the pipeline):
`grpc_calls`, one row per call, and `grpc_messages`, one row per gRPC
message (`message_seq` its place in its call), joined to its call on
`(source, position)`; there `position` numbers a file's calls, not its
NATS rows.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lbparse.columnar.commands import command_fields, command_structs
from lbparse.columnar.decode_arrow import Decoded, null_column
from lbparse.columnar.pandas_meta import dataset_schema
from lbparse.columnar.schema import (
    CAPTURE_COLUMNS,
    FIXED_FIELDS,
    GRPC_CALL_FIELDS,
    GRPC_MESSAGE_FIELDS,
    RAFT_ENTRY,
    RAFT_RPC,
    arrow_output_schema,
    payload_columns,
)
from lbparse.errors import InputError

__all__ = [
    "BARE_KEYS",
    "GRPC_CALLS",
    "GRPC_MESSAGES",
    "GRPC_TABLES",
    "JOIN_KEYS",
    "MESSAGES",
    "MESSAGE_FIELDS",
    "RAFT_ENTRIES",
    "RAFT_RPCS",
    "TRAFFIC",
    "TRAFFIC_TABLES",
    "payload_tables",
    "table_names",
    "table_schema",
    "tables_of",
]

MESSAGES = "messages"
TRAFFIC = "traffic"
RAFT_RPCS = "raft_rpcs"
RAFT_ENTRIES = "raft_entries"
TRAFFIC_TABLES = (TRAFFIC, RAFT_RPCS, RAFT_ENTRIES)
GRPC_CALLS = "grpc_calls"
GRPC_MESSAGES = "grpc_messages"
GRPC_TABLES = (GRPC_CALLS, GRPC_MESSAGES)
JOIN_KEYS = ("source", "position")
BARE_KEYS = ("position",)  # payloads that came from no file: decode_tables
# The wide row's traffic columns that live in the traffic tables; `traffic`
# (the kind) stays in messages, as msg_type_name does, to filter without a join.
_TRAFFIC_DETAIL = ("traffic_node", "raft_rpcs", "traffic_json")
MESSAGE_FIELDS: tuple[str, ...] = tuple(
    f.name for f in FIXED_FIELDS if f.name not in _TRAFFIC_DETAIL
)
_RPC_SEQ = pa.field("rpc_seq", pa.int32(), False)
_TRAFFIC_FIELDS = (
    pa.field("kind", pa.string(), False),
    pa.field("node", pa.string()),
)
_RPC_FIELDS = (_RPC_SEQ, *(f for f in RAFT_RPC if f.name != "entries"))
# An entry's fields, then its RaftLog command's as typed columns (columnar.commands).
_ENTRY_FIELDS = (
    _RPC_SEQ,
    pa.field("entry_seq", pa.int32(), False),
    *RAFT_ENTRY,
    *command_fields(),
)
# The JSON text columns each traffic table ends with when they are asked for
# (DecodeOptions.json_columns): last, so that the other columns keep their places.
_JSON_FIELDS = {
    TRAFFIC: (pa.field("traffic_json", pa.string()),),
    RAFT_RPCS: (pa.field("fields_json", pa.string()),),
    RAFT_ENTRIES: (pa.field("command_json", pa.string()),),
}


@cache
def payload_tables() -> dict[str, str]:
    """table name -> payload type, for every payload type with typed columns.

    Returns:
        The payload tables' names and types.
    """
    return {col: ptype for ptype, col in payload_columns().items()}


@cache
def table_names() -> tuple[str, ...]:
    """Every table a capture's decoding may give, messages first.

    Returns:
        The names: messages, the payload tables, the traffic tables.
    """
    return (MESSAGES, *payload_tables(), *TRAFFIC_TABLES)


_OWN_SCHEMAS = {
    TRAFFIC: _TRAFFIC_FIELDS,
    RAFT_RPCS: _RPC_FIELDS,
    RAFT_ENTRIES: _ENTRY_FIELDS,
    GRPC_CALLS: GRPC_CALL_FIELDS,
    GRPC_MESSAGES: GRPC_MESSAGE_FIELDS,
}


@cache
def table_schema(
    name: str, keys: tuple[str, ...] = JOIN_KEYS, json_columns: bool = False
) -> pa.Schema:
    """The schema of table `name` whose join keys are `keys`.

    With the `pandas` metadata that makes `to_pandas()` read its integers as
    integers, in memory as from its files (lbparse.columnar.pandas_meta).

    Args:
        name: A table's name (`table_names`).
        keys: Its join key columns: ("source", "position"), or BARE_KEYS
            ("position",) for bare payloads, whose `messages` then has no
            capture column (CAPTURE_COLUMNS but the keys).
        json_columns: With the JSON text columns (DecodeOptions.json_columns):
            `traffic_json` last in traffic, `fields_json` in raft_rpcs,
            `command_json` in raft_entries; the other tables are the same.

    Returns:
        The Arrow schema.
    """
    return dataset_schema(_table_schema(name, keys, json_columns))


def _table_schema(name: str, keys: tuple[str, ...], json_columns: bool) -> pa.Schema:
    out = arrow_output_schema()
    if name == MESSAGES:
        drop = set(JOIN_KEYS) - set(keys)
        if keys == BARE_KEYS:
            drop.update(CAPTURE_COLUMNS)
        return pa.schema([out.field(n) for n in MESSAGE_FIELDS if n in keys or n not in drop])
    if name in _OWN_SCHEMAS:
        extra = _JSON_FIELDS.get(name, ()) if json_columns else ()
        return pa.schema([out.field(k) for k in keys] + list(_OWN_SCHEMAS[name]) + list(extra))
    if name not in payload_tables():
        raise InputError(
            "bad_option",
            f"no table {name!r}: the tables are {', '.join(repr(t) for t in table_names())}",
        )
    struct = out.field(name).type
    fields = [out.field(k) for k in keys] + list(struct)
    clash = set(keys) & {f.name for f in struct}
    if clash:  # a payload field named like a join key would hide it: refuse at once
        raise InputError(
            "bad_spec", f"payload table {name}: fields {sorted(clash)} clash with the join keys"
        )
    return pa.schema(fields)


def tables_of(
    decoded: Decoded, keys: tuple[str, ...] = JOIN_KEYS, empty: bool = False
) -> dict[str, pa.Table]:
    """The narrow tables of one decoded batch.

    `messages` and the payload tables of the types it holds.

    Args:
        decoded: The decoded batch.
        keys: The join key columns each table starts with.
        empty: Give every payload table, empty where the batch has none of
            its type.

    Returns:
        pyarrow Tables by name.
    """
    cols = decoded.columns
    json_columns = decoded.json_columns
    msg_schema = table_schema(MESSAGES, keys)
    n = decoded.num_rows
    # The traffic columns exist only where a unit's traffic reader ran.
    out = {
        MESSAGES: _assembled(
            [cols[f.name] if f.name in cols else null_column(n, f.type) for f in msg_schema],
            msg_schema,
        )
    }
    taker: _Keys | None = None
    for name in payload_tables():
        found = decoded.structs.get(name)
        if found is None:
            if empty:
                out[name] = table_schema(name, keys).empty_table()
            continue
        rows, arr = found
        if taker is None:
            taker = _Keys([cols[k] for k in keys])
        out[name] = _payload_table(name, keys, taker, rows, arr)
    if taker is None and "traffic" in cols:
        taker = _Keys([cols[k] for k in keys])
    out.update(
        _traffic_tables(
            cols, decoded.structs, keys, empty, json_columns, taker, decoded.emit_defaults
        )
    )
    return out


def _traffic_tables(
    cols: dict[str, pa.Array],
    named: dict[str, tuple[np.ndarray, pa.Array]],
    keys: tuple[str, ...],
    empty: bool,
    json_columns: bool,
    taker: _Keys | None,
    emit_defaults: bool = True,
) -> dict[str, pa.Table]:
    """The traffic tables of a batch whose traffic reader ran and named some
    message (lbparse.columnar.trafficcols: `traffic` a value per row, the
    rest in `named` at the rows it names); none (or empty ones) otherwise.
    Their join keys are taken as the payload tables' are (`_Keys`), at the
    batch rows of each table's rows."""
    kind = cols.get("traffic")
    if kind is None or taker is None or kind.null_count == len(kind):
        if not empty:
            return {}
        return {t: table_schema(t, keys, json_columns).empty_table() for t in TRAFFIC_TABLES}
    rows, node = named["traffic_node"]
    traffic = [kind.take(pa.array(rows)), node]
    if json_columns:
        traffic.append(named["traffic_json"][1])
    out = {TRAFFIC: _table(TRAFFIC, keys, taker.take(rows) + traffic, json_columns)}
    rpc_rows, rpc_seq, rpc = _explode(named["raft_rpcs"][1])
    rpc_rows = rows[rpc_rows]  # the batch row of each RPC
    rpc_names = [f.name for f in _RPC_FIELDS[1:]] + (["fields_json"] if json_columns else [])
    out[RAFT_RPCS] = _table(
        RAFT_RPCS,
        keys,
        taker.take(rpc_rows) + [rpc_seq] + [rpc.field(n) for n in rpc_names],
        json_columns,
    )
    entry_rpcs, entry_seq, entry = _explode(rpc.field("entries"))
    # flatten: a child's values where its struct is null are not nulls of their own
    commands = command_structs(entry.field("command_data"), emit_defaults).flatten()
    out[RAFT_ENTRIES] = _table(
        RAFT_ENTRIES,
        keys,
        taker.take(rpc_rows[entry_rpcs])
        + [rpc_seq.take(pa.array(entry_rpcs)), entry_seq]
        + [entry.field(f.name) for f in RAFT_ENTRY]
        + commands
        + ([entry.field("command_json")] if json_columns else []),
        json_columns,
    )
    return out


def _explode(lists: pa.Array) -> tuple[np.ndarray, pa.Array, pa.StructArray]:
    """A list column's elements, each with the row it came from (int64
    indices) and its place in that row's list."""
    parents = np.asarray(pc.list_parent_indices(lists), np.int64)
    lengths = np.asarray(pc.list_value_length(lists).fill_null(0), np.int64)
    starts = np.cumsum(lengths) - lengths
    place = np.arange(len(parents), dtype=np.int64) - starts[parents]
    return parents, pa.array(place.astype(np.int32)), pc.list_flatten(lists)


def _table(
    name: str, keys: tuple[str, ...], arrays: list[pa.Array], json_columns: bool
) -> pa.Table:
    return _assembled(arrays, table_schema(name, keys, json_columns))


def _assembled(arrays: list[pa.Array], schema: pa.Schema) -> pa.Table:
    """A one-chunk table of `arrays`, checked against `schema`: by way of a
    RecordBatch, a third of Table.from_arrays' cost (~9 us against ~20 a
    table, a dozen tables a batch: the per-call cost of issue #45)."""
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(arrays, schema=schema)])


class _Keys:
    """A batch's join key columns, taken at the rows of each of its tables.

    An integer column without nulls is taken in numpy, a column of one value
    repeated (a batch's `source`, one file) is that value repeated; others by
    Arrow's take. Made once a batch: the dozen tables' takes were a fifth of
    a 1,000-row batch's decoding.
    """

    def __init__(self, arrays: list[pa.Array]) -> None:
        self._ways: list[tuple[str, Any, pa.Array]] = []
        for a in arrays:
            if a.null_count == 0 and pa.types.is_integer(a.type):
                self._ways.append(("numpy", a.to_numpy(), a))
            elif len(a) and a.null_count == 0 and pc.all(pc.equal(a, a[0])).as_py():
                self._ways.append(("one", a[0], a))
            else:
                self._ways.append(("take", None, a))

    def take(self, rows: np.ndarray) -> list[pa.Array]:
        """The key columns at `rows` (int64 indices into the batch).

        Args:
            rows: The batch rows, in the table's order.

        Returns:
            One array a key column, of its type.
        """
        out = []
        for way, held, a in self._ways:
            if way == "numpy":
                out.append(pa.array(held.take(rows), a.type))  # take: half a[rows]
            elif way == "one":
                out.append(pa.repeat(held, len(rows)))
            else:
                out.append(a.take(pa.array(rows)))
        return out


def _payload_table(
    name: str, keys: tuple[str, ...], taker: _Keys, rows: np.ndarray, arr: pa.Array
) -> pa.Table:
    schema = table_schema(name, keys)
    idx = np.asarray(rows, np.int64)
    # The struct's rows are usually all valid (a row has a struct only where
    # it has that type), so its children are the columns as they are: a batch
    # of them at once (Arrow slices each to the struct's offset and length),
    # the keys put in front, not a pyarrow Array (and its type wrapped anew)
    # per field. Rows a reader left null are filtered out, field by field.
    if arr.null_count == 0:
        batch = pa.RecordBatch.from_struct_array(arr)
        for i, key in enumerate(taker.take(idx)):
            batch = batch.add_column(i, schema.field(i), key)
        return pa.Table.from_batches([batch], schema=schema)
    fields = len(schema) - len(keys)  # the struct's (not arr.type's: a new wrapper)
    valid = arr.is_valid()
    children = [arr.field(i).filter(valid) for i in range(fields)]
    idx = idx[np.asarray(valid)]
    return _assembled(taker.take(idx) + children, schema)
