"""`lbparse tap` and `lbparse record` when the NATS server goes away (issue #12).

A real nats-server is killed (SIGKILL, by PID) under a running tap or
record and started again on the same port: the tool says when the
connection was lost, reconnects, says after how long and what may have
been missed, receives what is published afterwards, and exits 1 (messages
may be missing). A server that never comes back makes it give up after
--reconnect-timeout with exit 1; a record file is whole and readable in
every case.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import LBPARSE
from support.net import free_port

from lbparse.capture import CaptureReader

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
NATS_SERVER = "nats-server"


class Server:
    """A nats-server on a fixed loopback port, killed and restarted by PID."""

    def __init__(self, port: int, log: Path) -> None:
        self.port = port
        self.log = log
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        from support.net import wait_accepting

        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [NATS_SERVER, "-a", "127.0.0.1", "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_accepting(self.port, self.proc)

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    if subprocess.run(["which", NATS_SERVER], capture_output=True).returncode:
        pytest.skip("nats-server is not installed")
    s = Server(free_port(), tmp_path / "nats-server.log")
    s.start()
    try:
        yield s
    finally:
        s.stop()


class Tool:
    """`lbparse tap|record ...` as a process; its stderr lines, read as they come."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [*LBPARSE, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.lines: list[str] = []

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        for line in self.lines:
            if text in line:
                return line
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stderr], [], [], 0.2)
            if r:
                line = self.proc.stderr.readline().decode(errors="replace")
                if not line and self.proc.poll() is not None:
                    break
                self.lines.append(line)
                if text in line:
                    return line
        raise AssertionError(
            f"no line with {text!r} within {timeout} s; stderr so far: {''.join(self.lines)}"
        )

    def finish(self, timeout: float = 30.0) -> tuple[int, str, str]:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate(timeout=5)
            raise AssertionError(f"did not finish; stderr: {''.join(self.lines)}") from None
        return self.proc.returncode, out.decode(), "".join(self.lines) + err.decode()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)


def publish(url: str, first: int, n: int) -> None:
    async def go() -> None:
        import nats

        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=5)
        try:
            for i in range(first, first + n):
                await nc.publish(f"lb.r{i}", b"message %d" % i)
            await nc.flush(timeout=5)
        finally:
            await nc.close()

    asyncio.run(go())


def lose_and_restore(server: Server, tool: Tool) -> None:
    """5 messages, the server killed and started again, 5 more."""
    publish(server.url, 0, 5)
    time.sleep(0.5)  # delivered to the tool before the server goes
    server.kill()
    lost = tool.wait_for("lost at")
    assert server.url in lost and "reconnecting for up to 30 s" in lost
    time.sleep(1.0)  # an outage the tool must measure
    server.start()
    back = tool.wait_for("reconnected")
    seconds = float(back.split(" after ")[1].split(" s;")[0])
    assert 1.0 <= seconds < 20
    assert "messages published meanwhile were not received" in back
    # The subscription is made again on reconnection: wait until the server has it.
    time.sleep(0.5)
    publish(server.url, 5, 5)


def test_tap_reconnects_says_so_and_exits_1(server: Server) -> None:
    tap = Tool("tap", server.url, "lb.>", "--count", "10", "--reconnect-timeout", "30")
    try:
        tap.wait_for("listening on")
        lose_and_restore(server, tap)
        rc, out, err = tap.finish()
    finally:
        tap.kill()
    recs = [json.loads(line) for line in out.splitlines()]
    assert [r["subject"] for r in recs] == [f"lb.r{i}" for i in range(10)]
    assert len({r["dst"] for r in recs[:5]} | {r["dst"] for r in recs[5:]}) == 2  # a new connection
    assert rc == 1
    assert "10 messages; connection lost 1 time(s)" in err


