"""A run that fails, or is killed, leaves nothing that blocks the next one (issue #12)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lbparse.columnar.decode_arrow import DecodeOptions
from lbparse.pipeline import job
from lbparse.pipeline.job import PipelineOptions, run


def _options(inputs: dict[str, Path], out: Path, **kw: Any) -> PipelineOptions:
    return PipelineOptions(
        inputs=(str(inputs["capture.pcap"]),), out=str(out), decode=DecodeOptions(layout="v0"), **kw
    )


def test_a_failed_run_removes_its_output_and_the_next_run_starts_clean(
    spark: Any, inputs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_commit(*args: Any) -> None:
        raise OSError("disk full (a test)")

    with monkeypatch.context() as m:
        m.setattr(job, "commit", failing_commit)
        with pytest.raises(job.JobFailed, match="disk full") as err:
            run(spark, _options(inputs, tmp_path))
    assert isinstance(err.value.__cause__, OSError)
    assert not (tmp_path / "messages").exists()
    failed = json.loads((tmp_path / "summary.json").read_text())
    assert failed["outcome"] == "failed" and "disk full" in failed["error"]
    summary = run(spark, _options(inputs, tmp_path))  # no --overwrite needed
    assert summary.totals()["rows"] > 0 and (tmp_path / "messages" / "_SUCCESS").exists()


def test_what_a_killed_run_left_is_replaced_but_a_finished_run_is_kept(
    spark: Any, inputs: dict[str, Path], tmp_path: Path
) -> None:
    """A killed run cannot clean up: its DIR/messages holds only _temporary,
    no _SUCCESS. The next run takes its place; a finished run's output still
    needs --overwrite."""
    left = tmp_path / "messages" / "_temporary" / "0123abcd" / "stage0-task0-attempt0"
    left.mkdir(parents=True)
    (left / "part-0.parquet").write_bytes(b"PAR1 half written")
    summary = run(spark, _options(inputs, tmp_path))
    assert summary.totals()["rows"] > 0
    assert not (tmp_path / "messages" / "_temporary").exists()
    with pytest.raises(ValueError, match="exists; remove it or pass --overwrite"):
        run(spark, _options(inputs, tmp_path))
    mine = tmp_path / "other"
    (mine / "messages").mkdir(parents=True)
    (mine / "messages" / "notes.txt").write_text("someone's files")
    with pytest.raises(ValueError, match="exists"):
        run(spark, _options(inputs, mine))
    assert (mine / "messages" / "notes.txt").exists()


ROOT = Path(__file__).resolve().parent.parent.parent


def _cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "lbparse",
            "pipeline",
            "--test-conf",
            "--master",
            "local[1]",
            "--layout",
            "v0",
            "-q",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_a_crashed_job_has_its_own_exit_status_and_outcome(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    """Issue #19: a job that crashed exited 1 with a traceback, like a run
    that only found bad data. A real crash (the tasks' results over
    spark.driver.maxResultSize: Spark aborts the job) now exits 3, says
    FAILED in one line, and summary.json's outcome is "failed". A run over
    damaged input still exits 1 with "problems", and a clean one 0 with "ok"
    (test_summary.py's test_cli_prints_the_summary: the same command line,
    in the tests' Spark session rather than two more of its own)."""
    crashed = _cli(
        [
            str(inputs["capture.pcap"]),
            "--out",
            str(tmp_path / "crashed"),
            "--conf",
            "spark.driver.maxResultSize=1k",
        ]
    )
    assert crashed.returncode == 3, crashed.stderr[-2000:]
    assert "lbparse pipeline: FAILED, nothing written: the job failed" in crashed.stderr
    assert "Traceback" not in crashed.stderr
    summary = json.loads((tmp_path / "crashed" / "summary.json").read_text())
    assert summary["outcome"] == "failed" and summary["error"]
    assert summary["totals"]["rows"] == 0 and not (tmp_path / "crashed" / "messages").exists()
