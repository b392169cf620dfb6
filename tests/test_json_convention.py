"""One JSON convention (lbparse.jsonform), and one table of record columns
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

import lbparse
from lbparse import jsonform
from lbparse.capture import CaptureReader, Record, fields
from lbparse.capture.recordings import (JsonlRecordWriter, ParquetRecordWriter, parquet_schema,
                                        read_jsonl)
from lbparse.capture.records import COLUMNS, record_columns
from support.capwriter import ETHERNET, NS, Conn, link, pub, write_pcapng
from vectors import VECTORS, data

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
    assert jsonform.dumps({"t": n, "l": [n], "plain": 5}) == \
        '{"t": "1700000000000000001", "l": ["1700000000000000001"], "plain": 5}'


@pytest.mark.parametrize("value,want", [("42", 42), (42, 42), ("-9223372036854775808", -2**63)])
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
    assert (entry["offset"], entry["timestamp"], entry["leader_epoch"]) == \
        ("41", "1700000000000000001", "3")
    assert entry["size"] == 16  # 32-bit: a number
    # ... while to_json_dict keeps comparing equal to the vector's numbers
    assert lbparse.decode(data(v)).to_json_dict()["commitlog_messages"] == \
        v["expect"]["commitlog_messages"]


def test_protobuf_payloads_use_the_canonical_mapping() -> None:
    v = next(v for v in VECTORS if v["id"] == "v0_publish_full")
    payload = json.loads(jsonform.dumps(lbparse.decode(data(v)).to_json_dict()))["payload_json"]
    assert payload["offset"] == "9223372036854775807" and "replySubject" in payload
    assert payload["key"] == base64.b64encode(b"\x00\xff\x10\x80").decode()


# -- records: one table of columns, nanosecond times ----------------------------

def _record(ts: int = T0_NS) -> Record:
    return Record.make(ts, "127.0.0.1:40000", "127.0.0.1:4222", "HPUB", "lb.x", "_INBOX.1", None,
                       b"NATS/1.0\r\nA: 1\r\n\r\n", b"payload")


def test_record_json_columns_are_the_table() -> None:
    d = _record().to_json_dict()
    assert tuple(d) == fields.RECORD_NAMES
    text = jsonform.dumps(d)
    assert json.loads(text)["ts"] == str(T0_NS) and _big_numbers(text) == []
    assert all(SNAKE.fullmatch(k) for k in d)


def test_parquet_and_pipeline_columns_are_the_table() -> None:
    from lbparse.pipeline.schema import FIXED_COLUMNS, RECORD_COLUMNS

    names = [c.name for c in fields.RECORD + fields.DECODING]
    assert parquet_schema().names == names
    assert parquet_schema().field("ts").type == pa.timestamp("ns", tz="UTC")
    record_names = [n for n in RECORD_COLUMNS if n not in ("source", "position", "ts_ns",
                                                             "error_kind", "error_message")]
    assert record_names == list(fields.RECORD_NAMES)
    assert set(fields.RECORD_NAMES) | {"ts_ns"} <= set(FIXED_COLUMNS.names)
    assert COLUMNS == tuple("header_block" if n == "headers" else n for n in fields.RECORD_NAMES)
    cols = record_columns([_record()])
    assert list(cols) == list(COLUMNS)
    rec = _record()
    assert cols["ts"] == [T0_NS] and cols["header_block"] == [rec.header_block]
    assert [cols[n][0] for n in COLUMNS if n != "header_block"] == \
        [getattr(rec, n) for n in fields.RECORD_NAMES if n != "headers"]


@pytest.mark.parametrize("ext", ["jsonl", "parquet"])
def test_recordings_keep_nanoseconds(tmp_path: Path, ext: str) -> None:
    path = tmp_path / f"r.{ext}"
    writer = JsonlRecordWriter(str(path)) if ext == "jsonl" else ParquetRecordWriter(str(path))
    with writer:
        writer.write(_record())
        writer.write(_record(T0_NS + 1))
    assert [r.ts for r in CaptureReader(path, decode=False)] == [T0_NS, T0_NS + 1]


def test_older_recordings_with_float_seconds_still_read() -> None:
    line = ('{"ts": 1700000000.25, "src": "a:1", "dst": "b:2", "verb": "PUB", "subject": "s", '
            '"payload": "eA=="}\n')
    (rec,) = read_jsonl(io.BytesIO(line.encode()), "old.jsonl")
    assert rec.ts == 1_700_000_000_250_000_000


def test_pcapng_nanoseconds_reach_the_pipeline(tmp_path: Path) -> None:
    """A nanosecond pcapng: the record's ts, its JSON, and the pipeline's
    ts_ns column hold the nanoseconds; its ts column (Spark's timestamp,
    microseconds) holds them rounded down."""
    from lbparse.pipeline.sources import SourceOptions, UnitStats, plan, read_unit

    conn = Conn()
    frames = conn.handshake() + conn.send("c", pub("lb.x", b"hello"))
    times = [T0_NS + i for i in range(len(frames))]
    path = tmp_path / "ns.pcapng"
    write_pcapng(path, [(ETHERNET, 9, 262144)],
                 [(0, t, link(ETHERNET, f)) for t, f in zip(times, frames)])
    (rec,) = list(CaptureReader(path, decode=False))
    assert rec.ts == times[-1]
    assert json.loads(jsonform.dumps(rec.to_json_dict()))["ts"] == str(times[-1])
    (unit,) = plan([str(path)], SourceOptions())
    (batch,) = list(read_unit(unit, SourceOptions(), UnitStats(unit.path, unit.format, unit.size)))
    row = batch.to_pylist()[0]
    assert row["ts_ns"] == times[-1]
    micros = batch.column("ts").cast(pa.int64()).to_pylist()[0]
    assert micros == times[-1] // 1000
