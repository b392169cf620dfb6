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
"""

from __future__ import annotations

import zlib
from typing import Any, NamedTuple

from google.protobuf import json_format
from google.protobuf.message_factory import GetMessageClass

from lbparse.codec.jsonform import Int64
from lbparse_generated.proto import api_pb2

CLIENT_TO_SERVER = "client_to_server"
SERVER_TO_CLIENT = "server_to_client"
# Messages a call record keeps of each side (a Subscribe may deliver
# millions): the per-message records carry every one. Past this count, or
# the reader's byte budget for all open calls (lbparse.capture.h2), a call
# counts its messages without keeping them.
MAX_KEPT = 1000


class Method(NamedTuple):
    name: str
    request: Any   # the protobuf message class
    response: Any
    client_streaming: bool
    server_streaming: bool


def _methods() -> dict[str, Method]:
    service = api_pb2.DESCRIPTOR.services_by_name["API"]
    return {f"/{service.full_name}/{m.name}": Method(
        m.name, GetMessageClass(m.input_type), GetMessageClass(m.output_type),
        m.client_streaming, m.server_streaming) for m in service.methods}


METHODS: dict[str, Method] = _methods()


class Splitter:
    """gRPC messages of one direction of one call, fed DATA payloads in
    pieces. Memory follows the bytes that arrived: a declared length over
    `max_length` is refused (`refused` says so) and the rest of the
    direction skipped."""

    __slots__ = ("buf", "max_length", "refused", "count")

    def __init__(self, max_length: int) -> None:
        self.buf = bytearray()
        self.max_length = max_length
        self.refused: str | None = None
        self.count = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """The (flag, message bytes) that `data` completes."""
        if self.refused is not None:
            return []
        buf = self.buf
        buf += data
        out: list[tuple[int, bytes]] = []
        pos = 0
        while len(buf) - pos >= 5:
            length = int.from_bytes(buf[pos + 1:pos + 5], "big")
            if length > self.max_length:
                self.refused = (f"a gRPC message declares {length} bytes, over the limit of "
                                f"{self.max_length} (max_frame); the rest of this side of the "
                                "call is skipped")
                buf.clear()
                return out
            if len(buf) - pos - 5 < length:
                break
            out.append((buf[pos], bytes(buf[pos + 5:pos + 5 + length])))
            pos += 5 + length
        del buf[:pos]
        self.count += len(out)
        return out

    def leftover(self) -> str | None:
        """What a half-received message left (at the end of its side)."""
        if not self.buf:
            return None
        have = len(self.buf)
        if have < 5:
            return f"{have} bytes of a gRPC message prefix, its end never came"
        want = int.from_bytes(self.buf[1:5], "big")
        return f"a gRPC message of {want} bytes ended after {have - 5}"


def gunzip(data: bytes, max_length: int) -> bytes:
    """`data` gunzipped, refused (ValueError) past `max_length` bytes:
    a small message must not expand into gigabytes."""
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(data, max_length + 1)
    if len(out) > max_length:
        raise ValueError(f"gzip expands past {max_length} bytes (max_frame)")
    if not d.eof:
        raise ValueError("gzip stream is cut short")
    return out


def decode_message(cls: Any, flag: int, data: bytes, encoding: str | None,
                   max_length: int) -> tuple[dict[str, Any] | None, str | None]:
    """(canonical JSON, None) or (None, what is wrong)."""
    if flag & 1:
        if encoding != "gzip":
            return None, f"compressed with {encoding or 'an unnamed encoding'!r}, not decoded"
        try:
            data = gunzip(data, max_length)
        except (ValueError, zlib.error) as exc:
            return None, f"gzip: {exc}"
    if cls is None:
        return None, "method unknown (its request headers were not read): not decoded"
    try:
        message = cls.FromString(data)
        return _maps_sorted(json_format.MessageToDict(message), cls.DESCRIPTOR), None
    except Exception as exc:  # noqa: BLE001  DecodeError, RecursionError: all bad bytes
        return None, f"not a {cls.DESCRIPTOR.full_name}: {type(exc).__name__}: {exc}"


def _maps_sorted(d: dict[str, Any], descriptor: Any) -> dict[str, Any]:
    """`d` (MessageToDict's) with every map field's entries in key order: a
    map's order is the hash table's, which differs from one process to the
    next (PublishRequest's headers), and the same bytes must make the same
    JSON (the tables are compared across runs and workers)."""
    for fd in descriptor.fields:
        value = d.get(fd.json_name)
        if value is None or fd.message_type is None:
            continue
        if fd.message_type.GetOptions().map_entry:
            entry = fd.message_type.fields_by_name["value"].message_type
            items = sorted(value.items())
            d[fd.json_name] = {k: _maps_sorted(v, entry) if entry is not None else v
                               for k, v in items}
        elif isinstance(value, list):
            d[fd.json_name] = [_maps_sorted(v, fd.message_type) for v in value]
        elif isinstance(value, dict):
            d[fd.json_name] = _maps_sorted(value, fd.message_type)
    return d


def _ns(ts: int | None) -> Int64 | None:
    return None if ts is None else Int64(ts)


class GrpcMessage:
    """One gRPC message: which call, which side, and what it decoded to."""

    __slots__ = ("ts", "src", "dst", "direction", "stream_id", "method", "type", "index",
                 "compressed", "length", "message", "error", "late")

    def __init__(self, ts: int | None, src: str, dst: str, direction: str, stream_id: int,
                 method: str | None, type_: str | None, index: int, compressed: bool,
                 length: int, message: dict[str, Any] | None, error: str | None,
                 late: bool = False) -> None:
        self.ts, self.src, self.dst, self.direction = ts, src, dst, direction
        self.stream_id, self.method, self.type, self.index = stream_id, method, type_, index
        self.compressed, self.length, self.message, self.error = compressed, length, message, error
        # After its call's RST_STREAM (the call already out): sent before the
        # reset reached this message's sender (lbparse.capture.h2).
        self.late = late

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "grpc": "message", "ts": _ns(self.ts), "src": self.src, "dst": self.dst,
            "direction": self.direction, "stream_id": self.stream_id, "method": self.method,
            "type": self.type, "index": self.index, "compressed": self.compressed,
            "length": self.length}
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
    connection), capture_end, or dropped (max_streams)."""

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
            CLIENT_TO_SERVER: [], SERVER_TO_CLIENT: []}
        self.counts = {CLIENT_TO_SERVER: 0, SERVER_TO_CLIENT: 0}
        self.client_done = False
        self.kept_bytes = 0  # what its kept messages count against the reader's budget
        self.end: str | None = None
        self.rst_code: int | None = None

    @property
    def method_name(self) -> str | None:
        return self.method.name if self.method is not None else None

    def keep(self, direction: str, message: dict[str, Any] | None, room: bool) -> bool:
        """Count the message; keep it if `room` and under MAX_KEPT. Kept?"""
        self.counts[direction] += 1
        kept = self.messages[direction]
        if room and len(kept) < MAX_KEPT:
            kept.append(message)
            return True
        return False

    def to_json_dict(self) -> dict[str, Any]:
        req, resp = self.messages[CLIENT_TO_SERVER], self.messages[SERVER_TO_CLIENT]
        d: dict[str, Any] = {
            "grpc": "call", "ts": _ns(self.end_ts), "client": self.client, "server": self.server,
            "stream_id": self.stream_id, "method": self.method_name, "path": self.path,
            "request_ts": _ns(self.request_ts), "first_response_ts": _ns(self.first_response_ts),
            "trailers_ts": _ns(self.trailers_ts), "http_status": self.http_status,
            "grpc_status": self.grpc_status, "grpc_message": self.grpc_message,
            "end": self.end, "request_count": self.counts[CLIENT_TO_SERVER],
            "response_count": self.counts[SERVER_TO_CLIENT], "requests": req, "responses": resp}
        if self.rst_code is not None:
            d["rst_stream_error"] = self.rst_code
        return d