def test_tap_gives_up_when_the_server_never_comes_back(server: Server) -> None:
    tap = Tool("tap", server.url, "lb.>", "--reconnect-timeout", "2")
    try:
        tap.wait_for("listening on")
        publish(server.url, 0, 3)
        time.sleep(0.5)  # delivered to the tap before the server goes
        server.kill()
        start = time.monotonic()
        rc, out, err = tap.finish(timeout=30)
        took = time.monotonic() - start
    finally:
        tap.kill()
    assert rc == 1 and 2 <= took < 20
    assert len(out.splitlines()) == 3
    assert "did not come back within 2 s: giving up" in err
    assert "the server did not come back: gave up" in err


def test_no_reconnect_when_told_not_to(server: Server) -> None:
    tap = Tool("tap", server.url, "lb.>", "--reconnect-timeout", "0")
    try:
        tap.wait_for("listening on")
        server.kill()
        rc, _, err = tap.finish(timeout=20)
    finally:
        tap.kill()
    assert rc == 1 and "not reconnecting (--reconnect-timeout 0)" in err


@pytest.mark.parametrize("ext", ["jsonl", "parquet"])
def test_record_reconnects_and_its_file_holds_every_message_received(
    server: Server, tmp_path: Path, ext: str
) -> None:
    out = tmp_path / f"rec.{ext}"
    rec = Tool(
        "record", server.url, "lb.>", "-o", str(out), "--count", "10", "--reconnect-timeout", "30"
    )
    try:
        rec.wait_for("listening on")
        lose_and_restore(server, rec)
        rc, _, err = rec.finish()
    finally:
        rec.kill()
    assert rc == 1 and "10 messages; connection lost 1 time(s)" in err
    got = list(CaptureReader(str(out)))
    assert [r.subject for r in got] == [f"lb.r{i}" for i in range(10)]


@pytest.mark.parametrize("ext", ["jsonl", "parquet"])
def test_a_record_file_is_whole_when_the_server_never_comes_back(
    server: Server, tmp_path: Path, ext: str
) -> None:
    out = tmp_path / f"rec.{ext}"
    rec = Tool("record", server.url, "lb.>", "-o", str(out), "--reconnect-timeout", "1")
    try:
        rec.wait_for("listening on")
        publish(server.url, 0, 4)
        time.sleep(0.5)
        server.kill()
        rc, _, err = rec.finish(timeout=30)
    finally:
        rec.kill()
    assert rc == 1 and "gave up" in err
    assert [r.subject for r in CaptureReader(str(out))] == [f"lb.r{i}" for i in range(4)]


def _lines_of(proc: subprocess.Popen, got: list[bytes], want: int, timeout: float = 10.0) -> None:
    """Read the process's stdout, as it comes, until it has given `want` lines."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while sum(chunk.count(b"\n") for chunk in got) < want and time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.1)[0]:
            got.append(os.read(proc.stdout.fileno(), 1 << 16))


def test_each_message_reaches_the_output_as_it_comes(server: Server, tmp_path: Path) -> None:
    """Outputs are flushed whenever the writer has caught up (not at each
    message: a flood is written in large writes): a message that comes on
    its own is in tap's stdout and in record's JSON Lines file at once,
    while both still run."""
    out = tmp_path / "live.jsonl"
    # stdout a pipe, as a user's `| jq`: block-buffered unless flushed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    record = Tool("record", server.url, "lb.>", "-o", str(out), "--reconnect-timeout", "0", env=env)
    tap = Tool("tap", server.url, "lb.>", "--reconnect-timeout", "0", env=env)
    shown: list[bytes] = []
    try:
        record.wait_for("listening on")
        tap.wait_for("listening on")
        for i in range(1, 4):
            publish(server.url, i, 1)
            _lines_of(tap.proc, shown, i)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and out.read_bytes().count(b"\n") < i:
                time.sleep(0.05)
            assert out.read_bytes().count(b"\n") == i, f"record: message {i} not in the file"
            assert b"".join(shown).count(b"\n") == i, f"tap: message {i} not on stdout"
        assert record.proc.poll() is None and tap.proc.poll() is None
    finally:
        record.kill()
        tap.kill()
