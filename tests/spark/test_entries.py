"""Liftbridge data directories as inputs of `lbparse pipeline` (real local[2]
Spark): one row per stored entry in DIR/entries, as lbparse.storage reads
it, values of known type in their struct columns, damage as rows, counts
in the summary, beside the messages of a capture in the same run."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.storage import (
    messages,
    short_data,  # noqa: F401 (a fixture)
    write_partition,
)

from lbparse.storage import find_partitions, read_segment


@pytest.fixture(scope="module")
def entries_run(
    spark: Any,
    inputs: dict[str, Path],
    short_data: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    from lbparse.columnar.decode_arrow import DecodeOptions
    from lbparse.columnar.sources import SourceOptions
    from lbparse.pipeline.job import PipelineOptions
    from lbparse.pipeline.job import run as run_pipeline

    damaged = tmp_path_factory.mktemp("damaged") / "DATA"
    folder = write_partition(
        damaged / "streams" / "made" / "0", [messages(5)], hw=4, epochs=[(3, 0)]
    )
    log = folder / "00000000000000000000.log"
    raw = log.read_bytes()
    cut = read_segment(log).positions[2]
    log.write_bytes(raw[:cut] + b"\xee" * 21 + raw[cut:-9])  # garbage, then a torn last entry
    out = tmp_path_factory.mktemp("out-entries")
    options = PipelineOptions(
        inputs=(str(short_data), str(damaged), str(inputs["capture.pcap"])),
        out=str(out),
        decode=DecodeOptions(layout="v0"),
        source=SourceOptions(batch_rows=7),
    )
    summary = run_pipeline(spark, options)
    data = spark.read.parquet(os.path.join(out, "entries"))
    return {
        "summary": summary,
        "data": data,
        "rows": data.collect(),
        "out": out,
        "damaged": log,
        "json": json.loads((out / "summary.json").read_text()),
    }


def test_every_stored_entry_is_one_row(entries_run: dict[str, Any], short_data: Path) -> None:
    rows = [r for r in entries_run["rows"] if r.error_kind is None]
    by_key = {(r.source, r.position): r for r in rows}
    assert len(by_key) == len(rows)
    seen = 0
    for part in find_partitions([short_data]):
        for seg in part.segments:
            reading = read_segment(seg.log)
            for pos, e in reading:
                r = by_key[(str(seg.log), pos)]
                assert (r.node, r.stream, r.partition, r.segment) == (
                    part.node,
                    part.stream,
                    part.partition,
                    seg.base_offset,
                )
                assert (r.offset, r.timestamp, r.leader_epoch, r.size, r.crc32c, r.crc_ok) == (
                    e.offset,
                    e.timestamp,
                    e.leader_epoch,
                    e.size,
                    e.crc32c,
                    True,
                )
                assert (r.key, r.value) == (e.key, e.value)
                assert dict(r.headers) == dict(e.headers)
                assert r.time.timestamp() == pytest.approx(e.timestamp / 1e9, abs=1e-6)
                seen += 1
    assert seen == 255


def test_values_of_known_type_are_typed_columns(entries_run: dict[str, Any]) -> None:
    rows = entries_run["rows"]
    act = sorted(
        (r for r in rows if r.stream == "__activity" and r.node == "node1"), key=lambda r: r.offset
    )
    assert act[0].value_type == "proto.ActivityStreamEvent"
    assert act[0].proto_ActivityStreamEvent.createStreamOp.stream == "__activity"
    cur = [r for r in rows if r.stream == "__cursors"]
    assert {r.protocol_Cursor.cursorId for r in cur} == {"reader-1"}
    assert all(r.proto_ActivityStreamEvent is None for r in cur)
    orders = [r for r in rows if r.stream == "orders"]
    assert all(r.value_type is None and r.proto_ActivityStreamEvent is None for r in orders)


def test_damage_is_rows_and_nothing_readable_is_lost(entries_run: dict[str, Any]) -> None:
    log = entries_run["damaged"]
    rows = sorted(
        (r for r in entries_run["rows"] if r.source == str(log)), key=lambda r: r.position
    )
    assert [r.offset for r in rows if r.error_kind is None] == [0, 1, 2, 3]
    assert [r.error_kind for r in rows if r.error_kind] == ["segment:garbage", "segment:torn_entry"]
    torn = rows[-1]
    assert torn.offset == 4 and str(log) in torn.error_message  # its header was readable


def test_summary_counts_the_entries(entries_run: dict[str, Any], inputs: dict[str, Path]) -> None:
    summary = entries_run["summary"]
    assert summary.checks() == []
    t = summary.totals()
    assert t["entries"] == 255 + 4
    segments = [f for f in summary.files if f.format == "segment"]
    assert len(segments) == 22
    assert sum(f.problems for f in segments) == 2
    assert t["per_stream"]["orders"] == 3 * (24 + 15 + 14)
    assert t["rows_written"] == t["rows"]
    assert entries_run["json"]["totals"]["per_stream"]["made"] == 6
    # the capture given in the same run is in DIR/messages as ever
    capture = [f for f in summary.files if f.path == str(inputs["capture.pcap"])]
    assert capture and capture[0].messages > 20
    assert (entries_run["out"] / "messages" / "_SUCCESS").is_file()
    # plain files, the stream a column of them (no stream=NAME directories)
    entries = entries_run["out"] / "entries"
    assert (entries / "_SUCCESS").is_file() and not [p for p in entries.iterdir() if p.is_dir()]
    assert entries_run["json"]["tables"]["entries"] == {
        "path": str(entries),
        "rows": t["rows_written"] - capture[0].rows,
    }


def test_data_directories_alone_write_only_the_entries(
    spark: Any,
    short_data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No messages without a capture: no DIR/messages at all, not an empty
    dataset that the README's DuckDB and Polars lines fail on (issue #25),
    and the command's report names only what it wrote."""
    import duckdb
    import polars

    from lbparse.cli.pipeline_cmd import print_report
    from lbparse.columnar.decode_arrow import DecodeOptions
    from lbparse.columnar.sources import SourceOptions
    from lbparse.pipeline.job import PipelineOptions
    from lbparse.pipeline.job import run as run_pipeline

    out = tmp_path / "out"
    summary = run_pipeline(
        spark,
        PipelineOptions(
            inputs=(str(short_data),),
            out=str(out),
            decode=DecodeOptions(layout="v0"),
            source=SourceOptions(),
        ),
    )
    assert sorted(p.name for p in out.iterdir()) == ["entries", "summary.json"]
    # The summary names the tables written, and only those.
    assert json.loads((out / "summary.json").read_text())["tables"] == {
        "entries": {"path": f"{out}/entries", "rows": 255}
    }
    n = duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}/entries/*.parquet')")
    assert n.fetchall() == [(255,)]
    assert polars.scan_parquet(f"{out}/entries").collect().height == 255
    print_report(summary, str(out))
    said = capsys.readouterr().out
    assert f"Parquet: {out}/entries" in said and "messages" not in said.split("Parquet:", 1)[1]
