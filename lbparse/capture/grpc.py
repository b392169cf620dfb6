"""gRPC over HTTP/2: Liftbridge's client API, as captured.

`METHODS` maps a call's `:path` (`/proto.API/<Method>`) to its method: the
request and response types and which side streams, read from the `service
API` of spec/proto/api.proto (its generated descriptor: no list here).
`Splitter` cuts one direction of one call's DATA bytes into gRPC's
length-prefixed messages (a flag byte, a 4-byte length); `decode_message`
makes a message's canonical protobuf JSON (lbparse.codec.jsonform), gunzipped
first when its compressed flag is set and the call said `grpc-encoding:
gzip`. `GrpcMessage` is the record of one message, `GrpcCall` that of one
call (lbparse.capture.h2 makes both).

What a message may cost decoded is bounded (`Budget`, from
lbparse.codec.limits): its gunzipped size by max_frame, what gzip adds to
all the messages of a reading by max_grpc_inflate, and the protobuf fields
it decodes to by max_grpc_elements, counted on its wire bytes
(`element_count`) before the runtime and MessageToDict make an object of
each (33M empty brokers in 64 MB took 5 GB and 96 s).
"""

from __future__ import annotations

import zlib
from functools import cache
from typing import Any, ClassVar, NamedTuple

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor as F
from google.protobuf.message_factory import GetMessageClass

from lbparse.capture.records import NO_TIME
from lbparse.codec.jsonform import Int64
from lbparse.codec.limits import DEFAULT, PROTOBUF_MAX_DEPTH, Limits
from lbparse.errors import InputError
from lbparse_generated.proto import api_pb2

CLIENT_TO_SERVER = "client_to_server"
SERVER_TO_CLIENT = "server_to_client"
# Messages a call record keeps of each side (a Subscribe may deliver
# millions): the per-message records carry every one. Past this count, or
# the reader's byte budget for all open calls (lbparse.capture.h2), a call
# counts its messages without keeping them.
MAX_KEPT = 1000


class Method(NamedTuple):
    """One method of Liftbridge's gRPC API.

    Attributes:
        name: The method's name (`Subscribe`, `Publish`, ...).
        request: The protobuf message class of its requests.
        response: The protobuf message class of its responses.
        client_streaming: Whether the client sends a stream of requests.
        server_streaming: Whether the server sends a stream of responses.
    """

    name: str
    request: Any  # the protobuf message class
    response: Any
    client_streaming: bool
    server_streaming: bool


def _methods() -> dict[str, Method]:
    service = api_pb2.DESCRIPTOR.services_by_name["API"]
    return {
        f"/{service.full_name}/{m.name}": Method(
            m.name,
            GetMessageClass(m.input_type),
            GetMessageClass(m.output_type),
            m.client_streaming,
            m.server_streaming,
        )
        for m in service.methods
    }


METHODS: dict[str, Method] = _methods()


class Splitter:
    """gRPC messages of one direction of one call, fed DATA payloads in pieces.

    Memory follows the bytes that arrived: a declared length over
    `max_length` is refused (`refused` says so) and the rest of the
    direction skipped.

    Args:
        max_length: The most bytes one message may declare (max_frame).
    """

    __slots__ = ("buf", "max_length", "refused", "count")

    def __init__(self, max_length: int) -> None:
        self.buf = bytearray()
        self.max_length = max_length
        self.refused: str | None = None
        self.count = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """The (flag, message bytes) that `data` completes.

        Args:
            data: The next bytes of this side's DATA frames.

        Returns:
            A list of (flag byte, message bytes) tuples, one per message `data`
            completes, in order; empty once a length was refused.
        """
        if self.refused is not None:
            return []
        buf = self.buf
        buf += data
        out: list[tuple[int, bytes]] = []
        pos = 0
        while len(buf) - pos >= 5:
            length = int.from_bytes(buf[pos + 1 : pos + 5], "big")
            if length > self.max_length:
                self.refused = (
                    f"a gRPC message declares {length} bytes, over the limit of "
                    f"{self.max_length} (max_frame); the rest of this side of the "
                    "call is skipped"
                )
                buf.clear()
                return out
            if len(buf) - pos - 5 < length:
                break
            out.append((buf[pos], bytes(buf[pos + 5 : pos + 5 + length])))
            pos += 5 + length
        del buf[:pos]
        self.count += len(out)
        return out

    def leftover(self) -> str | None:
        """What a half-received message left (at the end of its side).

        Returns:
            A sentence saying what part of a message never completed, or None
            when no bytes are left over.
        """
        if not self.buf:
            return None
        have = len(self.buf)
        if have < 5:
            return f"{have} bytes of a gRPC message prefix, its end never came"
        want = int.from_bytes(self.buf[1:5], "big")
        return f"a gRPC message of {want} bytes ended after {have - 5}"


