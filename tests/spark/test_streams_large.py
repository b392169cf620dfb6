"""format("liftbridge-streams") and its client on messages of the largest size
Liftbridge accepts: a real 3-node cluster of its own whose limits are raised
(NATS's max_payload, Liftbridge's clustering.replication.max.bytes), 1 MiB and
8 MiB messages published on NATS to the streams' subjects (a plain NATS
publish is stored whole as the value), read back byte for byte; batches
bounded by bytes, so a task's memory is bounded by its batch."""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")

from support.cluster import BIN
from support.live_cluster import LiveCluster, env_with_checkout
from support.net import NATS_SERVER

import lbparse.spark
from lbparse.spark.streams_source import BATCH_BYTES, batches
from lbparse.streams.client import StreamsClient
from lbparse_generated.proto import api_pb2

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (BIN / "liftbridge").exists() or not shutil.which(NATS_SERVER),
        reason="needs the shared Liftbridge binaries and nats-server",
    ),
]

MiB = 1 << 20
LARGEST = 8 * MiB  # the messages the cluster is set up to take (and twice that)
SIZES = [1 * MiB, 8 * MiB, 1 * MiB + 7, 8 * MiB - 3]  # the stream "big", in order
FLOOD = 24  # 8 MiB messages of the stream "flood" (192 MiB, one replica)


