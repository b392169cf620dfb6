"""One big capture on every core: `lbparse pipeline` cuts a large pcap/pcapng
into ranges (sources._plan_capture) that several tasks read, and writes
exactly the rows of a one-task reading. Here "large" is made small
(capture_unit_bytes) so that the real cluster capture and a damaged one
are cut into many ranges, and every message spanning packets may cross a
cut. A capture with the clients' gRPC calls (api-short.pcapng) gives its
gRPC tables from a second stage (lbparse.pipeline.http2_stage) whose rows
are those of the one-task reading too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.damage import damaged_captures
from support.shared import LIFTBRIDGE

from lbparse import read_capture_tables
from lbparse.capture import native_batches
from lbparse.columnar.decode_arrow import DecodeOptions
from lbparse.columnar.sources import SourceOptions
from lbparse.pipeline.input_plan import plan
from lbparse.pipeline.job import PipelineOptions, run

pytestmark = pytest.mark.skipif(
    not native_batches.available(), reason="the C capture loop is not built: captures are one task"
)


def _rows(out: Path) -> dict[str, pa.Table]:
    """Every table's rows in (source, position) order (a stable sort: the rows
    of one position keep theirs), read from its Parquet files by pyarrow: the
    same rows Spark reads back (as the tests of the pipeline's values do),
    without carrying ~8,000 of them through the JVM into Python objects
    (4 s a run against 0.1)."""
    return {
        p.name: pq.read_table(p).sort_by([("source", "ascending"), ("position", "ascending")])
        for p in sorted(out.iterdir())
        if p.is_dir()
    }


def test_a_big_capture_is_read_by_several_tasks_as_by_one(spark: Any, tmp_path: Path) -> None:
    inputs = [
        c.path
        for c in damaged_captures(tmp_path / "in", "pcapng")
        if c.name in ("frame_cut", "garbage_records", "lying")
    ]
    for sample in ("short.pcapng", "api-short.pcapng"):
        if (LIFTBRIDGE / "samples" / sample).exists():
            inputs.append(str(LIFTBRIDGE / "samples" / sample))
    results = {}
    for name, unit_bytes in (("one", 1 << 40), ("cut", 20000)):
        source = SourceOptions(capture_unit_bytes=unit_bytes)
        summary = run(
            spark,
            PipelineOptions(
                inputs=tuple(inputs),
                out=str(tmp_path / name),
                decode=DecodeOptions(layout="auto"),
                source=source,
            ),
        )
        assert not summary.checks(), summary.checks()
        results[name] = (summary, _rows(tmp_path / name))
    units = plan(inputs, SourceOptions(capture_unit_bytes=20000))
    assert len(units) > 2 * len(inputs)  # cut into many ranges
    one, cut = results["one"], results["cut"]
    assert cut[1] == one[1]  # the same rows of every table, positions and all
    assert {"messages", "proto_Message", "commitlog_ReplicationResponse"} <= set(one[1])
    if len(inputs) > 4:  # api-short.pcapng: every gRPC call, none of its HTTP/2 bytes a problem
        calls = sum(
            t["grpc_calls"].num_rows for t in read_capture_tables(inputs[-1]) if "grpc_calls" in t
        )
        assert calls > 50
        assert one[1]["grpc_calls"].num_rows == calls
        assert one[1]["grpc_messages"].num_rows > calls
    t1, t2 = one[0].totals(), cut[0].totals()
    for key in ("rows", "messages", "problems", "packets", "gaps"):
        assert t2[key] == t1[key], key
