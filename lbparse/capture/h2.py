"""Cleartext HTTP/2 (h2c, prior knowledge) in captures, for gRPC.

A direction of a TCP connection is HTTP/2 when its first bytes are the
client's connection preface (`PRI * HTTP/2.0...`), when its peer's are, or
when they are whole, plausible frames (a server's first SETTINGS, or a
capture that starts inside a connection), on any port: `Side.sniff`,
which the NATS parser asks before it reads a direction's first bytes
(lbparse.capture.nats, `sniff`). From then on the direction's bytes come
here: frames are cut by their 9-byte headers, header blocks (HEADERS,
CONTINUATION, PUSH_PROMISE) decoded with HPACK (python-hyper's `hpack`, a
dynamic table per direction), and each stream's DATA handed to gRPC's
message framing (lbparse.capture.grpc). What comes out (`GrpcMessage`,
`GrpcCall`, `Notice`) is appended to one list the reader empties after
each packet; the reader sets `Clock.ts` to each packet's time first.

A capture that starts inside a connection, or loses bytes, leaves the
HPACK tables unknown: header blocks are then decoded as far as the entries
seen since allow (`Table`), never by a guess; what could not be decoded
is a notice, and the call's messages are still cut, undecoded.

Bounded whatever the bytes: a frame longer than the receiver's
SETTINGS_MAX_FRAME_SIZE is refused without buffering it (the direction then
waits for a segment that starts with frames again); a header block is cut
at MAX_HEADER_BLOCK bytes (CONTINUATION floods), a decoded header list at
MAX_HEADER_LIST (HPACK bombs), the dynamic table at MAX_TABLE, a gRPC
message at `max_frame`, open calls per connection at MAX_STREAMS and in
all at `max_open_calls`, and the reset calls kept for their late frames at
MAX_RESETS. What messages decode to is bounded by lbparse.capture.grpc's
`Budget` (max_grpc_elements, max_grpc_inflate), what call records keep of
their headers by `max_grpc_headers`, and what open calls keep of their
messages by MAX_KEPT_BYTES, counted as decoded (fields and bytes, not the
compressed bytes that came).

A stream reset by one side may still carry frames the other sent before
the RST_STREAM reached it (RFC 9113, section 5.4.2; a real cluster's
client cancels a lookup as the node's answer is on its way): they are the
reset call's, its messages read as such, and no call of their own.
"""

from __future__ import annotations

import bisect
import re
from typing import Any
from urllib.parse import unquote

import hpack
from hpack.table import HeaderTable

from lbparse.capture.grpc import (
    CLIENT_TO_SERVER,
    METHODS,
    SERVER_TO_CLIENT,
    Budget,
    GrpcCall,
    GrpcMessage,
    Splitter,
    decode_counted,
)
from lbparse.capture.nats import UNDECIDED
from lbparse.capture.notices import Notice
from lbparse.codec.limits import DEFAULT, Limits
from lbparse.digits import ascii_int

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS = 0, 1, 2, 3, 4
PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 5, 6, 7, 8, 9
END_STREAM, END_HEADERS, PADDED, PRIO = 0x1, 0x4, 0x8, 0x20
DEFAULT_MAX_FRAME = 16384
MAX_HEADER_BLOCK = 256 << 10
MAX_HEADER_LIST = 256 << 10
DEFAULT_TABLE = 4096  # SETTINGS_HEADER_TABLE_SIZE until the receiver says otherwise
MAX_TABLE = 64 << 10
UNDECIDED_BYTES = 64 << 10  # a direction's first bytes held while sniff cannot tell, at most
GRPC_STATUS_MAX = 2**31 - 1  # grpc_calls.grpc_status is an int32 (gRPC's codes are 0-16)
MAX_STREAMS = 4096
MAX_RESETS = 64  # reset calls a connection keeps for their late frames, the last ones
# GOAWAYs said a connection; later ones are said only when they end calls (a
# storm of them would be a notice each, and nothing to say)
MAX_GOAWAYS_SAID = 16
# All open calls of a reading together: the bytes of messages their records
# keep, as decoded (each counted 64 bytes more, and as much again for each
# protobuf field, what a field costs as a dict entry or list item), and the
# bytes of half-received messages they hold (past it, the call that would
# go over gives up its message: a `limit` notice, max_reassembly).
MAX_KEPT_BYTES = 64 << 20
MESSAGE_COST = 64
# A header value a call record keeps costs nothing against max_grpc_headers
# up to this long: a record costs as much anyway.
FREE_HEADER = 256
_PATHS = {path: path for path in METHODS}
# Exact lengths and stream rules of the frame types that have them: what a
# sniff checks, so that NATS text or envelope bytes are not taken for frames.
_LENGTHS = {PRIORITY: 5, RST_STREAM: 4, PING: 8, WINDOW_UPDATE: 4}
_CONNECTION_ONLY = (SETTINGS, PING, GOAWAY)
_STREAM_ONLY = (DATA, HEADERS, PRIORITY, RST_STREAM, PUSH_PROMISE, CONTINUATION)
ERROR_CODES = (
    "NO_ERROR",
    "PROTOCOL_ERROR",
    "INTERNAL_ERROR",
    "FLOW_CONTROL_ERROR",
    "SETTINGS_TIMEOUT",
    "STREAM_CLOSED",
    "FRAME_SIZE_ERROR",
    "REFUSED_STREAM",
    "CANCEL",
    "COMPRESSION_ERROR",
    "CONNECT_ERROR",
    "ENHANCE_YOUR_CALM",
    "INADEQUATE_SECURITY",
    "HTTP_1_1_REQUIRED",
)