class Budget:
    """What decoding the gRPC messages of one reading may cost.

    Each message (max_frame gunzipped, max_grpc_elements fields) and all of
    them (max_grpc_inflate: what gzip adds, given up as it is spent).

    Args:
        max_length: The most bytes one message may take gunzipped (max_frame).
        limits: Where max_grpc_elements and max_grpc_inflate come from.
    """

    __slots__ = ("max_length", "max_elements", "inflate_left", "max_inflate")

    def __init__(self, max_length: int, limits: Limits = DEFAULT) -> None:
        self.max_length = max_length
        self.max_elements = limits.max_grpc_elements
        self.max_inflate = self.inflate_left = limits.max_grpc_inflate


class Decoded(NamedTuple):
    """A message decoded (`message`) or not (`error`).

    Attributes:
        message: The canonical protobuf JSON of the message, or None.
        error: What is wrong, or None when it decoded.
        limit: The name of the limit that refused it, if one did.
        size: Its bytes gunzipped.
        elements: The protobuf fields it holds (0 when not counted).
    """

    message: dict[str, Any] | None
    error: str | None
    limit: str | None = None
    size: int = 0
    elements: int = 0


class LimitError(InputError):
    """A limit refused the bytes; `limit` (its kind) names it.

    Args:
        kind: The limit's name (max_frame, max_grpc_inflate), checked against KINDS.
        message: What was refused, for people.
    """

    KINDS: ClassVar[frozenset[str]] = frozenset({"max_frame", "max_grpc_inflate"})

    @property
    def limit(self) -> str:
        """The name of the limit that refused the bytes (the error's kind)."""
        return self.kind


def gunzip(data: bytes, max_length: int, budget: Budget | None = None) -> bytes:
    """`data` gunzipped, within `max_length` bytes and what `budget` has left.

    A small message must not expand into gigabytes, nor many small ones.

    Args:
        data: A gzip stream (a compressed gRPC message).
        max_length: The most bytes the result may have (max_frame).
        budget: The reading's budget; what gzip adds is taken from its
            inflate_left. None: no budget but `max_length`.

    Returns:
        The decompressed bytes.

    Raises:
        LimitError: The result would pass `max_length` (limit "max_frame"),
            or what the budget has left (limit "max_grpc_inflate").
        InputError: The gzip stream ends before its end.
    """
    room = max_length
    if budget is not None and len(data) + budget.inflate_left < room:
        room = len(data) + budget.inflate_left
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(data, room + 1)
    if len(out) > room:
        if room == max_length:
            raise LimitError("max_frame", f"gzip expands past {max_length} bytes (max_frame)")
        raise LimitError(
            "max_grpc_inflate",
            f"gzip expands past the {budget.max_inflate if budget else 0} bytes "
            "decompression may add to this capture's gRPC messages in all "
            "(max_grpc_inflate); not decompressed",
        )
    if not d.eof:
        raise InputError("bad_input", "gzip stream is cut short")
    if budget is not None and len(out) > len(data):
        budget.inflate_left -= len(out) - len(data)
    return out


def decode_message(
    cls: Any, flag: int, data: bytes, encoding: str | None, max_length: int
) -> tuple[dict[str, Any] | None, str | None]:
    """A message's canonical JSON, or what is wrong with it.

    Within the default limits but for max_frame (`max_length`).

    Args:
        cls: The protobuf message class (None: the method is unknown).
        flag: The message's flag byte (bit 0: compressed).
        data: The message's bytes.
        encoding: The call's `grpc-encoding` ("gzip" is the one decoded).
        max_length: The most bytes the message may take gunzipped.

    Returns:
        (canonical JSON, None) or (None, what is wrong).
    """
    decoded = decode_counted(cls, flag, data, encoding, Budget(max_length))
    return decoded.message, decoded.error


