"""The pipeline's columns of Liftbridge's non-envelope traffic (lbparse.traffic).

Each unit (a capture file) has one `TrafficReader`, fed its rows in order
(Raft streams span messages and batches). Only rows that may be such
traffic are looked at one by one: a subject with `.raft.metadata.` in it,
or an inbox that may carry a handshake's reply.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lbparse.capture.records import STATUS
from lbparse.pipeline.schema import arrow_output_schema
from lbparse.traffic import TrafficReader

__all__ = ["TRAFFIC_COLUMNS", "traffic_columns"]

TRAFFIC_COLUMNS = ("traffic", "traffic_node", "raft_rpcs", "traffic_json")


def _candidates(records: pa.RecordBatch, reader: TrafficReader) -> np.ndarray:
    subject = records.column("subject")
    payload = records.column("payload")
    maybe = pc.match_substring(subject, ".raft.metadata.")
    inbox = pc.starts_with(subject, "_INBOX.")
    first = pc.binary_slice(payload, 0, 1)
    reply_like = pc.or_(pc.equal(first, b"{"), pc.equal(pc.binary_length(payload), 0))
    maybe = pc.or_(maybe, pc.and_(inbox, reply_like))
    return np.asarray(maybe.fill_null(False))


def _rpc(r: Any) -> dict[str, Any]:
    return {"role": r.role, "rpc": r.rpc, "term": r.term, "node": r.node, "error": r.error,
            "fields_json": json.dumps(r.fields, ensure_ascii=False),
            "entries": [{"index": e.index, "term": e.term, "type": e.type_name,
                         "command": (e.command.name or e.command.op) if e.command else None,
                         "command_json": (json.dumps(e.command.to_json_dict(),
                                                     ensure_ascii=False)
                                          if e.command else None)} for e in r.entries]}


def traffic_columns(reader: TrafficReader, records: pa.RecordBatch) -> dict[str, pa.Array]:
    """The traffic columns of a batch (rows in order; reading moves the reader on)."""
    n = records.num_rows
    schema = arrow_output_schema()
    kinds: list[str | None] = [None] * n
    nodes: list[str | None] = [None] * n
    rpcs: list[list[dict[str, Any]] | None] = [None] * n
    texts: list[str | None] = [None] * n
    idx = np.flatnonzero(_candidates(records, reader))
    if idx.size:
        cols = {name: records.column(name) for name in ("src", "dst", "subject", "reply",
                                                         "payload", "headers", "error_kind")}
        for i in idx.tolist():
            if cols["error_kind"][i].is_valid:  # a problem row of the input
                continue
            headers = cols["headers"][i].as_py()
            status = headers[0]["value"] if headers and headers[0]["key"] == STATUS else None
            t = reader.read(cols["src"][i].as_py() or "", cols["dst"][i].as_py() or "",
                            cols["subject"][i].as_py() or "", cols["reply"][i].as_py(),
                            cols["payload"][i].as_py() or b"", status=status)
            if t is None:
                continue
            kinds[i], nodes[i] = t.kind, t.node
            rpcs[i] = [_rpc(r) for r in t.rpcs]
            texts[i] = json.dumps(t.to_json_dict(), ensure_ascii=False)
    if not any(k is not None for k in kinds):
        return {name: pa.nulls(n, schema.field(name).type) for name in TRAFFIC_COLUMNS}
    return {"traffic": pa.array(kinds, pa.string()), "traffic_node": pa.array(nodes, pa.string()),
            "raft_rpcs": pa.array(rpcs, schema.field("raft_rpcs").type),
            "traffic_json": pa.array(texts, pa.string())}
