"""Reading one segment index (`<base offset>.index`).

An index is an array of fixed-size entries (spec/segment_index.ksy). The
active segment's index is preallocated with zeros; Liftbridge stops at the
first entry whose non-offset fields are all zero (index.go
`InitializePosition`). What follows that entry must be zeros too: anything
else is reported, entry by entry, and not taken as part of the index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lbparse.storage.errors import Finding, StorageError
from lbparse.storage.formats import INDEX_FORMATS_BY_NAME, IndexFormat

__all__ = ["IndexEntry", "IndexReading", "read_index", "read_index_bytes", "CURRENT_INDEX"]

CURRENT_INDEX: IndexFormat = max(INDEX_FORMATS_BY_NAME.values(), key=lambda f: f.id)
MAX_TAIL_FINDINGS = 10  # entries after the zero tail reported one by one, then counted


@dataclass(frozen=True)
class IndexEntry:
    """One index entry: where in the .index, and the entry of the .log it locates."""

    index_position: int
    rel_offset: int
    offset: int
    position: int
    timestamp: int | None = None
    size: int | None = None

    def to_json_dict(self) -> dict[str, int | None]:
        return {"index_position": self.index_position, "rel_offset": self.rel_offset,
                "offset": self.offset, "timestamp": self.timestamp, "position": self.position,
                "size": self.size}


@dataclass
class IndexReading:
    """The entries of an index, where its zero tail starts, and what is wrong."""

    path: str
    format: IndexFormat
    size: int
    base_offset: int
    entries: list[IndexEntry] = field(default_factory=list)
    zero_tail: int | None = None  # byte position of the first empty entry
    damage: list[Finding] = field(default_factory=list)
    after_tail: list[IndexEntry] = field(default_factory=list)  # non-zero entries past it


def read_index(path: str | Path, base_offset: int | None = None,
               fmt: IndexFormat = CURRENT_INDEX) -> IndexReading:
    """Read a `.index` file; the base offset defaults to the one its name gives."""
    p = Path(path)
    if base_offset is None:
        stem = p.name.split(".", 1)[0]
        base_offset = int(stem) if stem.isdigit() else 0
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise StorageError("is a directory, not an index file", path=path) from None
    return read_index_bytes(data, str(path), base_offset, fmt)


def _entry(fmt: IndexFormat, at: int, values: tuple[int, ...], base: int) -> IndexEntry:
    named = dict(zip(fmt.fields, values))
    return IndexEntry(at, named["rel_offset"], base + named["rel_offset"], named["position"],
                      named.get("timestamp"), named.get("size"))


def _empty(fmt: IndexFormat, i: int, values: tuple[int, ...]) -> bool:
    """Liftbridge's end-of-index test: every field but the relative offset zero.

    An 8-byte entry has only a position besides, which the first entry
    legitimately has at 0: there the test is an all-zero entry past the first.
    """
    rest = [v for name, v in zip(fmt.fields, values) if name != "rel_offset"]
    if fmt.has_timestamp:
        return not any(rest)
    return i > 0 and not any(values)


def read_index_bytes(data: bytes, path: str = "<bytes>", base_offset: int = 0,
                     fmt: IndexFormat = CURRENT_INDEX) -> IndexReading:
    reading = IndexReading(path, fmt, len(data), base_offset)
    width = fmt.entry.size
    whole = len(data) // width * width
    if data.count(0, whole) != len(data) - whole:
        reading.damage.append(Finding(path, whole, "index_tail",
                                      f"{len(data) - whole} bytes after the last whole "
                                      f"{width}-byte entry"))
    # Only the entries before the trailing zeros need unpacking (a
    # preallocated index is 10 MiB of mostly zeros).
    upto = min(-(-len(data.rstrip(b"\x00")) // width) * width, whole)
    rows = fmt.entry.iter_unpack(data[:upto])
    for i, values in enumerate(rows):
        at = i * width
        if reading.zero_tail is None:
            if _empty(fmt, i, values):
                reading.zero_tail = at
            else:
                reading.entries.append(_entry(fmt, at, values, base_offset))
        elif any(values):
            reading.after_tail.append(_entry(fmt, at, values, base_offset))
    if reading.zero_tail is None and upto < whole:
        reading.zero_tail = upto
    _report_after_tail(reading)
    return reading


def _report_after_tail(reading: IndexReading) -> None:
    for e in reading.after_tail[:MAX_TAIL_FINDINGS]:
        reading.damage.append(Finding(
            reading.path, e.index_position, "index_tail",
            f"entry (offset {e.offset}, position {e.position}) after the zero entry at "
            f"{reading.zero_tail}, where Liftbridge's index ends"))
    more = len(reading.after_tail) - MAX_TAIL_FINDINGS
    if more > 0:
        reading.damage.append(Finding(
            reading.path, reading.after_tail[MAX_TAIL_FINDINGS].index_position, "index_tail",
            f"{more} more non-zero entries after the zero entry at {reading.zero_tail}"))
