"""One JSON convention (lbparse.codec.jsonform), and one table of record columns
(lbparse.capture.fields) that every output takes its columns from.

- payloads: protobuf's canonical JSON mapping (lowerCamelCase, int64 as
  decimal strings, bytes base64);
- lbparse's own fields: snake_case, 64-bit integers (offsets, epochs,
  timestamps) as decimal strings too;
- capture times: integer nanoseconds end to end (pcapng's nanoseconds kept).
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.capwriter import ETHERNET, NS, Conn, link, pub, write_pcapng
from support.examples import examples
from vectors import VECTORS, data

import lbparse
from lbparse.capture import CaptureReader, Record, fields
from lbparse.capture.recordings import (
    JsonlRecordWriter,
    ParquetRecordWriter,
    parquet_schema,
    read_jsonl,
)
from lbparse.capture.records import COLUMNS, decode_into, record_columns
from lbparse.codec import jsonform

SNAKE = re.compile(r"[a-z][a-z0-9_]*")
T0_NS = 1_700_000_000 * NS + 123_456_789  # a time whose nanoseconds matter


def _big_numbers(text: str) -> list[int]:
    """Integers written as JSON numbers that a double cannot hold exactly."""
    found: list[int] = []

    def note(s: str) -> int:
        if abs(int(s)) > 2**53:
            found.append(int(s))
        return int(s)

    json.loads(text, parse_int=note)
    return found


def _own_keys(obj: Any, skip: tuple[str, ...] = ("payload_json",)) -> set[str]:
    """Keys of lbparse's own JSON (not those inside payloads or header maps)."""
    keys: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            keys.add(k)
            if k not in skip and k != "headers_hex":
                keys |= _own_keys(v, skip)
    elif isinstance(obj, list):
        for v in obj:
            keys |= _own_keys(v, skip)
    return keys


# -- jsonform ------------------------------------------------------------------


def test_int64_is_an_int_and_written_as_a_string() -> None:
    n = jsonform.Int64(1_700_000_000_000_000_001)
    assert n == 1_700_000_000_000_000_001 and isinstance(n, int)
    assert (
        jsonform.dumps({"t": n, "l": [n], "plain": 5})
        == '{"t": "1700000000000000001", "l": ["1700000000000000001"], "plain": 5}'
    )


