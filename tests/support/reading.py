"""Everything one reading of a capture gives, as plain data to compare."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from lbparse.capture import CaptureReader, Record
from lbparse.codec.limits import Limits
from lbparse.columnar.schema import arrow_record_schema
from lbparse.columnar.sources import SourceOptions, Unit, UnitStats, read_capture
from support.shared import shared_path


def sample_records(name: str) -> tuple[Record, ...]:
    """The records of shared/liftbridge/samples/NAME read with the default
    options, once a process (seven tests read short.pcapng whole, half a
    second each): read them, never change them. Skips the test when the
    sample is missing."""
    return _records(shared_path("liftbridge", "samples", name))


@functools.cache
def _records(path: Path) -> tuple[Record, ...]:
    return tuple(CaptureReader(str(path)))


def read_all(path: str) -> dict[str, Any]:
    """Records (with their decoding), notices and stats of `path` read as v0."""
    notices: list[list[Any]] = []
    reader = CaptureReader(
        path, layout="v0", on_notice=lambda n: notices.append([n.kind, n.message, n.nbytes])
    )
    records = [r.to_json_dict() for r in reader]
    return {"records": records, "notices": notices, "stats": reader.stats.to_json_dict()}


def concat_tables(batches: Iterable[dict[str, pa.Table]]) -> dict[str, pa.Table]:
    """read_capture_tables' batches as one table per name, in reading order."""
    parts: dict[str, list[pa.Table]] = {}
    for batch in batches:
        for name, table in batch.items():
            parts.setdefault(name, []).append(table)
    return {k: pa.concat_tables(v) for k, v in parts.items()}


def pipeline_rows(
    path: str | Path, native: bool, limits: Limits | None = None, batch_rows: int = 65536
) -> tuple[pa.Table, dict[str, Any]]:
    """The pipeline's record rows of a capture (the C loop's, or the
    reference's: `native`), and its unit counts."""
    unit = Unit(str(path), "pcap", os.path.getsize(path), os.path.getsize(path))
    stats = UnitStats(unit.path, unit.format, unit.size)
    batches = list(
        read_capture(
            unit, SourceOptions(batch_rows=batch_rows), stats, limits=limits, native=native
        )
    )
    table = pa.Table.from_batches(batches, schema=arrow_record_schema())
    return table, dict(vars(stats))


def reading_problems(rows: pa.Table) -> list[tuple[Any, ...]]:
    """(source, position, error_kind, error_message) of every reading problem
    (`input:*`) of a `messages` table or the wide rows, sorted."""
    import pyarrow.compute as pc

    rows = rows.filter(pc.starts_with(rows.column("error_kind"), "input:").fill_null(False))
    cols = ("source", "position", "error_kind", "error_message")
    return sorted(zip(*(rows.column(c).to_pylist() for c in cols)))
