"""Build capture files for tests: TCP segments in Ethernet, Linux cooked,
BSD loopback or raw IP frames, written as pcap or pcapng; and gRPC calls
over cleartext HTTP/2 (h2c) in them, made byte by byte (frames,
length-prefixed gRPC messages, request headers through the real `hpack`
encoder).

Written for the tests (not a general tool): checksums are left zero, as
captures of locally generated traffic show them with offload.
"""

from __future__ import annotations

import gzip
import ipaddress
import struct
from collections.abc import Iterable
from pathlib import Path

import hpack

from lbparse_generated.proto import api_pb2

ETHERNET, NULL, RAW, LOOP, LINUX_SLL, LINUX_SLL2 = 1, 0, 101, 108, 113, 276
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def ip_tcp(
    src: str, sport: int, dst: str, dport: int, seq: int, ack: int, flags: int, data: bytes = b""
) -> bytes:
    """An IPv4 or IPv6 packet (by the address family of `src`) with a TCP segment."""
    tcp = (
        struct.pack(
            "!HHIIHHHH",
            sport,
            dport,
            seq & 0xFFFFFFFF,
            ack & 0xFFFFFFFF,
            (5 << 12) | flags,
            65535,
            0,
            0,
        )
        + data
    )
    s, d = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    if s.version == 4:
        return (
            struct.pack(
                "!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, s.packed, d.packed
            )
            + tcp
        )
    return struct.pack("!IHBB16s16s", 6 << 28, len(tcp), 6, 64, s.packed, d.packed) + tcp


def link(linktype: int, packet: bytes) -> bytes:
    """Frame an IP packet for `linktype`."""
    v6 = packet[0] >> 4 == 6
    if linktype == ETHERNET:  # as on Linux loopback: zero MACs
        return b"\0" * 12 + (b"\x86\xdd" if v6 else b"\x08\x00") + packet
    if linktype == LINUX_SLL:
        return struct.pack("!HHH8sH", 0, 772, 6, b"\0" * 8, 0x86DD if v6 else 0x0800) + packet
    if linktype == LINUX_SLL2:
        return (
            struct.pack("!HHIHBB8s", 0x86DD if v6 else 0x0800, 0, 1, 772, 0, 6, b"\0" * 8) + packet
        )
    if linktype == NULL:
        return struct.pack("<I", 30 if v6 else 2) + packet
    if linktype == LOOP:
        return struct.pack("!I", 24 if v6 else 2) + packet
    if linktype == RAW:
        return packet
    raise ValueError(linktype)


class Conn:
    """One TCP connection's packets, tracking sequence numbers both ways."""

    def __init__(
        self,
        client: tuple[str, int] = ("127.0.0.1", 40000),
        server: tuple[str, int] = ("127.0.0.1", 4222),
        isn: tuple[int, int] = (1000, 0xFFFFFF00),
    ) -> None:
        # The server's ISN is near 2**32 so that every test crosses the wrap.
        self.ends = {"c": client, "s": server}
        self.seq = {"c": isn[0], "s": isn[1]}

    def _pkt(self, side: str, seq: int, flags: int, data: bytes) -> bytes:
        other = "s" if side == "c" else "c"
        (src, sport), (dst, dport) = self.ends[side], self.ends[other]
        return ip_tcp(src, sport, dst, dport, seq, self.seq[other], flags, data)

    def handshake(self) -> list[bytes]:
        c, s = self.seq["c"], self.seq["s"]
        out = [
            ip_tcp(*self.ends["c"], *self.ends["s"], c, 0, SYN),
            ip_tcp(*self.ends["s"], *self.ends["c"], s, c + 1, SYN | ACK),
        ]
        self.seq = {"c": c + 1, "s": s + 1}
        out.append(self._pkt("c", self.seq["c"], ACK, b""))
        return out

    def send(self, side: str, data: bytes, mss: int | None = None) -> list[bytes]:
        """Segments carrying `data` from `side` ("c" or "s"), in order."""
        out = []
        step = mss or max(len(data), 1)
        for i in range(0, len(data), step):
            out.append(self._pkt(side, self.seq[side], PSH | ACK, data[i : i + step]))
            self.seq[side] += len(data[i : i + step])
        return out

    def segment_at(self, side: str, seq: int, data: bytes) -> bytes:
        """A segment at an explicit sequence number (retransmissions, overlaps)."""
        return self._pkt(side, seq, PSH | ACK, data)

    def fin(self, side: str) -> bytes:
        return self._pkt(side, self.seq[side], FIN | ACK, b"")


NS = 1_000_000_000


