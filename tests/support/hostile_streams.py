"""The streams client (lbparse.streams.client) against a hostile gRPC server
(issue #47): the `streams` fuzz target's check.

One real gRPC server per process, on 127.0.0.1 (three ports, so that
leaders and followers can be different addresses), whose handlers answer
with whatever bytes the script of the running execution holds: its
response serializer is the identity, so the fuzzer's bytes are what goes on
the wire as a FetchMetadataResponse, a FetchPartitionMetadataResponse or a
Subscribe `Message`. Each execution makes one client call (the input's
first byte chooses which) and holds it to what the client promises: a
well-formed answer (types, offsets start..end-1 in order, each once) or an
error of lbparse's family; never another exception, never a hang.

The input, after the call byte and a parameter byte, is chunks of
`head, length, data[length]`; `head >> 6` is where the chunk goes
(0 FetchMetadata, answered in turn; 1 FetchPartitionMetadata, chosen by
the partition asked; 2 Subscribe, the stream's messages in order (the
first is the "subscription made" message), 3 likewise), and `head & 63`
what it is: under 32 the bytes answered, 32..47 an abort (status code,
the bytes as details), 63 silence until the client gives up (the rest
as under 32: a silent reply costs the timeout, so it is made rare).

Bounded waits, without touching the client's internals: the client is
made with a small `timeout` and `retries=0` (a failed read is an error at
once, no pause), so `_rounds` never pauses either (it pauses only when a
second look fits in 2 x timeout); FetchMetadata is never silent (the
client waits 4 s at least for it) and the client is given one server more
than the FetchMetadata chunks that fail, the last answered with an empty,
valid response, so metadata() never starts a second round (which sleeps a
second). Broker addresses the fuzzer writes are mapped onto the server's
own ports, so that no execution dials a host of its choosing.
"""

from __future__ import annotations

import threading
import time
import zlib
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from lbparse.errors import LbparseError
from lbparse.streams.client import PartitionInfo, StreamsClient
from lbparse_generated.proto import api_pb2

TIMEOUT = 0.05  # the client's timeout: a silent node costs this, about
HANG = 8.0  # seconds: a call that takes longer hangs (FetchMetadata waits 4 s at most)
# FetchMetadata replies a script holds, at most: the client is given a server
# for each, asked in turn (~1 ms a server), so an input of 6,635 of them made
# one call take 6.7 s, past HANG on a loaded machine; the rest are ignored.
MAX_METADATA = 32
STREAMS = ("s", "t")
PORTS = 3
_CODES = [c for c in grpc.StatusCode if c is not grpc.StatusCode.OK]


@dataclass
class Reply:
    """One answer: bytes, an abort (code, details) or silence."""

    data: bytes = b""
    code: grpc.StatusCode | None = None
    silent: bool = False


@dataclass
class Script:
    metadata: list[Reply] = field(default_factory=list)
    partition: list[Reply] = field(default_factory=list)
    subscribe: list[Reply] = field(default_factory=list)
    taken: int = 0  # FetchMetadata answers given
    lock: threading.Lock = field(default_factory=threading.Lock)


_script = Script()
_server: tuple[grpc.Server, list[str]] | None = None


def _answer(reply: Reply, context: grpc.ServicerContext) -> bytes:
    if reply.silent:
        _wait_gone(context)
        context.abort(grpc.StatusCode.UNAVAILABLE, "silent")
    if reply.code is not None:
        context.abort(reply.code, reply.data.decode("utf-8", "replace"))
    return reply.data


def _wait_gone(context: grpc.ServicerContext) -> None:
    """Until the client cancels (or a second, should it never)."""
    gone = threading.Event()
    context.add_callback(gone.set)
    gone.wait(1.0)


def _fetch_metadata(request: bytes, context: grpc.ServicerContext) -> bytes:
    script = _script
    with script.lock:
        i, script.taken = script.taken, script.taken + 1
    # Past the script: an empty answer, which parses (see the module's doc).
    return _answer(script.metadata[i] if i < len(script.metadata) else Reply(), context)


def _fetch_partition(request: bytes, context: grpc.ServicerContext) -> bytes:
    script = _script
    if not script.partition:
        return b""
    asked = api_pb2.FetchPartitionMetadataRequest.FromString(request).partition
    return _answer(script.partition[asked % len(script.partition)], context)