def _walked(obj: Any) -> Any:
    """to_json_value as first written (isinstance all the way): the reference."""
    if isinstance(obj, dict):
        return {k: _walked(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_walked(v) for v in obj]
    return str(int(obj)) if isinstance(obj, jsonform.Int64) else obj


_leaves = (
    st.integers(-(2**70), 2**70)
    | st.integers(-(2**70), 2**70).map(jsonform.Int64)
    | st.booleans()
    | st.none()
    | st.text(max_size=5)
    | st.floats(allow_nan=False)
)


@settings(max_examples=examples(50), deadline=None)
@given(
    st.recursive(
        _leaves,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        max_leaves=12,
    )
)
def test_the_json_walk_and_text_are_the_references(obj: Any) -> None:
    """to_json_value's exact-type shortcut and dumps' one encoder give what
    the plain walk and json.dumps give."""
    assert jsonform.to_json_value(obj) == _walked(obj)
    assert jsonform.dumps(obj) == json.dumps(_walked(obj), ensure_ascii=False)
    assert jsonform.dumps(obj, indent=2) == json.dumps(_walked(obj), ensure_ascii=False, indent=2)


@pytest.mark.parametrize("value,want", [("42", 42), (42, 42), ("-9223372036854775808", -(2**63))])
def test_int64_reads_strings_and_numbers(value: Any, want: int) -> None:
    assert jsonform.int64(value) == want


@pytest.mark.parametrize("value", [True, 1.5, "1.5", " 1", "1_000", "", None, [1]])
def test_int64_refuses_what_is_not_an_integer(value: Any) -> None:
    with pytest.raises(ValueError):
        jsonform.int64(value)


# -- envelopes -------------------------------------------------------------------


def test_every_vector_follows_the_convention() -> None:
    """No JSON number past 2**53, snake_case keys outside payloads, and the
    payloads in protobuf's mapping (its lowerCamelCase names)."""
    for v in VECTORS:
        if "error" in v["expect"]:
            continue
        env = lbparse.decode(data(v), "auto")
        text = jsonform.dumps(env.to_json_dict())
        assert _big_numbers(text) == [], v["id"]
        own = _own_keys(json.loads(text))
        assert all(SNAKE.fullmatch(k) for k in own), (v["id"], own)


def test_replication_response_64_bit_fields_are_strings() -> None:
    v = next(v for v in VECTORS if v["id"] == "v0_replication_response_two_msgs")
    d = json.loads(jsonform.dumps(lbparse.decode(data(v)).to_json_dict()))
    assert d["payload_json"]["leader_epoch"] == "3" and d["payload_json"]["high_watermark"] == "41"
    entry = d["commitlog_messages"][1]
    assert (entry["offset"], entry["timestamp"], entry["leader_epoch"]) == (
        "41",
        "1700000000000000001",
        "3",
    )
    assert entry["size"] == 16  # 32-bit: a number
    # ... while to_json_dict keeps comparing equal to the vector's numbers
    assert (
        lbparse.decode(data(v)).to_json_dict()["commitlog_messages"]
        == v["expect"]["commitlog_messages"]
    )


def test_protobuf_payloads_use_the_canonical_mapping() -> None:
    v = next(v for v in VECTORS if v["id"] == "v0_publish_full")
    payload = json.loads(jsonform.dumps(lbparse.decode(data(v)).to_json_dict()))["payload_json"]
    assert payload["offset"] == "9223372036854775807" and "replySubject" in payload
    assert payload["key"] == base64.b64encode(b"\x00\xff\x10\x80").decode()


# -- records: one table of columns, nanosecond times ----------------------------


def _record(ts: int = T0_NS) -> Record:
    return Record.make(
        ts,
        "127.0.0.1:40000",
        "127.0.0.1:4222",
        "HPUB",
        "lb.x",
        "_INBOX.1",
        None,
        b"NATS/1.0\r\nA: 1\r\n\r\n",
        b"payload",
    )


def test_record_json_columns_are_the_table() -> None:
    d = _record().to_json_dict()
    assert tuple(d) == fields.RECORD_NAMES
    text = jsonform.dumps(d)
    assert json.loads(text)["ts"] == str(T0_NS) and _big_numbers(text) == []
    assert all(SNAKE.fullmatch(k) for k in d)


def test_parquet_and_pipeline_columns_are_the_table() -> None:
    from lbparse.pipeline.spark_schema import FIXED_COLUMNS, RECORD_COLUMNS

    names = [c.name for c in fields.RECORD + fields.DECODING]
    assert parquet_schema().names == names
    assert parquet_schema().field("ts").type == pa.timestamp("ns", tz="UTC")
    record_names = [
        n
        for n in RECORD_COLUMNS
        if n not in ("source", "position", "ts_ns", "error_kind", "error_message")
    ]
    assert record_names == list(fields.RECORD_NAMES)
    assert set(fields.RECORD_NAMES) | {"ts_ns"} <= set(FIXED_COLUMNS.names)
    assert COLUMNS == tuple("header_block" if n == "headers" else n for n in fields.RECORD_NAMES)
    cols = record_columns([_record()])
    assert list(cols) == list(COLUMNS)
    rec = _record()
    assert cols["ts"] == [T0_NS] and cols["header_block"] == [rec.header_block]
    assert [cols[n][0] for n in COLUMNS if n != "header_block"] == [
        getattr(rec, n) for n in fields.RECORD_NAMES if n != "headers"
    ]


@pytest.mark.parametrize("ext", ["jsonl", "parquet"])
def test_recordings_keep_nanoseconds(tmp_path: Path, ext: str) -> None:
    path = tmp_path / f"r.{ext}"
    writer = JsonlRecordWriter(str(path)) if ext == "jsonl" else ParquetRecordWriter(str(path))
    with writer:
        writer.write(_record())
        writer.write(_record(T0_NS + 1))
    assert [r.ts for r in CaptureReader(path, decode=False)] == [T0_NS, T0_NS + 1]


def test_older_recordings_with_float_seconds_still_read() -> None:
    line = (
        '{"ts": 1700000000.25, "src": "a:1", "dst": "b:2", "verb": "PUB", "subject": "s", '
        '"payload": "eA=="}\n'
    )
    (rec,) = read_jsonl(io.BytesIO(line.encode()), "old.jsonl")
    assert rec.ts == 1_700_000_000_250_000_000


def test_pcapng_nanoseconds_reach_the_pipeline(tmp_path: Path) -> None:
    """A nanosecond pcapng: the record's ts, its JSON, and the pipeline's
    ts_ns column hold the nanoseconds; its ts column (Spark's timestamp,
    microseconds) holds them rounded down."""
    from lbparse.columnar.sources import SourceOptions, UnitStats, read_unit
    from lbparse.pipeline.input_plan import plan

    conn = Conn()
    frames = conn.handshake() + conn.send("c", pub("lb.x", b"hello"))
    times = [T0_NS + i for i in range(len(frames))]
    path = tmp_path / "ns.pcapng"
    write_pcapng(
        path, [(ETHERNET, 9, 262144)], [(0, t, link(ETHERNET, f)) for t, f in zip(times, frames)]
    )
    (rec,) = list(CaptureReader(path, decode=False))
    assert rec.ts == times[-1]
    assert json.loads(jsonform.dumps(rec.to_json_dict()))["ts"] == str(times[-1])
    (unit,) = plan([str(path)], SourceOptions())
    (batch,) = list(read_unit(unit, SourceOptions(), UnitStats(unit.path, unit.format, unit.size)))
    row = batch.to_pylist()[0]
    assert row["ts_ns"] == times[-1]
    micros = batch.column("ts").cast(pa.int64()).to_pylist()[0]
    assert micros == times[-1] // 1000


# -- Liftbridge's own traffic and NATS statuses: entries of the same table ------------

RAFT_INBOX = "liftbridge-default.raft.metadata.node2.request._INBOX.abc"
BIG = 2**63 + 5  # a uint64 past int64: hashicorp/raft's terms and indexes are uint64


def _append_entries(term: int = BIG, index: int = 2**53 + 1) -> bytes:
    """An AppendEntries request as go-msgpack writes it (raw strings), with
    terms and indexes no JSON number holds exactly."""
    import msgpack

    entry = {"Index": index, "Term": term, "Type": 2, "Data": None, "Extensions": None}
    return bytes([0]) + msgpack.packb(
        {
            "ProtocolVersion": 3,
            "Term": term,
            "Leader": b"node1",
            "PrevLogEntry": index - 1,
            "PrevLogTerm": term,
            "Entries": [entry],
            "LeaderCommitIndex": index,
        },
        use_bin_type=False,
    )


def _traffic_record() -> Record:
    from lbparse.capture.traffic import TrafficReader

    rec = Record.make(
        T0_NS,
        "127.0.0.1:40000",
        "127.0.0.1:4222",
        "PUB",
        RAFT_INBOX,
        None,
        None,
        None,
        _append_entries(),
    )
    rec.traffic = TrafficReader().read(rec.src, rec.dst, rec.subject, rec.reply, rec.payload)
    assert rec.traffic is not None and rec.traffic.kind == "raft_request"
    return rec


def test_record_json_decoding_keys_are_the_table() -> None:
    """After the columns, a record's JSON holds what fields.JSON_DECODING
    lists, in its order; our Parquet recordings' liftbridge_json and the
    pipeline's traffic columns are entries of the table too."""
    from lbparse.columnar.schema import JSON_COLUMNS, fixed_fields
    from lbparse.columnar.trafficcols import TRAFFIC_COLUMNS
    from lbparse.pipeline.spark_schema import FIXED_COLUMNS

    decoding = [c.name for c in fields.JSON_DECODING]
    rec = _traffic_record()
    decode_into(rec, "auto")
    keys = list(rec.to_json_dict())
    assert keys[: len(fields.RECORD_NAMES)] == list(fields.RECORD_NAMES)
    extra = keys[len(fields.RECORD_NAMES) :]
    assert extra == [n for n in decoding if n in extra] and "liftbridge" in extra
    assert "liftbridge_json" in [c.name for c in fields.DECODING]
    assert TRAFFIC_COLUMNS == tuple(c.name for c in fields.TRAFFIC)
    typed = [c for c in TRAFFIC_COLUMNS if c not in JSON_COLUMNS]  # traffic_json: on request
    assert FIXED_COLUMNS.names[-len(typed) :] == typed
    with_json = [f.name for f in fixed_fields(json_columns=True)]
    assert with_json[-len(fields.TRAFFIC) :] == list(TRAFFIC_COLUMNS)


def test_raft_64_bit_fields_are_strings_in_every_output(tmp_path: Path) -> None:
    """Raft terms and indexes (uint64) follow the JSON convention in the
    record's JSON, JSON Lines, Parquet's liftbridge_json and the pipeline's
    traffic_json; 8-bit and enumerated values stay numbers."""
    rec = _traffic_record()
    text = jsonform.dumps(rec.to_json_dict())
    assert _big_numbers(text) == []
    (rpc,) = json.loads(text)["liftbridge"]["rpcs"]
    assert rpc["fields"]["Term"] == str(BIG) and rpc["fields"]["LeaderCommitIndex"] == str(
        2**53 + 1
    )
    assert rpc["fields"]["Leader"] == "node1"
    (entry,) = rpc["entries"]
    assert (entry["index"], entry["term"], entry["type"]) == (str(2**53 + 1), str(BIG), 2)
    for ext in ("jsonl", "parquet"):
        path = tmp_path / f"r.{ext}"
        writer = JsonlRecordWriter(str(path)) if ext == "jsonl" else ParquetRecordWriter(str(path))
        with writer:
            writer.write(rec)
        if ext == "jsonl":
            stored = json.loads(path.read_text())["liftbridge"]
        else:
            import pyarrow.parquet as pq

            stored = json.loads(pq.read_table(path).column("liftbridge_json")[0].as_py())
        assert stored == json.loads(text)["liftbridge"], ext


def test_the_pipelines_raft_columns_hold_any_uint64() -> None:
    """A term past 2**63 is wrapped in raft_rpcs' bigint (as Spark's uint64
    is), exact in traffic_json, and never fails the batch."""
    from lbparse.capture.traffic import TrafficReader
    from lbparse.columnar.trafficcols import traffic_columns

    rows = [
        {
            "src": "127.0.0.1:40000",
            "dst": "127.0.0.1:4222",
            "subject": RAFT_INBOX,
            "reply": None,
            "payload": _append_entries(),
            "headers": None,
            "error_kind": None,
        }
    ]
    cols = traffic_columns(TrafficReader(), pa.RecordBatch.from_pylist(rows), json_columns=True)
    (rpc,) = cols["raft_rpcs"].to_pylist()[0]
    assert rpc["term"] == BIG - 2**64 and rpc["entries"][0]["term"] == BIG - 2**64
    assert rpc["entries"][0]["index"] == 2**53 + 1
    assert json.loads(rpc["fields_json"])["Term"] == str(BIG)
    text = cols["traffic_json"].to_pylist()[0]
    assert _big_numbers(text) == [] and json.loads(text)["rpcs"][0]["fields"]["Term"] == str(BIG)


def test_a_nats_status_is_a_header_of_every_output(tmp_path: Path) -> None:
    """`NATS/1.0 503` is [Status, 503] in the record's headers column (fields.RECORD),
    its JSON, a recording read back (the block byte for byte) and the pipeline's
    headers column."""
    from lbparse.columnar.sources import SourceOptions, UnitStats, read_unit
    from lbparse.pipeline.input_plan import plan

    block = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\n\r\n"
    want = [["Status", "100"], ["Description", "Idle Heartbeat"], ["Nats-Last-Consumer", "7"]]
    rec = Record.make(
        T0_NS, "127.0.0.1:4222", "127.0.0.1:40000", "HMSG", "_INBOX.x", None, "1", block, b""
    )
    assert rec.headers == want and rec.to_json_dict()["headers"] == want
    for ext in ("jsonl", "parquet"):
        path = tmp_path / f"s.{ext}"
        writer = JsonlRecordWriter(str(path)) if ext == "jsonl" else ParquetRecordWriter(str(path))
        with writer:
            writer.write(rec)
        (back,) = CaptureReader(path, decode=False)
        assert back.header_block == block and back.ts == T0_NS, ext
        (unit,) = plan([str(path)], SourceOptions())
        (batch,) = list(
            read_unit(unit, SourceOptions(), UnitStats(unit.path, unit.format, unit.size))
        )
        row = batch.to_pylist()[0]
        assert [[h["key"], h["value"]] for h in row["headers"]] == want, ext
        assert row["ts_ns"] == T0_NS