def decode_counted(
    cls: Any, flag: int, data: bytes, encoding: str | None, budget: Budget, as_json: bool = True
) -> Decoded:
    """A message's canonical JSON, within `budget` (which it spends).

    Args:
        cls: The protobuf message class (None: the method is unknown).
        flag: The message's flag byte (bit 0: compressed).
        data: The message's bytes.
        encoding: The call's `grpc-encoding` ("gzip" is the one decoded).
        budget: The reading's Budget; gunzipping spends its inflate_left.
        as_json: False: a message that decodes is `{}`, not its JSON (for a
            reading that keeps no message: every count, limit and error is
            as with its JSON, which is about a third of a gRPC reading's time).

    Returns:
        The Decoded message, or the error that stopped it (and the limit's
        name when a limit did); never raises for bad bytes.
    """
    if flag & 1:
        if encoding != "gzip":
            return Decoded(
                None, f"compressed with {encoding or 'an unnamed encoding'!r}, not decoded"
            )
        try:
            data = gunzip(data, budget.max_length, budget)
        except LimitError as exc:
            return Decoded(None, f"gzip: {exc}", exc.limit)
        except (ValueError, zlib.error) as exc:
            return Decoded(None, f"gzip: {exc}")
    if cls is None:
        return Decoded(
            None, "method unknown (its request headers were not read): not decoded", size=len(data)
        )
    desc = cls.DESCRIPTOR
    elements = element_count(data, desc, budget.max_elements)
    if elements > budget.max_elements:
        return Decoded(
            None,
            f"{len(data)} bytes that hold more than {budget.max_elements} "
            f"protobuf fields as {desc.full_name} (max_grpc_elements): not decoded",
            "max_grpc_elements",
            len(data),
            elements,
        )
    try:
        message = cls.FromString(data)
        return Decoded(
            _maps_sorted(json_format.MessageToDict(message), desc) if as_json else {},
            None,
            size=len(data),
            elements=elements,
        )
    except Exception as exc:
        return Decoded(
            None,
            f"not a {desc.full_name}: {type(exc).__name__}: {exc}",
            size=len(data),
            elements=elements,
        )


_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
# Bytes each element of a packed repeated field takes (0: a varint, its own length).
_PACKED = {
    F.TYPE_FIXED64: 8,
    F.TYPE_SFIXED64: 8,
    F.TYPE_DOUBLE: 8,
    F.TYPE_FIXED32: 4,
    F.TYPE_SFIXED32: 4,
    F.TYPE_FLOAT: 4,
}
_CONTINUED = bytes(range(0x80, 0x100))  # a varint's bytes but its last


@cache
def _layout(desc: Any) -> dict[int, Any]:
    """Field number -> the submessage's descriptor, or for a repeated scalar
    (packable) the bytes one element takes (0: a varint)."""
    out: dict[int, Any] = {}
    for f in desc.fields:
        if f.type == F.TYPE_MESSAGE and f.message_type is not None:
            out[f.number] = f.message_type
        elif f.is_repeated and f.type not in (F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_GROUP):
            out[f.number] = _PACKED.get(f.type, 0)
    return out


def element_count(buf: bytes, desc: Any, limit: int) -> int:
    """How many fields `buf` holds as the message type `desc`, at every level.

    Each element of a repeated field, packed or not; a map entry and its key
    and value, as the protobuf runtime would make them; stops as soon as the
    count passes `limit` (returning a count above it), and at the first
    malformed byte (the runtime refuses those). No object per field; levels
    are walked in place, to the runtime's own depth.

    Args:
        buf: The message's wire bytes.
        desc: The protobuf descriptor of its message type.
        limit: Stop counting once the count passes this.

    Returns:
        The number of fields, or a number above `limit` when it passed it.
    """
    return _count(buf, 0, len(buf), desc, limit, 0)


