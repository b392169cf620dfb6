"""make test's waiting lane (tests/support/lanes.py): each test it names is
there, and a real pytest-xdist run gives that worker those tests and the
others the rest."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.lanes import WAITING, waits

ROOT = Path(__file__).resolve().parents[2]
GAPS = "tests/live/test_live_gaps.py"
# Two tests of a WAITING module that need no server (an instant each), and
# this module's quick ones, which are not WAITING's.
LANE_TESTS = [
    f"{GAPS}::test_offsets_skipped_across_an_outage_are_counted",
    f"{GAPS}::test_without_offsets_the_estimate_is_said_to_be_one",
]
OTHERS = "tests/support/test_lanes.py::test_each_waiting_entry_names_a_test_that_is_there"


@pytest.mark.parametrize("prefix", WAITING)
def test_each_waiting_entry_names_a_test_that_is_there(prefix: str) -> None:
    path, _, name = prefix.partition("::")
    file = ROOT / path
    assert file.is_file(), f"{prefix}: no {path}"
    if name:
        defined = {
            n.name for n in ast.walk(ast.parse(file.read_text())) if isinstance(n, ast.FunctionDef)
        }
        assert name in defined, f"{prefix}: {path} has no test {name}"


def test_waits_is_by_node_id_and_never_a_group() -> None:
    assert all(waits(t) for t in LANE_TESTS)
    assert not waits(OTHERS) and not waits("spark-interrupts")


@pytest.mark.slow
def test_a_run_gives_the_lane_worker_the_waiting_tests(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-v",
            "-n",
            "1",
            "--dist",
            "loadgroup",
            "--waiting-lane",
            "--basetemp",
            str(tmp_path / "base"),
            *LANE_TESTS,
            OTHERS,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "created: 2/2 workers" in done.stdout  # -n 1, and the lane
    ran = re.findall(r"^\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", done.stdout, re.M)
    assert sorted(t for w, t in ran if w == "gw1") == sorted(LANE_TESTS), ran
    others = [t for w, t in ran if w == "gw0"]
    assert others and all(t.startswith(OTHERS) for t in others), ran
