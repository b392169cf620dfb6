"""From input paths to the report's data model, in one streaming pass per input."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lbparse.capture import Stats
from lbparse.report.aggregate import Aggregator
from lbparse.report.inputs import ReadOptions, read_input
from lbparse.textform import utf8_values


def build_model(
    paths: Iterable[str], options: ReadOptions | None = None, raft: bool = True
) -> dict[str, Any]:
    """Read every input and return the data behind every chart.

    The inputs are captures, recordings and pipeline output; the result is what
    `lbparse report --json` writes. `totals` are the capture reader's counts
    (`lbparse capture --stats`) summed over the inputs.

    Args:
        paths: The input files, read in this order, each in one streaming pass.
        options: How to read them (layout, limits, callbacks); None for the
            defaults.
        raft: Whether to decode the Raft transport; False leaves it undecoded.

    Returns:
        The report's model, plain JSON values only (Aggregator.model); a
        file name that is not UTF-8 written with its bytes as `\\xNN`
        (lbparse.textform.utf8_text).
    """
    options = options or ReadOptions()
    agg = Aggregator(raft=raft)
    stats = Stats()
    inputs = [read_input(p, agg, stats, options).to_json_dict() for p in paths]
    model: dict[str, Any] = utf8_values(agg.model(inputs, stats.to_json_dict()))
    return model