def error_name(code: int) -> str:
    """The name of an HTTP/2 error code.

    Args:
        code: The error code of an RST_STREAM or GOAWAY frame.

    Returns:
        Its name (`CANCEL`, ...), or `error <code>` for a code RFC 9113 does
        not name.
    """
    return ERROR_CODES[code] if code < len(ERROR_CODES) else f"error {code}"


# hpack's messages may hold an object's repr (`<memory at 0x7f...>`): an address
# differs run to run and tells the reader nothing.
_REPR = re.compile(r":? ?<[^<>]* at 0x[0-9a-fA-F]+>")


def _said(exc: Exception) -> str:
    return _REPR.sub("", str(exc))


def _header_ok(length: int, ftype: int, sid: int) -> bool:
    if length > DEFAULT_MAX_FRAME or ftype > CONTINUATION or sid >> 31:
        return False
    if ftype in _CONNECTION_ONLY and sid:
        return False
    if ftype in _STREAM_ONLY and not sid:
        return False
    if ftype == SETTINGS and length % 6:
        return False
    return _LENGTHS.get(ftype, length) == length


def _frame_headers(data: bytes, whole: bool = False) -> int:
    """How many plausible frame headers `data` starts with, one after the
    other up to its end; -1 if one of them is not (or, `whole`, if the
    last frame does not end where `data` does)."""
    pos, seen = 0, 0
    while len(data) - pos >= 9:
        length = int.from_bytes(data[pos : pos + 3], "big")
        if not _header_ok(length, data[pos + 3], int.from_bytes(data[pos + 5 : pos + 9], "big")):
            return -1
        seen += 1
        pos += 9 + length
    return -1 if whole and pos != len(data) else seen


def looks_like_frames(data: bytes, whole: bool = False) -> bool:
    """Whether `data` starts with HTTP/2 frames.

    At least one header, each plausible, up to where `data` ends: inside the
    last frame, or, `whole`, at its end.

    Args:
        data: The first bytes of a direction (or of a segment).
        whole: Require the last frame to end where `data` does.

    Returns:
        True if `data` holds at least one frame header and every header in it
        is plausible.
    """
    return _frame_headers(data, whole) > 0


class Clock:
    """The time of the packet being read (the reader sets it)."""

    __slots__ = ("ts",)

    def __init__(self) -> None:
        self.ts = 0


class Flows:
    """What a reader needs for HTTP/2.

    The sniffers of each new flow (`pair`), the output list, the clock, and
    the connections with calls still open (closed at the capture's end:
    `close`).

    Args:
        max_length: max_frame, the most bytes one gRPC message may take.
        max_buffered: max_reassembly, the most bytes of half-received gRPC
            messages held for all calls.
        limits: The gRPC limits (lbparse.codec.limits.GRPC_LIMITS; default:
            the codec's DEFAULT).
        as_json: False: each decoded message is `{}` in the records, not its
            JSON (grpc.decode_counted): for a reading that keeps no message.
    """

    def __init__(
        self,
        max_length: int,
        max_buffered: int = 16 << 20,
        limits: Limits | None = None,
        as_json: bool = True,
    ) -> None:
        """Make the reader's HTTP/2 state; see the class for the arguments.

        Args:
            max_length: max_frame.
            max_buffered: max_reassembly.
            limits: The gRPC ones (lbparse.codec.limits.GRPC_LIMITS).
            as_json: Whether decoded messages are made into their JSON.
        """
        limits = limits or DEFAULT
        self.as_json = as_json
        self.out: list[Any] = []
        self.clock = Clock()
        self.max_length = max_length
        self.budget = Budget(max_length, limits)
        self.inflate_told = False
        self.headers_left = self.max_headers = limits.max_grpc_headers
        self.max_open_calls = limits.max_open_calls
        # Every open call of the reading, oldest first: the one given up
        # past max_open_calls.
        self.calls: dict[GrpcCall, Connection] = {}
        self.kept_bytes = 0  # see MAX_KEPT_BYTES
        self.buffered = 0  # half-received gRPC messages, all calls
        self.max_buffered = max_buffered
        self.open: dict[int, Connection] = {}
        # Set by the reader when the capture has ended: a direction that ends
        # then ends with the capture, not with its connection.
        self.ending = False
        # Each connection found to be HTTP/2, as (lower, higher) endpoint: what a
        # NATS-only reading of the same capture took for bytes that are not NATS.
        self.connections: set[tuple[str, str]] = set()

    def pair(self, src: str, dst: str) -> tuple[Side, Side]:
        """The two Sides of a new TCP connection, each the other's peer.

        Args:
            src: The endpoint (host:port) of the first direction's sender.
            dst: The endpoint of its receiver.

        Returns:
            (the src -> dst Side, the dst -> src Side), sharing a new Connection.
        """
        conn = Connection(self)
        a, b = Side(conn, src, dst), Side(conn, dst, src)
        a.peer, b.peer = b, a
        return a, b

    def close(self) -> None:
        """End every connection still open at the capture's end (its calls are out)."""
        for conn in list(self.open.values()):
            conn.close()


