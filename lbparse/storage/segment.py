"""Reading one commit-log segment (`<base offset>.log`), damaged or not.

The entries are read by lbparse.codec.commitlog's entry loop and body parser (the
code that reads ReplicationResponse payloads, which carry the same
entries); the older generations of the entry (spec/segment.ksy) go through
a loop of their own over the same body code. Reading never stops at
damage: where an entry is cut short, malformed, or where bytes that are no
entry sit between entries, a `Finding` says so (file, byte position,
what), and reading resumes at the next entry that is whole and whose CRC
matches.
"""

from __future__ import annotations

import array
import contextlib
import gc
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import crc32c as _crc32c

from lbparse.codec import commitlog
from lbparse.codec.commitlog import CommitLogEntry
from lbparse.digits import ascii_int
from lbparse.errors import EnvelopeError
from lbparse.storage.errors import Finding, StorageError
from lbparse.storage.formats import CURRENT, SegmentFormat, by_recency
from lbparse_generated.storage_layouts import BODY_LENGTHS

_native: Any  # the entry loop in C (setup.py builds it where a compiler is); else Python
try:
    from lbparse.storage import _scan as _native
except ImportError:  # pragma: no cover - a pure-Python install
    _native = None

__all__ = [
    "SegmentReading",
    "read_segment",
    "read_segment_bytes",
    "iter_segment",
    "iter_segment_bytes",
    "detect_format",
    "entry_json",
]

# What a segment is read from: its bytes, or the file mapped into memory
# (lbparse.codec.commitlog's code takes either: it slices and unpacks).
Buffer = bytes | mmap.mmap
NS_PER_MS = 1_000_000  # the first generations kept the timestamp in milliseconds
DETECT_ENTRIES = 16  # entries read from the start of a file to tell its generation
PART_BYTES = 8 << 20  # what iter_segment reads at a time