def _subscribe(request: bytes, context: grpc.ServicerContext) -> Any:
    for reply in _script.subscribe:
        yield _answer(reply, context)


def server() -> list[str]:
    """The server's addresses (started at the first call)."""
    global _server
    if _server is None:
        srv = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        handler = grpc.method_handlers_generic_handler(
            "proto.API",
            {
                "FetchMetadata": grpc.unary_unary_rpc_method_handler(_fetch_metadata),
                "FetchPartitionMetadata": grpc.unary_unary_rpc_method_handler(_fetch_partition),
                "Subscribe": grpc.unary_stream_rpc_method_handler(_subscribe),
            },
        )
        srv.add_generic_rpc_handlers((handler,))
        ports = [srv.add_insecure_port("127.0.0.1:0") for _ in range(PORTS)]
        srv.start()
        _server = (srv, [f"127.0.0.1:{p}" for p in ports])
    return _server[1]


def stop() -> None:
    """Stop the server if one was started (the session's end: conftest)."""
    global _server
    if _server is not None:
        _server[0].stop(None).wait()
        _server = None


def _ours(data: bytes, addresses: list[str]) -> bytes:
    """A FetchMetadataResponse's brokers moved onto the server's ports: the
    bytes as they are when they name no other address (or do not parse)."""
    try:
        resp = api_pb2.FetchMetadataResponse.FromString(data)
    except DecodeError:
        return data
    if all(f"{b.host}:{b.port}" in addresses for b in resp.brokers):
        return data
    for b in resp.brokers:
        mapped = addresses[zlib.crc32(f"{b.host}:{b.port}".encode()) % PORTS]
        b.host, b.port = "127.0.0.1", int(mapped.rpartition(":")[2])
    return resp.SerializeToString()


def script_of(data: bytes, addresses: list[str]) -> Script:
    script = Script()
    pos = 0
    while pos + 2 <= len(data):
        head, n = data[pos], data[pos + 1]
        chunk = data[pos + 2 : pos + 2 + n]
        pos += 2 + n
        kind = head & 63
        reply = Reply(chunk)
        if 32 <= kind < 48:
            reply.code = _CODES[kind % len(_CODES)]
        elif kind == 63:  # one head in 64: silence costs the client's timeout
            reply.silent = True
        where = head >> 6
        if where == 0:
            # FetchMetadata is never silent: the client waits 4 s for it
            reply.silent = False
            reply.data = _ours(chunk, addresses) if reply.code is None else chunk
            if len(script.metadata) < MAX_METADATA:
                script.metadata.append(reply)
        elif where == 1:
            script.partition.append(reply)
        else:
            script.subscribe.append(reply)
    return script


def chunk(where: int, data: bytes, kind: int = 0) -> bytes:
    """One chunk of a script (the module's doc): `where` 0..2, `kind` 0 the
    bytes answered, 32..47 an abort, 63 silence."""
    return bytes([where << 6 | kind, len(data)]) + data


def cluster(
    messages: list[api_pb2.Message],
    partitions: int = 1,
    paused: bool = False,
    high_watermark: int = 9,
) -> bytes:
    """A script of a sane cluster: streams s and t, `partitions` partitions
    led by b1 (b2 and b3 in sync) of `high_watermark`, whose Subscribe sends
    `messages` after the "subscription made" one."""
    part = {
        i: api_pb2.PartitionMetadata(
            id=i,
            leader="b1",
            isr=["b1", "b2", "b3"],
            highWatermark=high_watermark,
            newestOffset=high_watermark,
            paused=paused,
        )
        for i in range(partitions)
    }
    meta = api_pb2.FetchMetadataResponse(
        brokers=[api_pb2.Broker(id=f"b{i}", host="127.0.0.1", port=i) for i in (1, 2, 3)],
        streamMetadata=[
            api_pb2.StreamMetadata(name=n, subject=f"{n}.x", partitions=part) for n in STREAMS
        ],
    )
    out = chunk(0, meta.SerializeToString())
    for p in part.values():
        out += chunk(1, api_pb2.FetchPartitionMetadataResponse(metadata=p).SerializeToString())
    out += chunk(2, b"")
    return out + b"".join(chunk(2, m.SerializeToString()) for m in messages)


