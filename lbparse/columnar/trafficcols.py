"""The pipeline's columns of Liftbridge's non-envelope traffic (lbparse.capture.traffic).

Each unit (a capture file) has one `TrafficReader`, fed its rows in order
(Raft streams span messages and batches). Only rows that may be such
traffic are looked at one by one: a subject with `.raft.metadata.` in it,
or an inbox that may carry a handshake's reply.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lbparse.capture import fields
from lbparse.capture.records import STATUS
from lbparse.capture.traffic import TrafficReader
from lbparse.codec.jsonform import dumps
from lbparse.columnar.schema import JSON_COLUMNS, arrow_output_schema
from lbparse.columnar.wirescan import binary_buffers, bitmap, spread
from lbparse.raft.entries import command_label
from lbparse.raft.msgpack_structs import json_fields
from lbparse.raft.tables import log_type_name
from lbparse.raft.transport import REQUEST, RESPONSE, rpc_names_by_code, rpc_row

__all__ = ["TRAFFIC_COLUMNS", "Parts", "traffic_columns", "traffic_parts"]

TRAFFIC_COLUMNS: tuple[str, ...] = tuple(c.name for c in fields.TRAFFIC)


def _candidates(records: pa.RecordBatch, reader: TrafficReader) -> np.ndarray:
    # A batch's subjects are few, repeated: matched once each (Arrow's
    # substring search cost ~70 ns a row, more than the rest of this), and
    # the payloads looked at only where the subject is an inbox.
    subjects = pc.dictionary_encode(records.column("subject"))
    words, at = subjects.dictionary, subjects.indices
    # per word, and a last False for the rows whose subject is null
    raft = np.append(np.asarray(pc.match_substring(words, ".raft.metadata.")), False)
    inbox = np.append(np.asarray(pc.starts_with(words, "_INBOX.")), False)
    if not (raft.any() or inbox.any()):
        return np.zeros(records.num_rows, np.bool_)
    codes = np.asarray(at.fill_null(len(words)))
    maybe: np.ndarray = raft[codes]
    rows = np.flatnonzero(inbox[codes])
    if rows.size:
        # Each such payload's first byte read where it lies: no payloads
        # taken (a copy of every Ack's bytes on a publishing cluster).
        payload = records.column("payload")
        starts, ends, data = binary_buffers(payload)
        at, end = starts[rows], ends[rows]
        first = data[np.minimum(at, len(data) - 1)]
        reply_like = (end == at) | ((end > at) & (first == ord("{")))
        if payload.null_count:
            reply_like &= np.asarray(payload.is_valid())[rows]
        maybe[rows] = reply_like
    return maybe


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


def _read(reader: TrafficReader, lists: tuple[Any, ...], j: int, rows: bool) -> Any:
    """The reference's reading of candidate j (`TrafficReader.read`)."""
    src, dst, subject, reply, payload, headers = lists
    block = headers[j]
    status = block[0]["value"] if block and block[0]["key"] == STATUS else None
    return reader.read(
        src[j] or "",
        dst[j] or "",
        subject[j] or "",
        reply[j],
        payload[j] or b"",
        status=status,
        # without the JSON columns the RPCs' rows alone: no RPC objects
        rows=rows,
    )


def _rows_of(t: Any) -> list[dict[str, Any]]:
    """A Traffic's raft_rpcs rows: those read for columns, else its RPCs'."""
    return t.rows if t.rows is not None else [rpc_row(r) for r in t.rpcs]


def _bitmap(valid: bytes) -> pa.Buffer:
    return bitmap(np.frombuffer(valid, np.bool_))


@cache
def _rpc_names() -> pa.Array:
    return pa.array(rpc_names_by_code(), pa.string())


