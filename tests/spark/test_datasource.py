"""lbparse.spark on real local[2] Spark: `spark.read.format("liftbridge")` gives the
pipeline's rows (captures, recordings, tables, the real cluster's capture and data
directories), `from_envelope` decodes any binary column as lbparse.decode does, and
`readStream` takes new files of a directory once each, across a restart."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.shared import LIFTBRIDGE

import lbparse
import lbparse.spark
from lbparse.columnar.sources import SourceOptions
from lbparse.pipeline.input_plan import plan
from lbparse.spark.functions import CAPTURE_COLUMNS

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"  # a real Liftbridge cluster's capture
OPTIONS = {"column": "data", "subjectColumn": "subj", "timestampColumn": "t"}
STREAM_TIMEOUT = 120.0


@pytest.fixture
def liftbridge(spark: Any) -> Any:
    """A new reader (a DataFrameReader keeps the options set on it)."""
    lbparse.spark.register(spark)
    return spark.read.format("liftbridge")


def _rows(table: pa.Table, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    table = table.sort_by([("source", "ascending"), ("position", "ascending")])
    return table.select([n for n in table.column_names if n not in drop]).to_pylist()


def _present(datasets: dict[str, Any]) -> list[str]:
    return [p for p in datasets["captures"] if os.path.exists(p)]


def test_read_gives_the_pipelines_rows(liftbridge: Any, datasets: dict[str, Any]) -> None:
    captures = _present(datasets)  # (a missing input is refused: see below)
    df = liftbridge.options(layout="auto", **OPTIONS).load(captures)
    want = datasets["wide"]["table"]  # the pipeline's tables joined back into the wide row
    want = want.filter(pa.compute.is_in(want.column("source"), pa.array(captures)))
    assert df.schema == lbparse.pipeline.spark_schema.output_schema()
    assert _rows(df.toArrow()) == _rows(want.select(df.columns))


def test_one_input_partition_per_unit(liftbridge: Any, datasets: dict[str, Any]) -> None:
    captures = _present(datasets)
    units = plan(captures, SourceOptions(column="data"))
    df = liftbridge.options(**OPTIONS).load(captures)
    assert df.rdd.getNumPartitions() == len(units) > len(captures) - 1


def test_read_gives_the_entries_of_data_directories(
    liftbridge: Any, datasets: dict[str, Any]
) -> None:
    df = liftbridge.load(datasets["data_dirs"])
    want = datasets["entries"]["table"]
    assert sorted(df.columns) == sorted(want.column_names)
    assert _rows(df.toArrow()) == _rows(want.select(df.columns))


def test_the_real_clusters_capture(liftbridge: Any, datasets: dict[str, Any]) -> None:
    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")
    df = liftbridge.load(str(SHORT))  # the CLI's default layout: auto
    counts = {r["layout"]: r["count"] for r in df.groupBy("layout").count().collect()}
    assert counts.get("v0", 0) > 5000 and "auto" not in counts
    want = datasets["wide"]["table"]
    want = want.filter(pa.compute.equal(want.column("source"), str(SHORT)))
    assert _rows(df.toArrow()) == _rows(want.select(df.columns))


@pytest.mark.parametrize(
    "options, paths, message",
    [
        ({}, ["{missing}"], "no such input"),
        ({"column": "nope"}, ["{table}"], "no column 'nope'"),
        ({"colum": "data"}, ["{table}"], "unknown option(s) colum"),
        ({"layout": "v9"}, ["{table}"], "v9"),
        ({"batchRows": "0"}, ["{table}"], "batchRows"),
    ],
)
def test_bad_arguments_fail_when_the_dataframe_is_made(
    liftbridge: Any,
    inputs: dict[str, Path],
    options: dict[str, str],
    paths: list[str],
    message: str,
) -> None:
    paths = [p.format(missing=inputs["missing.pcap"], table=inputs["table.parquet"]) for p in paths]
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        liftbridge.options(**options).load(paths).schema  # noqa: B018  (made, not run)


def test_from_envelope_is_the_pipelines_decoding(spark: Any, run: dict[str, Any]) -> None:
    """On the payloads of the v0 run: the struct's fields are the row's columns."""
    from pyspark.sql import functions as F

    data = run["data"].where(
        F.col("payload").isNotNull()
        & ~F.coalesce(F.col("error_kind"), F.lit("")).startswith("input:")
    )
    env = data.select(
        "source", "position", lbparse.spark.from_envelope("payload", layout="v0").alias("env")
    )
    got = env.select("source", "position", "env.*")
    want = data.select(*got.columns)
    assert got.count() > 30
    assert _rows(got.toArrow()) == _rows(want.toArrow())
    assert set(got.columns) == {f.name for f in lbparse.spark.envelope_schema().fields} | {
        "source",
        "position",
    }
    assert not set(CAPTURE_COLUMNS) & set(lbparse.spark.envelope_schema().names)


def test_from_envelope_on_any_binary_column(spark: Any) -> None:
    """A DataFrame made in Spark (as a Kafka `value` column is): every row is
    lbparse.decode's answer, or its error; a null payload is a row too."""
    from vectors import VECTORS
    from vectors import data as vector_bytes

    payloads = [vector_bytes(v) for v in VECTORS]
    df = spark.createDataFrame(
        [(i, p) for i, p in enumerate(payloads)] + [(len(payloads), None)], "i int, value binary"
    )
    rows = (
        df.select("i", lbparse.spark.from_envelope("value", layout="v0").alias("e"))
        .orderBy("i")
        .collect()
    )
    assert len(rows) == len(payloads) + 1
    for r, p in zip(rows, payloads):
        try:
            env = lbparse.decode(p, "v0")
        except lbparse.EnvelopeError as exc:
            assert (r.e.error_kind, r.e.error_message) == (exc.kind, exc.message)
            continue
        assert r.e.error_kind is None
        assert (r.e.layout, r.e.msg_type_name, r.e.payload_type) == (
            env.layout,
            env.msg_type_name,
            env.payload_type,
        )
    assert rows[-1].e.error_kind == "input:null_payload"
    with pytest.raises(ValueError):
        lbparse.spark.from_envelope("value", layout="v9")


