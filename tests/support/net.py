"""Loopback ports for the servers tests start, and waiting for capture files."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

NATS_SERVER = shutil.which("nats-server") or "/usr/bin/nats-server"


def _ephemeral_low() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port(span: int = 1) -> int:
    """A free loopback port (the first of `span` free in a row) below the
    ephemeral range. A server on an ephemeral port can share its number with
    the local end of some other test's connection, and a capture filtered by
    port (`port N`, `portrange`) then takes in that stranger's traffic: a
    gRPC connection already under way, read without its HPACK state."""
    top = _ephemeral_low() - span
    rng = random.SystemRandom()
    for _ in range(200):
        base = rng.randrange(10000 if top > 11000 else 1024, top)
        socks: list[socket.socket] = []
        try:
            for p in range(base, base + span):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return socks[0].getsockname()[1]
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {span} free loopback port(s) in a row below {top + span}")


def wait_file_settles(path: Path, quiet: float = 0.5, limit: float = 15.0) -> None:
    """Return once `path` has not grown for `quiet` seconds (at most `limit`):
    a capture tool may write the last packets well after they were sent."""
    deadline = time.monotonic() + limit
    size, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = path.stat().st_size if path.exists() else 0
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.05)


def wait_accepting(port: int, proc: subprocess.Popen, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nats-server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nats-server did not accept on 127.0.0.1:{port} within {timeout}s")


def stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
