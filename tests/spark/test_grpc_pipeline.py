"""`lbparse pipeline` and `format("liftbridge")` on the shared capture of a
real cluster's client API (api-short.pcapng): the gRPC tables they give
are those `lbparse capture --tables` writes (lbparse.columnar.grpctables),
55 calls and 287 messages; `lbparse report` on the pipeline's output has
the capture's client section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from support.api_short import API_SHORT, need_api_short, with_gaps
from support.reading import concat_tables, reading_problems

import lbparse
import lbparse.spark
from lbparse.columnar.sources import SourceOptions
from lbparse.columnar.tables import GRPC_CALLS, GRPC_MESSAGES, GRPC_TABLES, table_schema
from lbparse.pipeline.job import PipelineOptions, run


@pytest.mark.slow
def test_the_pipeline_writes_the_grpc_tables(spark: Any, tmp_path: Path) -> None:
    if not API_SHORT.exists():
        pytest.skip(f"shared material missing: {API_SHORT}")
    summary = run(
        spark,
        PipelineOptions(
            inputs=(str(API_SHORT),), out=str(tmp_path), source=SourceOptions(batch_rows=100)
        ),
    )
    want = concat_tables(lbparse.read_capture_tables(API_SHORT))
    for name, rows, order in (
        (GRPC_CALLS, 55, ["position"]),
        (GRPC_MESSAGES, 287, ["position", "message_seq"]),
    ):
        got = ds.dataset(str(tmp_path / name)).to_table()
        assert got.schema.remove_metadata() == table_schema(name)
        assert got.num_rows == rows
        by = [(c, "ascending") for c in order]
        assert got.sort_by(by).equals(want[name].sort_by(by))
    assert {n: summary.tables[n]["rows"] for n in GRPC_TABLES} == {
        GRPC_CALLS: 55,
        GRPC_MESSAGES: 287,
    }
    # The NATS reading took the HTTP/2 bytes for bytes that are not NATS: no
    # such problem row is written or counted, and every count adds up.
    messages = ds.dataset(str(tmp_path / "messages")).to_table()
    assert messages.num_rows == want["messages"].num_rows
    assert (
        messages.filter(
            pc.starts_with(messages.column("error_kind"), "input:").fill_null(False)
        ).num_rows
        == 0
    )
    totals = summary.totals()
    assert totals["problems"] == 0 and not summary.checks() and summary.outcome == "ok"
    assert totals["rows"] == messages.num_rows and "input:protocol" not in totals["per_error_kind"]
    # lbparse report on the pipeline's output: the same client section as on the capture
    from lbparse.report import build_model

    client = build_model([str(tmp_path)])["client"]
    assert client is not None and client["calls"] == 55
    assert client == build_model([str(API_SHORT)])["client"]


@pytest.mark.slow
def test_the_data_source_reads_the_grpc_tables(spark: Any) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    if not API_SHORT.exists():
        pytest.skip(f"shared material missing: {API_SHORT}")
    lbparse.spark.register(spark)
    want = concat_tables(lbparse.read_capture_tables(API_SHORT))
    frames = {}
    for name, order in ((GRPC_CALLS, ["position"]), (GRPC_MESSAGES, ["position", "message_seq"])):
        df = spark.read.format("liftbridge").option("table", name).load(str(API_SHORT))
        assert df.schema == from_arrow_schema(table_schema(name))
        by = [(c, "ascending") for c in order]
        assert df.toArrow().sort_by(by).to_pylist() == want[name].sort_by(by).to_pylist()
        frames[name] = df
    joined = frames[GRPC_CALLS].join(frames[GRPC_MESSAGES], ["source", "position"])
    assert joined.count() == 287
    # messages: as read_capture_tables gives them, no HTTP/2 bytes as problems
    messages = (
        spark.read.format("liftbridge").option("table", "messages").load(str(API_SHORT)).toArrow()
    )
    assert messages.num_rows == want["messages"].num_rows
    assert (
        messages.filter(
            pc.starts_with(messages.column("error_kind"), "input:").fill_null(False)
        ).num_rows
        == 0
    )


@pytest.mark.slow
def test_the_data_source_gives_the_tables_verdict(spark: Any, tmp_path: Path) -> None:
    """The data source's `messages` and its wide rows have read_capture_tables'
    problems: none for api-short's HTTP/2 bytes (the wide rows had 18), and
    with two of a gRPC connection's segments gone, the two gaps and the
    HTTP/2 frames lost at them (its `messages` had the gaps alone)."""
    need_api_short()
    lbparse.spark.register(spark)
    gaps = with_gaps(tmp_path / "gaps.pcapng")
    for path, count in ((API_SHORT, 0), (gaps, 4)):
        want = reading_problems(concat_tables(lbparse.read_capture_tables(path))["messages"])
        assert len(want) == count
        reader = spark.read.format("liftbridge")
        wide = reader.load(str(path)).where("error_kind LIKE 'input:%'").toArrow()
        assert reading_problems(wide) == want, path
        messages = (
            reader.option("table", "messages").load(str(path)).where("error_kind IS NOT NULL")
        ).toArrow()
        assert reading_problems(messages) == want, path
