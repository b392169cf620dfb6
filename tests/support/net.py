"""Loopback ports for the servers tests start, and waiting for capture files."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

NATS_SERVER = shutil.which("nats-server") or "/usr/bin/nats-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
