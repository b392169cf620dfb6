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

The join keys are `(source, position)`; a table of payloads that did not
come from a file (`decode_tables`) has `position` alone.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyarrow as pa

from lbparse.columnar.decode_arrow import Decoded
from lbparse.columnar.schema import FIXED_FIELDS, arrow_output_schema, payload_columns

__all__ = ["JOIN_KEYS", "MESSAGES", "MESSAGE_FIELDS", "payload_tables", "table_schema",
           "tables_of"]

MESSAGES = "messages"
JOIN_KEYS = ("source", "position")
MESSAGE_FIELDS: tuple[str, ...] = tuple(f.name for f in FIXED_FIELDS)


@lru_cache(maxsize=None)
def payload_tables() -> dict[str, str]:
    """table name -> payload type, for every payload type with typed columns."""
    return {col: ptype for ptype, col in payload_columns().items()}


@lru_cache(maxsize=None)
def table_schema(name: str, keys: tuple[str, ...] = JOIN_KEYS) -> pa.Schema:
    """The schema of table `name` whose join keys are `keys`."""
    out = arrow_output_schema()
    if name == MESSAGES:
        return pa.schema([out.field(n) for n in MESSAGE_FIELDS
                          if n in keys or n not in JOIN_KEYS])
    if name not in payload_tables():
        raise ValueError(f"no table {name!r}: the tables are {MESSAGES!r} and "
                         f"{', '.join(sorted(payload_tables()))}")
    struct = out.field(name).type
    fields = [out.field(k) for k in keys] + list(struct)
    clash = set(keys) & {f.name for f in struct}
    if clash:  # a payload field named like a join key would hide it: refuse at once
        raise ValueError(f"payload table {name}: fields {sorted(clash)} clash with the join keys")
    return pa.schema(fields)


def tables_of(decoded: Decoded, keys: tuple[str, ...] = JOIN_KEYS,
              empty: bool = False) -> dict[str, pa.Table]:
    """The narrow tables of one decoded batch: `messages` and the payload
    tables of the types it holds (every payload table, empty where the batch
    has none of its type, when `empty`)."""
    cols = decoded.columns
    msg_schema = table_schema(MESSAGES, keys)
    n = decoded.num_rows
    # The traffic columns exist only where a unit's traffic reader ran.
    out = {MESSAGES: pa.Table.from_arrays(
        [cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in msg_schema],
        schema=msg_schema)}
    for name in payload_tables():
        found = decoded.structs.get(name)
        if found is None:
            if empty:
                out[name] = table_schema(name, keys).empty_table()
            continue
        rows, arr = found
        out[name] = _payload_table(name, keys, [cols[k] for k in keys], rows, arr)
    return out


def _payload_table(name: str, keys: tuple[str, ...], key_cols: list[pa.Array],
                   rows: np.ndarray, arr: pa.Array) -> pa.Table:
    schema = table_schema(name, keys)
    idx = pa.array(np.asarray(rows, np.int64))
    # The struct's rows are all valid (a row has a struct only where it has
    # that type), so its children are the columns as they are.
    children = arr.flatten() if arr.null_count == 0 else \
        [arr.field(i).filter(arr.is_valid()) for i in range(arr.type.num_fields)]
    if arr.null_count:
        idx = idx.filter(arr.is_valid())
    arrays = [k.take(idx) for k in key_cols] + list(children)
    return pa.Table.from_arrays(arrays, schema=schema)
