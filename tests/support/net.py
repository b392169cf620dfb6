"""Loopback ports for the servers tests start, and waiting for capture files."""

from __future__ import annotations

import socket
import time
from pathlib import Path


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
