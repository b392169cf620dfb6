"""The run's summary: its counts add up, and they are the data's counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from lbparse.capture import CaptureReader
from lbparse.cli import main
from lbparse.columnar.sources import Unit
from lbparse.pipeline.summary import NONE, Summary


def _counts(data: Any, column: str, by_source: bool = False) -> dict[Any, int]:
    key = F.coalesce(F.col(column), F.lit(NONE)).alias("k")
    cols = [F.col("source"), key] if by_source else [key]
    return {
        tuple(r[:-1]) if by_source else r[0]: r[-1] for r in data.groupBy(*cols).count().collect()
    }


def test_counts_add_up(run: dict[str, Any]) -> None:
    summary: Summary = run["summary"]
    assert summary.checks() == [] and run["json"]["checks"] == []
    t = run["json"]["totals"]
    assert t["rows"] == t["messages"] + t["problems"] == run["data"].count()
    for key in ("per_layout", "per_msg_type", "per_error_kind"):
        assert sum(t[key].values()) == t["rows"]
    for f in run["json"]["files"]:
        assert f["rows"] == f["messages"] + f["problems"]
    assert t["files"] == len(run["json"]["files"]) == 8


def test_counts_are_the_datas(run: dict[str, Any]) -> None:
    data, t = run["data"], run["json"]["totals"]
    for key, column in (
        ("per_layout", "layout"),
        ("per_msg_type", "msg_type_name"),
        ("per_error_kind", "error_kind"),
    ):
        assert t[key] == _counts(data, column), key
        per_file = _counts(data, column, by_source=True)
        for f in run["json"]["files"]:
            assert f[key] == {k: n for (s, k), n in per_file.items() if s == f["path"]}, key
    problems = {
        r[0]: r[1]
        for r in data.where(F.col("error_kind").startswith("input:"))
        .groupBy("source")
        .count()
        .collect()
    }
    rows = {r[0]: r[1] for r in data.groupBy("source").count().collect()}
    for f in run["json"]["files"]:
        assert (f["rows"], f["problems"]) == (rows[f["path"]], problems.get(f["path"], 0))


def test_reading_counts(run: dict[str, Any], inputs: dict[str, Path]) -> None:
    files = {Path(f["path"]).name: f for f in run["json"]["files"]}
    for name in ("capture.pcap", "gap.pcap", "cut.pcap"):
        reader = CaptureReader(inputs[name], decode=False)
        messages = sum(1 for _ in reader)
        f = files[name]
        assert (f["format"], f["messages"], f["packets"]) == (
            "pcap",
            messages,
            reader.stats.packets,
        )
        assert f["bytes_read"] == inputs[name].stat().st_size
        assert f["gaps"] == reader.stats.gaps
    assert files["gap.pcap"]["gaps"] >= 1 and files["capture.pcap"]["gaps"] == 0
    table = files["table.parquet"]
    assert (table["format"], table["rows"], table["messages"], table["problems"]) == (
        "parquet",
        24,
        23,
        1,
    )  # a null payload cell is a problem, not a message
    for name in ("garbage.bin", "broken.parquet", "missing.pcap", "cut.pcap"):
        assert files[name]["file_errors"] or files[name]["notices"], name


def test_summary_table_and_json(run: dict[str, Any]) -> None:
    text = run["summary"].table()
    assert "per layout:" in text and "per error kind:" in text and "total" in text
    assert "problem: input:unknown_format" in text and "COUNTS DO NOT ADD UP" not in text
    assert json.loads((run["out"] / "summary.json").read_text()) == run["json"]


def test_checks_name_counts_that_do_not_add_up() -> None:
    unit = Unit("a.pcap", "pcap", 10, 10)
    s = Summary.from_units(
        [unit],
        {
            unit.key: {
                "rows": 3,
                "messages": 2,
                "problems": 0,
                "per_layout": {"v0": 3},
                "per_msg_type": {},
                "per_error_kind": {NONE: 3},
            }
        },
        "out",
        "v0",
        1.0,
    )
    assert s.checks() == [
        "a.pcap: rows 3 != messages 2 + problems 0",
        "a.pcap: per_msg_type sums to 0, rows are 3",
    ]
    missing = Summary.from_units([unit], {}, "out", "v0", 1.0)
    assert missing.checks()[0] == "a.pcap: counts of 1 of its parts never came back"


def test_cli_prints_the_summary(
    spark: Any, inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = [str(inputs["capture.pcap"]), str(inputs["records.jsonl"])]
    assert main(["pipeline", *good, "--out", str(tmp_path), "--layout", "v0", "-q"]) == 0
    out = capsys.readouterr().out
    assert "capture.pcap" in out and f"Parquet: {tmp_path}/messages" in out
    assert json.loads((tmp_path / "summary.json").read_text())["outcome"] == "ok"
    # The session is the tests' and still runs; the output is not overwritten unasked.
    assert spark.range(1).count() == 1
    assert main(["pipeline", *good, "--out", str(tmp_path)]) == 2
    assert "exists; remove it or pass --overwrite" in capsys.readouterr().err
    bad = [str(inputs["cut.pcap"])]  # a capture that ends inside a packet
    assert main(["pipeline", *bad, "--out", str(tmp_path), "--overwrite", "-q"]) == 1
    assert "input:truncated 1" in capsys.readouterr().out  # per error kind
    # damaged input: status 1 and "problems", a crash's being 3 and "failed"
    # (test_failed_runs.py)
    assert json.loads((tmp_path / "summary.json").read_text())["outcome"] == "problems"
