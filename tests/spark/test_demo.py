"""`lbparse demo`: the examples, then the pipeline on the bundled capture."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support.tools import load_tool

from lbparse.capture import CaptureReader
from lbparse.cli import main


def test_the_bundled_capture_is_what_its_script_publishes() -> None:
    path = resources.files("lbparse.examples").joinpath("sample.pcap")
    with resources.as_file(path) as p:
        recs = list(CaptureReader(p, decode=False))
    sent = load_tool("make_sample_capture").sample_messages()
    pubs = [r for r in recs if r.direction == "client_to_server"]
    delivered = [r for r in recs if r.direction == "server_to_client"]
    assert [(r.subject, r.payload, r.reply or None) for r in pubs] == [
        (s, p, reply) for s, p, reply, _ in sent
    ]
    assert sorted(r.payload for r in delivered) == sorted(p for _, p, _, _ in sent)
    assert [r.headers for r in pubs] == [h for _, _, _, h in sent]


def test_demo_runs_the_pipeline_on_the_bundled_capture(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Decoded 12 example envelopes: 11 ok, 1 rejected" in out
    assert "196 rows from 1 file(s)" in out
    assert "Publish 80 | Ack 80" in out
    assert f"Parquet: {tmp_path}/messages" in out
    assert "Publish rows, typed columns" in out and '{"amount": 144}' in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["checks"] == [] and summary["totals"]["rows"] == 196
    assert spark.range(1).count() == 1  # the tests' session is still running
    # last, the report of the capture (make demo prints its path)
    assert f"report: {tmp_path}/report.html" in out
    assert "vegaEmbed" in (tmp_path / "report.html").read_text()


def test_report_of_the_pipeline_output_is_the_report_of_its_capture(
    spark: Any, tmp_path: Path
) -> None:
    """`lbparse report DIR` on the pipeline's output (rows partitioned by MsgType,
    read back in time order, payloads decoded again) says what the report of
    the capture itself says."""
    from lbparse.report import build_model

    sample = str(resources.files("lbparse.examples").joinpath("sample.pcap"))
    assert main(["pipeline", sample, "--out", str(tmp_path)]) == 0
    direct, via = build_model([sample]), build_model([str(tmp_path)])
    assert via["inputs"][0]["format"] == "pipeline"
    assert via["inputs"][0]["pipeline_summary"]["rows"] == 196
    for key in ("messages", "per_verb", "per_layout", "per_msg_type", "errors"):
        assert via["totals"][key] == direct["totals"][key], key
    for part in ("traffic", "latency", "partitions", "problems"):
        assert via[part] == direct[part], part
    # the pipeline's ts_ns: the capture's times to the nanosecond
    for key in ("first_ns", "last_ns", "first_utc", "last_utc"):
        assert via["report"][key] == direct["report"][key], key
