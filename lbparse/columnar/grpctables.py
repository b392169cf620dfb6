"""The client's gRPC calls of a capture as tables: `grpc_calls` and `grpc_messages`.

The C capture loop reads NATS only: an HTTP/2 connection is, to it, bytes
that are not NATS (`input:protocol` or `input:incomplete` rows). A file
whose rows show HTTP/2's bytes (HTTP2_BYTES) is read once more by the Python reader with `on_grpc`
(lbparse.capture.h2, grpc; `decode=False`: its NATS records are not
wanted again), whose GrpcCall and GrpcMessage records become rows here. A
file without such a row (a NATS-only capture) costs nothing more.

Keys: `(source, position)`, `position` the call's number in its file, in
the order calls were first seen (a message, or the call's record when it
had none); a message carries its call's. The columns are the schemas'
(lbparse.columnar.schema, GRPC_CALL_FIELDS and GRPC_MESSAGE_FIELDS).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lbparse.capture import native_batches
from lbparse.capture.errors import CaptureError
from lbparse.capture.grpc import CLIENT_TO_SERVER, GrpcCall, GrpcMessage
from lbparse.capture.native_batches import ConnectionPackets, NativeUnsupported
from lbparse.capture.notices import Notice
from lbparse.capture.reader import CaptureReader
from lbparse.capture.records import NO_TIME
from lbparse.codec.jsonform import dumps_plain
from lbparse.codec.limits import Limits
from lbparse.columnar.tables import GRPC_CALLS, GRPC_MESSAGES, JOIN_KEYS, table_schema

__all__ = [
    "HTTP2_HINTS",
    "GrpcRows",
    "Held",
    "grpc_tables",
    "http2_rows",
    "notice_rows",
    "on_connections",
    "read_grpc",
]

# The problem rows an HTTP/2 connection gives a NATS-only reading: bytes that
# are not a NATS control line (or one cut short) which start as HTTP/2 does,
# with the client's preface or a frame header (its 24-bit length's first byte
# 0: any frame within the default SETTINGS_MAX_FRAME_SIZE, 16 KiB). A NATS
# control line starts with a letter (PUB, MSG, ...), +OK or -ERR; a capture
# that cuts a NATS message short, or starts inside one, is not read again.
HTTP2_HINTS = ("input:protocol", "input:incomplete")
HTTP2_BYTES = (
    r"(not a NATS control line|control line cut after \d+ bytes|\d+ bytes without "
    r"a line end where a control line was expected): b['\"](PRI \* HTTP/2\.0|\\x00)"
)

_CallKey = tuple[str, str, int]  # client, server, HTTP/2 stream id
# Reset calls of a file whose row a late message can still find (each
# connection keeps its last lbparse.capture.h2.MAX_RESETS; a message later
# than these many resets has a position of its own, as before it).
RESETS_KEPT = 4096


def http2_rows(messages: pa.Table) -> pa.Array | None:
    """The rows of `messages` that may be an HTTP/2 connection's bytes taken for NATS.

    Problem rows of the kinds HTTP2_HINTS whose message matches HTTP2_BYTES.

    Args:
        messages: A `messages` table.

    Returns:
        A boolean mask over its rows; None when there are none.
    """
    hint = pc.is_in(messages.column("error_kind"), pa.array(HTTP2_HINTS))
    if not pc.any(hint).as_py():
        return None
    bytes_ = pc.match_substring_regex(messages.column("error_message"), HTTP2_BYTES)
    mask = pc.and_(hint, bytes_.fill_null(False)).fill_null(False)
    return mask if pc.any(mask).as_py() else None


MAX_HELD = 100_000  # rows held at once; past it, rows that may be HTTP/2 stay where they are


class Held:
    """`messages` rows that may be HTTP/2's bytes taken for NATS, held back.

    Held (http2_rows) until the gRPC reading names the connections that were
    HTTP/2: theirs are no problem (the Python reader, reading HTTP/2 as it
    goes, has none), the others are given back.
    """

    def __init__(self) -> None:
        self.rows: list[pa.Table] = []
        self.count = 0
        # Rows were taken past MAX_HELD, unlooked at: the held rows may not
        # name every connection that was HTTP/2.
        self.overflowed = False

    def take(self, messages: pa.Table) -> pa.Table:
        """`messages` without the rows it holds from now on.

        Args:
            messages: A `messages` table of the reading.

        Returns:
            The table less the rows held (all of it once MAX_HELD rows are held).
        """
        if self.count >= MAX_HELD:
            self.overflowed = self.overflowed or bool(messages.num_rows)
            return messages
        mask = http2_rows(messages)
        if mask is None:
            return messages
        held = messages.filter(mask)
        self.rows.append(held)
        self.count += held.num_rows
        return messages.filter(pc.invert(mask))

    def sources(self) -> set[str]:
        """The files the held rows come from.

        Returns:
            Their `source` values.
        """
        return {s for t in self.rows for s in t.column("source").to_pylist()}

    def connections(self, source: str) -> frozenset[tuple[str, str]] | None:
        """The connections of `source` that the held rows are from.

        Those the gRPC reading of `source` needs to read: a direction that is
        HTTP/2 starts with the preface or a frame header (lbparse.capture.h2's
        sniff), which the C loop, reading NATS, takes for a row held here.

        Args:
            source: A file the rows come from.

        Returns:
            (lower, higher) endpoints of each connection, or None when the held
            rows may not name them all (rows past MAX_HELD were not looked at,
            a held row has no endpoints, or none is of `source`, as a file
            named otherwise): read every connection then.
        """
        if self.overflowed:
            return None
        found: set[tuple[str, str]] = set()
        for table in self.rows:
            for s, a, b in zip(
                table.column("source").to_pylist(),
                table.column("src").to_pylist(),
                table.column("dst").to_pylist(),
            ):
                if s != source:
                    continue
                if not a or not b:
                    return None
                found.add((min(a, b), max(a, b)))
        return frozenset(found) if found else None

    def release(self, connections: set[tuple[str, str]]) -> tuple[pa.Table, pa.Table]:
        """Give back the held rows, split by whether they were on HTTP/2 connections.

        Nothing is held afterwards.

        Args:
            connections: The HTTP/2 connections, (lower, higher) endpoints.

        Returns:
            (the held rows not on `connections`: problems after all, those on
            them).
        """
        if not self.rows:
            empty = table_schema("messages").empty_table()
            return empty, empty
        rows = pa.concat_tables(self.rows)
        self.rows, self.count = [], 0
        theirs = on_connections(rows, connections)
        return rows.filter(pc.invert(theirs)), rows.filter(theirs)


def on_connections(rows: pa.Table, connections: set[tuple[str, str]]) -> pa.Array:
    """A mask of `rows` whose (src, dst) is one of `connections` ((lower, higher)).

    Args:
        rows: A table with `src` and `dst` columns.
        connections: Connections as (lower, higher) endpoints.

    Returns:
        A boolean array, a value per row.
    """
    pairs = zip(rows.column("src").to_pylist(), rows.column("dst").to_pylist())
    return pa.array(
        [
            s is not None and d is not None and (min(s, d), max(s, d)) in connections
            for s, d in pairs
        ],
        pa.bool_(),
    )


def _times(row: dict[str, Any], name: str, ns: int | None) -> None:
    """A capture time as its two columns: microseconds (rounded down) and
    whole; null where the capture has none (NO_TIME: a pcapng clock past
    what 64 bits of nanoseconds hold)."""
    if ns == NO_TIME:
        ns = None
    row[name] = None if ns is None else ns // 1000
    row[f"{name}_ns"] = ns


class GrpcRows:
    """gRPC records of one file (on_grpc's items) as rows, flushed as tables.

    Args:
        source: The file's name, each row's `source`.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.calls: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self._open: dict[_CallKey, tuple[int, int]] = {}  # -> (position, messages so far)
        # Calls out after an RST_STREAM, for the late messages that may follow
        # (GrpcMessage.late): the last RESETS_KEPT of the file.
        self._reset: dict[_CallKey, tuple[int, int]] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self.calls) + len(self.messages)

    def _position(self, key: _CallKey, message: bool) -> tuple[int, int]:
        """The call's position and (for a message) its message_seq."""
        found = self._open.get(key)
        if found is None:
            found = (self._next, 0)
            self._next += 1
        if message:
            self._open[key] = (found[0], found[1] + 1)
        return found

    def add(self, item: Any) -> None:
        """Take one gRPC record: a call or a message.

        Args:
            item: A GrpcCall or GrpcMessage (anything else is ignored).
        """
        if isinstance(item, GrpcMessage):
            self._message(item)
        elif isinstance(item, GrpcCall):
            self._call(item)

    def _message(self, m: GrpcMessage) -> None:
        client, server = (m.src, m.dst) if m.direction == CLIENT_TO_SERVER else (m.dst, m.src)
        key = (client, server, m.stream_id)
        if m.late and key not in self._open and key in self._reset:
            position, seq = self._reset[key]  # its call's row, already written
            self._reset[key] = (position, seq + 1)
        else:
            position, seq = self._position(key, True)
        row: dict[str, Any] = {
            "source": self.source,
            "position": position,
            "message_seq": seq,
            "src": m.src,
            "dst": m.dst,
            "direction": m.direction,
            "stream_id": m.stream_id,
            "method": m.method,
            "type": m.type,
            "index": m.index,
            "compressed": m.compressed,
            "length": m.length,
            "error": m.error,
            # MessageToDict's (grpc.decode_counted): no Int64 to walk for
            "message_json": None if m.message is None else dumps_plain(m.message),
        }
        _times(row, "ts", m.ts)
        self.messages.append(row)

    def _call(self, c: GrpcCall) -> None:
        key = (c.client, c.server, c.stream_id)
        position, seq = self._position(key, False)
        self._open.pop(key, None)  # its stream id may come again on a new connection
        if c.end == "rst_stream":
            if len(self._reset) >= RESETS_KEPT:
                del self._reset[next(iter(self._reset))]
            self._reset[key] = (position, seq)
        d = c.to_json_dict()
        row: dict[str, Any] = {
            k: d.get(k)
            for k in (
                "client",
                "server",
                "stream_id",
                "method",
                "path",
                "request_count",
                "response_count",
                "http_status",
                "grpc_status",
                "grpc_message",
                "end",
                "rst_stream_error",
            )
        }
        row.update(source=self.source, position=position)
        for name, ns in (
            ("request_ts", c.request_ts),
            ("first_response_ts", c.first_response_ts),
            ("trailers_ts", c.trailers_ts),
            ("end_ts", c.end_ts),
        ):
            _times(row, name, ns)
        self.calls.append(row)

    def flush(self) -> dict[str, pa.Table]:
        """The rows taken since the last flush, as tables; none are kept.

        Returns:
            {"grpc_calls": ..., "grpc_messages": ...} as pyarrow Tables.
        """
        out = {
            GRPC_CALLS: _table(GRPC_CALLS, self.calls),
            GRPC_MESSAGES: _table(GRPC_MESSAGES, self.messages),
        }
        self.calls, self.messages = [], []
        return out