class Connection:
    """The calls of one HTTP/2 connection, by stream id.

    Args:
        flows: The reader's Flows (output, clock, limits and budgets).
    """

    def __init__(self, flows: Flows) -> None:
        self.flows = flows
        self.calls: dict[int, GrpcCall] = {}
        # The open calls' stream ids, sorted: a GOAWAY finds the calls past its
        # last stream in O(log n + those), however many are open and in
        # whatever order a (hostile) client opened them.
        self.sids: list[int] = []
        self.client: Side | None = None
        self.resets: dict[int, _Reset] = {}  # by stream id, the last MAX_RESETS
        self.headers_told = False  # max_grpc_headers said on this connection
        self.goaways = 0  # GOAWAY frames seen (the first MAX_GOAWAYS_SAID are said)

    def notice(
        self,
        side: Side,
        message: str,
        kind: str = "grpc",
        limit: str | None = None,
        info: bool = False,
    ) -> None:
        """Put a Notice about this connection on the output.

        Args:
            side: The direction it concerns (its src and dst are the notice's).
            message: What happened, for people.
            kind: The notice's kind (lbparse.capture.notices).
            limit: The limit's name, for kind "limit".
            info: Normal behaviour that lost nothing (lbparse.capture.notices).
        """
        self.flows.out.append(
            Notice(kind, message, self.flows.clock.ts, side.src, side.dst, limit=limit, info=info)
        )

    def _client_of(self, side: Side, request: bool) -> Side:
        if self.client is None:
            # A request's headers, or the preface, tell; without them the
            # side on the higher port (the ephemeral one) is taken for the client.
            if request or _port(side.src) >= _port(side.dst):
                self.client = side
            else:
                self.client = side.peer
        return self.client

    def _call(self, side: Side, sid: int, request: bool) -> GrpcCall:
        call = self.calls.get(sid)
        if call is None:
            client = self._client_of(side, request)
            call = GrpcCall(client.src, client.dst, sid)
            call.splitters = _both_sides(self.flows.max_length)  # type: ignore[attr-defined]
            if len(self.calls) >= MAX_STREAMS:
                oldest = self.calls[next(iter(self.calls))]
                self.notice(
                    side,
                    f"more than {MAX_STREAMS} calls open on one connection "
                    f"(max_streams): stream {oldest.stream_id} given up",
                    "limit",
                    "max_streams",
                )
                self._end(side, oldest, "dropped")
            flows = self.flows
            if len(flows.calls) >= flows.max_open_calls:
                first, conn = next(iter(flows.calls.items()))
                on = conn.client or side  # known: it has a call
                conn.notice(
                    on,
                    f"more than {flows.max_open_calls} calls open in the capture "
                    f"(max_open_calls): stream {first.stream_id} given up",
                    "limit",
                    "max_open_calls",
                )
                conn._end(on, first, "dropped")
            self.calls[sid] = call
            bisect.insort(self.sids, sid)
            flows.calls[call] = self
            flows.open[id(self)] = self
        return call

    def _kept(self, side: Side, value: str | None, what: str) -> str | None:
        """A header value as a call record may keep it: past FREE_HEADER
        bytes, within max_grpc_headers (spent), else not at all."""
        if value is None or len(value) <= FREE_HEADER:
            return value
        flows = self.flows
        if len(value) <= flows.headers_left:
            flows.headers_left -= len(value)
            return value
        if not self.headers_told:
            self.headers_told = True
            self.notice(
                side,
                f"{what} of {len(value)} bytes not kept: the header values of "
                f"this capture's calls past {flows.max_headers} bytes in all "
                "(max_grpc_headers); said once a connection",
                "limit",
                "max_grpc_headers",
            )
        return None

    def headers(
        self, side: Side, sid: int, headers: list[tuple[str, str]] | None, end_stream: bool
    ) -> None:
        """Take a decoded header block (HEADERS and its CONTINUATIONs) of a stream.

        Request headers set the call's method and times; response headers and
        trailers its statuses; a block ending the stream ends that side (the
        server's: the call).

        Args:
            side: The direction the block came on.
            sid: The stream id.
            headers: The (name, value) pairs, or None when the block could not be
                decoded (HPACK state unknown).
            end_stream: Whether the frame had END_STREAM set.
        """
        if sid not in self.calls and self._late(side, sid) is not None:
            return  # a reset call's late headers: its status no longer changes it
        names = dict(headers or ())
        request = ":path" in names or ":method" in names
        call = self._call(side, sid, request)
        now = self.flows.clock.ts
        if side is self.client:
            if call.request_ts is None:
                call.request_ts = now
                if headers is None:
                    # Its cause (a gap, a block that failed, a start inside the
                    # connection) was said when it happened, as what it is.
                    self.notice(
                        side,
                        f"stream {sid}: the request's headers were not decoded "
                        "(HPACK state unknown); its method is unknown",
                        info=True,
                    )
                self._request(side, call, names)
            if end_stream:
                call.client_done = True
                self._leftover(side, call, CLIENT_TO_SERVER)
            return
        if call.request_ts is None and call.first_response_ts is None:
            self.notice(
                side,
                f"stream {sid}: a response whose request the capture does not "
                "hold (it started before the capture); its method is unknown",
                info=True,
            )
        if call.first_response_ts is None:
            call.first_response_ts = now
            call.http_status = self._kept(side, names.get(":status"), ":status")
            call.encodings[SERVER_TO_CLIENT] = self._kept(
                side, names.get("grpc-encoding"), "grpc-encoding"
            )
        if "grpc-status" in names:
            call.trailers_ts = now
            status = names["grpc-status"]
            call.grpc_status = ascii_int(status, GRPC_STATUS_MAX)
            if call.grpc_status is None:
                self.notice(
                    side,
                    f"stream {sid}: grpc-status {status[:40]!r}"
                    f"{'...' if len(status) > 40 else ''} is not a status code "
                    f"(0 to {GRPC_STATUS_MAX}): the call's status is null",
                )
            if "grpc-message" in names:
                call.grpc_message = self._kept(side, unquote(names["grpc-message"]), "grpc-message")
        if end_stream:
            self._end(side, call, "trailers" if call.trailers_ts is not None else "end_stream")

    def _request(self, side: Side, call: GrpcCall, names: dict[str, str]) -> None:
        path = names.get(":path")
        call.method = METHODS.get(path or "")
        # A method's path is one of METHODS' own strings, kept once for all calls.
        call.path = self._kept(side, path, ":path") if call.method is None else _PATHS[path or ""]
        call.encodings[CLIENT_TO_SERVER] = self._kept(
            side, names.get("grpc-encoding"), "grpc-encoding"
        )

    def data(self, side: Side, sid: int, payload: bytes, end_stream: bool) -> None:
        """Take a DATA frame's payload: the gRPC messages it completes go out.

        Args:
            side: The direction the frame came on.
            sid: The stream id.
            payload: The frame's data, padding removed.
            end_stream: Whether the frame had END_STREAM set.
        """
        call = self.calls.get(sid)
        if call is None:
            late = self._late(side, sid)
            if late is not None:
                self._feed(side, late.call, self._direction(side), payload, late)
                return
            if not payload and not end_stream:
                return
            self.notice(
                side,
                f"stream {sid}: DATA whose headers the capture does not hold; "
                "its method is unknown",
                info=True,
            )
            call = self._call(side, sid, False)  # may settle which side is the client
        direction = self._direction(side)
        self._feed(side, call, direction, payload)
        if end_stream:
            if side is self.client:
                call.client_done = True
                self._leftover(side, call, direction)
            else:
                self._end(side, call, "end_stream")

    def _direction(self, side: Side) -> str:
        return CLIENT_TO_SERVER if side is self.client else SERVER_TO_CLIENT

    def _feed(
        self, side: Side, call: GrpcCall, direction: str, payload: bytes, late: _Reset | None = None
    ) -> None:
        """A DATA frame's bytes into one side of a call (`late`: of a reset
        call): its whole messages out, the rest held within max_reassembly."""
        # a call's splitters are set by _call
        splitter: Splitter = (
            late.splitters if late is not None else call.splitters  # type: ignore[attr-defined]
        )[direction]
        sid = call.stream_id
        told = splitter.refused is not None
        before = len(splitter.buf)
        for flag, body in splitter.feed(payload):
            self._message(side, call, direction, flag, body, late)
        if splitter.refused is not None and not told:
            self.notice(
                side, f"stream {sid} ({call.method_name}): {splitter.refused}", "limit", "max_frame"
            )
        flows = self.flows
        flows.buffered += len(splitter.buf) - before
        if flows.buffered > flows.max_buffered:
            self.notice(
                side,
                f"stream {sid} ({call.method_name}): half-received gRPC messages "
                f"of all calls past {flows.max_buffered} bytes (max_reassembly): this "
                "one's dropped and the rest of this side of the call skipped",
                "limit",
                "max_reassembly",
            )
            splitter.refused = "over max_reassembly"
            self._clear(splitter)
        if late is not None and splitter.buf:
            flows.open[id(self)] = self  # closed at the capture's end: the bytes let go

    def _message(
        self,
        side: Side,
        call: GrpcCall,
        direction: str,
        flag: int,
        body: bytes,
        late: _Reset | None = None,
    ) -> None:
        method = call.method
        cls = (
            None
            if method is None
            else (method.request if direction == CLIENT_TO_SERVER else method.response)
        )
        flows = self.flows
        decoded = decode_counted(
            cls, flag, body, call.encodings[direction], flows.budget, flows.as_json
        )
        message, error = decoded.message, decoded.error
        if decoded.limit == "max_grpc_elements" or (
            decoded.limit == "max_grpc_inflate" and not flows.inflate_told
        ):
            flows.inflate_told |= decoded.limit == "max_grpc_inflate"
            self.notice(
                side,
                f"stream {call.stream_id} ({call.method_name}) message "
                f"{call.counts[direction] if late is None else late.counts[direction]}"
                f": {error}",
                "limit",
                decoded.limit,
            )
        if late is not None:  # the call is out already: counted here, not kept
            index = late.counts[direction]
            late.counts[direction] += 1
        else:
            index = call.counts[direction]
            cost = (
                MESSAGE_COST
                if message is None
                else decoded.size + MESSAGE_COST * (1 + decoded.elements)
            )
            if call.keep(direction, message, flows.kept_bytes + cost <= MAX_KEPT_BYTES):
                call.kept_bytes += cost
                flows.kept_bytes += cost
        flows.out.append(
            GrpcMessage(
                flows.clock.ts,
                side.src,
                side.dst,
                direction,
                call.stream_id,
                call.method_name,
                None if cls is None else cls.DESCRIPTOR.full_name,
                index,
                bool(flag & 1),
                len(body),
                message,
                error,
                late is not None,
            )
        )

    def _leftover(self, side: Side, call: GrpcCall, direction: str) -> None:
        splitter: Splitter = call.splitters[direction]  # type: ignore[attr-defined]
        left = splitter.leftover()
        if left:
            self.notice(
                side,
                f"stream {call.stream_id} ({call.method_name}): {left}; message dropped",
                "incomplete",
            )
            self._clear(splitter)

    def _clear(self, splitter: Splitter) -> None:
        self.flows.buffered -= len(splitter.buf)
        splitter.buf.clear()

    def _end(self, side: Side, call: GrpcCall, how: str) -> None:
        self._leftover(side, call, CLIENT_TO_SERVER)
        self._leftover(side, call, SERVER_TO_CLIENT)
        call.end = how
        call.end_ts = self.flows.clock.ts
        self.flows.kept_bytes -= call.kept_bytes
        if self.calls.pop(call.stream_id, None) is not None:
            del self.sids[bisect.bisect_left(self.sids, call.stream_id)]
        self.flows.calls.pop(call, None)
        if not self.calls and not self._holding():
            self.flows.open.pop(id(self), None)
        self.flows.out.append(call)

    def reset(self, side: Side, sid: int, code: int) -> None:
        """Take an RST_STREAM: the call ends (kept a while for late frames).

        Args:
            side: The direction the frame came on.
            sid: The stream id.
            code: The frame's error code.
        """
        call = self.calls.get(sid)
        late = self.resets.get(sid)
        method = (
            call.method_name
            if call is not None
            else late.call.method_name
            if late is not None
            else None
        )
        # A reset is the call's own end (grpc_calls.rst_code), chosen by a peer
        # (CANCEL: the client gave up a Subscribe): nothing of it was lost.
        self.notice(side, f"RST_STREAM {error_name(code)} on stream {sid} ({method})", info=True)
        if call is not None:
            call.rst_code = code
            self._end(side, call, "rst_stream")
            if len(self.resets) >= MAX_RESETS:
                self._forget(next(iter(self.resets)))
            self.resets[sid] = _Reset(call, self.flows.max_length)

    def _late(self, side: Side, sid: int) -> _Reset | None:
        """The reset call a frame on stream `sid` is late for (None: none);
        said once a stream."""
        late = self.resets.get(sid)
        if late is not None and not late.said:
            late.said = True
            self.notice(
                side,
                f"stream {sid} ({late.call.method_name}): frames after its "
                "RST_STREAM, sent before the reset reached the peer: read as the "
                "reset call's",
                info=True,
            )
        return late

    def _holding(self) -> bool:
        """A reset call's late message half-received."""
        return any(sp.buf for late in self.resets.values() for sp in late.splitters.values())

    def _forget(self, sid: int) -> None:
        for splitter in self.resets.pop(sid).splitters.values():
            self._clear(splitter)

    def goaway(self, side: Side, last: int, code: int, debug: bytes) -> None:
        """Take a GOAWAY: the open calls past its last stream end unanswered.

        Args:
            side: The direction the frame came on.
            last: The last stream id the sender processed.
            code: The frame's error code.
            debug: Its debug data (the first 80 bytes are said).
        """
        gone = [self.calls[s] for s in self.sids[bisect.bisect_right(self.sids, last) :]]
        self.goaways += 1
        if self.goaways <= MAX_GOAWAYS_SAID or gone:
            more = (
                "; later GOAWAYs that end no call are not said"
                if self.goaways == MAX_GOAWAYS_SAID
                else ""
            )
            self.notice(
                side,
                f"GOAWAY {error_name(code)}, last stream {last}"
                f"{', ' + repr(debug[:80]) if debug else ''}; {len(gone)} open calls "
                f"past it end unanswered{more}",
                info=True,
            )
        for call in gone:
            self._end(side, call, "goaway")

    def close(self, how: str = "capture_end") -> None:
        """End the calls still open: the capture or the connection ended first.

        Args:
            how: Why: capture_end (the capture ended) or closed (the TCP
                connection did).
        """
        what = "capture" if how == "capture_end" else "connection"
        for sid in list(self.resets):
            self._forget(sid)
        for call in list(self.calls.values()):
            assert self.client is not None  # a call was made: its client is known
            # What the call carried up to here is read; a half-received
            # message (_leftover, in _end) is a problem of its own.
            self.notice(
                self.client,
                f"stream {call.stream_id} ({call.method_name}): the "
                f"{what} ends before the call does",
                "incomplete",
                info=True,
            )
            self._end(self.client, call, how)
        self.flows.open.pop(id(self), None)  # held for a late message only, if at all