def _count(buf: bytes, pos: int, end: int, desc: Any, left: int, depth: int) -> int:
    """Fields of buf[pos:end] as `desc`, once past `left` no more counted."""
    n = 0
    layout = _layout(desc) if desc is not None else {}
    while pos < end:
        n += 1
        if n > left:
            return n
        b = buf[pos]
        if b < 0x80:  # one-byte tags and lengths: most of them, inline
            key, pos = b, pos + 1
        else:
            key, pos = _varint(buf, pos, end)
            if pos < 0:
                return n
        wire = key & 7
        if wire == _VARINT:
            if pos < end and buf[pos] < 0x80:
                pos += 1
            else:
                pos = _varint(buf, pos, end)[1]
                if pos < 0:
                    return n
        elif wire == _I64:
            pos += 8
        elif wire == _I32:
            pos += 4
        elif wire == _LEN:
            if pos < end and buf[pos] < 0x80:
                length, pos = buf[pos], pos + 1
            else:
                length, pos = _varint(buf, pos, end)
                if pos < 0:
                    return n
            start, pos = pos, pos + length
            if pos > end:
                return n
            inner = layout.get(key >> 3)
            if inner is None or start == pos:
                continue
            if isinstance(inner, int):  # packed: one field, as many elements
                if inner:
                    n += length // inner - 1
                else:
                    n += len(buf[start:pos].translate(None, _CONTINUED)) - 1
            elif depth < PROTOBUF_MAX_DEPTH:  # deeper, the runtime refuses it
                n += _count(buf, start, pos, inner, left - n, depth + 1)
        elif wire not in (3, 4):  # groups: their fields are counted as this level's
            return n
    return n


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, position after it); position -1 if it does not end by `end`."""
    result = shift = 0
    for i in range(pos, min(pos + 10, end)):
        b = buf[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i + 1
        shift += 7
    return 0, -1


def _maps_sorted(d: dict[str, Any], descriptor: Any) -> dict[str, Any]:
    """`d` (MessageToDict's) with every map field's entries in key order: a
    map's order is the hash table's, which differs from one process to the
    next (PublishRequest's headers), and the same bytes must make the same
    JSON (the tables are compared across runs and workers)."""
    for name, is_map, inner in _nested(descriptor):
        value = d.get(name)
        if value is None:
            continue
        if is_map:
            items = sorted(value.items())
            d[name] = {k: _maps_sorted(v, inner) if inner is not None else v for k, v in items}
        elif isinstance(value, list):
            d[name] = [_maps_sorted(v, inner) for v in value]
        elif isinstance(value, dict):
            d[name] = _maps_sorted(value, inner)
    return d


@cache
def _nested(descriptor: Any) -> tuple[tuple[str, bool, Any], ...]:
    """The fields of a message type that hold messages or maps: (JSON name,
    whether a map, the message type inside: a map's values' or None).
    Once per type: a descriptor's options are parsed at each GetOptions()."""
    out = []
    for fd in descriptor.fields:
        mt = fd.message_type
        if mt is None:
            continue
        if mt.GetOptions().map_entry:
            out.append((fd.json_name, True, mt.fields_by_name["value"].message_type))
        else:
            out.append((fd.json_name, False, mt))
    return tuple(out)


def _ns(ts: int | None) -> Int64 | None:
    # NO_TIME: no time (a pcapng clock past 64 bits of nanoseconds)
    return None if ts is None or ts == NO_TIME else Int64(ts)


class GrpcMessage:
    """One gRPC message: which call, which side, and what it decoded to.

    Args:
        ts: The capture time, integer nanoseconds, if known.
        src: The sender, host:port.
        dst: The receiver, host:port.
        direction: CLIENT_TO_SERVER or SERVER_TO_CLIENT.
        stream_id: The HTTP/2 stream (the call).
        method: The method's name, None when unknown.
        type_: The message's protobuf type name, None when unknown.
        index: Its position among its side's messages of the call, from 0.
        compressed: Whether its compressed flag is set.
        length: Its bytes on the wire.
        message: Its canonical JSON, None when it did not decode.
        error: Why it did not decode, or None.
        late: Sent after its call's RST_STREAM (before the reset reached the
            sender).
    """

    __slots__ = (
        "ts",
        "src",
        "dst",
        "direction",
        "stream_id",
        "method",
        "type",
        "index",
        "compressed",
        "length",
        "message",
        "error",
        "late",
    )

    def __init__(
        self,
        ts: int | None,
        src: str,
        dst: str,
        direction: str,
        stream_id: int,
        method: str | None,
        type_: str | None,
        index: int,
        compressed: bool,
        length: int,
        message: dict[str, Any] | None,
        error: str | None,
        late: bool = False,
    ) -> None:
        self.ts, self.src, self.dst, self.direction = ts, src, dst, direction
        self.stream_id, self.method, self.type, self.index = stream_id, method, type_, index
        self.compressed, self.length, self.message, self.error = compressed, length, message, error
        # After its call's RST_STREAM (the call already out): sent before the
        # reset reached this message's sender (lbparse.capture.h2).
        self.late = late

    def to_json_dict(self) -> dict[str, Any]:
        """The message as a JSON-ready dict (the records' `grpc: message` rows).

        Returns:
            A new dict; `message` when it decoded, else `error`; `late` only when
            set.
        """
        d: dict[str, Any] = {
            "grpc": "message",
            "ts": _ns(self.ts),
            "src": self.src,
            "dst": self.dst,
            "direction": self.direction,
            "stream_id": self.stream_id,
            "method": self.method,
            "type": self.type,
            "index": self.index,
            "compressed": self.compressed,
            "length": self.length,
        }
        if self.late:
            d["late"] = True
        if self.error is not None:
            d["error"] = self.error
        else:
            d["message"] = self.message
        return d


class GrpcCall:
    """One gRPC call (one HTTP/2 stream): its method, messages, status and times.

    `end` says how it ended: trailers, rst_stream, goaway, closed (the TCP
    connection), capture_end, or dropped (max_streams).

    Args:
        client: The client's endpoint, host:port.
        server: The server's endpoint, host:port.
        stream_id: The HTTP/2 stream id.
    """

    def __init__(self, client: str, server: str, stream_id: int) -> None:
        self.client, self.server, self.stream_id = client, server, stream_id
        self.path: str | None = None
        self.method: Method | None = None
        self.request_ts: int | None = None
        self.first_response_ts: int | None = None
        self.trailers_ts: int | None = None
        self.end_ts: int | None = None
        self.http_status: str | None = None
        self.grpc_status: int | None = None
        self.grpc_message: str | None = None
        self.encodings: dict[str, str | None] = {CLIENT_TO_SERVER: None, SERVER_TO_CLIENT: None}
        self.messages: dict[str, list[dict[str, Any] | None]] = {
            CLIENT_TO_SERVER: [],
            SERVER_TO_CLIENT: [],
        }
        self.counts = {CLIENT_TO_SERVER: 0, SERVER_TO_CLIENT: 0}
        self.client_done = False
        self.kept_bytes = 0  # what its kept messages count against the reader's budget
        self.end: str | None = None
        self.rst_code: int | None = None

    @property
    def method_name(self) -> str | None:
        """The method's name, or None while the method is unknown."""
        return self.method.name if self.method is not None else None

    def keep(self, direction: str, message: dict[str, Any] | None, room: bool) -> bool:
        """Count the message; keep it if `room` and under MAX_KEPT.

        Args:
            direction: CLIENT_TO_SERVER or SERVER_TO_CLIENT.
            message: The message's JSON (None when it did not decode).
            room: Whether the reader's byte budget for open calls has room.

        Returns:
            Whether the message was kept.
        """
        self.counts[direction] += 1
        kept = self.messages[direction]
        if room and len(kept) < MAX_KEPT:
            kept.append(message)
            return True
        return False

    def to_json_dict(self) -> dict[str, Any]:
        """The call as a JSON-ready dict (the records' `grpc: call` rows).

        Returns:
            A new dict: endpoints, method and path, times (Int64 nanoseconds),
            statuses, how it ended, message counts and the kept messages;
            `rst_stream_error` only after an RST_STREAM.
        """
        req, resp = self.messages[CLIENT_TO_SERVER], self.messages[SERVER_TO_CLIENT]
        d: dict[str, Any] = {
            "grpc": "call",
            "ts": _ns(self.end_ts),
            "client": self.client,
            "server": self.server,
            "stream_id": self.stream_id,
            "method": self.method_name,
            "path": self.path,
            "request_ts": _ns(self.request_ts),
            "first_response_ts": _ns(self.first_response_ts),
            "trailers_ts": _ns(self.trailers_ts),
            "http_status": self.http_status,
            "grpc_status": self.grpc_status,
            "grpc_message": self.grpc_message,
            "end": self.end,
            "request_count": self.counts[CLIENT_TO_SERVER],
            "response_count": self.counts[SERVER_TO_CLIENT],
            "requests": req,
            "responses": resp,
        }
        if self.rst_code is not None:
            d["rst_stream_error"] = self.rst_code
        return d
