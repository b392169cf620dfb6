"""The pipeline tests' shared pieces: one Spark session, small inputs, one run.

One local[2] session serves every test (a session costs ~5 s to start);
the inputs are a few kilobytes, made here deterministically: captures
with envelopes of many MsgTypes, corrupt ones, a gap and a cut file; a
Parquet table; our JSON Lines records; and files that cannot be read.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java", allow_module_level=True)

import pyarrow as pa
import pyarrow.parquet as pq
from support.capwriter import ETHERNET, Conn, link, msg, pub, write_pcap
from support.shared import LIFTBRIDGE
from support.storage import extract_short_data
from support.testrun import once_a_run

import lbparse
from lbparse.capture.recordings import record_writer
from lbparse.capture.records import Record
from lbparse.codec.commitlog import CommitLogEntry, ReplicationResponse

VECTORS = Path(__file__).parent.parent / "data" / "vectors.jsonl"


def envelopes() -> list[tuple[str, bytes]]:
    """(subject, payload) of every kind: all v0 MsgTypes, with and without
    CRC, and broken ones (CRC, magic, truncated, unknown MsgType, bad payload)."""
    M = lbparse.message_class
    out: list[tuple[str, bytes]] = []
    for i in range(6):
        out.append(
            (
                "orders.eu",
                lbparse.encode(
                    M("proto.Message")(
                        offset=100 + i,
                        key=b"k-%d" % i,
                        value=b'{"qty": %d}' % i,
                        stream="orders",
                        partition=i % 2,
                        subject="orders.eu",
                        headers={"content-type": b"json"} if i % 2 else {},
                        ackPolicy=i % 3,
                        timestamp=1_763_700_000_000_000_000 + i,
                    ),
                    crc=i % 2 == 0,
                ),
            )
        )
        out.append(
            (
                "acks",
                lbparse.encode(
                    M("proto.Ack")(
                        stream="orders",
                        partitionSubject="orders.eu.0",
                        offset=100 + i,
                        ackError=i % 2,
                    ),
                    crc=True,
                ),
            )
        )
    rr = ReplicationResponse(
        4,
        109,
        [
            CommitLogEntry(
                100 + j,
                1_763_700_000_000_000_000 + j,
                4,
                key=b"key-%d" % j,
                value=b"x" * 10,
                headers=[("subject", b"orders.eu")],
            )
            for j in range(3)
        ],
    )
    out.append(("repl", lbparse.encode(rr, crc=True)))
    for name, payload_type in (
        ("raft", "protocol.RaftJoinRequest"),
        ("info", "protocol.ServerInfoResponse"),
        ("prop", "protocol.PropagatedRequest"),
    ):
        msg_obj = M(payload_type)()
        if payload_type == "protocol.PropagatedRequest":
            msg_obj.op = 6
            msg_obj.pauseStreamOp.stream = "orders"
            msg_obj.pauseStreamOp.partitions.extend([0, 1])  # packed: decoded by upb
        elif payload_type == "protocol.ServerInfoResponse":
            msg_obj.id, msg_obj.host, msg_obj.port = "s1", "lb.example", 9292
        else:
            msg_obj.nodeID, msg_obj.nodeAddr = "n1", "10.0.0.1:9293"
        out.append((name, lbparse.encode(msg_obj)))
    good = out[0][1]
    out += [
        ("bad.crc", good[:12] + bytes([good[12] ^ 1]) + good[13:]),
        ("bad.magic", b"\x00" + good[1:]),
        ("bad.short", good[:6]),
        ("bad.truncated", good[:5] + b"\x30" + good[6:]),
        ("bad.type", good[:7] + b"\x63" + good[8:]),
        ("bad.payload", bytes.fromhex("b90e43b40008000b") + b"\xff\xff\xff"),
        ("plain.text", b"hello, not an envelope"),
    ]
    return out


def write_capture(path: Path, gap: bool = False) -> None:
    """One NATS connection: every envelope published, then delivered back."""
    items = envelopes()
    conn = Conn()
    frames = conn.handshake()
    frames += conn.send(
        "c",
        b"".join(
            pub(s, p, headers=[("Nats-Msg-Id", f"m{i}")] if i % 3 == 0 else None)
            for i, (s, p) in enumerate(items)
        ),
        mss=200,
    )
    deliveries = conn.send(
        "s",
        b"".join(
            msg(s, 1, p, reply="_INBOX.r" if i % 4 == 0 else None) for i, (s, p) in enumerate(items)
        ),
        mss=300,
    )
    if gap:  # one server segment never captured: a gap, messages lost around it
        del deliveries[2]
    frames += deliveries + [conn.fin("c"), conn.fin("s")]
    write_pcap(
        str(path), [(1_763_700_000 + i * 0.001, link(ETHERNET, f)) for i, f in enumerate(frames)]
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The tests' one Spark session: local[2], no UI, two shuffle partitions."""
    from lbparse.pipeline.session import TEST_CONF, spark_session

    session = spark_session("local[2]", conf=TEST_CONF)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every kind of input, good and bad, by name; written once a run (the
    pipeline runs below, shared by the workers, name them)."""
    return once_a_run(tmp_path_factory, "spark-inputs", _write_inputs)


def _write_inputs(d: Path) -> dict[str, Path]:
    paths = {
        name: d / name
        for name in (
            "capture.pcap",
            "gap.pcap",
            "cut.pcap",
            "table.parquet",
            "records.jsonl",
            "garbage.bin",
            "broken.parquet",
            "missing.pcap",
        )
    }
    write_capture(paths["capture.pcap"])
    write_capture(paths["gap.pcap"], gap=True)
    write_capture(paths["cut.pcap"])
    whole = paths["cut.pcap"].read_bytes()
    paths["cut.pcap"].write_bytes(whole[: len(whole) * 2 // 3])  # ends inside a packet
    items = envelopes()
    table = pa.table(
        {
            "data": pa.array([p for _, p in items] + [None], pa.binary()),
            "subj": pa.array([s for s, _ in items] + ["null.payload"]),
            "t": pa.array([1_763_700_000.5 + i for i in range(len(items) + 1)]),
        }
    )
    pq.write_table(table, paths["table.parquet"], row_group_size=8)  # several row groups
    with record_writer(str(paths["records.jsonl"])) as w:
        for i, (s, p) in enumerate(items):
            w.write(
                Record.make(
                    (1_763_700_000 + i) * 10**9,
                    "127.0.0.1:40000",
                    "127.0.0.1:4222",
                    "PUB",
                    s,
                    None,
                    None,
                    None,
                    p,
                )
            )
    paths["garbage.bin"].write_bytes(bytes(range(7, 200)))
    paths["broken.parquet"].write_bytes(b"PAR1" + b"\0" * 40)
    return paths


@pytest.fixture(scope="session")
def run(
    spark: Any, inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """One pipeline run over every input (layout v0), made once a run: its
    summary, data and output dir. Its tables joined back into the wide row
    (`wide_frame`: a Spark job or three per table, with their checks) are
    joined once a run too, and written beside it for every worker to read."""
    from lbparse.columnar.decode_arrow import DecodeOptions
    from lbparse.columnar.sources import SourceOptions
    from lbparse.pipeline.job import PipelineOptions
    from lbparse.pipeline.job import run as run_pipeline

    def make(d: Path) -> tuple[Path, Any, Path]:
        out, wide = d / "out", d / "wide"
        options = PipelineOptions(
            inputs=tuple(str(p) for p in inputs.values()),
            out=str(out),
            decode=DecodeOptions(layout="v0"),
            source=SourceOptions(
                column="data",
                subject_column="subj",
                timestamp_column="t",
                batch_rows=16,
                unit_bytes=1,
            ),
        )  # small batches, a unit per row group
        summary = run_pipeline(spark, options)
        wide_frame(spark, out).write.parquet(str(wide))
        return out, summary, wide

    out, summary, wide = once_a_run(tmp_path_factory, "spark-run", make)
    data = spark.read.parquet(str(wide))
    return {
        "summary": summary,
        "data": data,
        "out": out,
        "rows": data.collect(),
        "json": json.loads((out / "summary.json").read_text()),
    }


def wide_frame(spark: Any, out: Path) -> Any:
    """The pipeline's tables joined back into the wide row (lbparse.decode_arrow's):
    DIR/messages, each row with its payload table's row as a struct column named
    after the table (null where it has none), in the order of the wide schema.
    What the tests of the pipeline's values read; each payload row joins exactly
    one message (asserted)."""
    from pyspark.sql import functions as F

    from lbparse.columnar.tables import payload_tables
    from lbparse.pipeline.spark_schema import output_schema

    data = spark.read.parquet(os.path.join(out, "messages"))
    keys = list(KEY)
    _one_message_each(out)
    for name in payload_tables():
        where = os.path.join(out, name)
        if not os.path.isdir(where):
            data = data.withColumn(name, F.lit(None).cast(output_schema()[name].dataType))
            continue
        table = spark.read.parquet(where)
        fields = [c for c in table.columns if c not in KEY]
        data = data.join(table.select(*keys, F.struct(*fields).alias(name)), keys, "left")
    traffic = _traffic_frame(spark, out)
    for name in ("traffic_node", "raft_rpcs"):
        if traffic is None:
            data = data.withColumn(name, F.lit(None).cast(output_schema()[name].dataType))
    if traffic is not None:
        data = data.join(traffic, keys, "left")
    return data.select(*output_schema().names)


def _keys(where: str) -> list[tuple[Any, ...]]:
    return list(zip(*pq.read_table(where, columns=list(KEY)).to_pydict().values()))


def _one_message_each(out: Path) -> None:
    """Each row of each payload table, and of the traffic table, joins exactly
    one message: the messages' keys are distinct, and so are a table's, each
    among the messages'. Read with Arrow (the keys only): the Spark jobs that
    counted the joins, three a table, took ~15 CPU-s."""
    from lbparse.columnar.tables import payload_tables

    messages = _keys(os.path.join(out, "messages"))
    known = set(messages)
    assert len(known) == len(messages), "messages: a key twice"
    for name in (*payload_tables(), "traffic"):
        where = os.path.join(out, name)
        if os.path.isdir(where):
            keys = _keys(where)
            assert len(set(keys)) == len(keys) and known.issuperset(keys), name


def _traffic_frame(spark: Any, out: Path) -> Any:
    """The wide row's traffic detail (traffic_node, raft_rpcs) by
    KEY, rebuilt from DIR/traffic, DIR/raft_rpcs and DIR/raft_entries, the
    lists in their seq order; None without a traffic table."""
    from pyspark.sql import functions as F

    from lbparse.columnar.schema import RAFT_ENTRY, RAFT_RPC
    from lbparse.pipeline.spark_schema import output_schema

    def read(name: str) -> Any:
        where = os.path.join(out, name)
        return spark.read.parquet(where) if os.path.isdir(where) else None

    def ordered(df: Any, by: list[str], seq: str, fields: list[str], alias: str) -> Any:
        packed = F.sort_array(F.collect_list(F.struct(seq, *fields)))
        return (
            df.groupBy(*by)
            .agg(packed.alias("l"))
            .select(
                *by,
                F.transform("l", lambda x: F.struct(*[x[f].alias(f) for f in fields])).alias(alias),
            )
        )

    traffic, rpcs, entries = read("traffic"), read("raft_rpcs"), read("raft_entries")
    if traffic is None:
        return None
    keys = list(KEY)
    rpc_type = output_schema()["raft_rpcs"].dataType
    entry_type = rpc_type.elementType["entries"].dataType
    frame = traffic.select(*keys, F.col("node").alias("traffic_node"))
    if rpcs is not None:
        if entries is not None:
            grouped = ordered(
                entries, [*keys, "rpc_seq"], "entry_seq", [f.name for f in RAFT_ENTRY], "entries"
            )
            rpcs = rpcs.join(grouped, [*keys, "rpc_seq"], "left")
        else:
            rpcs = rpcs.withColumn("entries", F.lit(None).cast(entry_type))
        rpcs = rpcs.withColumn("entries", F.coalesce("entries", F.array().cast(entry_type)))
        frame = frame.join(
            ordered(rpcs, keys, "rpc_seq", [f.name for f in RAFT_RPC], "raft_rpcs"), keys, "left"
        )
    else:
        frame = frame.withColumn("raft_rpcs", F.lit(None).cast(rpc_type))
    return frame.withColumn(
        "raft_rpcs", F.coalesce("raft_rpcs", F.array().cast(rpc_type)).cast(rpc_type)
    )


# -- the pipeline's output over every kind of input, read by Spark -----------------

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"  # a real Liftbridge cluster's capture
KEY = ("source", "position")


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in KEY])


@pytest.fixture(scope="session")
def datasets(
    spark: Any, inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """One run (auto) over every input kind, the real cluster's capture and data
    directories among them; per table written (messages, entries, each payload
    table, as summary.json lists them: `tables`): its directory, and Spark's
    reading of it (schema, and its rows as an Arrow table sorted by KEY); and
    `wide`, the tables joined back into the wide row (`wide_frame`)."""
    from lbparse.columnar.decode_arrow import DecodeOptions
    from lbparse.columnar.sources import SourceOptions
    from lbparse.pipeline.job import PipelineOptions
    from lbparse.pipeline.job import run as run_pipeline

    captures = (*map(str, inputs.values()), *([str(SHORT)] if SHORT.is_file() else []))

    def make(d: Path) -> tuple[Path, Path, Any, dict[str, Any]]:  # made once a run
        data_dir = extract_short_data(d)
        out = d / "out-readers"
        summary = run_pipeline(
            spark,
            PipelineOptions(
                inputs=(*captures, str(data_dir)),
                out=str(out),
                decode=DecodeOptions(layout="auto"),
                source=SourceOptions(
                    column="data",
                    subject_column="subj",
                    timestamp_column="t",
                    batch_rows=64,
                    unit_bytes=1,
                ),
            ),
        )
        return out, data_dir, summary, _read_tables(spark, out)

    out, short_data, summary, read = once_a_run(tmp_path_factory, "spark-datasets", make)
    assert summary.checks() == []
    tables = json.loads((out / "summary.json").read_text())["tables"]
    return {
        "captures": captures,
        "data_dirs": [str(short_data)],
        "out": out,
        "tables": list(tables),
        "summary": summary,
        **read,
    }


def _read_tables(spark: Any, out: Path) -> dict[str, Any]:
    """Each table of the run in `out` as Spark reads it (its schema, its rows as
    Arrow sorted by KEY), and `wide`: once a run, for every worker."""
    got: dict[str, Any] = {}
    for name, table in json.loads((out / "summary.json").read_text())["tables"].items():
        path = os.path.join(out, name)
        df = spark.read.parquet(path)
        rows = df.toArrow()  # one job a table: its rows are counted here too
        assert table == {"path": path, "rows": rows.num_rows}
        got[name] = {"path": path, "schema": df.schema, "table": _sorted(rows)}
    got["wide"] = {"table": _sorted(wide_frame(spark, out).toArrow())}
    return got
