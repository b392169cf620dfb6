"""The machine around an output, for tests of outputs: another local user
(what one user can plant for another), a FIFO nobody writes (opening it to
read waits for ever), and a tmpfs mounted for a test (root only);
`silent_fifo` is a fixture, imported by the module using it; a
process's memory from /proc (`status_mib`), and what a child's pipe holds
now (`read_available`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def throwaway_user() -> Iterator[int | None]:
    """The uid of a user made with useradd for the test and removed after it
    (root only; None elsewhere, where no other user can be made)."""
    if os.getuid() != 0 or shutil.which("useradd") is None:
        yield None
        return
    name = f"lbt{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
        timeout=60,
    )
    try:
        import pwd

        yield pwd.getpwnam(name).pw_uid
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)


# --- places an output may be that are not a plain directory (the outputs-first
# tests of the command line and of the pipeline) ---


@pytest.fixture
def silent_fifo(tmp_path: Path) -> Path:
    """A FIFO nobody writes: opening it to read waits for ever."""
    fifo = tmp_path / "silent.pcap"
    os.mkfifo(fifo)
    return fifo


@contextmanager
def mounted(where: Path, *options: str) -> Iterator[Path]:
    """A tmpfs at `where` (made), unmounted after; skip if mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(where)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True, timeout=30).returncode:
            subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def status_mib(pid: int, key: str) -> int | None:
    """A /proc/PID/status size (VmRSS, VmHWM: the process's own, unlike a
    child's ru_maxrss) in MiB; None once the process has ended."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) >> 10
    except OSError:  # it ended
        return None
    return None


def read_available(fd: int) -> bytes:
    """What a non-blocking pipe holds now, to its end once the writer is gone
    (a child's stdout or stderr read while it runs, without waiting)."""
    got = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return got
        if not chunk:
            return got
        got += chunk
