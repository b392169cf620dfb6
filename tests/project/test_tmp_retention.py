"""The suite's own temporary files (pyproject.toml's tmp_path_retention_policy):
a passed test's tmp_path is removed when it ends and a failed test's is kept,
so a whole run never holds every test's files at once (one kept 2.2 GB, and
a CI machine with less disk ran out)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASE = """\
def test_passes(tmp_path):
    (tmp_path / "written").write_bytes(bytes(4096))


def test_fails(tmp_path):
    (tmp_path / "evidence").write_bytes(b"kept")
    assert False, "fails on purpose"
"""


@pytest.mark.slow  # a pytest run of its own
def test_a_passed_tests_files_go_and_a_failed_tests_stay(tmp_path: Path) -> None:
    case = tmp_path / "case"
    case.mkdir()
    (case / "test_case.py").write_text(CASE)
    base = tmp_path / "base"
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(case),
            "--basetemp",
            str(base),
            str(case / "test_case.py"),
        ],
        cwd=case,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, done.stdout[-2000:]
    left = sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())
    assert left == ["test_fails0/evidence"], left


def test_the_processes_the_tests_start_write_in_the_runs_directory() -> None:
    """support/testrun.py: TMPDIR for what the tests start, removed at the end."""
    from support import testrun

    assert os.path.isdir(testrun.PATH) and os.environ["TMPDIR"] == testrun.PATH
    done = subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp())"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    made = done.stdout.strip()
    assert os.path.dirname(made) == testrun.PATH, made
    os.rmdir(made)
