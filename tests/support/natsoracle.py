"""NATS messages of a capture found without lbparse: tshark's TCP segments, framed here.

tshark gives every TCP segment's payload and raw sequence number; each
direction of each connection is put together by sequence number here, and
cut into NATS operations by the protocol's own rule (a control line ending
in CRLF; PUB/HPUB/MSG/HMSG followed by the byte count their last argument
gives, and CRLF). Nothing of lbparse's capture code is used, so the
messages it finds are a check on lbparse's reassembly and parsing.
"""

from __future__ import annotations

import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

WITH_PAYLOAD = {b"PUB", b"HPUB", b"MSG", b"HMSG"}


@dataclass(frozen=True)
class Message:
    src: str
    dst: str
    verb: str
    subject: str
    data: bytes  # header block and payload, as on the wire


def tcp_streams(capture: Path) -> dict[tuple[str, str], bytes]:
    """(src, dst) as host:port -> the bytes that direction carried."""
    res = subprocess.run(
        [
            "tshark",
            "-r",
            str(capture),
            "-n",
            "-o",
            "tcp.desegment_tcp_streams:FALSE",
            "-Y",
            "tcp.len > 0",
            "-T",
            "fields",
            "-E",
            "separator=\t",
            "-e",
            "ip.src",
            "-e",
            "tcp.srcport",
            "-e",
            "ip.dst",
            "-e",
            "tcp.dstport",
            "-e",
            "tcp.seq_raw",
            "-e",
            "tcp.payload",
        ],
        capture_output=True,
        timeout=600,
        check=True,
    )
    segments: dict[tuple[str, str], dict[int, bytes]] = defaultdict(dict)
    for line in res.stdout.decode().splitlines():
        src, sport, dst, dport, seq, payload = line.split("\t")
        data = bytes.fromhex(payload.replace(":", ""))
        seg = segments[(f"{src}:{sport}", f"{dst}:{dport}")]
        if len(data) > len(seg.get(int(seq), b"")):
            seg[int(seq)] = data  # a retransmission keeps the longer copy
    out = {}
    for key, seg in segments.items():
        buf = bytearray()
        first = min(seg)
        for seq in sorted(seg):
            at = (seq - first) % (1 << 32)
            data = seg[seq]
            if at + len(data) > len(buf):
                buf += data[max(len(buf) - at, 0) :]
        out[key] = bytes(buf)
    return out


def messages(capture: Path) -> list[Message]:
    """Every PUB, HPUB, MSG and HMSG of the capture, per direction in order."""
    out = []
    for (src, dst), data in tcp_streams(capture).items():
        pos = 0
        while True:
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                break
            args = data[pos:eol].split()
            pos = eol + 2
            if not args or args[0].upper() not in WITH_PAYLOAD:
                continue
            size = int(args[-1])
            out.append(
                Message(
                    src, dst, args[0].upper().decode(), args[1].decode(), data[pos : pos + size]
                )
            )
            pos += size + 2
    return out
