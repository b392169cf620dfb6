"""Everything one reading of a capture gives, as plain data to compare."""

from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa

from lbparse.capture import CaptureReader


def read_all(path: str) -> dict[str, Any]:
    """Records (with their decoding), notices and stats of `path` read as v0."""
    notices: list[list[Any]] = []
    reader = CaptureReader(path, layout="v0",
                           on_notice=lambda n: notices.append([n.kind, n.message, n.nbytes]))
    records = [r.to_json_dict() for r in reader]
    return {"records": records, "notices": notices, "stats": reader.stats.to_json_dict()}


def concat_tables(batches: Iterable[dict[str, pa.Table]]) -> dict[str, pa.Table]:
    """read_capture_tables' batches as one table per name, in reading order."""
    parts: dict[str, list[pa.Table]] = {}
    for batch in batches:
        for name, table in batch.items():
            parts.setdefault(name, []).append(table)
    return {k: pa.concat_tables(v) for k, v in parts.items()}