def write_pcap(
    path: str,
    frames: Iterable[tuple[float | int, bytes]],
    linktype: int = ETHERNET,
    nanos: bool = False,
    big_endian: bool = False,
    snaplen: int = 262144,
) -> None:
    """`frames`: (time, frame); a time is float seconds or integer nanoseconds
    (written exactly, to the file's resolution)."""
    e = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    with open(path, "wb") as f:
        f.write(struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))
        for ts, frame in frames:
            if isinstance(ts, int):
                sec, ns = divmod(ts, NS)
                frac = ns if nanos else ns // 1000
            else:
                sec = int(ts)
                frac = round((ts - sec) * (1e9 if nanos else 1e6))
            cap = frame[:snaplen]
            f.write(struct.pack(e + "IIII", sec, frac, len(cap), len(frame)) + cap)


def _block(e: str, btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", n)


def write_pcapng(
    path: str,
    interfaces: list[tuple[int, int, int]],
    packets: Iterable[tuple[int, float | int, bytes]],
    big_endian: bool = False,
) -> None:
    """`interfaces`: (linktype, if_tsresol byte, snaplen); `packets`: (interface,
    time, frame), a time float seconds or integer nanoseconds (exact where
    the interface's resolution holds it)."""
    e = ">" if big_endian else "<"
    ticks = [(1 << (r & 0x7F)) if r & 0x80 else 10**r for _, r, _ in interfaces]
    with open(path, "wb") as f:
        f.write(_block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1)))
        f.write(_block(e, 0x00000004, b""))  # a name resolution block, to be skipped
        for lt, res, snap in interfaces:
            opts = struct.pack(e + "HHB3x", 9, 1, res) + struct.pack(e + "HH", 0, 0)
            f.write(_block(e, 1, struct.pack(e + "HHI", lt, 0, snap) + opts))
        for iface, ts, frame in packets:
            units = ts * ticks[iface] // NS if isinstance(ts, int) else round(ts * ticks[iface])
            cap = frame[: interfaces[iface][2]]
            f.write(
                _block(
                    e,
                    6,
                    struct.pack(
                        e + "IIIII", iface, units >> 32, units & 0xFFFFFFFF, len(cap), len(frame)
                    )
                    + cap,
                )
            )


def write_pcapng_units(
    path: Path, tsresol: int, offset_s: int, units: list[int], frames: list[bytes]
) -> None:
    """A pcapng whose interface has `tsresol` and `if_tsoffset`, each packet
    stamped with raw `units` (cycled)."""
    opts = (
        struct.pack("<HHB3x", 9, 1, tsresol)
        + struct.pack("<HHq", 14, 8, offset_s)
        + struct.pack("<HH", 0, 0)
    )
    blocks = [
        _block("<", 0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
        _block("<", 1, struct.pack("<HHI", ETHERNET, 0, 65535) + opts),
    ]
    for k, frame in enumerate(frames):
        u = units[k % len(units)]
        blocks.append(
            _block(
                "<",
                6,
                struct.pack("<IIIII", 0, u >> 32, u & 0xFFFFFFFF, len(frame), len(frame)) + frame,
            )
        )
    path.write_bytes(b"".join(blocks))


def pub(
    subject: str,
    payload: bytes,
    reply: str | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> bytes:
    """A PUB or HPUB frame as nats-py writes it (two spaces for no reply)."""
    r = reply or ""
    if headers is None:
        return f"PUB {subject} {r} {len(payload)}\r\n".encode() + payload + b"\r\n"
    hdr = b"NATS/1.0\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers) + b"\r\n"
    return (
        f"HPUB {subject} {r} {len(hdr)} {len(hdr) + len(payload)}\r\n".encode()
        + hdr
        + payload
        + b"\r\n"
    )


def msg(
    subject: str,
    sid: int,
    payload: bytes,
    reply: str | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> bytes:
    """A MSG or HMSG frame as nats-server writes it."""
    r = f" {reply}" if reply else ""
    if headers is None:
        return f"MSG {subject} {sid}{r} {len(payload)}\r\n".encode() + payload + b"\r\n"
    hdr = b"NATS/1.0\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in headers) + b"\r\n"
    return (
        f"HMSG {subject} {sid}{r} {len(hdr)} {len(hdr) + len(payload)}\r\n".encode()
        + hdr
        + payload
        + b"\r\n"
    )


# --- gRPC calls over cleartext HTTP/2 (h2c) ---


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
    conn = Conn(("127.0.0.1", 51000), ("127.0.0.1", port))
    pkts = conn.handshake() if handshake else []
    for i in range(max(len(client), len(server))):
        if i < len(client):
            pkts += conn.send("c", client[i], mss)
        if i < len(server):
            pkts += conn.send("s", server[i], mss)
    if fin:
        pkts += [conn.fin("c"), conn.fin("s")]
    write_pcap(str(path), [(1.7e9 + i / 1e3, link(ETHERNET, p)) for i, p in enumerate(pkts)])
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