def _table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = table_schema(name, JOIN_KEYS)
    return pa.Table.from_pylist(rows, schema=schema)


def _reading(
    path: str,
    on_grpc: Callable[[Any], None] | None,
    limits: Limits | None,
    on_notice: Callable[[Notice], None] | None = None,
    found: set[tuple[str, str]] | None = None,
    connections: frozenset[tuple[str, str]] | None = None,
) -> Iterator[None]:
    """The Python reader's pass over `path` for its gRPC records, one step per
    NATS record (which it does not decode: the first reading did).
    `on_notice` gets the notices said of HTTP/2 connections only (the first
    reading said the rest); `found` gets those connections. `connections`:
    only these are read (Held.connections), None: all. `on_grpc` None: no
    record is wanted, so no message is made into its JSON."""
    reader = CaptureReader(
        path,
        decode=False,
        limits=limits,
        on_grpc=_ignore if on_grpc is None else on_grpc,
        grpc_json=on_grpc is not None,
        connections=connections,
        source=_packets_of(path, connections, limits),
    )
    http2 = reader.http2_connections

    def notice(n: Notice) -> None:
        if (
            on_notice is not None
            and n.src
            and n.dst
            and not _tcp_said(n)
            and (min(n.src, n.dst), max(n.src, n.dst)) in http2
        ):
            on_notice(n)

    reader.on_notice = notice
    try:
        for _ in reader:
            yield None
    except (CaptureError, OSError):
        pass  # the NATS reading of the same file has said what is wrong (a problem row)
    if found is not None:
        found |= http2


