"""`lbparse pipeline --layout auto` resolves ambiguous envelopes by the capture's
context exactly as `lbparse capture` does (issue #12): per connection and
subject, across batches of one file, the first batches held for the first
proof. Row by row, the layout column equals the capture reader's layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from generations import legacy_capture, v0_capture
from support.shared import LIFTBRIDGE
from test_liftbridge_pipeline import read_rows

from lbparse.capture import CaptureReader
from lbparse.columnar.decode_arrow import DecodeOptions
from lbparse.columnar.sources import SourceOptions
from lbparse.pipeline.job import PipelineOptions, run

SAMPLE = LIFTBRIDGE / "samples" / "short.pcapng"


@pytest.mark.parametrize("batch_rows", [2, 65536])
@pytest.mark.parametrize("which", ["legacy", "v0", "sample"])
def test_pipeline_layouts_are_the_capture_readers(
    spark: Any, tmp_path: Path, which: str, batch_rows: int
) -> None:
    if which == "sample":
        if not SAMPLE.exists():
            pytest.skip(f"shared material missing: {SAMPLE}")
        path = SAMPLE
    else:
        path = (legacy_capture if which == "legacy" else v0_capture)(tmp_path / f"{which}.pcap")
    want = [(r.subject, r.envelope.layout if r.envelope else None) for r in CaptureReader(path)]
    run(
        spark,
        PipelineOptions(
            inputs=(str(path),),
            out=str(tmp_path / "out"),
            decode=DecodeOptions(layout="auto"),
            source=SourceOptions(batch_rows=batch_rows),
        ),
    )
    rows = [
        r for r in read_rows(tmp_path / "out") if not (r["error_kind"] or "").startswith("input:")
    ]
    got = [(r["subject"], None if r["error_kind"] else r["layout"]) for r in rows]
    assert got == want
    if which == "legacy":
        assert {lay for s, lay in got if s == "orders"} == {"legacy"}
