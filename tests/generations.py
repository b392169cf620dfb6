"""Captures of one envelope generation each, for the tests of auto with context.

`legacy_capture`: a v1.0.0-alpha client's traffic: legacy proto.Messages
(byte for byte v0 Publishes: ambiguous alone) on one connection, and
legacy Acks (which only legacy reads cleanly: proof) on another, a little
later. `v0_capture`: today's Liftbridge: Publishes (ambiguous alone)
before and after MsgTypes only v0 has, on two connections.
"""

from __future__ import annotations

from pathlib import Path

from support.capwriter import ETHERNET, Conn, link, pub, write_pcap

import lbparse

M = lbparse.message_class

LEGACY_MESSAGE = lbparse.encode(
    M("proto.Message")(key=b"k", value=b"legacy", stream="s", subject="foo"), layout="legacy"
)
LEGACY_ACK = bytes.fromhex(
    "b90e43b4000800000a01731205666f6f2e311a03666f6f200a2a0461636b73320263313801"
)
V0_PUBLISH = lbparse.encode(M("proto.Message")(key=b"k", value=b"v0", stream="s", subject="foo"))
V0_INFO = lbparse.encode(M("protocol.ServerInfoRequest")(id="node1"))


def _write(path: Path, conns: list[tuple[Conn, list[tuple[str, bytes]]]]) -> None:
    frames: list[bytes] = []
    for conn, _ in conns:
        frames += conn.handshake()
    # Round robin, one message a turn, so that the connections interleave.
    queues = [list(items) for _, items in conns]
    while any(queues):
        for (conn, _), q in zip(conns, queues):
            if q:
                subject, payload = q.pop(0)
                frames += conn.send("c", pub(subject, payload))
    write_pcap(
        str(path), [(1_763_700_000 + i * 0.001, link(ETHERNET, f)) for i, f in enumerate(frames)]
    )


def legacy_capture(path: Path, messages: int = 6, acks_from: int = 3) -> Path:
    """Legacy Messages on connection 1; on connection 2, padding then legacy Acks."""
    a = Conn(client=("127.0.0.1", 40001))
    b = Conn(client=("127.0.0.1", 40002))
    filler = [("other", b"not an envelope")] * acks_from
    _write(
        path,
        [(a, [("orders", LEGACY_MESSAGE)] * messages), (b, filler + [("acks", LEGACY_ACK)] * 2)],
    )
    return path


def v0_capture(path: Path) -> Path:
    """Publishes on connection 1 (first before any proof); a ServerInfoRequest on
    connection 2 after the first Publish, then on connection 1 too."""
    a = Conn(client=("127.0.0.1", 40011))
    b = Conn(client=("127.0.0.1", 40012))
    _write(
        path,
        [
            (a, [("orders", V0_PUBLISH)] * 3 + [("info", V0_INFO)] + [("orders", V0_PUBLISH)] * 2),
            (b, [("other", b"plain")] + [("info", V0_INFO)]),
        ],
    )
    return path
