"""What an input directory holds and a run does not read is listed, with why
(issue #27): names Spark leaves out (a leading . or _), links to directories
(not followed); in the plan, in summary.json and in the summary people read."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from lbparse.columnar.sources import NOT_DATA, SourceOptions
from lbparse.pipeline.input_plan import plan
from lbparse.pipeline.summary import Summary

SAMPLE = Path(__file__).resolve().parents[2] / "lbparse" / "examples" / "sample.pcap"


def _inputs(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    top = tmp_path / "in"
    (top / "sub").mkdir(parents=True)
    (top / ".git").mkdir()
    (top / "_spark_metadata").mkdir()
    for name in ("a.pcap", "sub/b.pcap", ".hidden.pcap", "_tmp.pcap", ".git/x.pcap"):
        shutil.copyfile(SAMPLE, top / name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copyfile(SAMPLE, elsewhere / "c.pcap")
    os.symlink(elsewhere, top / "linked")
    want = {
        str(top / ".hidden.pcap"): NOT_DATA,
        str(top / "_tmp.pcap"): NOT_DATA,
        str(top / ".git"): NOT_DATA,
        str(top / "_spark_metadata"): NOT_DATA,
        str(top / "linked"): "a link to a directory: not followed",
    }
    return top, want


def test_the_plan_says_what_it_left_out(tmp_path: Path) -> None:
    top, want = _inputs(tmp_path)
    skipped: list[tuple[str, str]] = []
    units = plan([str(top)], SourceOptions(), skipped)
    assert sorted(u.path for u in units) == [str(top / "a.pcap"), str(top / "sub" / "b.pcap")]
    assert dict(skipped) == want and len(skipped) == len(want)


def test_the_summary_lists_every_skipped_input() -> None:
    items = [{"path": f"/in/.x{i}", "reason": NOT_DATA} for i in range(25)]
    s = Summary([], "/out/messages", "auto", skipped=items)
    assert s.to_json_dict()["skipped"] == items
    lines = s.table().splitlines()
    assert f"skipped: /in/.x0: {NOT_DATA}" in lines
    assert "... and 5 more skipped (summary.json has them all)" in lines


@pytest.mark.slow
def test_the_pipeline_writes_them_in_summary_json(spark: Any, tmp_path: Path) -> None:
    from lbparse.pipeline.job import PipelineOptions, run

    top, want = _inputs(tmp_path)
    out = tmp_path / "out"
    run(spark, PipelineOptions(inputs=(str(top),), out=str(out)))
    got = json.loads((out / "summary.json").read_text())["skipped"]
    assert {d["path"]: d["reason"] for d in got} == want