CALLS = (
    "metadata",
    "partitions",
    "partitions_leaderless",
    "partition",
    "read",
    "read_raw",
    "first_offset",
    "offset_at",
)


def check_streams(data: bytes) -> None:
    """One client call against the server answering `data` (the module's doc)."""
    if len(data) < 2:
        return
    global _script
    addresses = server()
    call, param = CALLS[data[0] % len(CALLS)], data[1]
    script = script_of(data[2:], addresses)
    _script = script
    # One server more than FetchMetadata answers in the script: the last one
    # is answered with a valid empty response, so no second round.
    servers = [addresses[i % PORTS] for i in range(len(script.metadata) + 1)]
    stream, partition = STREAMS[param & 1], (param >> 1) & 3
    start, end = (param >> 3) & 3, ((param >> 3) & 3) + ((param >> 5) & 3)
    c = _client(bool(param & 128))
    c.servers, c.resumed = servers, 0
    began = time.monotonic()
    try:
        _call(c, call, stream, partition, start, end, addresses[param % PORTS])
    except LbparseError:
        pass  # the client's refusal: what it may do with anything a server says
    took = time.monotonic() - began
    assert took < HANG, f"{call} took {took:.1f} s"


_clients: dict[bool, StreamsClient] = {}


def _client(replica: bool) -> StreamsClient:
    """One client a kind for every execution: its channels, made once, are
    most of a fresh client's cost (its servers are set for each execution)."""
    if replica not in _clients:
        _clients[replica] = StreamsClient([], timeout=TIMEOUT, retries=0, replica=replica)
    return _clients[replica]


def _call(
    c: StreamsClient, call: str, stream: str, partition: int, start: int, end: int, at: str
) -> None:
    if call == "metadata":
        assert isinstance(c.metadata([stream]), api_pb2.FetchMetadataResponse)
    elif call.startswith("partitions"):
        leaderless = call.endswith("leaderless")
        infos = c.partitions(list(STREAMS), leaderless=leaderless)
        _well_formed(infos, leaderless)
        keys = [(STREAMS.index(p.stream), p.partition) for p in infos]
        assert keys == sorted(set(keys)), keys  # stream then partition order, each once
    elif call == "partition":
        info = c.partition(stream, partition)
        _well_formed([info], False)
        assert (info.stream, info.partition) == (stream, partition), info
    elif call == "read":
        got = list(c.read(stream, partition, start, end, at if start & 1 else ""))
        assert all(isinstance(m, api_pb2.Message) for m in got)
        assert [m.offset for m in got] == list(range(start, end)), [m.offset for m in got]
    elif call == "read_raw":
        raws = list(c.read_raw(stream, partition, start, end, at if start & 1 else ""))
        assert all(isinstance(r, bytes) for r in raws) and len(raws) == end - start, raws
        if raws:
            _batched(raws, stream, partition, start)
    elif call == "first_offset":
        got = c.first_offset(stream, partition, end)
        assert isinstance(got, int) and 0 <= got <= end, (got, end)
    else:
        got = c.offset_at(stream, partition, start * 10**9, end)
        assert isinstance(got, int) and 0 <= got <= end, (got, end)


def _well_formed(infos: list[PartitionInfo], leaderless: bool) -> None:
    for p in infos:
        assert isinstance(p, PartitionInfo)
        assert p.stream in STREAMS and isinstance(p.partition, int), p
        assert isinstance(p.leader, str) and isinstance(p.address, str), p
        assert all(isinstance(a, str) for a in p.isr), p
        assert isinstance(p.high_watermark, int) and isinstance(p.newest_offset, int), p
        assert isinstance(p.paused, bool) and isinstance(p.readonly, bool), p
        assert leaderless or p.described, p


def _batched(raws: list[bytes], stream: str, partition: int, first: int) -> None:
    """The messages through the liftbridge-streams source's batch reader
    (wirescan.decode_structs, the C reader when built): its rows are upb's
    parse of each message, or it refuses them with a StreamsError."""
    from lbparse.spark.streams_source import _batch, raw_batch

    try:
        batch = raw_batch(raws, stream, partition, first)
    except LbparseError:
        return
    assert batch.num_rows == len(raws)
    assert batch.column(2).to_pylist() == list(range(first, first + len(raws)))
    reference = _batch([api_pb2.Message.FromString(r) for r in raws])
    assert batch.to_pylist() == reference.to_pylist()