def rpc_lists(got: tuple[bytes, ...], typ: pa.DataType) -> pa.ListArray:
    """The raft_rpcs lists of `lbparse.raft.transport.stream_rows`' columns.

    Args:
        got: What stream_rows returned (its codes first).
        typ: The raft_rpcs column's type (a list of the RPC struct).

    Returns:
        A list a message of the batch, empty where stream_rows did not read it.
    """
    _, offsets, which, term, term_valid, node_off, node, node_valid, err_off, err, err_valid = got[
        :11
    ]
    n = len(term_valid)
    code = np.frombuffer(which, np.uint16)
    rpc = typ.value_type
    entries = rpc.field("entries").type
    children = [
        pa.array([RESPONSE, REQUEST], pa.string()).take(pa.array(code < 256, pa.int8())),
        _rpc_names().take(pa.array(code)),
        pa.Array.from_buffers(pa.int64(), n, [_bitmap(term_valid), pa.py_buffer(term)]),
        pa.Array.from_buffers(
            pa.string(), n, [_bitmap(node_valid), pa.py_buffer(node_off), pa.py_buffer(node)]
        ),
        pa.Array.from_buffers(
            pa.string(), n, [_bitmap(err_valid), pa.py_buffer(err_off), pa.py_buffer(err)]
        ),
        _entry_lists(got[11:], entries),
    ]
    values = pa.StructArray.from_arrays(children, fields=list(rpc))
    starts = pa.Array.from_buffers(pa.int32(), len(offsets) // 4, [None, pa.py_buffer(offsets)])
    return pa.ListArray.from_arrays(starts, values, type=typ)


def _entry_lists(got: tuple[bytes, ...], typ: pa.ListType) -> pa.ListArray:
    """The rows' log entries of stream_rows' columns: `_log_row`'s, the type's
    name and the command's label made once per distinct value, the command's
    data as the C reader gives it."""
    offsets, index, term, types, cmd_off, cmd, cmd_valid = got
    n = len(cmd_valid)
    code = np.frombuffer(types, np.uint64)
    known, at = np.unique(code, return_inverse=True)
    names = pa.array([log_type_name(int(v)) for v in known.tolist()], pa.string())
    ends = np.frombuffer(cmd_off, np.int32)
    labels: dict[bytes, str | None] = {}
    commands: list[str | None] = [None] * n
    for k in np.flatnonzero(np.frombuffer(cmd_valid, np.bool_)).tolist():
        data = cmd[ends[k] : ends[k + 1]]
        if data not in labels:
            labels[data] = command_label(data)
        commands[k] = labels[data]
    children = {
        "index": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(index)]),
        "term": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(term)]),
        "type": names.take(pa.array(at.astype(np.int64, copy=False))),
        "command": pa.array(commands, pa.string()),
        "command_data": pa.Array.from_buffers(
            pa.binary(), n, [_bitmap(cmd_valid), pa.py_buffer(cmd_off), pa.py_buffer(cmd)]
        ),
    }
    entry = typ.value_type
    values = pa.StructArray.from_arrays([children[f.name] for f in entry], fields=list(entry))
    starts = pa.Array.from_buffers(pa.int32(), len(offsets) // 4, [None, pa.py_buffer(offsets)])
    return pa.ListArray.from_arrays(starts, values, type=typ)


def _batched(
    reader: TrafficReader,
    idx: list[int],
    n: int,
    schema: pa.Schema,
    lists: tuple[Any, ...],
    error_kind: list[Any],
) -> Parts | None:
    """The typed traffic columns (`traffic_parts`) with the stream messages
    read in one C call (`TrafficReader.stream_batch`), the others by `read`
    in their turn; None when the C reader is not in use."""
    src, dst, subject, _, payload, _ = lists
    slow: dict[int, Any] = {}
    # a message on an envelope's metadata subject is nothing `read` reads:
    # skipped here, where each was a call of the fallback
    inert = {s: reader.inert(s) for s in set(subject)}

    def fallback(j: int) -> None:
        t = _read(reader, lists, j, rows=True)
        if t is not None:
            slow[j] = t

    got = reader.stream_batch(
        src,
        dst,
        subject,
        [
            None if e is not None or inert[s] else (p or b"")
            for p, e, s in zip(payload, error_kind, subject)
        ],
        fallback,
    )
    if got is None:
        return None
    code = np.frombuffer(got[0], np.uint8)
    fast = np.flatnonzero((code == 1) | (code == 2))
    if not fast.size and not slow:
        return _no_parts(n, False)
    m = len(idx)
    kinds = np.full(m, None, object)
    kinds[code == 1] = "raft_request"
    kinds[code == 2] = "raft_response"
    nodes = np.full(m, None, object)
    node_of: dict[str, str | None] = {}
    for j in fast.tolist():
        s = subject[j]
        if s not in node_of:
            node_of[s] = reader.stream_node(s)
        nodes[j] = node_of[s]
    late = list(slow)
    for j in late:
        t = slow[j]
        kinds[j], nodes[j] = t.kind, t.node
    # the RPC lists: the C reader's, then read's, each named message's taken
    typ = schema.field("raft_rpcs").type
    theirs = pa.array([_rows_of(slow[j]) for j in late], typ)
    which = np.full(m, -1, np.int64)
    which[fast] = fast
    which[late] = m + np.arange(len(late))
    named = np.flatnonzero(which >= 0)
    rpcs = pa.concat_arrays([rpc_lists(got, typ), theirs]).take(pa.array(which[named]))
    rows = np.full(n, -1, np.int64)
    rows[idx] = np.arange(m)
    at = pa.array(rows, mask=rows < 0)
    where = np.asarray(idx, np.int64)[named]
    return Parts(
        {"traffic": pa.array(kinds, pa.string()).take(at)},
        {
            "traffic_node": (where, pa.array(nodes[named], pa.string())),
            "raft_rpcs": (where, rpcs),
        },
    )


class Parts(NamedTuple):
    """A batch's traffic columns, `traffic` a value per row, the rest at its rows.

    The others only at the rows a message of Liftbridge's traffic is in
    (`Decoded.structs`' form: the tables take them as they are, no row
    spread and taken back).

    Attributes:
        wide: `traffic` by name, a value per row (null: no such traffic).
        named: traffic_node, raft_rpcs (and traffic_json) by name: (the rows
            with a `traffic`, ascending; a value for each).
    """

    wide: dict[str, pa.Array]
    named: dict[str, tuple[np.ndarray, pa.Array]]


def _no_parts(n: int, json_columns: bool) -> Parts:
    schema = arrow_output_schema(json_columns)
    none = np.zeros(0, np.int64)
    return Parts(
        {"traffic": pa.nulls(n, pa.string())},
        {
            name: (none, pa.array([], schema.field(name).type))
            for name in _names(json_columns)
            if name != "traffic"
        },
    )


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
        Liftbridge traffic): `traffic_parts`' spread over the batch's rows.
    """
    wide, named = traffic_parts(reader, records, json_columns)
    n = records.num_rows
    return {**wide, **{name: spread(values, rows, n) for name, (rows, values) in named.items()}}


def traffic_parts(
    reader: TrafficReader, records: pa.RecordBatch, json_columns: bool = False
) -> Parts:
    """The traffic columns of a batch, as Parts (reading moves the reader on).

    Args:
        reader: The unit's traffic reader, fed each batch once, in order.
        records: The batch.
        json_columns: As `traffic_columns`.

    Returns:
        `traffic` a value per row, the other columns at the rows it names.
    """
    n = records.num_rows
    schema = arrow_output_schema(json_columns)
    idx = np.flatnonzero(_candidates(records, reader)).tolist()
    # Most batches hold no traffic: no lists of n rows for them (a Python
    # pass over every row costs the pipeline ~0.1 us a row).
    if not idx:
        return _no_parts(n, json_columns)
    # The candidates' values taken at once, as Python lists: a pyarrow scalar
    # per row and column (`column[i].as_py()`) cost more than the rest of
    # this loop's own work.
    taken = pa.array(idx, pa.int64())
    src, dst, subject = (
        records.column(name).take(taken).fill_null("").to_pylist()
        for name in ("src", "dst", "subject")
    )
    reply, payload, headers, error_kind = (
        records.column(name).take(taken).to_pylist()
        for name in ("reply", "payload", "headers", "error_kind")
    )
    lists = (src, dst, subject, reply, payload, headers)
    if not json_columns:
        got = _batched(reader, idx, n, schema, lists, error_kind)
        if got is not None:
            return got
    kinds: list[str | None] = [None] * n
    rows: list[int] = []
    nodes: list[str | None] = []
    rpcs: list[list[dict[str, Any]]] = []
    texts: list[str | None] = []
    for j, i in enumerate(idx):
        if error_kind[j] is not None:  # a problem row of the input
            continue
        t = _read(reader, lists, j, rows=not json_columns)
        if t is None:
            continue
        kinds[i] = t.kind
        rows.append(i)
        nodes.append(t.node)
        if json_columns:
            rpcs.append([_rpc_json(r) for r in t.rpcs])
            texts.append(dumps(t.to_json_dict()))
        else:
            rpcs.append(_rows_of(t))
    if not rows:
        return _no_parts(n, json_columns)
    # By the table's names (fields.TRAFFIC): a column added there and not filled
    # here is a KeyError, not a column silently null.
    values: dict[str, list[Any]] = {"traffic_node": nodes, "raft_rpcs": rpcs, "traffic_json": texts}
    at = np.asarray(rows, np.int64)
    return Parts(
        {"traffic": pa.array(kinds, pa.string())},
        {
            name: (at, pa.array(values[name], schema.field(name).type))
            for name in _names(json_columns)
            if name != "traffic"
        },
    )
