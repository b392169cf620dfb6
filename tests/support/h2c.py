"""gRPC calls over cleartext HTTP/2 (h2c) in captures, made byte by byte:
frames, length-prefixed gRPC messages, request headers through the real
`hpack` encoder, and a capture of one connection (the capture tests of
lbparse.capture.h2 and grpc, and the report's tables from a gRPC-only
capture)."""

from __future__ import annotations

import gzip
from pathlib import Path

import hpack

from lbparse_generated.proto import api_pb2
from support import capwriter as cw


def frame(ftype: int, flags: int, sid: int, payload: bytes) -> bytes:
    return (
        len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload
    )


def grpc_message(body: bytes, flag: int = 0) -> bytes:
    return bytes([flag]) + len(body).to_bytes(4, "big") + body


SETTINGS = frame(4, 0, 0, b"")


def request_headers(enc: hpack.Encoder, method: str, *extra: tuple[str, str]) -> bytes:
    return enc.encode(
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", f"/proto.API/{method}"),
            (":authority", "127.0.0.1"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            *extra,
        ]
    )


def h2c_capture(
    path: Path,
    client: list[bytes],
    server: list[bytes],
    port: int = 7001,
    handshake: bool = True,
    mss: int | None = None,
    fin: bool = False,
) -> Path:
    """A capture of one connection: the client's bytes, then the server's,
    alternating by piece (`fin`: then both close)."""
    conn = cw.Conn(("127.0.0.1", 51000), ("127.0.0.1", port))
    pkts = conn.handshake() if handshake else []
    for i in range(max(len(client), len(server))):
        if i < len(client):
            pkts += conn.send("c", client[i], mss)
        if i < len(server):
            pkts += conn.send("s", server[i], mss)
    if fin:
        pkts += [conn.fin("c"), conn.fin("s")]
    cw.write_pcap(
        str(path), [(1.7e9 + i / 1e3, cw.link(cw.ETHERNET, p)) for i, p in enumerate(pkts)]
    )
    return path


def unary_capture(tmp_path: Path, mss: int | None = None) -> Path:
    ce, se = hpack.Encoder(), hpack.Encoder()
    req = api_pb2.FetchCursorRequest(stream="orders", partition=2, cursorId="c1")
    resp = api_pb2.FetchCursorResponse(offset=41)
    client = [
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + SETTINGS
        + frame(1, 4, 1, request_headers(ce, "FetchCursor", ("grpc-encoding", "gzip")))
        + frame(0, 1, 1, grpc_message(gzip.compress(req.SerializeToString()), 1))
    ]
    server = [
        SETTINGS
        + frame(1, 4, 1, se.encode([(":status", "200"), ("content-type", "application/grpc")]))
        + frame(0, 0, 1, grpc_message(resp.SerializeToString()))
        + frame(1, 5, 1, se.encode([("grpc-status", "0"), ("grpc-message", "")]))
    ]
    # A second call on the same connection, its path from HPACK's dynamic table.
    client.append(
        frame(1, 4, 3, request_headers(ce, "FetchCursor"))
        + frame(0, 1, 3, grpc_message(req.SerializeToString()))
    )
    server.append(
        frame(
            1,
            5,
            3,
            se.encode(
                [
                    (":status", "200"),
                    ("grpc-status", "5"),
                    ("grpc-message", "no such stream: orders%0A"),
                ]
            ),
        )
    )
    return h2c_capture(tmp_path / "unary.pcap", client, server, mss=mss)