def _add(directory: Path, source: Path, name: str) -> Path:
    """A file put in place whole, as a recorder should (written hidden, renamed)."""
    hidden = directory / f".{name}"
    shutil.copyfile(source, hidden)
    os.rename(hidden, directory / name)
    return directory / name


def _wait_rows(spark: Any, query: Any, out: Path, rows: int) -> None:
    from pyspark.errors import AnalysisException

    deadline = time.monotonic() + STREAM_TIMEOUT
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"the stream failed: {query.exception()}")
        try:
            if spark.read.parquet(str(out)).count() >= rows:
                return
        except AnalysisException:  # nothing committed yet
            pass
        time.sleep(0.5)
    raise AssertionError(
        f"the stream did not write {rows} rows within {STREAM_TIMEOUT:.0f} s: {query.status}"
    )


def test_read_stream_takes_each_new_file_once_across_a_restart(
    spark: Any, liftbridge: Any, inputs: dict[str, Path], tmp_path: Path
) -> None:
    incoming, out, chk = tmp_path / "incoming", tmp_path / "out", tmp_path / "checkpoint"
    incoming.mkdir()
    captures = [inputs["capture.pcap"], inputs["gap.pcap"], inputs["records.jsonl"]]
    expected = {
        str(incoming / f"{i}-{p.name}"): spark.read.format("liftbridge")
        .options(layout="v0")
        .load(str(p))
        .count()
        for i, p in enumerate(captures)
    }

    def start() -> Any:
        return (
            spark.readStream.format("liftbridge")
            .options(layout="v0", minFileAge="0.2")
            .load(str(incoming))
            .writeStream.format("parquet")
            .option("checkpointLocation", str(chk))
            .trigger(processingTime="500 milliseconds")
            .start(str(out))
        )

    query = start()
    try:
        _add(incoming, captures[0], f"0-{captures[0].name}")
        _wait_rows(spark, query, out, expected[str(incoming / f"0-{captures[0].name}")])
        _add(incoming, captures[1], f"1-{captures[1].name}")  # while the stream runs
        _wait_rows(spark, query, out, sum(list(expected.values())[:2]))
    finally:
        query.stop()
    _add(incoming, captures[2], f"2-{captures[2].name}")  # while it is stopped
    time.sleep(0.3)
    query = start()  # from the checkpoint: only the new file
    try:
        _wait_rows(spark, query, out, sum(expected.values()))
        query.processAllAvailable()
    finally:
        query.stop()
    got = spark.read.parquet(str(out))
    keys = got.select("source", "position").collect()
    assert len(keys) == len(set(keys)) == sum(expected.values())  # nothing twice, nothing lost
    per_file = {r["source"]: r["count"] for r in got.groupBy("source").count().collect()}
    assert per_file == expected