def _both_sides(max_length: int) -> dict[str, Splitter]:
    """A call's message splitters, one a direction."""
    return {d: Splitter(max_length) for d in (CLIENT_TO_SERVER, SERVER_TO_CLIENT)}


class _Reset:
    """A call ended by RST_STREAM, kept for the frames its peer had sent before
    the reset reached it: its messages are cut and decoded as the call's
    (numbered on from its counts), the call itself already out."""

    def __init__(self, call: GrpcCall, max_length: int) -> None:
        self.call = call
        self.splitters = _both_sides(max_length)
        self.counts = dict(call.counts)
        self.said = False


class Table(HeaderTable):
    """HPACK's dynamic table, knowing which of its entries to trust.

    When a header block is lost, or fails half-way, the entries it added on
    the encoder's side are missing here: a later reference past the entries
    added since would land on an older one, and decode to a wrong header
    without a word. `trusted` counts the entries added since (None: every
    entry is trusted); a reference past them is refused (InvalidTableIndex).
    """

    def __init__(self) -> None:
        super().__init__()
        self.trusted: int | None = None

    def add(self, name: bytes, value: bytes) -> None:
        """Add an entry to the table, counting it as trusted.

        Args:
            name: The header's name.
            value: The header's value.
        """
        if self.trusted is not None:
            self.trusted += 1
        super().add(name, value)

    def get_by_index(self, index: int) -> tuple[bytes, bytes]:
        """The entry at an HPACK index, if it can be trusted.

        Args:
            index: The HPACK index (static entries first, then dynamic ones).

        Returns:
            The entry's (name, value).

        Raises:
            InvalidTableIndex: The index reaches past the entries added since the
                HPACK state was lost (or past the table).
        """
        if self.trusted is not None and index > self.STATIC_TABLE_LENGTH + self.trusted:
            raise hpack.InvalidTableIndex(
                f"table entry {index} may have shifted since the HPACK state was lost"
            )
        return super().get_by_index(index)


