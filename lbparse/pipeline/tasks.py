"""What one Spark task runs: read its units, decode them, count them.

`run_task` is the function given to `mapInArrow`. Its input batches carry
the task's units (JSON, one per row; see `job.py`); it yields the output
batches as it goes, so a task holds one batch at a time whatever the size
of its files, and it adds each unit's counts to the run's accumulator
when the unit is done.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Iterator

import pyarrow as pa

import lbparse
from lbparse.pipeline.decode_arrow import BatchDecoder, DecodeOptions
from lbparse.pipeline.sources import SourceOptions, Unit, UnitStats, read_unit
from lbparse.pipeline.summary import count_batch, count_problems

__all__ = ["TaskOptions", "run_task"]


@dataclass(frozen=True)
class TaskOptions:
    decode: DecodeOptions
    source: SourceOptions


@lru_cache(maxsize=4)
def _decoder(options: DecodeOptions) -> BatchDecoder:
    # Built once per Python worker (they are reused across tasks): the
    # schema and the per-type column builders are made here, not per batch.
    return BatchDecoder(options)


def process_unit(unit: Unit, options: TaskOptions) -> tuple[Iterator[pa.RecordBatch], dict[str, Any]]:
    """The output batches of one unit, and its counts (complete once they are consumed)."""
    decoder = _decoder(options.decode)
    stats = UnitStats(unit.path, unit.format, unit.size)
    counts: dict[str, Any] = {"rows": 0, "problems": 0}
    breakdowns: dict[str, Counter[str]] = {}

    def batches() -> Iterator[pa.RecordBatch]:
        for records in read_unit(unit, options.source, stats):
            out = decoder(records)
            counts["rows"] += out.num_rows
            counts["problems"] += count_problems(out)
            count_batch(out, breakdowns)
            yield out
        counts["messages"] = counts["rows"] - counts["problems"]
        # Which lbparse the executor imported: on a cluster, the --py-files
        # zip or an installed copy; worth knowing when versions differ.
        counts["lbparse"] = os.path.dirname(lbparse.__file__)
        counts.update(asdict(stats))
        counts.update({k: dict(v) for k, v in breakdowns.items()})

    return batches(), counts


def run_task(batches: Iterator[pa.RecordBatch], options: TaskOptions, accumulator: Any
             ) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for row in batch.column(0).to_pylist():  # one row per task: its units, as JSON
            for text in json.loads(row):
                unit = Unit.from_json(text)
                out, counts = process_unit(unit, options)
                yield from out
                accumulator.add({unit.key: counts})
