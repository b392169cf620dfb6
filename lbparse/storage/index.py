"""Reading one segment index (`<base offset>.index`).

An index is an array of fixed-size entries (spec/segment_index.ksy). The
active segment's index is preallocated with zeros; Liftbridge stops at the
first entry whose non-offset fields are all zero (index.go
`InitializePosition`). What follows that entry must be zeros too: anything
else is reported, entry by entry, and not taken as part of the index.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lbparse.digits import ascii_int
from lbparse.storage.errors import Finding, StorageError
from lbparse.storage.formats import INDEX_FORMATS_BY_NAME, IndexFormat

__all__ = ["IndexEntry", "IndexReading", "read_index", "read_index_bytes", "CURRENT_INDEX"]

CURRENT_INDEX: IndexFormat = max(INDEX_FORMATS_BY_NAME.values(), key=lambda f: f.id)
MAX_TAIL_FINDINGS = 10  # entries after the zero tail reported one by one, then counted
CHUNK = 1 << 20  # bytes of the index read at a time
Buffer = bytes | mmap.mmap
_ZEROS = bytes(CHUNK)


@dataclass(frozen=True)
class IndexEntry:
    """One index entry: where in the .index, and the entry of the .log it locates.

    Attributes:
        index_position: The entry's byte position in the .index.
        rel_offset: The offset relative to the segment's base offset.
        offset: The absolute offset (base offset + rel_offset).
        position: The byte position of the entry in the .log.
        timestamp: The entry's timestamp, None when the format has none.
        size: The entry's size in the .log, None when the format has none.
    """

    index_position: int
    rel_offset: int
    offset: int
    position: int
    timestamp: int | None = None
    size: int | None = None

    def to_json_dict(self) -> dict[str, int | None]:
        """The entry as a JSON-ready dict.

        Returns:
            A new dict of its fields (timestamp and size None when absent).
        """
        return {
            "index_position": self.index_position,
            "rel_offset": self.rel_offset,
            "offset": self.offset,
            "timestamp": self.timestamp,
            "position": self.position,
            "size": self.size,
        }


@dataclass
class IndexReading:
    """The entries of an index, where its zero tail starts, and what is wrong.

    Attributes:
        path: How findings name the file.
        format: The index format it was read as.
        size: The file's size in bytes.
        base_offset: The segment's base offset.
        entries: The entries before the zero tail, in file order.
        zero_tail: Byte position of the first empty entry, None if none.
        damage: What is wrong with the file (kind index_tail).
        after_tail: Non-zero entries past the zero tail (not part of the
            index).
    """

    path: str
    format: IndexFormat
    size: int
    base_offset: int
    entries: list[IndexEntry] = field(default_factory=list)
    zero_tail: int | None = None  # byte position of the first empty entry
    damage: list[Finding] = field(default_factory=list)
    after_tail: list[IndexEntry] = field(default_factory=list)  # non-zero entries past it


def read_index(
    path: str | Path, base_offset: int | None = None, fmt: IndexFormat = CURRENT_INDEX
) -> IndexReading:
    """Read a `.index` file; the base offset defaults to the one its name gives.

    The file is mapped, not read: a preallocated (or sparse) index of
    gigabytes costs the pages that hold entries, and the zeros after them
    are found through the file's holes where the system tells them.

    Args:
        path: The `.index` file.
        base_offset: The segment's base offset (default: from the file name,
            0 if it gives none).
        fmt: The index format to read it as.

    Returns:
        The IndexReading.

    Raises:
        StorageError: `path` is a directory.
        OSError: The file cannot be opened.
    """
    p = Path(path)
    if base_offset is None:
        stem = p.name.split(".", 1)[0]
        base_offset = ascii_int(stem) or 0
    try:
        f = open(p, "rb")
    except IsADirectoryError:
        raise StorageError("bad_file", "is a directory, not an index file", path=path) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return read_index_bytes(b"", str(path), base_offset, fmt)
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return read_index_bytes(data, str(path), base_offset, fmt, _next_data(f.fileno(), size))


def _next_data(fd: int, size: int) -> Callable[[int], int]:
    """Where the file's next stretch of data starts at or after a position (holes
    read as zeros); the position itself where the system does not say."""
    seek_data = getattr(os, "SEEK_DATA", None)

    def at(pos: int) -> int:
        if seek_data is None or pos >= size:
            return pos
        try:
            return max(pos, os.lseek(fd, pos, seek_data))
        except OSError:  # ENXIO: nothing but a hole after pos
            return size

    return at


def _entry(fmt: IndexFormat, at: int, values: tuple[int, ...], base: int) -> IndexEntry:
    named = dict(zip(fmt.fields, values))
    return IndexEntry(
        at,
        named["rel_offset"],
        base + named["rel_offset"],
        named["position"],
        named.get("timestamp"),
        named.get("size"),
    )


def _empty(fmt: IndexFormat, i: int, values: tuple[int, ...]) -> bool:
    """Liftbridge's end-of-index test: every field but the relative offset zero.

    An 8-byte entry has only a position besides, which the first entry
    legitimately has at 0: there the test is an all-zero entry past the first.
    """
    rest = [v for name, v in zip(fmt.fields, values) if name != "rel_offset"]
    if fmt.has_timestamp:
        return not any(rest)
    return i > 0 and not any(values)


def read_index_bytes(
    data: Buffer,
    path: str = "<bytes>",
    base_offset: int = 0,
    fmt: IndexFormat = CURRENT_INDEX,
    next_data: Callable[[int], int] | None = None,
) -> IndexReading:
    """Read an index's bytes (or map), a chunk at a time.

    Args:
        data: The index's bytes, or a map of its file.
        path: How findings name it.
        base_offset: The segment's base offset.
        fmt: The index format to read it as.
        next_data: `next_data(pos)`: where data starts again at or after
            `pos` (a file's holes, all zeros, are skipped once the zero tail
            is found); None reads every byte.

    Returns:
        The IndexReading: entries, zero tail, and damage found.
    """
    size = len(data)
    reading = IndexReading(path, fmt, size, base_offset)
    width = fmt.entry.size
    whole = size // width * width
    rest = bytes(data[whole:])
    if rest.count(0) != len(rest):
        reading.damage.append(
            Finding(
                path,
                whole,
                "index_tail",
                f"{size - whole} bytes after the last whole {width}-byte entry",
            )
        )
    step = max(CHUNK // width, 1) * width
    pos = 0
    while pos < whole:
        if reading.zero_tail is not None and next_data is not None:
            pos = min(whole, next_data(pos) // width * width)
        chunk = data[pos : min(whole, pos + step)]
        if not chunk:
            break
        # Zeros need no unpacking once the tail is found (a preallocated
        # index is 10 MiB of mostly zeros).
        if reading.zero_tail is None or chunk != _ZEROS[: len(chunk)]:
            _entries(reading, fmt, pos, chunk)
        pos += len(chunk)
    _report_after_tail(reading)
    return reading


def _entries(reading: IndexReading, fmt: IndexFormat, pos: int, chunk: bytes) -> None:
    width = fmt.entry.size
    for i, values in enumerate(fmt.entry.iter_unpack(chunk), pos // width):
        if reading.zero_tail is None:
            if _empty(fmt, i, values):
                reading.zero_tail = i * width
            else:
                reading.entries.append(_entry(fmt, i * width, values, reading.base_offset))
        elif any(values):
            reading.after_tail.append(_entry(fmt, i * width, values, reading.base_offset))


def _report_after_tail(reading: IndexReading) -> None:
    for e in reading.after_tail[:MAX_TAIL_FINDINGS]:
        reading.damage.append(
            Finding(
                reading.path,
                e.index_position,
                "index_tail",
                f"entry (offset {e.offset}, position {e.position}) after the zero entry at "
                f"{reading.zero_tail}, where Liftbridge's index ends",
            )
        )
    more = len(reading.after_tail) - MAX_TAIL_FINDINGS
    if more > 0:
        reading.damage.append(
            Finding(
                reading.path,
                reading.after_tail[MAX_TAIL_FINDINGS].index_position,
                "index_tail",
                f"{more} more non-zero entries after the zero entry at {reading.zero_tail}",
            )
        )