@dataclass
class SegmentReading:
    """What one `.log` holds: its entries (with their byte positions) and its damage.

    Iterating yields (byte position, entry) pairs; len() is the entry count.

    Attributes:
        path: How findings name the file.
        format: The segment generation it was read as.
        size: The file's size in bytes (the whole file's, for a part).
        entries: The readable entries, in file order.
        positions: Each entry's byte position, parallel to `entries`.
        damage: What is wrong: cut, malformed or stray bytes, as Findings.
        damaged_headers: The entry-header fields of damaged entries whose
            header is readable (malformed or torn bodies), by byte position:
            nothing readable is lost.
    """

    path: str
    format: SegmentFormat
    size: int
    entries: list[CommitLogEntry] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    damage: list[Finding] = field(default_factory=list)
    # The entry-header fields of damaged entries whose header is readable
    # (malformed or torn bodies), by byte position: nothing readable is lost.
    damaged_headers: dict[int, dict[str, int]] = field(default_factory=dict)

    def __iter__(self) -> Iterator[tuple[int, CommitLogEntry]]:
        return zip(self.positions, self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def last_offset(self) -> int | None:
        """The offset of the last readable entry, None without entries."""
        return self.entries[-1].offset if self.entries else None

    @property
    def end_position(self) -> int:
        """Where the last readable entry ends."""
        if not self.entries:
            return 0
        return self.positions[-1] + self.format.header_len + (self.entries[-1].size or 0)


def entry_json(entry: CommitLogEntry, fmt: SegmentFormat) -> dict[str, Any]:
    """The entry as `commitlog_messages` shows it, plus `crc_ok`.

    Fields the segment's generation does not store (the leader epoch before
    Jul 2019, the timestamp of a first-generation message with magic 0) are
    null.

    Args:
        entry: An entry of the segment.
        fmt: The segment's generation.

    Returns:
        A new JSON-ready dict.
    """
    d = entry.to_json_dict()
    d["crc_ok"] = entry.crc_ok
    if fmt.field_index("leader_epoch") is None:
        d["leader_epoch"] = None
    if not _has_timestamp(entry, fmt):
        d["timestamp"] = None
    return d


def _has_timestamp(entry: CommitLogEntry, fmt: SegmentFormat) -> bool:
    if fmt.field_index("timestamp") is not None:
        return True
    if fmt.body_timestamp is None:
        return False
    return fmt.timestamp_if is None or bool(fmt.timestamp_if(entry.magic))


def read_segment(path: str | Path, fmt: SegmentFormat | None = None) -> SegmentReading:
    """Read a `.log` file; `fmt` None: tell the generation from the bytes.

    Args:
        path: The `.log` file.
        fmt: The generation to read it as; None: `detect_format`.

    Returns:
        The SegmentReading of the whole file.

    Raises:
        StorageError: `path` is a directory.
        OSError: The file cannot be read.
    """
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise StorageError("bad_file", "is a directory, not a segment file", path=path) from None
    return read_segment_bytes(data, str(path), fmt, base_offset=base_offset_of(path))


def base_offset_of(path: str | Path) -> int | None:
    """The base offset a segment file's name gives (None if the name is not one)."""
    stem = Path(path).name.split(".", 1)[0]
    return ascii_int(stem)


def read_segment_bytes(
    data: Buffer,
    path: str = "<bytes>",
    fmt: SegmentFormat | None = None,
    base_offset: int | None = None,
) -> SegmentReading:
    """Read the entries of a segment's bytes, recording and skipping damage.

    Args:
        data: The segment's bytes, or a map of its file.
        path: How findings name it.
        fmt: The generation to read it as; None: `detect_format`.
        base_offset: The base offset its name gives, for checking the
            entries' offsets; None: not known.

    Returns:
        The SegmentReading.
    """
    fmt = fmt or detect_format(data)
    reading = SegmentReading(path, fmt, len(data))
    with _no_gc():
        _read_part(data, 0, reading, fmt, base_offset, None, None, _Resync(data, fmt))
    return reading


def iter_segment(
    path: str | Path, fmt: SegmentFormat | None = None, part_bytes: int = PART_BYTES
) -> Iterator[SegmentReading]:
    """A segment file read as a stream, one part at a time.

    One SegmentReading per part of about `part_bytes`, cut between entries,
    in file order. The file is mapped, not read: memory holds one part's
    entries at a time whatever the segment's size. Damage is found and
    skipped as by `read_segment` (a resync may read past the part).

    Args:
        path: The `.log` file.
        fmt: The generation to read it as; None: `detect_format`.
        part_bytes: About the bytes of one part.

    Yields:
        A SegmentReading per part (one empty reading for an empty file).

    Raises:
        StorageError: `path` is a directory, or the file cannot be mapped
            (an address-space limit).
        OSError: The file cannot be opened.
    """
    try:
        f = open(path, "rb")
    except IsADirectoryError:
        raise StorageError("bad_file", "is a directory, not a segment file", path=path) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield SegmentReading(str(path), fmt or CURRENT, 0)
            return
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            # Under an address-space limit (ulimit -v) a large segment cannot be
            # mapped whole; one line naming the file, not a bare "[Errno 12]".
            raise StorageError(
                "bad_file",
                f"cannot be mapped into memory to be read ({size:,} bytes): "
                f"{exc.strerror or exc}; is the address space limited "
                "(ulimit -v)?",
                path=path,
            ) from None
        with data:
            yield from iter_segment_bytes(data, str(path), fmt, base_offset_of(path), part_bytes)


def iter_segment_bytes(
    data: Buffer,
    path: str = "<bytes>",
    fmt: SegmentFormat | None = None,
    base_offset: int | None = None,
    part_bytes: int = PART_BYTES,
) -> Iterator[SegmentReading]:
    """`iter_segment` over bytes (or a map) already at hand.

    Args:
        data: The segment's bytes, or a map of its file.
        path: How findings name it.
        fmt: The generation to read it as; None: `detect_format`.
        base_offset: The base offset its name gives; None: not known.
        part_bytes: About the bytes of one part.

    Yields:
        A SegmentReading per part, in file order.
    """
    fmt = fmt or detect_format(data)
    pos, end, last = 0, len(data), None
    resync = _Resync(data, fmt)  # one for every part: what a resync learnt is kept
    while pos < end:
        part = SegmentReading(path, fmt, end)
        with _no_gc():
            pos = _read_part(data, pos, part, fmt, base_offset, last, part_bytes, resync)
        last = part.last_offset if part.last_offset is not None else last
        # The pages behind are not needed again: a mapped file read whole would
        # otherwise be resident whole (a 3 GB segment: 3.1 GB RSS).
        _release(data, 0, pos)
        yield part


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while entries are made.

    A segment makes hundreds of thousands of objects, none of them in a
    cycle; each collection the allocations trigger walks every one made so
    far, which took 6x as long as reading (2.0 s against 0.3 s for 40 MB).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _entry_end(data: Buffer, pos: int, end: int, fmt: SegmentFormat) -> int | None:
    """Where the entry at `pos` ends by its header, None if that is not inside [pos, end]."""
    hl = fmt.header.size
    if end - pos < hl:
        return None
    size = fmt.header.unpack_from(data, pos)[fmt.header_fields.index("size")]
    return pos + hl + size if size <= end - pos - hl else None


def _read_part(
    data: Buffer,
    pos: int,
    reading: SegmentReading,
    fmt: SegmentFormat,
    base_offset: int | None,
    last: int | None,
    part_bytes: int | None,
    resync: _Resync,
) -> int:
    """Read entries from `pos` into `reading` until about `part_bytes` (None: the
    end) are read, cutting between entries; returns where the next part starts."""
    path, end = reading.path, len(data)
    target = end if part_bytes is None else min(end, pos + part_bytes)
    while pos < end:
        first = _entry_end(data, pos, end, fmt)
        limit = target if first is None else min(end, max(target, first))
        before = len(reading.entries)
        try:
            _scan(data, pos, limit, reading.entries, reading.positions, fmt)
            pos = limit
        except EnvelopeError as exc:
            failed_at = reading.end_position if len(reading.entries) > before else pos
            whole = _entry_end(data, failed_at, end, fmt)
            if whole is not None and whole > limit:
                return failed_at  # an entry the part's limit cuts: the next part reads it
            known = reading.last_offset if reading.last_offset is not None else last
            expect = known + 1 if known is not None else base_offset
            detail = _detail(exc) if limit == end else _problem_at(data, failed_at, fmt)
            finding, pos = _recover(data, failed_at, end, fmt, expect, path, detail, resync)
            reading.damage.append(finding)
            if finding.kind in ("bad_entry", "torn_entry") and end - failed_at >= fmt.header_len:
                reading.damaged_headers[failed_at] = header_at(data, failed_at, fmt)
        if pos >= target:
            break
    return pos


def _scan(
    data: Buffer,
    pos: int,
    end: int,
    entries: list[CommitLogEntry],
    positions: list[int],
    fmt: SegmentFormat,
    native: bool = True,
) -> None:
    """The fast loop for the segment's generation; raises at the first bad entry.

    The C loop (when built) reads every whole entry and stops at the first
    that is not; the Python loop then reads on from there, so the error it
    raises is the one the Python reader gives (tests hold the two equal).
    """
    layout = native_layout(fmt) if native and _native is not None else None
    if layout is not None:
        header, body, kind = layout
        pos = _native.scan(data, pos, end, header, body, kind, CommitLogEntry, entries, positions)
        if pos >= end:
            return
    first = len(entries)
    try:
        if fmt.current_body and fmt.header_fields == CURRENT.header_fields:
            commitlog.scan_entries(cast(bytes, data), pos, end, entries, positions, fmt.crc)
        else:
            _scan_generic(data, pos, end, entries, positions, fmt)
    finally:
        for e in entries[first:]:  # the spec's offset is unsigned; Liftbridge's an int64
            if e.offset >= INT64_LIMIT:
                e.offset -= 1 << 64


_LAYOUTS: dict[str, tuple[Any, ...] | None] = {}


def native_layout(fmt: SegmentFormat) -> tuple[Any, ...] | None:
    """(header, body, crc kind) for the C loop, from the spec's structs; None
    for the generations whose body it does not read (the 12-byte headers)."""
    if fmt.name in _LAYOUTS:
        return _LAYOUTS[fmt.name]
    layout = None
    if fmt.current_body:
        layout = (_header_layout(fmt), _body_layout(fmt), 0 if fmt.crc_name == "crc32c" else 1)
    _LAYOUTS[fmt.name] = layout
    return layout


def _widths(fmt_text: str) -> list[tuple[int, int, bool]]:
    """(position, width, signed) of each field of a struct format."""
    order, codes = fmt_text[0], fmt_text[1:]
    out, at = [], 0
    for code in codes:
        width = struct.calcsize(order + code)
        out.append((at, width, code.islower()))
        at += width
    return out


def _header_layout(fmt: SegmentFormat) -> tuple[Any, ...]:
    fields = dict(zip(fmt.header_fields, _widths(fmt.header.format)))
    at, width, _ = fields["offset"]
    fields["offset"] = (at, width, True)  # an int64 to Liftbridge (commitlog.Message.Offset)
    absent = (-1, 8, False)  # position -1: the generation has no such field
    return (
        fmt.header.size,
        fields["offset"],
        fields.get("timestamp", absent),
        fields.get("leader_epoch", absent),
        fields["size"],
    )


def _body_layout(fmt: SegmentFormat) -> tuple[Any, ...]:
    head = [w for _, w, _ in _widths(fmt.body_head.format)]
    lengths = [
        _widths(BODY_LENGTHS[k])[0][1:]
        for k in ("key_len", "value_len", "header_count", "header.key_len", "header.value_len")
    ]
    # The shortest body: its head and the key, value and header-count lengths.
    minimum = fmt.body_head.size + sum(w for w, _ in lengths[:3])
    return (minimum, *head, *lengths)


def _scan_generic(
    buf: Buffer,
    pos: int,
    end: int,
    entries: list[CommitLogEntry],
    positions: list[int],
    fmt: SegmentFormat,
) -> None:
    """Entries of the older generations: header per the spec, body by commitlog's code."""
    head = fmt.header
    hl = head.size
    i_ts = fmt.field_index("timestamp")
    i_size = fmt.header_fields.index("size")
    while pos < end:
        if end - pos < hl:
            raise commitlog._bad(f"{end - pos} bytes left, an entry header needs {hl}", pos)
        values = head.unpack_from(buf, pos)
        size = values[i_size]
        body = pos + hl
        if size > end - body:
            raise commitlog._bad(
                f"entry size {size} but only {end - body} bytes follow",
                pos + fmt.field_offset("size"),
            )
        entry = CommitLogEntry(values[0], values[i_ts] if i_ts is not None else 0, 0, size=size)
        if fmt.current_body:
            commitlog.parse_body(cast(bytes, buf), body, body + size, entry, fmt.crc)
        else:
            _legacy_body(buf, body, body + size, entry, fmt)
        entries.append(entry)
        positions.append(pos)
        pos = body + size


def _legacy_body(buf: Buffer, pos: int, end: int, entry: CommitLogEntry, fmt: SegmentFormat) -> int:
    """A body of the 12-byte-header generations: head, optional timestamp, the rest."""
    head = fmt.body_head
    if end - pos < head.size:
        raise commitlog._bad(f"entry body is {end - pos} bytes, needs at least {head.size}", pos)
    entry.crc32c, entry.magic, entry.attributes = head.unpack_from(buf, pos)
    p = pos + head.size
    ts = fmt.body_timestamp
    if ts is not None and (fmt.timestamp_if is None or fmt.timestamp_if(entry.magic)):
        if p + ts.size > end:
            raise commitlog._bad("timestamp runs past the entry body", p)
        entry.timestamp = ts.unpack_from(buf, p)[0] * NS_PER_MS
        p += ts.size
    with_headers = fmt.headers_if is None or bool(fmt.headers_if(entry.magic))
    stop = commitlog.parse_key_and_rest(cast(bytes, buf), p, end, entry, with_headers)
    # The CRC once the body is whole (as commitlog's: a resync must not pay it per byte).
    entry._crc_ok = fmt.crc(buf[pos + fmt.crc_width : end]) == entry.crc32c
    return stop


def header_at(data: Buffer, pos: int, fmt: SegmentFormat) -> dict[str, int]:
    """The entry-header fields at `pos`, by name."""
    fields = dict(zip(fmt.header_fields, fmt.header.unpack_from(data, pos)))
    fields["offset"] = _int64(fields["offset"])
    return fields


INT64_LIMIT = 1 << 63


def _int64(value: int) -> int:
    """An offset as Liftbridge reads it: the header's 8 bytes as an int64."""
    return value - (1 << 64) if value >= INT64_LIMIT else value


def _problem_at(data: Buffer, pos: int, fmt: SegmentFormat) -> str:
    """What is wrong with the entry at `pos`, judged against the whole file (a
    part's limit would change the numbers in the message)."""
    try:
        _scan(data, pos, len(data), [], [], fmt, native=False)
    except EnvelopeError as exc:
        return _detail(exc)
    return "no entry"  # pragma: no cover - only called where an entry fails


def _detail(exc: EnvelopeError) -> str:
    """commitlog's message without its ReplicationResponse framing."""
    text = exc.message.removeprefix("ReplicationResponse: ")
    return text.rsplit(" at payload offset ", 1)[0]


def _entry_at(data: Buffer, pos: int, end: int, fmt: SegmentFormat) -> CommitLogEntry:
    """One whole entry at `pos` (EnvelopeError if it is not)."""
    entries: list[CommitLogEntry] = []
    hl = fmt.header.size
    if end - pos < hl:
        raise commitlog._bad("no room for an entry header", pos)
    size = fmt.header.unpack_from(data, pos)[fmt.header_fields.index("size")]
    _scan(data, pos, min(end, pos + hl + size), entries, [], fmt)
    if not entries:
        raise commitlog._bad("no entry", pos)
    return entries[0]


def _whole_entry(
    data: Buffer, pos: int, end: int, fmt: SegmentFormat, min_offset: int | None
) -> bool:
    """Whether a whole entry with a matching CRC starts at `pos` (for resuming)."""
    hl = fmt.header.size
    if end - pos < hl + fmt.body_head.size:
        return False
    values = fmt.header.unpack_from(data, pos)
    size = values[fmt.header_fields.index("size")]
    if size < fmt.body_head.size or size > end - pos - hl:
        return False
    if min_offset is not None and not min_offset <= _int64(values[0]) < min_offset + (1 << 40):
        return False
    if fmt.current_body and not _body_fits(data, pos + hl, pos + hl + size, fmt):
        return False
    try:
        entry = _entry_at(data, pos, end, fmt)
    except EnvelopeError:
        return False
    return bool(entry.crc_ok)


_LENGTHS = {
    k: struct.Struct(BODY_LENGTHS[k])
    for k in ("key_len", "value_len", "header_count", "header.key_len", "header.value_len")
}


def _body_fits(data: Buffer, p: int, end: int, fmt: SegmentFormat) -> bool:
    """Whether a body's lengths (key, value, each header's) stay inside it,
    read without copying a field: a resync candidate whose key length covers
    most of the file must not cost a copy of it before it is refused."""
    shape = _body_shape(data, p, end, fmt)
    return shape is not None and _headers_fit(data, shape[0], shape[1], end)


def _body_shape(data: Buffer, p: int, end: int, fmt: SegmentFormat) -> tuple[int, int] | None:
    """Where a body's headers start and how many it declares, if its head, key
    and value lengths stay inside it (None if not): a few reads, whatever
    the lengths say. Every generation's body, as commitlog and _legacy_body
    read it (the first generations' timestamp and headers by magic)."""
    head = fmt.body_head
    if end - p < head.size:
        return None
    magic = head.unpack_from(data, p)[1]
    p += head.size
    ts = fmt.body_timestamp
    if ts is not None and (fmt.timestamp_if is None or fmt.timestamp_if(magic)):
        p += ts.size
        if p > end:
            return None
    for length in (_LENGTHS["key_len"], _LENGTHS["value_len"]):
        if p + length.size > end:
            return None
        (n,) = length.unpack_from(data, p)
        p += length.size + max(n, 0)
        if n < -1 or p > end:
            return None
    if fmt.headers_if is not None and not fmt.headers_if(magic):
        return p, 0
    count = _LENGTHS["header_count"]
    if p + count.size > end:
        return None
    (n,) = count.unpack_from(data, p)
    return p + count.size, max(n, 0)


def _headers_fit(data: Buffer, p: int, count: int, end: int) -> bool:
    """Whether `count` headers from `p` stay inside the body ending at `end`."""
    hkey, hvalue = _LENGTHS["header.key_len"], _LENGTHS["header.value_len"]
    for _ in range(count):
        for length in (hkey, hvalue):
            if p + length.size > end:
                return False
            (k,) = length.unpack_from(data, p)
            p += length.size + k
            if k < 0 or p > end:
                return False
    return True


# Reflected polynomials of the CRCs a segment's generation takes (formats.CRCS).
_POLYS = {"crc32c": 0x82F63B78, "crc32": 0xEDB88320}
_CONTINUED: dict[str, Callable[[bytes, int], int]] = {"crc32c": _crc32c.crc32c, "crc32": zlib.crc32}
_SHIFTS: dict[int, list[list[list[int]]]] = {}


def _shift_tables(poly: int, upto: int) -> list[list[list[int]]]:
    """Tables of x^(8 * 2^j) mod the polynomial, j < upto, as four byte-indexed
    tables each (a linear map of the 32-bit register: one lookup per byte).

    With them the CRC of data[a:e] comes from the CRCs of two prefixes:
    crc(A + B) = shift(crc(A), len(B)) ^ crc(B) (zlib's crc32_combine).
    """
    tables = _SHIFTS.setdefault(poly, [])
    while len(tables) < upto:
        if not tables:  # one zero byte through the register
            byte = []
            for b in range(256):
                c = b
                for _ in range(8):
                    c = (c >> 1) ^ (poly if c & 1 else 0)
                byte.append(c)
            images = [(v >> 8) ^ byte[v & 0xFF] for v in (1 << i for i in range(32))]
        else:  # the previous power, twice
            images = [_apply(tables[-1], _apply(tables[-1], 1 << i)) for i in range(32)]
        level = []
        for k in range(4):
            t = [0] * 256
            for b in range(1, 256):
                low = b & -b
                t[b] = t[b ^ low] ^ images[8 * k + low.bit_length() - 1]
            level.append(t)
        tables.append(level)
    return tables


def _apply(level: list[list[int]], v: int) -> int:
    return (
        level[0][v & 0xFF]
        ^ level[1][(v >> 8) & 0xFF]
        ^ level[2][(v >> 16) & 0xFF]
        ^ level[3][v >> 24]
    )


class _Resync:
    """What the resyncs of one reading share: CRCs of stretches of the file in
    bounded time.

    A candidate entry's CRC covers its declared body, which may run to the
    end of the file; taking it candidate by candidate made a run of headers
    each declaring a well-formed body to the end quadratic (0.88 MB of them:
    2.4 s, 3.52 MB: 26.4 s). Instead the CRC of every STEP-th prefix from
    the first resync on is kept (each byte passes through the CRC once, 4
    bytes kept per STEP), and a body's CRC is two prefixes' combined: at
    most 2 x STEP bytes read per candidate, however long its body, and
    about one when the candidates' starts (or ends) follow each other.
    """

    STEP = 1024

    def __init__(self, data: Buffer, fmt: SegmentFormat) -> None:
        self.data = data
        self.crc = _CONTINUED[fmt.crc_name]
        self.tables = _shift_tables(_POLYS[fmt.crc_name], 64)
        self.origin = -1
        self.marks: array.array[int] = array.array("L")
        self.last = [(-1, 0), (-1, 0)]  # (position, prefix CRC) last asked, per slot
        self.crc_bytes = 0  # bytes passed through the CRC (tests count them)

    def _shift(self, v: int, n: int) -> int:
        """v times x^(8n): the CRC register after n zero bytes (no conditioning)."""
        j = 0
        tables = self.tables
        while n:
            if n & 1:
                t = tables[j]
                v = t[0][v & 0xFF] ^ t[1][(v >> 8) & 0xFF] ^ t[2][(v >> 16) & 0xFF] ^ t[3][v >> 24]
            n >>= 1
            j += 1
        return v

    def _prefix(self, i: int, slot: int) -> int:
        """The CRC of data[origin:i]; `slot` 0 for a body's start, 1 for its end:
        each remembers its last answer, from which a later position in the
        same STEP goes on (the next candidate's start is a byte further)."""
        step, marks, data, crc = self.STEP, self.marks, self.data, self.crc
        j = (i - self.origin) // step
        while len(marks) <= j:
            at = self.origin + (len(marks) - 1) * step
            marks.append(crc(data[at : at + step], marks[-1]))
            self.crc_bytes += step
            if (at + step) % _RELEASE_EVERY == 0:  # the sweep's pages, not needed again
                _release(data, at + step - _RELEASE_EVERY, at + step)
        at, value = self.origin + j * step, marks[j]
        last, known = self.last[slot]
        if at <= last <= i:
            at, value = last, known
        value = int(crc(data[at:i], value))
        self.crc_bytes += i - at
        self.last[slot] = (i, value)
        return value

    def span(self, a: int, e: int) -> int:
        """The CRC of data[a:e] (the generation's CRC)."""
        if a < self.origin or self.origin < 0:
            self.origin, self.marks = a, array.array("L", [0])
            self.last = [(-1, 0), (-1, 0)]
        return self._prefix(e, 1) ^ self._shift(self._prefix(a, 0), e - a)


def _candidate(
    data: Buffer,
    p: int,
    values: tuple[int, ...],
    size: int,
    fmt: SegmentFormat,
    min_offset: int | None,
    resync: _Resync,
) -> bool:
    """Whether the entry header at `p` can start a whole entry with a matching
    CRC, each check in bounded time but the headers' (walked last, only
    for a body whose CRC matches)."""
    if min_offset is not None and not min_offset <= _int64(values[0]) < min_offset + (1 << 40):
        return False
    body = p + fmt.header.size
    end = body + size
    shape = _body_shape(data, body, end, fmt)
    if shape is None:
        return False
    stored = fmt.body_head.unpack_from(data, body)[0]
    if resync.span(body + fmt.crc_width, end) != stored:
        return False
    return _headers_fit(data, shape[0], shape[1], end)


def _next_entry(
    data: Buffer,
    start: int,
    end: int,
    fmt: SegmentFormat,
    min_offset: int | None,
    resync: _Resync | None = None,
) -> int | None:
    """The first position from `start` where a whole entry with a good CRC starts.

    Linear in the bytes passed: a candidate is judged by a few reads of its
    lengths and its CRC taken from kept prefix CRCs (_Resync), never by a
    pass over its body; only the one found is parsed whole. A run of zeros
    is skipped at C speed, since an entry header always holds a non-zero
    byte (its size, at least the body's head): no entry starts
    `header_len` bytes or more before the run ends.
    """
    resync = resync if resync is not None else _Resync(data, fmt)
    hl = fmt.header.size
    unpack, size_at = fmt.header.unpack_from, fmt.header_fields.index("size")
    least = fmt.body_head.size
    p, last, nonzero = start, end - hl, start - 1
    while p <= last:
        if nonzero < p:
            nonzero = _first_nonzero(data, p, end)
            if nonzero - p >= hl:
                p = nonzero - hl + 1
                continue
        values = unpack(data, p)
        size = values[size_at]
        if (
            least <= size <= end - p - hl
            and _candidate(data, p, values, size, fmt, min_offset, resync)
            and _whole_entry(data, p, end, fmt, min_offset)
        ):
            return p
        p += 1
    return None


ZERO_CHUNK = 1 << 20
_ZEROS = bytes(ZERO_CHUNK)
_RELEASE_EVERY = 64 << 20  # how much of a long sweep is resident before it is let go


def _first_nonzero(data: Buffer, pos: int, end: int) -> int:
    """Where the first non-zero byte at or after `pos` is (`end` if none).

    Chunks of up to a megabyte compared with zeros (memcmp speed; a regular
    expression went at 50 MB/s), memory one chunk whatever the run; a long
    run's pages are let go as it is passed (a 3 GB sparse segment of zeros
    was resident whole).
    """
    step = 64  # doubling: a short run (or none) costs a short look
    swept = pos
    while pos < end:
        chunk = data[pos : min(end, pos + step)]
        if chunk != _ZEROS[: len(chunk)]:
            return pos + len(chunk) - len(chunk.lstrip(b"\x00"))
        pos += len(chunk)
        step = min(step * 2, ZERO_CHUNK)
        if pos - swept >= _RELEASE_EVERY:
            _release(data, swept, pos)
            swept = pos
    return end


def _release(data: Buffer, start: int, end: int) -> None:
    """Let the kernel drop a mapped file's pages in [start, end) from this
    process (they are read again from the page cache if touched): reading
    a file as a stream then keeps a bounded part of it resident."""
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    lo = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    hi = min(end, len(data)) // mmap.PAGESIZE * mmap.PAGESIZE
    if hi > lo:
        with contextlib.suppress(OSError, ValueError):
            data.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _recover(
    data: Buffer,
    at: int,
    end: int,
    fmt: SegmentFormat,
    expect: int | None,
    path: str,
    detail: str,
    resync: _Resync | None = None,
) -> tuple[Finding, int]:
    """What is wrong at `at`, where the fast loop stopped, and where to read on."""
    hl = fmt.header.size
    left = end - at
    if data[at : min(end, at + hl)].count(0) == min(left, hl):
        return _zeros(data, at, end, fmt, expect, path, resync)
    if left < hl:
        return (
            Finding(
                path,
                at,
                "torn_entry",
                f"{left} bytes at the end of the file, an entry header needs {hl} "
                "(the last write was cut short)",
            ),
            end,
        )
    values = fmt.header.unpack_from(data, at)
    offset, size = _int64(values[0]), values[fmt.header_fields.index("size")]
    whole = size <= left - hl
    nxt = at + hl + size
    if whole and (nxt == end or _whole_entry(data, nxt, end, fmt, offset + 1)):
        return (
            Finding(
                path,
                at,
                "bad_entry",
                f"entry of offset {offset} ({size}-byte body) is malformed: {detail}",
            ),
            nxt,
        )
    resume = _next_entry(data, at + 1, end, fmt, expect, resync)
    # Torn: the header of the entry that was due, its body cut off by the end.
    if resume is None and not whole and expect is not None and offset == expect:
        return (
            Finding(
                path,
                at,
                "torn_entry",
                f"the last entry (offset {offset}) is cut short: its header declares "
                f"{size} body bytes, {left - hl} are there (a crash mid-write)",
            ),
            end,
        )
    stop = end if resume is None else resume
    what = "to the end of the file" if resume is None else f"up to the next entry at {resume}"
    return (
        Finding(path, at, "garbage", f"{stop - at} bytes that are no entry ({detail}), {what}"),
        stop,
    )


def _zeros(
    data: Buffer,
    at: int,
    end: int,
    fmt: SegmentFormat,
    expect: int | None,
    path: str,
    resync: _Resync | None = None,
) -> tuple[Finding, int]:
    resume = _next_entry(data, at + 1, end, fmt, expect, resync)
    stop = end if resume is None else resume
    what = "to the end of the file" if resume is None else f"up to the next entry at {resume}"
    return (
        Finding(
            path, at, "zeros", f"{stop - at} bytes of zeros where an entry should start, {what}"
        ),
        stop,
    )


def detect_format(data: Buffer) -> SegmentFormat:
    """The generation that wrote a segment, from its first entries.

    Each generation reads up to DETECT_ENTRIES entries from the start; the
    one that reads the most bytes whole, with matching CRCs and no bytes
    left inside bodies, wins; on a tie the newest. An empty file is taken
    to be of today's generation.

    Args:
        data: The segment's bytes (or map).

    Returns:
        The SegmentFormat.
    """
    best, best_score = CURRENT, (-1, 0)
    for fmt in by_recency():
        score = _detect_score(data, fmt)
        if score > best_score:
            best, best_score = fmt, score
    return best


def _detect_score(data: Buffer, fmt: SegmentFormat) -> tuple[int, int]:
    pos, end, good = 0, len(data), 0
    hl = fmt.header.size
    size_at = fmt.header_fields.index("size")
    for _ in range(DETECT_ENTRIES):
        if pos >= end or end - pos < hl:
            break
        size = fmt.header.unpack_from(data, pos)[size_at]
        body = pos + hl
        if size > end - body:
            break
        entry = CommitLogEntry(0, 0, 0, size=size)
        try:
            if fmt.current_body:
                stop = commitlog.parse_body(cast(bytes, data), body, body + size, entry, fmt.crc)
            else:
                stop = _legacy_body(data, body, body + size, entry, fmt)
        except EnvelopeError:
            break
        if not entry.crc_ok or stop != body + size:
            break
        good += 1
        pos = body + size
    return (pos, -fmt.recency) if good else (-1, -fmt.recency)