def _packets_of(
    path: str, connections: frozenset[tuple[str, str]] | None, limits: Limits | None
) -> ConnectionPackets | None:
    """The packets of `connections` found by the C loop, for the Python
    reader's loop to run over theirs alone; None (the reader reads the file
    itself) for all connections, or a file or limits the C loop does not take
    (and what is not a regular file, which the reader refuses unopened)."""
    if connections is None or not native_batches.available() or not os.path.isfile(path):
        return None
    try:
        return ConnectionPackets(path, connections, limits=limits)
    except (NativeUnsupported, OSError):
        return None


def _tcp_said(n: Notice) -> bool:
    """A notice of TCP reassembly (lbparse.capture.tcp: a gap, a retransmission
    that differs, segments past max_reassembly behind a hole, the one that
    counts its bytes): the first reading, the C loop, said it of the HTTP/2
    connection as of any other; said again here it would count twice."""
    return n.kind in ("gap", "retransmission") or (
        n.kind == "limit" and n.limit == "max_reassembly" and n.nbytes is not None
    )


def _ignore(_record: Any) -> None:
    pass


def read_grpc(
    path: str,
    on_grpc: Callable[[Any], None] | None,
    *,
    limits: Limits | None = None,
    on_notice: Callable[[Notice], None] | None = None,
    connections: frozenset[tuple[str, str]] | None = None,
) -> set[tuple[str, str]]:
    """Pass each gRPC record of capture `path` to `on_grpc` (lbparse report).

    Args:
        path: A capture file.
        on_grpc: Called with each GrpcCall and GrpcMessage as it is read;
            None: the connections and notices alone are wanted (no message
            is made into its JSON, about a third of the reading's time).
        limits: What the reading may cost (None for the defaults).
        on_notice: Called with each notice said of its HTTP/2 connections.
        connections: Read only these connections, (lower, higher) endpoints
            (Held.connections: the others are NATS); None: all.

    Returns:
        The connections found to be HTTP/2, as (lower, higher) endpoints.
    """
    found: set[tuple[str, str]] = set()
    for _ in _reading(path, on_grpc, limits, on_notice, found, connections):
        pass
    return found