def _value(i: int, size: int) -> bytes:
    """A value of `size` bytes that differs with `i` all along (not one byte repeated)."""
    block = hashlib.sha256(b"%d" % i).digest() * 4  # 128 bytes
    return (block * (size // len(block) + 1))[:size]


def _nats_publish(port: int, subject: str, payloads: list[bytes]) -> None:
    """Plain NATS publishes on one connection, then a PING answered with PONG:
    the server has taken every one of them (bounded: 60 s of silence at most)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        info = sock.recv(65536)
        assert info.startswith(b"INFO "), info[:80]
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
        for payload in payloads:
            sock.sendall(b"PUB %s %d\r\n" % (subject.encode(), len(payload)) + payload + b"\r\n")
        sock.sendall(b"PING\r\n")
        seen = b""
        while b"PONG\r\n" not in seen:
            chunk = sock.recv(4096)
            assert chunk, f"NATS closed the connection: {seen[-200:]!r}"
            assert b"-ERR" not in chunk, chunk
            seen += chunk


def _committed(cluster: LiveCluster, stream: str, count: int, limit: float = 90.0) -> None:
    """Until the stream's partition 0 has `count` committed messages (bounded)."""
    deadline = time.monotonic() + limit
    with StreamsClient(cluster.addresses, timeout=10) as client:
        while client.partition(stream, 0).end < count:
            assert time.monotonic() < deadline, f"{stream}: not {count} messages committed"
            time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    live = LiveCluster(tmp_path_factory.mktemp("live-large"), max_message=2 * LARGEST)
    try:
        live.start()
        for name, replicas in (("big", 3), ("flood", 1)):
            live.api(
                "CreateStream",
                api_pb2.CreateStreamRequest(
                    subject=f"large.{name}", name=name, replicationFactor=replicas, partitions=1
                ),
            )
        with StreamsClient(live.addresses, timeout=10) as client:
            deadline = time.monotonic() + 30
            while not all(p.address for p in client.partitions(["big", "flood"])):
                assert time.monotonic() < deadline, "the streams got no leader"
                time.sleep(0.5)
        _nats_publish(live.nats_port, "large.big", [_value(i, n) for i, n in enumerate(SIZES)])
        _nats_publish(
            live.nats_port, "large.flood", [_value(100 + i, LARGEST) for i in range(FLOOD)]
        )
        _committed(live, "big", len(SIZES))
        _committed(live, "flood", FLOOD)
        yield live
    finally:
        live.stop()


def test_the_client_reads_1_and_8_mib_messages_whole(cluster: LiveCluster) -> None:
    with StreamsClient(cluster.addresses, timeout=10) as client:
        got = [(m.offset, m.value) for m in client.read("big", 0, 0, len(SIZES))]
    assert [o for o, _ in got] == list(range(len(SIZES)))
    assert [len(v) for _, v in got] == SIZES
    assert all(v == _value(i, n) for (i, v), n in zip(got, SIZES))


def test_batches_end_at_their_byte_bound(cluster: LiveCluster) -> None:
    """A batch ends once it holds BATCH_BYTES (its last message may pass it);
    4,096 rows of 8 MiB would be 32 GiB in one batch."""
    with StreamsClient(cluster.addresses, timeout=10) as client:
        sizes = [
            (b.num_rows, b.column("value").nbytes)
            for b in batches(client.read_raw("flood", 0, 0, FLOOD), "flood", 0, 0)
        ]
    assert sum(rows for rows, _ in sizes) == FLOOD
    assert all(nbytes < BATCH_BYTES + LARGEST + MiB for _, nbytes in sizes), sizes
    assert len(sizes) >= FLOOD * LARGEST // (BATCH_BYTES + LARGEST)


READ_ALL = """
import sys
from lbparse.spark.streams_source import batches
from lbparse.streams.client import StreamsClient

def peak():  # this process's own (ru_maxrss would count the parent's, as at fork)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

before = peak()
with StreamsClient(sys.argv[1].split(","), timeout=10) as client:
    rows = sum(b.num_rows for b in batches(client.read_raw("flood", 0, 0, int(sys.argv[2])),
                                          "flood", 0, 0))
print(rows, before, peak())
"""


def _growth(cluster: LiveCluster, count: int) -> int:
    """How much a task's read of the first `count` messages of "flood", in a
    process of its own, grows its peak memory (bytes)."""
    out = subprocess.run(
        [sys.executable, "-c", READ_ALL, cluster.servers, str(count)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env_with_checkout(),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows, before, after = map(int, out.stdout.split())
    assert rows == count
    return after - before


def test_a_tasks_memory_is_bounded_by_its_batch_not_by_the_partition(cluster: LiveCluster) -> None:
    """Reading 24 messages of 8 MiB (192 MiB) grows a task's peak memory by about
    what reading 8 of them does: the batch bounds it (16 MiB, and what gRPC
    holds ahead: ~200 MiB in all, ~260 MiB on a busy machine), not the data. A
    batch of every message (4,096 rows are every message here) holds each of
    them three times (the messages, their bytes joined, the Arrow columns):
    16 more messages would be 384 MiB more."""
    few, many = _growth(cluster, 8), _growth(cluster, FLOOD)
    assert many - few < 128 * MiB < 3 * (FLOOD - 8) * LARGEST, (few / MiB, many / MiB)
    assert many < 3 * FLOOD * LARGEST, many / MiB


@pytest.fixture(scope="module")
def session(spark: Any) -> Any:
    lbparse.spark.register(spark)
    return spark


def test_spark_reads_1_and_8_mib_messages_whole(
    session: Any, cluster: LiveCluster, tmp_path: Path
) -> None:
    df = (
        session.read.format("liftbridge-streams")
        .option("servers", cluster.servers)
        .option("stream", "big,flood")
        .load()
    )
    sums = {
        (r.stream, r.offset): (r.n, r.sha)
        for r in df.selectExpr(
            "stream", "offset", "length(value) AS n", "sha2(value, 256) AS sha"
        ).collect()
    }
    want = {("big", i): (n, hashlib.sha256(_value(i, n)).hexdigest()) for i, n in enumerate(SIZES)}
    want.update(
        {
            ("flood", i): (LARGEST, hashlib.sha256(_value(100 + i, LARGEST)).hexdigest())
            for i in range(FLOOD)
        }
    )
    assert sums == want
    # written and read back as users do: Parquet, then its rows
    df.where("stream = 'big'").write.parquet(str(tmp_path / "big"))
    back = session.read.parquet(str(tmp_path / "big")).orderBy("offset").collect()
    assert [bytes(r.value) for r in back] == [_value(i, n) for i, n in enumerate(SIZES)]
    assert {r.subject for r in back} == {"large.big"}
