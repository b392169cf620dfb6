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
    """Which rows of an error_kind column are about the input.

    Args:
        kinds: An error_kind column (Arrow).

    Returns:
        A boolean column: True where the kind is "input:...", False where it
        is another or null.
    """
    return pc.fill_null(pc.starts_with(kinds, INPUT_PROBLEM), False)


@dataclass
class Unit:
    """What one task reads of one file.

    Attributes:
        path: The file.
        format: pcap, pcapng, jsonl, parquet, unknown or missing.
        size: The file's size in bytes.
        nbytes: This unit's share of it (what the task reads).
        index: Which unit of the file it is.
        row_groups: The Parquet row groups it reads; None: all of them.
        first_rows: The index of each of those row groups' first row.
        rows: The rows in those row groups.
        error: (kind, message) found while planning: one problem row.
        start: A capture range's first record's offset (the index pass).
        stop: The offset the range stops before; -1: the file's end.
        first_row: The range's first `position`.
        snapshot: The capture reader's state at the range's start.
    """

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
        """The unit's name in the summary: PATH#INDEX."""
        return f"{self.path}#{self.index}"

    def to_json(self) -> str:
        """The unit as JSON, as a Spark task is handed it.

        Returns:
            The JSON text (the snapshot in base64).
        """
        d = asdict(self)
        if self.snapshot is not None:
            d["snapshot"] = base64.b64encode(self.snapshot).decode()
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> Unit:
        """Inverse of `to_json`.

        Args:
            text: The JSON text.

        Returns:
            The unit.
        """
        d = json.loads(text)
        if d.get("error") is not None:
            d["error"] = tuple(d["error"])
        if d.get("snapshot") is not None:
            d["snapshot"] = base64.b64decode(d["snapshot"])
        return cls(**d)


@dataclass
class UnitStats:
    """What reading one unit saw.

    Rows, messages and problems are counted on the decoded rows (tasks.py),
    so that they are the data's counts.

    Attributes:
        path: The file.
        format: Its format.
        size: Its size in bytes.
        bytes_read: The bytes the reader read.
        packets: The packets (or records) read.
        gaps: Gaps in TCP streams.
        gap_bytes: The bytes those gaps lost.
        notices: Problems, by kind.
        notes: Information (Notice.info), by kind.
        file_error: "input:KIND: message" when reading stopped early.
    """

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
        """Count a reader's notice: a problem, or information.

        Args:
            n: The notice.
        """
        if n.info:
            self.notes[n.kind] = self.notes.get(n.kind, 0) + 1
            return
        self.notices[n.kind] = self.notices.get(n.kind, 0) + 1
        if n.kind == "gap":
            self.gaps += 1
            self.gap_bytes += n.nbytes or 0