def grpc_tables(
    path: str,
    *,
    limits: Limits | None = None,
    batch_rows: int = 65536,
    found: set[tuple[str, str]] | None = None,
    on_notice: Callable[[Notice], None] | None = None,
    connections: frozenset[tuple[str, str]] | None = None,
) -> Iterator[dict[str, pa.Table]]:
    """The gRPC tables of capture `path`, about `batch_rows` rows at a time.

    The reader's gRPC records as they come; their rows' `source` is `path`.

    Args:
        path: A capture file.
        limits: What the reading may cost (None for the defaults).
        batch_rows: Flush once this many rows (calls and messages) are held.
        found: Gets the connections that were HTTP/2 (for Held.release).
        on_notice: Called with each notice said of them (problems and
            information alike: `notice_rows` makes the problems rows).
        connections: Read only these connections, (lower, higher) endpoints
            (Held.connections: the others are NATS); None: all.

    Yields:
        {"grpc_calls": ..., "grpc_messages": ...} as pyarrow Tables.
    """
    rows = GrpcRows(path)
    for _ in _reading(path, rows.add, limits, on_notice, found, connections):
        if len(rows) >= batch_rows:
            yield rows.flush()
    if len(rows):
        yield rows.flush()


def notice_rows(
    source: str, first: int, notices: list[Notice], schema: pa.Schema | None = None
) -> pa.Table:
    """The problems among `notices` (not Notice.info) as `messages` rows.

    As the NATS reading gives its own (error_kind `input:KIND`, the notice
    as error_message): what the gRPC reading of `source` lost is a problem
    of the tables as it is of the records.

    Args:
        source: The file the notices are about.
        first: The `position` of the first row.
        notices: The reading's notices.
        schema: The rows' schema: None for `messages`'; the wide row's
            (lbparse.read_capture_arrow), whose other columns are null.

    Returns:
        A table, a row per problem, numbered from `first`.
    """
    problems = [n for n in notices if not n.info]
    if schema is None:
        schema = table_schema("messages", JOIN_KEYS)
    ns = pa.array([n.ts for n in problems], pa.int64())
    given: dict[str, pa.Array] = {
        "source": pa.array([source] * len(problems), pa.string()),
        "position": pa.array(range(first, first + len(problems)), pa.int64()),
        "ts": pa.array([None if n.ts is None else n.ts // 1000 for n in problems], pa.int64()).cast(
            schema.field("ts").type
        ),
        "ts_ns": ns,
        "src": pa.array([n.src for n in problems], pa.string()),
        "dst": pa.array([n.dst for n in problems], pa.string()),
        "error_kind": pa.array([f"input:{n.kind}" for n in problems], pa.string()),
        "error_message": pa.array([f"{source}: {n}" for n in problems], pa.string()),
    }
    return pa.Table.from_arrays(
        [given[f.name] if f.name in given else pa.nulls(len(problems), f.type) for f in schema],
        schema=schema,
    )
