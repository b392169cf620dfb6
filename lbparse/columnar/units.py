"""What a task reads (`Unit`: one file, or a share of one) and what reading it
saw (`UnitStats`): planned by sources.py and entries.py, read by the tasks,
the Spark data source and the report."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow.compute as pc

from lbparse.capture import Notice

__all__ = ["INPUT_PROBLEM", "Unit", "UnitStats", "input_problems"]

# The error_kind prefix of a row about the input (a gap, a damaged block, a file
# that cannot be read: `input:KIND`) rather than about a message.
INPUT_PROBLEM = "input:"


def input_problems(kinds: Any) -> Any:
    """Which rows of an error_kind column are about the input (a boolean column,
    false where the kind is null)."""
    return pc.fill_null(pc.starts_with(kinds, INPUT_PROBLEM), False)


@dataclass
class Unit:
    """What one task reads of one file."""

    path: str
    format: str  # pcap, pcapng, jsonl, parquet, unknown, missing
    size: int  # of the file
    nbytes: int = 0  # this unit's share of it (what the task reads)
    index: int = 0  # which unit of the file (Parquet files may have several)
    row_groups: list[int] | None = None
    first_rows: list[int] | None = None  # index of each row group's first row
    rows: int | None = None  # rows in those row groups
    error: tuple[str, str] | None = None  # found while planning: one problem row
    # A range of a capture cut by the index pass (native_batches.NativeCapture.index):
    # its first record's offset, the offset it stops before (-1: the end),
    # its first position, and the reader's state at its start. Bytes here,
    # base64 only in the JSON a Spark task is handed: a range read in this
    # process (lbparse's tests cut ~10,000 of them of ~120 KB) skips both.
    start: int = 0
    stop: int = -1
    first_row: int = 0
    snapshot: bytes | None = None

    @property
    def key(self) -> str:
        return f"{self.path}#{self.index}"

    def to_json(self) -> str:
        d = asdict(self)
        if self.snapshot is not None:
            d["snapshot"] = base64.b64encode(self.snapshot).decode()
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> Unit:
        d = json.loads(text)
        if d.get("error") is not None:
            d["error"] = tuple(d["error"])
        if d.get("snapshot") is not None:
            d["snapshot"] = base64.b64decode(d["snapshot"])
        return cls(**d)


@dataclass
class UnitStats:
    """What reading one unit saw; rows, messages and problems are counted on the
    decoded rows (tasks.py), so that they are the data's counts."""

    path: str
    format: str
    size: int
    bytes_read: int = 0
    packets: int = 0
    gaps: int = 0
    gap_bytes: int = 0
    notices: dict[str, int] = field(default_factory=dict)  # problems, by kind
    notes: dict[str, int] = field(default_factory=dict)  # information (Notice.info), by kind
    file_error: str | None = None  # "input:KIND: message" when reading stopped early

    def __post_init__(self) -> None:
        # client endpoint -> its CONNECT line's name (lbparse.capture.connects), for
        # the report; not a field: not one of the pipeline summary's counts
        self.connect_names: dict[str, str] = {}

    def notice(self, n: Notice) -> None:
        if n.info:
            self.notes[n.kind] = self.notes.get(n.kind, 0) + 1
            return
        self.notices[n.kind] = self.notices.get(n.kind, 0) + 1
        if n.kind == "gap":
            self.gaps += 1
            self.gap_bytes += n.nbytes or 0
