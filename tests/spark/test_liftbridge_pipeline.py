"""`lbparse pipeline` on a real Liftbridge cluster's capture: every row as Liftbridge decodes it.

The shared sample run's capture and one made now by a real 3-node cluster
(`liftbridge_short`) go through the Spark job; its Parquet rows, read back
with pyarrow, hold for each NATS message what Liftbridge's own decoders
(`bin/lbtruth`) make of its payload: the MsgType, the payload (its struct
column equals the column built from lbtruth's JSON), a
ReplicationResponse's commit-log entries. No job fails, nothing is lost
(rows = messages, no problem rows), in both layout modes.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from google.protobuf import json_format
from support.cluster import ClusterRun, lbtruth
from support.shared import LIFTBRIDGE
from support.traffic_tables import TRAFFIC_COLUMNS, traffic_back

import lbparse
from lbparse.columnar.columns import builder_for
from lbparse.columnar.decode_arrow import DecodeOptions
from lbparse.columnar.sources import SourceOptions
from lbparse.columnar.tables import TRAFFIC_TABLES, payload_tables, table_schema
from lbparse.pipeline.job import PipelineOptions, run
from lbparse.pipeline.spark_schema import arrow_output_schema, column_for, typed_payloads

SAMPLE = LIFTBRIDGE / "samples" / "short.pcapng"


@pytest.fixture(scope="module", params=["sample", pytest.param("live", marks=pytest.mark.slow)])
def capture(request: pytest.FixtureRequest) -> Path:
    if request.param == "sample":
        if not SAMPLE.exists():
            pytest.skip(f"shared material missing: {SAMPLE}")
        return SAMPLE
    cluster: ClusterRun = request.getfixturevalue("liftbridge_short")
    return cluster.capture


def read_rows(out: Path) -> list[dict[str, Any]]:
    """DIR/messages, each row with its payload table's row (its columns but the
    keys) under the table's name, None where it has none: every payload row
    joins exactly one message."""
    rows = {
        (r["source"], r["position"]): {**r, **dict.fromkeys(payload_tables())}
        for r in ds.dataset(str(out / "messages")).to_table().to_pylist()
    }
    traffic = traffic_back(
        {
            name: ds.dataset(str(out / name)).to_table()
            for name in TRAFFIC_TABLES
            if (out / name).is_dir()
        }
    )
    for key, row in rows.items():
        found = traffic.pop(key, dict.fromkeys(TRAFFIC_COLUMNS))
        assert found.pop("traffic") == row["traffic"], key  # the kind in both tables
        row.update(found)
    assert not traffic, "every traffic row joins a message"
    for name in payload_tables():
        if not (out / name).is_dir():
            continue
        for p in ds.dataset(str(out / name)).to_table().to_pylist():
            row = rows[(p.pop("source"), p.pop("position"))]
            assert row[name] is None, name
            row[name] = p
    return sorted(rows.values(), key=lambda r: r["position"])


def _norm(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and isinstance(v[0], tuple):
            return sorted(v)
        return [_norm(x) for x in v]
    return v


def _struct_of_truth(truth: dict[str, Any]) -> Any:
    """The struct column Liftbridge's decoding gives: its JSON parsed back into the
    message, built by the pipeline's upb-side builder (columns.py) with the
    pipeline's default options (zeros as values)."""
    name = truth["msg_type_name"]
    ptype = lbparse.LAYOUTS["v0"].msg_types[truth["msg_type"]].payload_type
    cls = typed_payloads()[ptype]
    msg = json_format.ParseDict(truth["payload_json"], cls())
    col = column_for(ptype)
    assert name
    return col, builder_for(
        ptype, arrow_output_schema().field(col).type, cls, DecodeOptions().emit_defaults
    ).build([msg]).to_pylist()[0]


