"""A real 3-node Liftbridge v1.9.0 cluster that stays up while tests talk to it.

run_cluster.sh (tests/support/cluster.py) plays a whole scenario and stops;
tests that read streams live need the cluster itself: one nats-server and
three nodes on free loopback ports, configured as run_cluster.sh's `short`
mode configures them, started once (a module fixture) and stopped by their
process ids. `publish` drives the real go-liftbridge client (lbclient),
`segment_entries` reads what a node keeps on disk with lbtruth.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from support.cluster import BIN
from support.net import NATS_SERVER, free_port

READY_TIMEOUT = 60.0  # seconds for the three nodes to elect and answer

CONFIG = """\
listen: 127.0.0.1:{port}
data.dir: {data}
metadata.cache.max.age: 2s
logging:
  level: info
nats:
  servers:
    - nats://127.0.0.1:{nats}
clustering:
  server.id: node{n}
  namespace: liftbridge-default
  raft.bootstrap.peers:
    - node1
    - node2
    - node3
  replica:
    max:
      lag.time: 6s
      leader.timeout: 3s
      idle.wait: 1s
cursors:
  stream:
    partitions: 1
    replication.factor: 3
"""

# With `max_message` set: NATS's max_payload and Liftbridge's largest message
# (clustering.replication.max.bytes, default 1 MiB: a larger publish is nacked
# TOO_LARGE) raised to hold messages of that many bytes, and their headers.
NATS_LIMITS = "max_payload: {payload}\n"
LARGE_CONFIG = "clustering:\n  replication.max.bytes: {replication}\n"
# ... and the replicas' patience Liftbridge's defaults give (15 s), not the
# 3 s that makes the other tests' failovers quick: a replication request of
# 16 MiB took longer than 3 s on a loaded CI machine, the followers reported
# the leader, and leader after leader was replaced before a message was
# committed (no failover is tested with large messages).
LARGE_REPLICA = (("lag.time: 6s", "lag.time: 30s"), ("leader.timeout: 3s", "leader.timeout: 15s"))


@dataclass
class LiveCluster:
    root: Path
    nats_port: int = 0
    lb_port: int = 0
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    max_message: int = 0  # bytes: 0 keeps NATS's and Liftbridge's limits (1 MiB)

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{self.lb_port + i}" for i in range(3)]

    @property
    def servers(self) -> str:
        return ",".join(self.addresses)

    def data(self, node: str) -> Path:
        return self.root / "data" / node

    def start(self) -> None:
        self.nats_port, self.lb_port = free_port(), free_port(3)
        logs = self.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        limits: list[str] = []
        if self.max_message:
            conf = logs / "nats-server.conf"
            # NATS's largest max_payload is 64 MiB
            conf.write_text(NATS_LIMITS.format(payload=min(2 * self.max_message, 64 << 20)))
            limits = ["-c", str(conf)]
        self.procs["nats"] = subprocess.Popen(
            [
                NATS_SERVER,
                *limits,
                "-a",
                "127.0.0.1",
                "-p",
                str(self.nats_port),
                "-l",
                str(logs / "nats-server.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # a node that finds no NATS exits at once ("no servers available")
        self._wait_accepting(f"127.0.0.1:{self.nats_port}")
        for n in (1, 2, 3):
            self.start_node(f"node{n}")
        self._wait_ready()

    def start_node(self, node: str) -> None:
        n = int(node[-1])
        logs = self.root / "logs"
        conf = logs / f"{node}.yaml"
        text = CONFIG.format(
            port=self.lb_port + n - 1, data=self.data(node), nats=self.nats_port, n=n
        )
        if self.max_message:
            text = text.replace(
                "clustering:\n", LARGE_CONFIG.format(replication=2 * self.max_message), 1
            )
            for short, patient in LARGE_REPLICA:
                assert short in text, short
                text = text.replace(short, patient)
        conf.write_text(text)
        with open(logs / f"{node}.log", "ab") as log:
            self.procs[node] = subprocess.Popen(
                [str(BIN / "liftbridge"), "--config", str(conf)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def _wait_ready(self) -> None:
        """Until every node accepts on its port (the metadata leader is elected
        later: lbclient's connect and the tests' first calls retry)."""
        deadline = time.monotonic() + READY_TIMEOUT
        for address in self.addresses:
            self._wait_accepting(address, deadline)

    def _wait_accepting(self, address: str, deadline: float | None = None) -> None:
        """Until `address` accepts a connection; a process that exits, or the
        deadline (READY_TIMEOUT from now by default) passing, is an error."""
        deadline = deadline or time.monotonic() + READY_TIMEOUT
        host, port = address.rsplit(":", 1)
        while True:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {proc.returncode}:\n" + self.log_tail(name)
                    )
            try:
                with socket.create_connection((host, int(port)), timeout=0.5):
                    return
            except OSError as err:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{address} not accepting after {READY_TIMEOUT} s") from err
                time.sleep(0.2)

    def log_tail(self, name: str) -> str:
        path = self.root / "logs" / f"{name}.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def kill(self, node: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(node)
        proc.send_signal(sig)
        proc.wait(timeout=30)

    def stop(self) -> None:
        """Every process started, by its id: the nodes first, then NATS."""
        for name in [n for n in self.procs if n != "nats"] + ["nats"]:
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    # -- the real client ---------------------------------------------------------

    def lbclient(
        self, *args: str, timeout: float = 180.0, background: bool = False
    ) -> subprocess.Popen[bytes] | subprocess.CompletedProcess[bytes]:
        argv = [
            str(BIN / "lbclient"),
            "-addrs",
            self.servers,
            "-nats",
            f"nats://127.0.0.1:{self.nats_port}",
            *args,
        ]
        if background:
            out = open(self.root / "logs" / "lbclient-bg.log", "ab")
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        done = subprocess.run(argv, capture_output=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(
                f"lbclient {' '.join(args)} exited {done.returncode}:\n"
                + done.stdout.decode(errors="replace")[-2000:]
            )
        return done

    # -- the API, for what lbclient does not do ------------------------------------

    def api(
        self, method: str, request: object, tries: int = 30, not_yet: tuple[str, ...] = ()
    ) -> object:
        """One unary call of Liftbridge's API (CreateStream with a subject of
        one's own, PauseStream, SetStreamReadonly, DeleteStream, Publish) at the
        first node, tried again while the cluster elects (`tries` seconds at most);
        `not_yet`: status codes (names) that mean the node has not caught up yet."""
        import grpc  # the streams extra: only the tests that use it need it

        from lbparse_generated.proto import api_pb2_grpc

        with grpc.insecure_channel(self.addresses[0]) as channel:
            call = getattr(api_pb2_grpc.APIStub(channel), method)
            for attempt in range(tries):
                try:
                    return call(request, timeout=5)
                except grpc.RpcError as exc:
                    if attempt == tries - 1 or exc.code() not in (
                        grpc.StatusCode.UNAVAILABLE,
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        grpc.StatusCode.INTERNAL,
                        grpc.StatusCode.FAILED_PRECONDITION,
                        *(getattr(grpc.StatusCode, code) for code in not_yet),
                    ):
                        raise
                    time.sleep(1.0)
        raise AssertionError("unreachable")

    def node_log_count(self, text: str) -> int:
        """How many lines of the nodes' logs hold `text`."""
        return sum(self.log_tail_all(f"node{n}").count(text) for n in (1, 2, 3))

    def log_tail_all(self, name: str) -> str:
        path = self.root / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- the truth on disk ---------------------------------------------------------

    def segment_entries(self, stream: str, partition: int) -> list[dict[str, object]]:
        """The partition's entries as lbtruth reads them from each node holding it,
        the longest replica's (replicas hold the same entries, a lagging one fewer)."""
        best: list[dict[str, object]] = []
        for node in ("node1", "node2", "node3"):
            folder = self.data(node) / "streams" / stream / str(partition)
            if not folder.is_dir():
                continue
            entries: list[dict[str, object]] = []
            for log in sorted(folder.glob("*.log")):
                out = subprocess.run(
                    [str(BIN / "lbtruth"), "segment", str(log)],
                    capture_output=True,
                    timeout=120,
                    check=True,
                )
                entries += [json.loads(line) for line in out.stdout.decode().splitlines()]
            if len(entries) > len(best):
                best = entries
        return best


@contextmanager
def temporary_cluster(prefix: str) -> Iterator[LiveCluster]:
    """A LiveCluster in a directory of its own (for the benches, outside pytest),
    started, and stopped and removed at the end."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    cluster = LiveCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def env_with_checkout() -> dict[str, str]:
    """The environment a subprocess needs to import this checkout's lbparse."""
    root = Path(__file__).resolve().parents[2]
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(root), str(root / "generated"), os.environ.get("PYTHONPATH", "")]
        ),
    )
