"""`lbparse pipeline` on a real local[2] Spark: nothing lost, everything
decoded as lbparse decodes it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

import lbparse
from lbparse.capture import CaptureReader
from lbparse.columnar.tables import MESSAGES, payload_tables, table_names, table_schema
from lbparse.pipeline.spark_schema import output_schema

CAPTURES = ("capture.pcap", "gap.pcap", "cut.pcap", "records.jsonl")


def _rows_of(run: dict[str, Any], path: Path) -> list[Any]:
    return sorted((r for r in run["rows"] if r.source == str(path)), key=lambda r: r.position)


def _messages(rows: list[Any]) -> list[Any]:
    return [r for r in rows if not (r.error_kind or "").startswith("input:")]


def test_every_captured_message_is_one_row(run: dict[str, Any], inputs: dict[str, Path]) -> None:
    for name in CAPTURES:
        expected = [
            (rec.verb, rec.subject, rec.reply, rec.headers, rec.payload)
            for rec in CaptureReader(inputs[name], decode=False)
        ]
        rows = _rows_of(run, inputs[name])
        got = [
            (
                r.verb,
                r.subject,
                r.reply,
                None if r.headers is None else [[h.key, h.value] for h in r.headers],
                bytes(r.payload),
            )
            for r in _messages(rows)
        ]
        assert got == expected, name
        assert [r.position for r in rows] == list(range(len(rows))), name
    assert len(expected) > 20


def test_every_table_row_is_one_row(run: dict[str, Any], inputs: dict[str, Path]) -> None:
    table = pq.read_table(inputs["table.parquet"])
    rows = _rows_of(run, inputs["table.parquet"])
    assert [r.position for r in rows] == list(range(table.num_rows))
    assert [None if r.payload is None else bytes(r.payload) for r in rows] == table.column(
        "data"
    ).to_pylist()
    assert [r.subject for r in rows] == table.column("subj").to_pylist()
    assert rows[0].ts.timestamp() == 1_763_700_000.5
    assert rows[-1].error_kind == "input:null_payload"


def test_rows_are_keyed_by_source_and_position(run: dict[str, Any]) -> None:
    keys = Counter((r.source, r.position) for r in run["rows"])
    assert keys and max(keys.values()) == 1


def test_each_message_is_decoded_or_has_lbparse_error(run: dict[str, Any]) -> None:
    checked = Counter()
    for r in _messages(run["rows"]):
        if r.payload is None:
            continue
        try:
            env = lbparse.decode(bytes(r.payload), "v0")
        except lbparse.EnvelopeError as exc:
            assert (r.error_kind, r.error_message) == (exc.kind, exc.message)
            checked[exc.kind] += 1
            continue
        assert r.error_kind is None and r.error_message is None
        assert (
            r.layout,
            r.version,
            r.header_len,
            r.flags,
            r.crc32c,
            r.msg_type,
            r.msg_type_name,
            r.payload_type,
        ) == (
            env.layout,
            env.version,
            env.header_len,
            env.flags,
            env.crc32c,
            env.msg_type,
            env.msg_type_name,
            env.payload_type,
        )
        assert r.crc_ok is (None if env.crc32c is None else True)
        checked["ok"] += 1
    assert {
        "ok",
        "crc_mismatch",
        "bad_magic",
        "too_short",
        "bad_header_len",
        "unknown_msg_type",
        "bad_payload",
    } <= set(checked)


def test_header_fields_of_errors_as_far_as_read(run: dict[str, Any]) -> None:
    by_kind = {r.error_kind: r for r in _messages(run["rows"]) if r.error_kind}
    crc = by_kind["crc_mismatch"]
    assert (crc.layout, crc.header_len, crc.crc_ok, crc.msg_type) == ("v0", 12, False, None)
    assert by_kind["bad_magic"].header_len is None
    bad = by_kind["bad_payload"]
    assert (bad.msg_type, bad.msg_type_name) == (11, "ServerInfoResponse")


def test_problems_in_inputs_are_rows(run: dict[str, Any], inputs: dict[str, Path]) -> None:
    kinds = {
        name: [r.error_kind for r in _rows_of(run, p) if (r.error_kind or "").startswith("input:")]
        for name, p in inputs.items()
    }
    assert kinds["capture.pcap"] == [] and kinds["records.jsonl"] == []
    assert "input:gap" in kinds["gap.pcap"]
    assert "input:truncated" in kinds["cut.pcap"]
    assert kinds["garbage.bin"] == ["input:unknown_format"]
    assert kinds["broken.parquet"] == ["input:bad_parquet"]
    assert kinds["missing.pcap"] == ["input:unreadable"]
    assert kinds["table.parquet"] == ["input:null_payload"]
    for r in run["rows"]:
        if (r.error_kind or "").startswith("input:"):
            # no MsgType: null, as in lbparse.decode_tables (no sentinel string)
            assert r.error_message and r.payload is None and r.msg_type_name is None


def test_payloads_as_typed_columns(run: dict[str, Any], inputs: dict[str, Path]) -> None:
    rows = _messages(_rows_of(run, inputs["capture.pcap"]))
    pubs = [r for r in rows if r.msg_type_name == "Publish" and r.direction == "client_to_server"]
    assert len(pubs) == 6
    for i, r in enumerate(pubs):
        m = r.proto_Message
        assert (m.offset, bytes(m.key), m.stream, m.subject) == (
            100 + i,
            b"k-%d" % i,
            "orders",
            "orders.eu",
        )
        assert m.partition == i % 2  # a proto3 zero is a value, as the data has it
        assert m.ackPolicy == ["LEADER", "ALL", "NONE"][i % 3]
        assert m.headers == ({"content-type": b"json"} if i % 2 else {})
        assert r.proto_Ack is None and r.commitlog_ReplicationResponse is None
    acks = [r.proto_Ack for r in rows if r.msg_type_name == "Ack"]
    assert [a.ackError for a in acks[:2]] == ["OK", "UNKNOWN"]
    rr = next(r.commitlog_ReplicationResponse for r in rows if r.msg_type == 3)
    assert (rr.leader_epoch, rr.high_watermark, len(rr.entries)) == (4, 109, 3)
    e = rr.entries[1]
    assert (e.offset, bytes(e.key), e.crc_ok, [(h.key, bytes(h.value)) for h in e.headers]) == (
        101,
        b"key-1",
        True,
        [("subject", b"orders.eu")],
    )
    prop = next(r.protocol_PropagatedRequest for r in rows if r.msg_type == 8)
    assert (prop.op, prop.pauseStreamOp.stream, prop.pauseStreamOp.partitions) == (
        "PAUSE_STREAM",
        "orders",
        [0, 1],
    )
    info = next(
        r.protocol_ServerInfoResponse for r in rows if r.msg_type == 11 and not r.error_kind
    )
    assert (info.id, info.host, info.port) == ("s1", "lb.example", 9292)


def test_tables_and_their_schemas(run: dict[str, Any]) -> None:
    """One directory per table, of plain Parquet files (no partition
    directories), each file with its table's whole schema; joined back, the
    tables are the wide row of lbparse.decode_arrow."""
    written = {f.name: f.dataType for f in run["data"].schema.fields}
    for f in output_schema().fields:
        assert written[f.name].simpleString() == f.dataType.simpleString(), f.name
    out = run["out"]
    tables = run["json"]["tables"]
    assert list(tables)[0] == MESSAGES and set(tables) <= set(table_names())
    assert {
        "proto_Message",
        "proto_Ack",
        "commitlog_ReplicationResponse",
        "protocol_PropagatedRequest",
        "protocol_ServerInfoResponse",
        "protocol_RaftJoinRequest",
    } <= set(tables)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(tables)
    for name, table in tables.items():
        d = out / name
        assert table["path"] == str(d)
        names = sorted(p.name for p in d.iterdir())
        assert names[0] == "_SUCCESS" and all(
            n.startswith("part-") and n.endswith(".parquet") for n in names[1:]
        ), names
        files = list(d.glob("*.parquet"))
        assert table["rows"] == sum(pq.ParquetFile(f).metadata.num_rows for f in files) > 0
        for f in files:
            assert pq.read_schema(f).remove_metadata() == table_schema(name), f
    # messages: one row per input row (the rows counted); a payload table: its rows' payloads
    assert tables[MESSAGES]["rows"] == run["json"]["totals"]["rows"] == len(run["rows"])
    for name in payload_tables():
        assert tables.get(name, {"rows": 0})["rows"] == sum(
            1 for r in run["rows"] if r[name] is not None
        ), name
