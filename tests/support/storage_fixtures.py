"""Fixtures of the on-disk tests: the shared sample data directories, extracted once."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.shared import LIFTBRIDGE

SAMPLE = LIFTBRIDGE / "samples" / "data-short.tar.gz"
LISTING = LIFTBRIDGE / "samples" / "data-short.listing.txt"
LBTRUTH = LIFTBRIDGE / "bin" / "lbtruth"


@pytest.fixture(scope="session")
def short_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The three data directories of the shared `short` run (node1..node3)."""
    out = tmp_path_factory.mktemp("data-short")
    yield extract_short_data(out)
    shutil.rmtree(out, ignore_errors=True)


def extract_short_data(into: Path) -> Path:
    """INTO/data-short: the `short` run's data directories, from the shared sample."""
    if not SAMPLE.is_file():
        pytest.skip(f"shared material missing: {SAMPLE} (set LBPARSE_SHARED)")
    with tarfile.open(SAMPLE) as tar:
        tar.extractall(into, filter="data")
    return into / "data-short"


def lbtruth(*args: str, panics: bool = False) -> list[str]:
    """Liftbridge's own reading (bin/lbtruth), line by line; skip where it is missing.

    lbtruth panics where upstream code panics (damaged data); with
    `panics`, the lines it wrote before are the answer."""
    if not LBTRUTH.is_file():
        pytest.skip(f"shared material missing: {LBTRUTH}")
    res = subprocess.run([str(LBTRUTH), *args], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 or (panics and "panic" in res.stderr), res.stderr
    return res.stdout.splitlines()
