"""Places an output may be that are not a plain directory: a FIFO nobody
writes (opening it to read waits for ever), and a tmpfs mounted for a test
(root only). Shared by the outputs-first tests of the command line and of
the pipeline; `silent_fifo` is a fixture, imported by the module using it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


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
