"""The pipeline's columns of Liftbridge's non-envelope traffic (lbparse.capture.traffic).

Each unit (a capture file) has one `TrafficReader`, fed its rows in order
(Raft streams span messages and batches). Only rows that may be such
traffic are looked at one by one: a subject with `.raft.metadata.` in it,
or an inbox that may carry a handshake's reply.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lbparse.capture import fields
from lbparse.capture.records import STATUS
from lbparse.capture.traffic import TrafficReader
from lbparse.codec.jsonform import dumps
from lbparse.columnar.schema import JSON_COLUMNS, arrow_output_schema
from lbparse.raft.msgpack_structs import json_fields
from lbparse.raft.transport import rpc_row

__all__ = ["TRAFFIC_COLUMNS", "traffic_columns"]

TRAFFIC_COLUMNS: tuple[str, ...] = tuple(c.name for c in fields.TRAFFIC)


def _candidates(records: pa.RecordBatch, reader: TrafficReader) -> np.ndarray:
    subject = records.column("subject")
    payload = records.column("payload")
    maybe = pc.match_substring(subject, ".raft.metadata.")
    inbox = pc.starts_with(subject, "_INBOX.")
    first = pc.binary_slice(payload, 0, 1)
    reply_like = pc.or_(pc.equal(first, b"{"), pc.equal(pc.binary_length(payload), 0))
    maybe = pc.or_(maybe, pc.and_(inbox, reply_like))
    return np.asarray(maybe.fill_null(False))


def _rpc_json(r: Any) -> dict[str, Any]:
    """`rpc_row` with the JSON text columns (fields_json, command_json)."""
    out = rpc_row(r)
    out["fields_json"] = dumps(json_fields(r.struct, r.fields))
    for e, entry in zip(r.entries, out["entries"]):
        entry["command_json"] = dumps(e.command.to_json_dict()) if e.command else None
    return out


def _names(json_columns: bool) -> tuple[str, ...]:
    return (
        TRAFFIC_COLUMNS
        if json_columns
        else tuple(c for c in TRAFFIC_COLUMNS if c not in JSON_COLUMNS)
    )


def _null_columns(n: int, json_columns: bool) -> dict[str, pa.Array]:
    schema = arrow_output_schema(json_columns)
    return {name: pa.nulls(n, schema.field(name).type) for name in _names(json_columns)}


def traffic_columns(
    reader: TrafficReader, records: pa.RecordBatch, json_columns: bool = False
) -> dict[str, pa.Array]:
    """The traffic columns of a batch (rows in order; reading moves the reader on).

    Args:
        reader: The unit's traffic reader, fed each batch once, in order.
        records: The batch.
        json_columns: Also the JSON text columns (traffic_json, and fields_json
            and command_json in raft_rpcs: lbparse.columnar.schema.JSON_COLUMNS);
            without them no JSON is made.

    Returns:
        The traffic columns by name, a value per row (null where a row is no
        Liftbridge traffic).
    """
    n = records.num_rows
    schema = arrow_output_schema(json_columns)
    idx = np.flatnonzero(_candidates(records, reader)).tolist()
    # Most batches hold no traffic: no lists of n rows for them (a Python
    # pass over every row costs the pipeline ~0.1 us a row).
    if not idx:
        return _null_columns(n, json_columns)
    kinds: list[str | None] = [None] * n
    nodes: list[str | None] = [None] * n
    rpcs: list[list[dict[str, Any]] | None] = [None] * n
    texts: list[str | None] = [None] * n
    # The candidates' values taken at once, as Python lists: a pyarrow scalar
    # per row and column (`column[i].as_py()`) cost more than the rest of
    # this loop's own work.
    taken = pa.array(idx, pa.int64())
    src, dst, subject, reply, payload, headers, error_kind = (
        records.column(name).take(taken).to_pylist()
        for name in ("src", "dst", "subject", "reply", "payload", "headers", "error_kind")
    )
    found = False
    # Without the JSON columns most stream messages take the reader's short
    # way (whole RPCs on a known stream, rows in one C call); `read` the rest.
    quick = None if json_columns else reader.stream_rows
    for j, i in enumerate(idx):
        if error_kind[j] is not None:  # a problem row of the input
            continue
        if quick is not None:
            got = quick(src[j] or "", dst[j] or "", subject[j] or "", payload[j] or b"")
            if got is not None:
                kinds[i], nodes[i], rpcs[i] = got
                found = True
                continue
        block = headers[j]
        status = block[0]["value"] if block and block[0]["key"] == STATUS else None
        t = reader.read(
            src[j] or "",
            dst[j] or "",
            subject[j] or "",
            reply[j],
            payload[j] or b"",
            status=status,
            # without the JSON columns the RPCs' rows alone: no RPC objects
            rows=not json_columns,
        )
        if t is None:
            continue
        kinds[i], nodes[i] = t.kind, t.node
        found = True
        if json_columns:
            rpcs[i] = [_rpc_json(r) for r in t.rpcs]
            texts[i] = dumps(t.to_json_dict())
        else:
            rpcs[i] = t.rows if t.rows is not None else [rpc_row(r) for r in t.rpcs]
    if not found:
        return _null_columns(n, json_columns)
    # By the table's names (fields.TRAFFIC): a column added there and not filled
    # here is a KeyError, not a column silently null.
    values: dict[str, list[Any]] = {
        "traffic": kinds,
        "traffic_node": nodes,
        "raft_rpcs": rpcs,
        "traffic_json": texts,
    }
    return {name: pa.array(values[name], schema.field(name).type) for name in _names(json_columns)}
