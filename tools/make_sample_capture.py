"""How lbparse/examples/sample.pcap was made: real traffic, captured.

    sudo python tools/make_sample_capture.py [OUT.pcap]

Starts a nats-server on a free loopback port and tcpdump on that port,
connects a subscriber (to everything) and a publisher with nats-py, and
publishes `sample_messages()`: Liftbridge envelopes of every v0 MsgType
(with and without CRC-32C, some with NATS headers or a reply subject), a
ReplicationResponse with commit-log entries, a few damaged envelopes and
a few plain NATS messages that are no envelope at all. The server
delivers each one to the subscriber, so the capture holds every message
twice: PUB/HPUB from the publisher, MSG/HMSG to the subscriber.

The messages are deterministic; the capture (ports, timestamps) is not,
which is why the pcap itself is committed.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import lbparse
from lbparse.codec.commitlog import CommitLogEntry, ReplicationResponse

__all__ = ["sample_messages"]

T0 = 1_763_700_000_000_000_000  # ns


def _msg(name: str, **fields: object) -> object:
    cls = lbparse.message_class(name)
    m = cls()
    for k, v in fields.items():
        if isinstance(v, dict):
            getattr(m, k).update(v)
        elif isinstance(v, list):
            getattr(m, k).extend(v)
        else:
            setattr(m, k, v)
    return m


def sample_messages(seed: int = 20261121) -> list[tuple[str, bytes, str | None, list | None]]:
    """(subject, payload, reply, headers) of every message the capture holds."""
    rnd = random.Random(seed)
    out: list[tuple[str, bytes, str | None, list | None]] = []
    for i in range(40):  # publishes and their acks: most of any real traffic
        stream = rnd.choice(["orders", "payments", "audit"])
        subject = f"{stream}.{rnd.choice(['eu', 'us'])}"
        pub = _msg(
            "proto.Message",
            offset=1000 + i,
            key=b"%s-%04d" % (stream.encode(), i),
            value=b'{"amount": %d}' % rnd.randrange(1, 500),
            stream=stream,
            partition=i % 3,
            subject=subject,
            timestamp=T0 + i * 1_000_000,
            ackInbox=f"_INBOX.acks.{i % 4}",
            correlationId=f"corr-{i:04d}",
            ackPolicy=rnd.choice([0, 1, 2]),
            headers={"content-type": b"application/json"} if i % 3 == 0 else {},
        )
        out.append(
            (
                subject,
                lbparse.encode(pub, crc=i % 2 == 0),
                None,
                [["Nats-Msg-Id", f"m-{i}"]] if i % 5 == 0 else None,
            )
        )
        ack = _msg(
            "proto.Ack",
            stream=stream,
            partitionSubject=f"{subject}.{i % 3}",
            msgSubject=subject,
            offset=1000 + i,
            ackInbox=f"_INBOX.acks.{i % 4}",
            correlationId=f"corr-{i:04d}",
            ackPolicy=1,
            receptionTimestamp=T0 + i * 1_000_000 + 50_000,
            commitTimestamp=T0 + i * 1_000_000 + 90_000,
            ackError=0 if i % 13 else 2,
        )
        out.append((f"_INBOX.acks.{i % 4}", lbparse.encode(ack, crc=True), None, None))
    server = "liftbridge-default"
    rpcs = [
        (
            "protocol.ReplicationRequest",
            dict(replicaID="s2", offset=1039, leaderEpoch=4),
            f"{server}.replicate.orders.0",
        ),
        (
            "protocol.RaftJoinRequest",
            dict(nodeID="s3", nodeAddr="10.0.0.3:9293"),
            f"{server}.raft.join",
        ),
        ("protocol.RaftJoinResponse", dict(error=""), f"{server}.raft.join.reply"),
        ("protocol.LeaderEpochOffsetRequest", dict(leaderEpoch=3), f"{server}.leo"),
        ("protocol.LeaderEpochOffsetResponse", dict(endOffset=1020), f"{server}.leo.reply"),
        ("protocol.ServerInfoRequest", dict(id="s1"), f"{server}.info"),
        (
            "protocol.ServerInfoResponse",
            dict(id="s1", host="10.0.0.1", port=9292),
            f"{server}.info.reply",
        ),
        ("protocol.PartitionStatusRequest", dict(stream="orders", partition=1), f"{server}.status"),
        (
            "protocol.PartitionStatusResponse",
            dict(exists=True, isLeader=True),
            f"{server}.status.reply",
        ),
        (
            "protocol.PartitionNotification",
            dict(stream="orders", partition=2),
            f"{server}.notify.s2",
        ),
    ]
    for name, fields, subject in rpcs:
        out.append((subject, lbparse.encode(_msg(name, **fields), crc=True), None, None))
    prop = _msg("protocol.PropagatedRequest", op=5)
    prop.deleteStreamOp.stream = "audit"
    out.append((f"{server}.propagate", lbparse.encode(prop, crc=True), "_INBOX.prop.1", None))
    resp = _msg("protocol.PropagatedResponse", op=5)
    out.append(("_INBOX.prop.1", lbparse.encode(resp), None, None))
    entries = [
        CommitLogEntry(
            1000 + j,
            T0 + j * 1_000_000,
            4,
            key=b"orders-%04d" % j,
            value=b'{"amount": %d}' % (10 * j),
            headers=[("subject", b"orders.eu")],
        )
        for j in range(5)
    ]
    out.append(
        (
            f"{server}.replicate.orders.0.reply",
            lbparse.encode(ReplicationResponse(4, 1004, entries), crc=True),
            None,
            None,
        )
    )
    good = out[0][1]
    out += [  # damaged on purpose: each is a row with its error
        ("orders.eu", good[:12] + bytes([good[12] ^ 0x20]) + good[13:], None, None),
        ("orders.eu", good[:10], None, None),
        ("orders.eu", good[:7] + b"\x2a" + good[8:], None, None),
    ]
    out += [
        (f"metrics.{n}", f'{{"cpu": {rnd.random():.3f}}}'.encode(), None, None)
        for n in ("s1", "s2")
    ]  # plain NATS traffic: no envelope
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nats-server did not listen on 127.0.0.1:{port}")


async def _traffic(url: str, messages: list) -> None:
    import nats

    sub_nc = await nats.connect(url, name="subscriber")
    pub_nc = await nats.connect(url, name="publisher")
    got = asyncio.Event()
    seen = 0

    async def on_msg(_m: object) -> None:
        nonlocal seen
        seen += 1
        if seen == len(messages):
            got.set()

    await sub_nc.subscribe(">", cb=on_msg)
    await sub_nc.flush()
    for subject, payload, reply, headers in messages:
        await pub_nc.publish(
            subject, payload, reply=reply or "", headers=dict(headers) if headers else None
        )
        await asyncio.sleep(0.002)  # a few packets, not one: like real traffic
    await pub_nc.flush()
    await asyncio.wait_for(got.wait(), 10)
    await pub_nc.close()
    await sub_nc.close()


def main(out: str) -> int:
    for tool in ("nats-server", "tcpdump"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed (apt-get install {tool})")
    port = _free_port()
    with tempfile.TemporaryDirectory() as d:
        server = subprocess.Popen(
            ["nats-server", "-a", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        dump = None
        try:
            _wait_port(port)
            tmp = os.path.join(d, "capture.pcap")
            # --immediate-mode: with buffered delivery, packets that arrive in
            # a burst can still sit in the kernel ring when tcpdump is stopped.
            dump = subprocess.Popen(
                [
                    "tcpdump",
                    "-i",
                    "lo",
                    "--immediate-mode",
                    "-s",
                    "0",
                    "-w",
                    tmp,
                    f"tcp port {port}",
                ],
                stderr=subprocess.PIPE,
            )
            line = dump.stderr.readline().decode()  # "listening on lo, ..." once it is
            if "listening" not in line:
                raise RuntimeError(f"tcpdump: {line.strip()}")
            asyncio.run(_traffic(f"nats://127.0.0.1:{port}", sample_messages()))
            time.sleep(0.5)
        finally:
            if dump is not None:
                dump.send_signal(signal.SIGINT)
                dump.wait(timeout=10)
            server.terminate()
            server.wait(timeout=10)
        shutil.copy(tmp, out)
    print(f"{out}: {os.path.getsize(out):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(
        main(
            sys.argv[1]
            if len(sys.argv) > 1
            else os.path.join(os.path.dirname(__file__), "sample.pcap")
        )
    )
