"""The pipeline's input plan: large captures cut later, in a process beside
Spark's start (lbparse.pipeline.cutting), into exactly the units that
cutting at once gives."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.shared import shared_path

import lbparse
from lbparse.capture import native_batches
from lbparse.columnar.sources import SourceOptions, cuttable
from lbparse.pipeline import cutting
from lbparse.pipeline.cutting import Cutting
from lbparse.pipeline.input_plan import cut_captures, plan

pytestmark = pytest.mark.skipif(not native_batches.available(), reason="the C capture reader")


def inputs(tmp: Path) -> list[str]:
    """Two real captures (pcapng and pcap), a JSON Lines file, a file in no
    format, a missing path, and a directory holding a capture."""
    d = tmp / "dir"
    d.mkdir()
    shutil.copy(shared_path("captures", "nats_1000.pcap"), d / "copy.pcap")
    (tmp / "records.jsonl").write_text("{}\n")
    (tmp / "notes.txt").write_text("not a capture\n")
    return [
        str(shared_path("liftbridge", "samples", "short.pcapng")),
        str(shared_path("captures", "nats_1000.pcap")),
        str(tmp / "records.jsonl"),
        str(tmp / "notes.txt"),
        str(tmp / "missing.pcap"),
        str(d),
    ]


@pytest.mark.parametrize("every", [pytest.param(20_000, marks=pytest.mark.slow), 1 << 40])
def test_cutting_later_plans_what_cutting_at_once_does(tmp_path: Path, every: int) -> None:
    paths = inputs(tmp_path)
    options = SourceOptions(capture_unit_bytes=every)
    at_once = plan(paths, options)
    uncut = plan(paths, options, cut=False)
    # Uncut: one unit per file, each capture whole.
    assert [u.path for u in uncut] == list(dict.fromkeys(u.path for u in at_once))
    assert all(u.nbytes == u.size and u.start == 0 and u.stop == -1 for u in uncut)
    assert cut_captures(uncut, options) == at_once
    with Cutting(uncut, options) as c:
        # A process only when there is something to cut.
        assert (c._proc is not None) == (every == 20_000)
        assert c.result() == at_once
    if every == 20_000:  # the captures were cut, else this test says nothing
        assert len(at_once) > len(uncut) + 10


@pytest.mark.slow
def test_the_process_gives_what_the_pass_here_gives(tmp_path: Path) -> None:
    """`python -m lbparse.pipeline.cutting` itself: its units are cut_captures'
    (a fallback in result() would hide a process that always fails)."""
    options = SourceOptions(capture_unit_bytes=20_000)
    uncut = plan(inputs(tmp_path), options, cut=False)
    todo = [u for u in uncut if cuttable(u, options)]
    assert len(todo) == 3  # the two captures and the directory's
    proc = cutting._start(todo, options)
    assert proc is not None
    got = cutting._finish(proc, len(todo))
    assert proc.returncode == 0
    assert got == [cut_captures([u], options) for u in todo]


def test_a_failed_process_is_replaced_by_the_pass_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process cannot import lbparse (PYTHONPATH pointing elsewhere, -I):
    result() runs the pass here, with the same units."""
    options = SourceOptions(capture_unit_bytes=20_000)
    uncut = plan(inputs(tmp_path), options, cut=False)
    monkeypatch.setattr(sys, "executable", shutil.which("false") or "/bin/false")
    with Cutting(uncut, options) as c:
        assert c._proc is not None
        assert c.result() == cut_captures(uncut, options)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with Cutting(uncut, options) as c:
        assert c._proc is None  # it could not start
        assert c.result() == cut_captures(uncut, options)


def test_close_stops_a_running_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupted run leaves no process behind: close() kills one still
    running (here a process that would wait for 60 s)."""
    options = SourceOptions(capture_unit_bytes=20_000)
    uncut = plan(inputs(tmp_path), options, cut=False)
    sleeper = tmp_path / "slow-python"
    sleeper.write_text("#!/bin/sh\nexec sleep 60\n")
    sleeper.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(sleeper))
    c = Cutting(uncut, options)
    proc = c._proc
    assert proc is not None and proc.poll() is None
    c.close()
    assert proc.returncode == -signal.SIGKILL
    assert c.result() == cut_captures(uncut, options)  # then the pass here


def _sigint_caught(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    caught = next(int(ln.split()[1], 16) for ln in status.splitlines() if ln.startswith("SigCgt:"))
    return bool(caught >> (signal.SIGINT - 1) & 1)


def _waiting_in_main(pid: int) -> bool:
    """lbparse imported (the C capture reader mapped) and SIGINT no longer
    Python's: main() is past its signal setting, waiting for its request."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
        return "capture/_native" in maps and not _sigint_caught(pid)
    except (OSError, StopIteration):
        return False


@pytest.mark.slow
def test_ctrl_c_ends_the_process_quietly() -> None:
    """Ctrl-C reaches the process group: the pass ends by the signal, without
    Python's KeyboardInterrupt traceback."""
    proc = subprocess.Popen(
        cutting.argv(), stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ
    )
    try:
        for _ in range(300):  # bounded: 30 s to start
            if _waiting_in_main(proc.pid):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the pass never reached main()")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGINT, err
    assert b"Traceback" not in err


def test_beside_false_cuts_here(tmp_path: Path) -> None:
    """A session already up (a test's, a bench's): no process, the same units."""
    options = SourceOptions(capture_unit_bytes=20_000)
    uncut = plan(inputs(tmp_path), options, cut=False)
    with Cutting(uncut, options, beside=False) as c:
        assert c._proc is None
        assert c.result() == cut_captures(uncut, options)


@pytest.mark.slow
def test_another_lbparse_in_the_process_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process imports an lbparse other than this one (here a copy first on
    its PYTHONPATH; in CI's pytest workers, which run without -P, the checkout's
    source once did, without its C modules): its cuts are not taken, the pass
    runs here."""
    options = SourceOptions(capture_unit_bytes=20_000)
    uncut = plan(inputs(tmp_path), options, cut=False)
    todo = [u for u in uncut if cuttable(u, options)]
    other = tmp_path / "other"
    here = Path(lbparse.__file__).parent
    shutil.copytree(here, other / "lbparse", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(other), os.environ.get("PYTHONPATH", "")])
    )
    proc = cutting._start(todo, options)
    assert proc is not None
    assert cutting._finish(proc, len(todo)) is None
    assert proc.returncode == 0  # it ran: its cuts were refused
    with Cutting(uncut, options) as c:
        assert c.result() == cut_captures(uncut, options)
