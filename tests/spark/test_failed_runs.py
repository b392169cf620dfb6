"""A run that fails, or is killed, leaves nothing that blocks the next one (issue #12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lbparse.pipeline import job
from lbparse.pipeline.decode_arrow import DecodeOptions
from lbparse.pipeline.job import PipelineOptions, run


def _options(inputs: dict[str, Path], out: Path, **kw: Any) -> PipelineOptions:
    return PipelineOptions(inputs=(str(inputs["capture.pcap"]),), out=str(out),
                           decode=DecodeOptions(layout="v0"), **kw)


def test_a_failed_run_removes_its_output_and_the_next_run_starts_clean(
        spark: Any, inputs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    def failing_commit(*args: Any) -> None:
        raise OSError("disk full (a test)")

    with monkeypatch.context() as m:
        m.setattr(job, "commit", failing_commit)
        with pytest.raises(OSError, match="disk full"):
            run(spark, _options(inputs, tmp_path))
    assert not (tmp_path / "messages").exists()
    summary = run(spark, _options(inputs, tmp_path))  # no --overwrite needed
    assert summary.totals()["rows"] > 0 and (tmp_path / "messages" / "_SUCCESS").exists()


def test_what_a_killed_run_left_is_replaced_but_a_finished_run_is_kept(
        spark: Any, inputs: dict[str, Path], tmp_path: Path) -> None:
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