def _port(endpoint: str) -> int:
    port = endpoint.rpartition(":")[2]
    return ascii_int(port, 65535) or 0


class Side:
    """One direction of an HTTP/2 connection: frames, header blocks, HPACK.

    Stands in for the NATS parser of its TCP direction (`feed`, `gap`,
    `abandon`, `busy`).

    Args:
        conn: The connection it belongs to.
        src: The sender's endpoint, host:port.
        dst: The receiver's endpoint, host:port.
    """

    def __init__(self, conn: Connection, src: str, dst: str) -> None:
        self.conn = conn
        self.src, self.dst = src, dst
        self.peer: Side = self
        self.active = False
        self.preface = False  # the client's preface is still to come
        self.lost = False  # frame boundaries lost: wait for a segment of frames
        self.buf = bytearray()
        # Made when the direction turns out HTTP/2 (_start): every TCP flow
        # of a reading gets Sides, most of them NATS.
        self.decoder: hpack.Decoder
        self.table = DEFAULT_TABLE  # the HPACK table its receiver allows
        self.hpack_unknown = False
        self.hpack_told = False
        self.max_frame = DEFAULT_MAX_FRAME  # what this side accepts (its SETTINGS)
        self.block: tuple[int, int, bool, list[bytes], int] | None = None
        self.skipping: int | None = None  # the stream whose header block was dropped
        self.ended = False  # its TCP direction ended (FIN, RST)

    @staticmethod
    def _decoder(table: int = DEFAULT_TABLE) -> hpack.Decoder:
        """HPACK's decoder for this direction's header blocks: its table as
        large as the receiver allows (its SETTINGS), at most MAX_TABLE."""
        d = hpack.Decoder(max_header_list_size=MAX_HEADER_LIST)
        d.header_table = Table()
        d.max_allowed_table_size = table
        return d

    def _hpack_lost(self) -> None:
        """A header block of this direction was not (all) decoded."""
        self.hpack_unknown = True
        table = self.decoder.header_table
        if isinstance(table, Table):
            table.trusted = 0

    # -- what the NATS parser asks -----------------------------------------
    def sniff(self, data: bytes, mid: bool, ending: bool = False) -> Side | str | None:
        """Whether the first bytes of this direction, `data`, are HTTP/2.

        HTTP/2 is the whole preface (a first segment of `P` alone may be NATS's
        PING: undecided until 24 bytes are there), the peer's being HTTP/2, or
        a run of at least two plausible frame headers, each where the frame
        before it ends (one is undecided, up to UNDECIDED_BYTES): a NATS
        client's bytes are never taken for HTTP/2 on less.

        Args:
            data: The direction's first bytes (all the NATS parser holds).
            mid: The capture holds no handshake (the connection started before
                it).
            ending: The direction ended with `data` held undecided: one whole
                frame and nothing after it (a server's SETTINGS, the client
                gone before its preface) is HTTP/2.

        Returns:
            Self if they are HTTP/2 (the direction is started), None if not,
            UNDECIDED while they cannot tell (the NATS parser holds them and asks
            again with more).
        """
        if PREFACE.startswith(data[: len(PREFACE)]) and data:
            if len(data) < len(PREFACE) and not self.peer.active:
                return UNDECIDED
            if self.conn.calls:  # the same addresses and ports, a new connection
                self.conn.close("closed")
            self._start(False)
            self.preface = True
            self.conn.client = self
            return self
        # Without a preface, and its peer not HTTP/2, only a run of frames
        # counts, from a connection's start as from inside one: a NATS client
        # may open with bytes that hold one plausible header (a PING frame's
        # 17), hardly with a chain of them. A server that speaks first (its
        # SETTINGS before the client's preface) is held until its peer tells.
        if not self.peer.active:
            frames = _frame_headers(data)  # plausible headers, one after the other
            if ending and frames == 1 and _frame_headers(data, True) == 1:
                pass
            elif frames in (0, 1) and len(data) < UNDECIDED_BYTES:
                return UNDECIDED
            elif frames < 2:
                return None
        self._start(mid)
        # A first segment too short to hold a frame header is taken as one's start;
        # one that holds an implausible header is a loss, and said.
        if _frame_headers(data) < 0:
            self._lose(f"the first {len(data)} bytes of this direction are not HTTP/2 frames")
        return self

    def _start(self, mid: bool) -> None:
        self.active = True
        self.conn.flows.connections.add((min(self.src, self.dst), max(self.src, self.dst)))
        self.ended = self.peer.ended = False
        self.buf = bytearray()
        # From inside a connection the receiver's SETTINGS are not known.
        self.decoder = self._decoder(MAX_TABLE if mid else self.table)
        self.block = None
        self.preface = self.lost = False
        self.hpack_unknown = mid
        if mid:
            self.conn.notice(
                self,
                "HTTP/2 from inside a connection (its start is not in the "
                "capture): HPACK state unknown; header blocks decoded as far as "
                "the table seen allows",
                info=True,
            )
            self.hpack_told = True

    @property
    def busy(self) -> bool:
        """Not to be forgotten.

        lbparse.capture.reader forgets idle flows past MAX_FLOWS: a live
        connection's HPACK table is state that a flow made anew would not find
        again, unlike NATS's.
        """
        return (self.active and not self.ended) or bool(self.buf) or bool(self.conn.calls)

    def gap(self) -> None:
        """Bytes went missing: frame boundaries, and the HPACK state, are lost."""
        self.buf.clear()
        self.block = None
        self.preface = False
        self.lost = True
        self._hpack_lost()
        self.ended = False  # abandon came first: this was a loss, not the end
        self.conn.notice(
            self,
            "HTTP/2 frames lost at a gap; reading resumes at the next "
            "segment that starts with frames, HPACK state unknown",
        )

    def abandon(self) -> list[str]:
        """The direction ends (or loses bytes): a half-read frame is said.

        When both directions ended, the connection's open calls end ("closed").

        Returns:
            What was lost, a sentence each (empty if nothing).
        """
        lost = []
        if self.buf and not self.lost:
            lost.append(f"HTTP/2: {len(self.buf)} bytes of a frame, its end never came")
        self.buf.clear()
        self.ended = not self.conn.flows.ending
        if self.ended and (self.peer.ended or not self.peer.active) and self.conn.calls:
            self.conn.close("closed")
        return lost

    def feed(self, data: bytes) -> None:
        """Read the next bytes of this direction: frames, header blocks, messages.

        After a loss, bytes are skipped until a segment that starts with frames.
        What the frames make (calls, messages, notices) goes on the Flows' output.

        Args:
            data: The direction's next bytes, in order.
        """
        if self.lost:
            if not looks_like_frames(data):
                return
            self.lost = False
        buf = self.buf
        buf += data
        pos = 0
        if self.preface:
            if len(buf) < len(PREFACE):
                if not PREFACE.startswith(bytes(buf)):
                    self._lose(f"not the HTTP/2 preface: {bytes(buf[:24])!r}")
                return
            self.preface = False
            pos = len(PREFACE)
        while len(buf) - pos >= 9:
            length = int.from_bytes(buf[pos : pos + 3], "big")
            if length > self.peer.max_frame:
                self._lose(
                    f"HTTP/2 frame of {length} bytes, over the receiver's "
                    f"SETTINGS_MAX_FRAME_SIZE of {self.peer.max_frame}"
                )
                return
            if len(buf) - pos - 9 < length:
                break
            ftype, flags = buf[pos + 3], buf[pos + 4]
            sid = int.from_bytes(buf[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
            payload = bytes(buf[pos + 9 : pos + 9 + length])
            pos += 9 + length
            self._frame(ftype, flags, sid, payload)
            if self.lost:
                return
        del buf[:pos]

    def _lose(self, why: str) -> None:
        self.conn.notice(
            self, f"{why}; reading resumes at the next segment that starts with frames", "protocol"
        )
        self.buf.clear()
        self.block = None
        self.preface = False
        self.lost = True
        self._hpack_lost()

    # -- frames ----------------------------------------------------------------
    def _frame(self, ftype: int, flags: int, sid: int, payload: bytes) -> None:
        if ftype != CONTINUATION:
            self.skipping = None
        if self.block is not None and ftype != CONTINUATION:
            self.conn.notice(
                self,
                f"stream {self.block[0]}: header block not ended before a "
                f"frame of type {ftype}; dropped",
                "protocol",
            )
            self.block = None
            self._hpack_lost()
        if ftype == DATA:
            body = self._unpad(flags, payload)
            if body is not None:
                self.conn.data(self, sid, body, bool(flags & END_STREAM))
        elif ftype in (HEADERS, PUSH_PROMISE):
            self._header_frame(ftype, flags, sid, payload)
        elif ftype == CONTINUATION:
            self._continuation(flags, sid, payload)
        elif ftype == RST_STREAM and len(payload) == 4:
            self.conn.reset(self, sid, int.from_bytes(payload, "big"))
        elif ftype == SETTINGS and not flags & 1:
            self._settings(payload)
        elif ftype == GOAWAY and len(payload) >= 8:
            self.conn.goaway(
                self,
                int.from_bytes(payload[:4], "big") & 0x7FFFFFFF,
                int.from_bytes(payload[4:8], "big"),
                payload[8:],
            )

    def _unpad(self, flags: int, payload: bytes) -> bytes | None:
        if not flags & PADDED:
            return payload
        if not payload or payload[0] >= len(payload):
            self.conn.notice(
                self,
                f"HTTP/2 padding of {payload[:1].hex() or 'no'} byte(s) "
                f"in a frame of {len(payload)}: frame dropped",
                "protocol",
            )
            if flags & (END_HEADERS | PRIO):
                self._hpack_lost()
            return None
        return payload[1 : len(payload) - payload[0]]

    def _header_frame(self, ftype: int, flags: int, sid: int, payload: bytes) -> None:
        body = self._unpad(flags, payload)
        if body is None:
            return
        if ftype == HEADERS and flags & PRIO:
            body = body[5:]
        elif ftype == PUSH_PROMISE:
            body = body[4:]  # the promised stream id: gRPC never pushes
        self.block = (sid, ftype, bool(flags & END_STREAM), [body], len(body))
        self._block_end(flags)

    def _continuation(self, flags: int, sid: int, payload: bytes) -> None:
        block = self.block
        if block is None and sid == self.skipping:  # the rest of a block refused
            if flags & END_HEADERS:
                self.skipping = None
            return
        if block is None or block[0] != sid:
            self.conn.notice(
                self,
                f"stream {sid}: CONTINUATION without a header block to continue; dropped",
                "protocol",
            )
            return
        size = block[4] + len(payload)
        if size > MAX_HEADER_BLOCK:
            self.conn.notice(
                self,
                f"stream {sid}: header block past {MAX_HEADER_BLOCK} bytes "
                "(max_header_block): dropped, HPACK state unknown",
                "limit",
                "max_header_block",
            )
            self.block = None
            self._hpack_lost()
            self.skipping = None if flags & END_HEADERS else sid  # its rest is skipped
            return
        block[3].append(payload)
        self.block = (block[0], block[1], block[2], block[3], size)
        self._block_end(flags)

    def _block_end(self, flags: int) -> None:
        if not flags & END_HEADERS or self.block is None:
            return
        sid, ftype, end_stream, parts, _ = self.block
        self.block = None
        headers = self._decode(sid, b"".join(parts))
        if ftype == HEADERS:
            self.conn.headers(self, sid, headers, end_stream)

    def _decode(self, sid: int, block: bytes) -> list[tuple[str, str]] | None:
        try:
            raw = self.decoder.decode(block, raw=True)
        except hpack.OversizedHeaderListError:
            self.conn.notice(
                self,
                f"stream {sid}: header list past {MAX_HEADER_LIST} bytes "
                "decoded (max_header_list): dropped, HPACK state unknown",
                "limit",
                "max_header_list",
            )
            self._hpack_lost()
            return None
        except Exception as exc:
            if not self.hpack_unknown or not self.hpack_told:
                self.conn.notice(
                    self,
                    f"stream {sid}: header block not decoded (HPACK: "
                    f"{type(exc).__name__}: {_said(exc)}); HPACK state unknown",
                    "grpc",
                )
                self.hpack_told = True
            self._hpack_lost()
            return None
        return [
            (bytes(n).decode("utf-8", "replace"), bytes(v).decode("utf-8", "replace"))
            for n, v in raw
        ]

    def _settings(self, payload: bytes) -> None:
        for i in range(0, len(payload) - 5, 6):
            ident = int.from_bytes(payload[i : i + 2], "big")
            value = int.from_bytes(payload[i + 2 : i + 6], "big")
            if ident == 5 and DEFAULT_MAX_FRAME <= value < 1 << 24:
                self.max_frame = value
            elif ident == 1:  # what the peer's encoder may use
                self.peer.table = min(value, MAX_TABLE)
                if self.peer.active:
                    self.peer.decoder.max_allowed_table_size = self.peer.table
