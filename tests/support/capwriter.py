"""Build capture files for tests: TCP segments in Ethernet, Linux cooked,
BSD loopback or raw IP frames, written as pcap or pcapng.

Written for the tests (not a general tool): checksums are left zero, as
captures of locally generated traffic show them with offload.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable

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
