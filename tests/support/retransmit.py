"""Captures where TCP bytes come twice, the second copy differing or not
(issue #27: a retransmission with other bytes is a notice), for the
reference's tests (tests/capture/test_tcp_retransmission.py) and the C loop's
(tests/capture/test_native_capture.py, whole and cut into ranges).

Each builder takes the file's path and writes a pcap there; CAPTURES names
them all with the `retransmission` notices the reference gives (how many).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lbparse.capture.tcp import RETRANSMIT_WINDOW
from support import capwriter as cw

Packets = list[bytes]


def write(path: Path, packets: Packets) -> str:
    cw.write_pcap(
        str(path),
        [(1_763_700_000 + i * 0.001, cw.link(cw.ETHERNET, p)) for i, p in enumerate(packets)],
    )
    return str(path)


def other_bytes(path: Path) -> str:
    """A message retransmitted at its place with other bytes, then one more."""
    conn = cw.Conn()
    packets = conn.handshake()
    first = conn.seq["c"]
    packets += conn.send("c", b"PUB a 5\r\nhello\r\n")
    packets.append(conn.segment_at("c", first, b"PUB a 5\r\nHELLO\r\n"))  # same place, new bytes
    packets += conn.send("c", b"PUB b 2\r\nok\r\n")
    return write(path, packets)


def same_bytes(path: Path) -> str:
    """The same, the retransmission holding the very bytes sent (and a part of them)."""
    conn = cw.Conn()
    packets = conn.handshake()
    first = conn.seq["c"]
    packets += conn.send("c", b"PUB a 5\r\nhello\r\n", mss=7)
    packets.append(conn.segment_at("c", first, b"PUB a 5\r\nhello\r\n"))
    packets.append(conn.segment_at("c", first + 9, b"hello\r\nPUB"))  # past what was sent
    packets += conn.send("c", b"PUB b 2\r\nok\r\n")
    return write(path, packets)


def long_stream(n: int = 4 * RETRANSMIT_WINDOW) -> bytes:
    """`n` bytes or so of PUBs, each payload distinct (one subject: a
    reading's counts do not grow with the stream)."""
    out = bytearray()
    i = 0
    while len(out) < n:
        payload = b"%06d" % i * 10
        out += b"PUB s %d\r\n%s\r\n" % (len(payload), payload)
        i += 1
    return bytes(out)


def back_by(back: int, flip: int, length: int = 40) -> Callable[[Path], str]:
    """A long stream sent in uneven segments, then `length` bytes at
    `back` bytes behind its end, equal to those sent but for the byte at
    index `flip` of the retransmission (none if outside it)."""

    def build(path: Path) -> str:
        conn = cw.Conn()
        packets = conn.handshake()
        first = conn.seq["c"]
        stream = long_stream()
        # the window's ring wraps within each part, and a segment larger
        # than the window fills it at once
        for at, end, mss in (
            (0, 5000, 1460),
            (5000, 5300, 7),
            (5300, 10500, None),
            (10500, len(stream), 1000),
        ):
            packets += conn.send("c", stream[at:end], mss=mss)
        start = len(stream) - back
        again = bytearray(stream[start : start + length])
        if 0 <= flip < len(again):
            again[flip] ^= 0x20
        packets.append(conn.segment_at("c", first + start, bytes(again)))
        packets += conn.send("c", b"PUB end 2\r\nok\r\n")
        return write(path, packets)

    build.__name__ = f"back_{back}_flip_{flip}"
    return build


def beyond_window(path: Path) -> str:
    """The first message retransmitted with other bytes after more than the
    window was delivered: not compared (the documented limit)."""
    return back_by(len(long_stream()), 12)(path)


def once_per_direction(path: Path) -> str:
    """Differing copies twice each way, then the same addresses and ports
    for a new connection (SYN) and one more: three notices."""
    conn = cw.Conn()
    packets = conn.handshake()
    c0, s0 = conn.seq["c"], conn.seq["s"]
    packets += conn.send("c", b"PUB a 5\r\nhello\r\n") + conn.send("s", b"MSG a 1 2\r\nhi\r\n")
    packets.append(conn.segment_at("c", c0, b"PUB a 5\r\nHELLO\r\n"))
    packets.append(conn.segment_at("s", s0 + 3, b"x"))
    packets += conn.send("c", b"PUB b 2\r\nok\r\n")
    packets.append(conn.segment_at("c", c0 + 16, b"PUB B"))  # differs again: not told
    packets.append(conn.segment_at("s", s0, b"MSG b"))
    packets.append(conn.fin("c"))
    conn.seq = {"c": 77_000, "s": 5}
    packets += conn.handshake()
    c0 = conn.seq["c"]
    packets += conn.send("c", b"PUB c 3\r\nnew\r\n")
    packets.append(conn.segment_at("c", c0 + 9, b"old"))  # a new connection: told again
    return write(path, packets)


def overlap_waiting(path: Path) -> str:
    """A segment waits behind a hole; the one that fills the hole runs into
    it with other bytes: the waiting copy's old part is compared (drain)."""
    conn = cw.Conn()
    packets = conn.handshake()
    c0 = conn.seq["c"]
    stream = b"PUB a 5\r\nhello\r\nPUB b 5\r\nworld\r\n"  # 16 + 16 bytes
    packets.append(conn.segment_at("c", c0, stream[:10]))
    packets.append(conn.segment_at("c", c0 + 26, stream[26:]))  # waits behind 10..26
    packets.append(conn.segment_at("c", c0 + 10, stream[10:30].replace(b"world", b"WORLD")))
    conn.seq["c"] = c0 + len(stream)
    packets += conn.send("c", b"PUB c 2\r\nok\r\n")
    return write(path, packets)


def after_a_loss(path: Path) -> str:
    """Bytes declared lost (the peer acknowledged past them), then a late
    copy of them: the window was emptied by the loss, so nothing is
    compared with bytes that were never there; a copy of bytes delivered
    after the loss is compared."""
    conn = cw.Conn()
    packets = conn.handshake()
    c0 = conn.seq["c"]
    stream = b"PUB a 5\r\nhello\r\nPUB b 5\r\nworld\r\nPUB c 5\r\nthree\r\nPUB d 4\r\nfour\r\n"
    packets.append(conn.segment_at("c", c0, stream[:16]))
    packets.append(conn.segment_at("c", c0 + 32, stream[32:48]))  # 16..32 never comes
    packets.append(cw.ip_tcp(*conn.ends["s"], *conn.ends["c"], conn.seq["s"], c0 + 48, cw.ACK))
    packets.append(conn.segment_at("c", c0 + 48, stream[48:]))  # 16..32 declared lost
    packets.append(conn.segment_at("c", c0 + 16, b"PUB b 5\r\nWORLD\r\n"))  # too late
    packets.append(conn.segment_at("c", c0 + 32, b"PUB c 5\r\nTHREE\r\n"))
    return write(path, packets)


# name -> (builder, retransmission notices the reference gives)
CAPTURES: dict[str, tuple[Callable[[Path], str], int]] = {
    "other_bytes": (other_bytes, 1),
    "same_bytes": (same_bytes, 0),
    "beyond_window": (beyond_window, 0),
    "once_per_direction": (once_per_direction, 3),
    "overlap_waiting": (overlap_waiting, 1),
    "after_a_loss": (after_a_loss, 1),
    **{
        f"back_{b}_flip_{f}": (back_by(b, f), n)
        for b, f, n in [
            (40, 0, 1),
            (40, 39, 1),
            (40, 40, 0),
            (1, 0, 1),
            (RETRANSMIT_WINDOW, 0, 1),
            (RETRANSMIT_WINDOW + 1, 0, 0),
            (RETRANSMIT_WINDOW + 1, 1, 1),
            (RETRANSMIT_WINDOW + 20, 19, 0),
            (RETRANSMIT_WINDOW + 20, 20, 1),
            (3000, 17, 1),
            (7000, 5, 0),
        ]
    },
}
