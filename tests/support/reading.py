"""Everything one reading of a capture gives, as plain data to compare."""

from __future__ import annotations

from typing import Any

from lbparse.capture import CaptureReader


def read_all(path: str) -> dict[str, Any]:
    """Records (with their decoding), notices and stats of `path` read as v0."""
    notices: list[list[Any]] = []
    reader = CaptureReader(path, layout="v0",
                           on_notice=lambda n: notices.append([n.kind, n.message, n.nbytes]))
    records = [r.to_json_dict() for r in reader]
    return {"records": records, "notices": notices, "stats": reader.stats.to_json_dict()}