def _entries(row: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for e in row["commitlog_ReplicationResponse"]["entries"]:
        out.append(
            {
                "offset": e["offset"],
                "timestamp": e["timestamp"],
                "leader_epoch": e["leader_epoch"],
                "size": e["size"],
                "crc32c": e["crc32c"],
                "crc_ok": e["crc_ok"],
                "magic": e["magic"],
                "attributes": e["attributes"],
                "key_hex": None if e["key"] is None else e["key"].hex(),
                "value_hex": None if e["value"] is None else e["value"].hex(),
                "headers_hex": {h["key"]: h["value"].hex() for h in e["headers"]},
            }
        )
    return out


@pytest.mark.parametrize("layout,batch_rows", [("auto", 8), ("v0", 8), ("auto", 65536)])
def test_pipeline_rows_are_what_liftbridge_decodes(
    spark: Any, capture: Path, layout: str, batch_rows: int, tmp_path: Path
) -> None:
    """Small batches too: runs of header-only ReplicationResponses alone in a
    batch failed the job before (issue #12)."""
    summary = run(
        spark,
        PipelineOptions(
            inputs=(str(capture),),
            out=str(tmp_path),
            decode=DecodeOptions(layout=layout),
            source=SourceOptions(batch_rows=batch_rows),
        ),
    )
    totals = summary.totals()
    assert summary.checks() == [] and totals["problems"] == 0
    rows = read_rows(tmp_path)
    assert len(rows) == totals["rows"] == totals["messages"] > 7000
    # Every no-responders status (HMSG, empty payload) keeps its status (issue #12).
    status = [r for r in rows if r["verb"] == "HMSG" and not r["payload"]]
    assert all(r["headers"] == [{"key": "Status", "value": "503"}] for r in status)
    assert capture != SAMPLE or len(status) == 28
    truths = lbtruth([r["payload"] for r in rows])
    compared = 0
    for row, truth in zip(rows, truths, strict=True):
        where = (row["position"], row["subject"], row["payload"][:32].hex())
        if not truth.get("envelope") or "error" in truth:
            assert row["error_kind"] is not None or row["layout"] != "v0", where
            continue
        assert row["error_kind"] is None, where
        assert (row["layout"], row["msg_type"], row["msg_type_name"]) == (
            "v0",
            truth["msg_type"],
            truth["msg_type_name"],
        ), where
        if truth["msg_type_name"] == "ReplicationResponse":
            rr = row["commitlog_ReplicationResponse"]
            assert (rr["leader_epoch"], rr["high_watermark"]) == (
                truth["leader_epoch"],
                truth["high_watermark"],
            ), where
            assert _entries(row) == truth["messages"], where
        else:
            col, want = _struct_of_truth(truth)
            assert _norm(row[col]) == _norm(want), where
        compared += 1
    assert compared > 3000


def _traffic(rows: list[dict[str, Any]]) -> tuple[Counter, Counter, set]:
    kinds: Counter = Counter()
    ops: Counter = Counter()
    votes: set = set()
    for r in rows:
        kinds[r["traffic"]] += 1
        for rpc in r["raft_rpcs"] or []:
            if rpc["role"] == "request" and rpc["rpc"] == "RequestVote":
                votes.add(rpc["term"])
            for e in rpc["entries"]:
                if e["command"]:
                    ops[e["command"]] += 1
    return kinds, ops, votes


def test_the_raft_traffic_has_its_columns(spark: Any, tmp_path: Path) -> None:
    """Liftbridge's non-envelope traffic in the pipeline: its kind, node, RPCs;
    asked for, the JSON text columns last in the traffic tables."""
    if not SAMPLE.exists():
        pytest.skip(f"shared material missing: {SAMPLE}")
    run(
        spark,
        PipelineOptions(
            inputs=(str(SAMPLE),),
            out=str(tmp_path),
            decode=DecodeOptions(json_columns=True),
            source=SourceOptions(batch_rows=100),
        ),
    )  # streams across batches
    for name in TRAFFIC_TABLES:
        schema = ds.dataset(str(tmp_path / name)).schema
        assert schema.names == table_schema(name, json_columns=True).names, name
    rows = read_rows(tmp_path)
    kinds, ops, votes = _traffic(rows)
    assert {k: v for k, v in kinds.items() if k} == {
        "raft_request": 1208,
        "raft_response": 1208,
        "raft_accept": 8,
        "raft_accept_reply": 8,
    }
    assert votes == {2} and ops["CreateStream"] == 20 and ops["PublishActivity"] == 52
    accept = next(r for r in rows if r["traffic"] == "raft_accept")
    assert accept["traffic_node"] in ("node2", "node3")
    assert json.loads(accept["traffic_json"])["id"] == "node1"


@pytest.mark.slow
def test_the_failovers_of_a_full_run_in_the_pipeline(
    spark: Any, liftbridge_full: ClusterRun, tmp_path: Path
) -> None:
    summary = run(spark, PipelineOptions(inputs=(str(liftbridge_full.capture),), out=str(tmp_path)))
    assert summary.checks() == [] and summary.totals()["problems"] == 0
    kinds, ops, votes = _traffic(read_rows(tmp_path))
    assert len(votes) >= 2 and ops["ChangeLeader"] and ops["ShrinkISR"] and ops["ExpandISR"]
    assert kinds["bootstrap_probe"] > 0 and kinds["raft_accept_reply"] > 0
