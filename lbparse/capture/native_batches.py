"""A capture file's records as Arrow batches, read by the C capture loop.

`native_batches(path, schema, ...)` yields the rows `lbparse.pipeline`'s
sources make of a pcap or pcapng file (one per NATS message, one per
problem the reader noticed, in reading order) as record batches of
`schema` (the pipeline's record schema), built from the column buffers
`_native.Reader` fills in C: no Python object per message.

The C loop (`_native.c`) is a port of the Python reference (pcap.py,
pcapng.py, linktypes.py, tcp.py, nats.py, reader.py's packet loop), which
stays the truth: tests/capture/test_native_capture.py holds the two equal, row for
row, notices included. `available()` says whether the module was built
(setup.py builds it the optional way, as the mypyc modules); `NativeUnsupported`
is raised before any row for what the C loop leaves to the reference (a
file that is not pcap or pcapng, a file header it would reject), so that a
caller falls back and the reference reports it in its own words.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from typing import Any, ClassVar, NamedTuple

import numpy as np
import pyarrow as pa

from lbparse.capture import connects, nats, pcap, reader, tcp
from lbparse.capture.errors import CaptureError
from lbparse.capture.reader import _endpoint
from lbparse.capture.records import parse_headers
from lbparse.codec.limits import DEFAULT, Limits
from lbparse.errors import OperationalError
from lbparse.native_switch import native_enabled

_native: Any
try:
    from lbparse.capture import _native
except ImportError:  # not built: no C compiler, LBPARSE_PURE_PYTHON, a --py-files zip
    _native = None

__all__ = [
    "ConnectionPackets",
    "Cut",
    "NativeCapture",
    "NativeUnsupported",
    "available",
    "flow_keys",
    "rules",
]

# The C loop's columns, in the order next_batch returns them (after n and ts).
_COLUMNS = (
    "src",
    "dst",
    "direction",
    "verb",
    "subject",
    "reply",
    "sid",
    "header_block",
    "payload",
    "error_kind",
    "error_message",
)
_BINARY = frozenset({"header_block", "payload"})
# Arrow's binary and string offsets are 32-bit: the C loop ends a batch well
# before its columns reach 2 GiB when the limits stay below this.
_MAX_LIMIT = 1 << 28


class Cut(NamedTuple):
    """Where a range of a capture starts.

    A record's file offset, the rows before it (its first position) and the
    reader's state there.

    Attributes:
        offset: The file offset of the record the range starts at.
        rows: The rows before it in one reading (the range's first position).
        snapshot: The C reader's state at that record (opaque bytes).
    """

    offset: int
    rows: int
    snapshot: bytes


class NativeUnsupported(OperationalError):
    """The C loop does not read this file (the reference does, or says why not)."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"unsupported"})


def available() -> bool:
    """Whether the C capture loop can be used.

    Returns:
        True when `_native` was built and imported, and the environment does
        not turn it off (`LBPARSE_NATIVE=0`).
    """
    return _native is not None and native_enabled()


def _capture_error(kind: str, message: str, offset: int) -> CaptureError:
    return CaptureError(kind, message, offset=offset)


def rules() -> dict[str, int]:
    """The capture loop's limits, each the reference's own constant, read now.

    Read now (not at import): the C loop takes them when a reader is made and
    has no copy of its own, so that a limit changed in Python (a test that
    lowers reader.MAX_FLOWS) holds for both loops. A value outside what
    the C loop's arithmetic takes makes NativeCapture refuse (the
    reference then reads).

    Returns:
        A new dict from limit name (block, max_record, min_max_record,
        max_line, max_pending_segments, max_flows, max_connect_bytes) to its
        current value.
    """
    return {
        "block": pcap.BLOCK,
        "max_record": pcap.MAX_RECORD,
        "min_max_record": pcap.MIN_MAX_RECORD,
        "max_line": nats.MAX_LINE,
        "max_pending_segments": tcp.MAX_PENDING_SEGMENTS,
        "max_flows": reader.MAX_FLOWS,
        "max_connect_bytes": connects.MAX_CONNECT_BYTES,
    }


if _native is not None:
    _native.configure(_capture_error, _endpoint)


class NativeCapture:
    """One pcap or pcapng file read by the C loop; `stats` once read (or while).

    Args:
        path: The pcap or pcapng file.
        name: How rows and errors name the file (default: `path`).
        limits: The frame and reassembly limits (default: the codec's DEFAULT).
        block: Bytes read at a time, instead of pcap.BLOCK.
        resume: Start at this Cut (from `index`) instead of the file's start.
        stop: The file offset to stop reading at (a next cut's offset); -1
            reads to the end.

    Raises:
        NativeUnsupported: The C module is not built, the limits exceed what
            one Arrow batch holds, or the C loop rejects the file header or
            limits (the caller falls back to the reference reader).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        limits: Limits | None = None,
        block: int | None = None,
        resume: Cut | None = None,
        stop: int = -1,
    ) -> None:
        if _native is None:
            raise NativeUnsupported("unsupported", "the C capture module is not built")
        lim = limits or DEFAULT
        if lim.max_frame > _MAX_LIMIT or lim.max_reassembly > _MAX_LIMIT:
            raise NativeUnsupported("unsupported", "limits past what one Arrow batch holds")
        self.path = os.fspath(path)
        self.name = self.path if name is None else name
        given = rules()
        if block is not None:
            given["block"] = block
        try:
            self._reader = _native.Reader(
                self.path, self.name, lim.max_frame, lim.max_reassembly, given
            )
        except ValueError as exc:  # not a file header, or limits, the C loop takes
            raise NativeUnsupported("unsupported", str(exc)) from None
        self.first = 0
        if resume is not None or stop >= 0:
            offset, rows, snapshot = resume if resume is not None else (0, 0, b"")
            self._reader.restore(offset, snapshot, stop)
            self.first = rows

    def index(self, every: int) -> tuple[list[Cut], int]:
        """Read the whole file once, without building columns, and cut it.

        A Cut (offset, rows before it, snapshot of the reading's state) at
        the first record boundary past every `every` bytes; and the number
        of rows in all. Ranges between cuts are read by NativeCapture(path,
        resume=cut, stop=next cut's offset), in any order, anywhere, and
        give together exactly the rows of one reading (tests hold them so).

        Args:
            every: The distance in bytes between cuts.

        Returns:
            A tuple (cuts, rows): the list of Cuts in file order, and the number
            of rows of the whole file.
        """
        cuts, rows = self._reader.index(every)
        return [Cut(*c) for c in cuts], rows

    @property
    def stats(self) -> dict[str, Any]:
        """The reading's statistics so far, a new dict.

        packets, bytes_read, skipped_packets, gap_bytes, controls, notices, limits, format;
        connects: [(client endpoint, CONNECT text)] (lbparse.capture.connects).
        """
        return dict(self._reader.stats())

    def columns(self, max_rows: int, max_bytes: int) -> Iterator[tuple[int, dict[str, pa.Array]]]:
        """The rows read, as column arrays, one batch at a time.

        (rows, columns) per batch: ts_ns (int64, the capture time in
        integer nanoseconds) and ts (timestamp[us, UTC], rounded down), the
        record columns, header_block (binary), error_kind, error_message. A
        CaptureError that stops the reading is raised after the rows before it.

        Args:
            max_rows: The C loop ends a batch after the packet that brings it to
                this many rows (a batch may hold a few more).
            max_bytes: The C loop ends a batch after the packet that brings its
                column data to this many bytes.

        Yields:
            A tuple (n, columns): the batch's row count and a dict from column
            name to a pyarrow Array of n values.
        """
        while True:
            got = self._reader.next_batch(max_rows, max_bytes)
            if got is None:
                return
            n, (ts_valid, ts), *bufs = got
            ns = pa.Array.from_buffers(pa.int64(), n, [_buf(ts_valid), pa.py_buffer(ts)])
            micros = np.frombuffer(ts, np.int64, n) // 1000  # floor, as sources._times_ns
            cols: dict[str, pa.Array] = {
                "ts_ns": ns,
                "ts": pa.Array.from_buffers(
                    pa.timestamp("us", tz="UTC"), n, [_buf(ts_valid), pa.py_buffer(micros)]
                ),
            }
            for name, (valid, offsets, data) in zip(_COLUMNS, bufs):
                typ = pa.binary() if name in _BINARY else pa.string()
                cols[name] = pa.Array.from_buffers(
                    typ, n, [_buf(valid), pa.py_buffer(offsets), pa.py_buffer(data)]
                )
            yield n, cols

    def close(self) -> None:
        """Release the C reader and its file."""
        self._reader.close()

    def batches(
        self,
        schema: pa.Schema,
        *,
        source: str | None = None,
        first: int | None = None,
        max_rows: int = 65536,
        max_bytes: int = 64 << 20,
    ) -> Iterator[pa.RecordBatch]:
        """Record batches of `schema` (the pipeline's record schema).

        `source` (default: the name) and `position` from `first` on, `headers`
        parsed from the header blocks. At most `max_rows` rows a batch (the C loop
        ends a batch after the packet that fills it: it is cut here).

        Args:
            schema: The pipeline's record schema; columns are cast to its types.
            source: The value of the `source` column (default: the name).
            first: The `position` of the first row (default: the resume cut's
                rows, else 0).
            max_rows: The most rows in one yielded batch.
            max_bytes: The C loop ends a batch after its column data reach this
                many bytes.

        Yields:
            pyarrow RecordBatches of `schema`, in reading order.
        """
        source = self.name if source is None else source
        position = self.first if first is None else first
        for n, cols in self.columns(max_rows, max_bytes):
            cols["headers"] = _headers(cols.pop("header_block"), schema.field("headers").type)
            arrays = []
            for f in schema:
                if f.name == "source":
                    arrays.append(pa.repeat(pa.scalar(source, pa.string()), n))
                elif f.name == "position":
                    arrays.append(pa.array(np.arange(position, position + n, dtype=np.int64)))
                else:
                    arr = cols[f.name]
                    arrays.append(arr if arr.type == f.type else arr.cast(f.type))
            position += n
            batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
            for start in range(0, n, max_rows) if n > max_rows else (0,):
                yield batch.slice(start, max_rows) if n > max_rows else batch


def flow_keys(connections: frozenset[tuple[str, str]]) -> frozenset[bytes] | None:
    """The flow keys (reader.dissect's, both directions) of some TCP connections.

    Args:
        connections: Each as its (lower, higher) `ip:port` endpoints, as
            records name them.

    Returns:
        The keys; None when an endpoint is not one the reader makes.
    """
    keys: set[bytes] = set()
    for pair in connections:
        ends = []
        for text in pair:
            host, _, port = text.rpartition(":")
            try:
                addr = ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).packed
                ends.append((addr, int(port).to_bytes(2, "big")))
            except ValueError:
                return None
            if _endpoint(addr, int(port)) != text:
                return None  # not how the reader names that address: not its key
        (a, pa_), (b, pb) = ends
        if len(a) != len(b):
            return None
        keys.add(a + b + pa_ + pb)
        keys.add(b + a + pb + pa_)
    return frozenset(keys)


class ConnectionPackets:
    """The packets of some TCP connections of a capture, found by the C loop.

    What the Python reader's packet loop takes (CaptureReader's `source`):
    Packets (ts, link type, buffer, offset, captured length, wire length)
    in file order, and `bytes_read`. The C loop reads the file and dissects
    every packet, and gives only those of the connections and the file's
    last (whose time ends the reading): the others the Python loop would
    skip by their flow key anyway (CaptureReader's `connections`). The gRPC
    reading of a capture reads a few connections of it (Held.connections):
    its Python loop then runs over theirs alone (tests/capture/
    test_native_capture.py holds the gRPC tables equal either way).

    Args:
        path: The pcap or pcapng file.
        connections: Each as its (lower, higher) endpoints.
        name: How errors name the file (default: `path`).
        limits: As NativeCapture's.

    Raises:
        NativeUnsupported: What NativeCapture raises it for, or an endpoint
            the reader does not make (the caller reads the file itself).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        connections: frozenset[tuple[str, str]],
        *,
        name: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        keys = flow_keys(connections)
        if keys is None:
            raise NativeUnsupported("unsupported", "an endpoint the reader does not make")
        self._keys = set(keys)
        self._capture = NativeCapture(path, name=name, limits=limits)
        self.bytes_read = 0

    def __iter__(self) -> Iterator[tuple[int, int, bytes, int, int, int]]:
        reader = self._capture._reader
        try:
            while True:
                got = reader.packets(self._keys, 4096)
                self.bytes_read = reader.stats()["bytes_read"]
                if got is None:
                    return
                for ts, lt, data, caplen, wirelen in got:
                    yield ts, lt, data, 0, caplen, wirelen
        finally:
            self._capture.close()


def _buf(b: Any) -> pa.Buffer | None:
    return None if b is None else pa.py_buffer(b)


def _headers(blocks: pa.Array, typ: pa.DataType) -> pa.Array:
    """The header blocks as lists of key/value structs (None without a block)."""
    n = len(blocks)
    if blocks.null_count == n:
        return pa.nulls(n, typ)
    # Only the rows with a block are parsed (few: HPUB and HMSG), then put in
    # their places; a Python value for every row cost ~2 ms a batch of 7,500.
    valid = np.asarray(blocks.is_valid())
    parsed = pa.array(
        [
            [{"key": k, "value": v} for k, v in parse_headers(b)]
            for b in blocks.filter(pa.array(valid)).to_pylist()
        ],
        typ,
    )
    if len(parsed) == n:
        return parsed
    places = np.cumsum(valid) - 1
    return parsed.take(pa.array(places, pa.int64(), mask=~valid))
