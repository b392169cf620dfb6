"""An interrupted `lbparse pipeline` keeps the previous results (issue #25).

Ctrl-C during `pipeline --overwrite` deleted the earlier messages/, left
the old summary.json saying "ok" for data that no longer existed, and
printed four Python tracebacks and JVM errors. Here real signals go to a
real `lbparse pipeline` process running a real Spark job (local[1], two
real captures of the shared Liftbridge run, so that there are two tasks
of a few seconds each), at several points of its run, found by watching
what the run prints and writes: before Spark starts, as its JVM starts,
while the job runs, after a task has written its files, and as the new
summary is made (just before or during the swap). Each time: the earlier
output is there, byte for byte, with its own summary (or the new one is
there whole, with its own), nothing else is left, the process group holds
no process (no JVM or Python worker outlives the run), the exit status is
130 (either signal), and stderr ends with one line saying how many rows
were done and what was kept, with no traceback and no JVM error.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.shared import LIFTBRIDGE
from support.system import read_available

from lbparse.columnar.sources import SourceOptions, UnitStats, read_unit
from lbparse.pipeline.input_plan import plan

# The module's tests on one worker, one after the other: each times its signal by
# what a run prints or writes, and two runs at once would slow each other's.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark-interrupts")]

CAPTURES = [LIFTBRIDGE / "samples" / "short.pcapng", LIFTBRIDGE / "samples" / "api-short.pcapng"]
LINE = re.compile(
    r"lbparse pipeline: interrupted \((SIGINT|SIGTERM)\) after ([\d,]+) rows; "
    r"(previous output kept \(.*\)|nothing written to .*|"
    r"the new output was already in place in .*)"
)


def _command(out: Path, *extra: str, inputs: list[Path] = CAPTURES) -> list[str]:
    return [
        sys.executable,
        "-P",
        "-m",
        "lbparse",
        "pipeline",
        "--test-conf",
        "--master",
        "local[1]",
        *map(str, inputs),
        "-o",
        str(out),
        *extra,
    ]


@pytest.fixture(scope="module")
def earlier(run: dict[str, Any]) -> Path:
    """A finished run's output, what an interrupted re-run must keep: any
    will do, so the one the pipeline's tests share (conftest's `run`, made
    once a run) rather than a run of its own (~40 s of a CI worker)."""
    if not all(c.is_file() for c in CAPTURES):
        pytest.skip("shared captures missing")
    return Path(run["out"])


def input_rows(inputs: list[Path] = CAPTURES) -> int:
    """At most the rows a whole run makes of `inputs`: every row the tasks'
    own reader makes of them, read here without Spark (of CAPTURES 15,208,
    input problems included: the run keeps 15,190)."""
    units = plan([str(c) for c in inputs], SourceOptions())
    return sum(
        batch.num_rows
        for u in units
        for batch in read_unit(u, SourceOptions(), UnitStats(u.path, u.format, u.size))
    )


def fingerprint(out: Path) -> dict[str, str]:
    """Every file under `out` and a hash of its bytes."""
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file()
    }


def consistent(out: Path) -> int:
    """The rows of out/messages, which out/summary.json must count exactly."""
    summary = json.loads((out / "summary.json").read_text())
    rows = sum(
        pq.ParquetFile(p).metadata.num_rows for p in (out / "messages").rglob("part-*.parquet")
    )
    assert summary["outcome"] in ("ok", "problems") and summary["totals"]["rows"] == rows
    return rows


def interrupt(
    out: Path,
    sig: int,
    when: Callable[[str, Path], bool],
    group: bool,
    *extra: str,
    inputs: list[Path] = CAPTURES,
) -> tuple[int, str, Path]:
    """Run the pipeline into `out`; send `sig` when `when(stderr so far, out)`
    says so (to the process group, as a terminal's Ctrl-C does, or to the
    process alone, as `kill PID`). Its exit status and stderr."""
    proc = subprocess.Popen(
        _command(out, *extra, inputs=inputs),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    os.set_blocking(fd, False)
    got = b""
    deadline = time.monotonic() + 300
    sent = False
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            got += read_available(fd)
            if when(got.decode(errors="replace"), out):
                (os.killpg if group else os.kill)(proc.pid, sig)
                sent = True
                break
            time.sleep(0.002)
        assert sent, f"the run ended before the point was reached:\n{got[-3000:]!r}"
        proc.wait(timeout=300)
        got += read_available(fd)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        proc.stderr.close()
    err = got.decode(errors="replace")
    _group_is_gone(proc.pid)
    return proc.returncode, err, out


def _group_is_gone(pgid: int) -> None:
    """No process of the run's group is left (the JVM, Spark's Python workers)."""
    for _ in range(200):  # bounded: 20 s
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(pgid, signal.SIGKILL)
    pytest.fail("processes of the interrupted run were still running 20 s after it ended")


def one_line(rc: int, err: str, sig: int) -> tuple[int, str]:
    """The exit status is 130; stderr ends with the one line; rows, and what it says."""
    assert rc == 130, err[-3000:]
    assert "Traceback" not in err and "Exception" not in err and " ERROR " not in err, err
    lines = err.strip().splitlines()
    assert sum("interrupted" in ln for ln in lines) == 1, err
    m = LINE.fullmatch(lines[-1])
    assert m and m.group(1) == signal.Signals(sig).name, lines[-1]
    return int(m.group(2).replace(",", "")), m.group(3)


def _copy(earlier: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    out = tmp_path / "out"
    shutil.copytree(earlier, out)
    return out, fingerprint(out)


def _staging(out: Path) -> list[Path]:
    return list(out.glob(".lbparse-staging-*"))


def _said(text: str) -> Callable[[str, Path], bool]:
    return lambda err, _out: text in err


def _task_files(err: str, out: Path) -> bool:
    """A task has written and closed its files (the other still runs)."""
    return any(p.is_dir() for p in out.glob(".lbparse-staging-*/_temporary/*/*"))


def _jvm_starting(err: str, out: Path) -> bool:
    """The run's Spark JVM is there (a SparkSubmit process whose parent's
    command line names `out`), just started: Spark starts after the notice of
    what --overwrite replaces, and a JVM takes a second or more to open the
    gateway PySpark waits for."""
    if "at the end of the run" not in err:
        return False
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"SparkSubmit" in (proc / "cmdline").read_bytes():
                parent = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
                if str(out).encode() in Path(f"/proc/{parent}/cmdline").read_bytes():
                    return True
        except OSError:  # gone meanwhile
            continue
    return False


def _summary_made(err: str, out: Path) -> bool:
    """The new summary is in the staging directory: the swap is next, or under way."""
    return bool(
        list(out.glob(".lbparse-staging-*/summary.json"))
        or not list(out.glob(".lbparse-staging-*"))
        and "task(s)" in err
    )


def test_sigint_before_spark_starts_keeps_the_earlier_output(earlier: Path, tmp_path: Path) -> None:
    out, before = _copy(earlier, tmp_path)
    # --overwrite says what it will replace just before Spark starts
    rc, err, _ = interrupt(out, signal.SIGINT, _said("at the end of the run"), True, "--overwrite")
    rows, kept = one_line(rc, err, signal.SIGINT)
    assert rows == 0 and kept.startswith("previous output kept") and "messages" in kept
    assert "task(s)" not in err  # Spark had not planned the job
    assert fingerprint(out) == before and not _staging(out)


def test_sigint_while_spark_starts_stops_its_jvm_too(earlier: Path, tmp_path: Path) -> None:
    """Ctrl-C as Spark's JVM starts, before PySpark has its gateway: the JVM
    ignores SIGINT (PySpark starts it so) and exits with its Python only once
    the gateway is up. Interrupted there, PySpark's wait removed the file the
    JVM was to write, and the JVM lived on, alone, with a stack trace on
    stderr. Now the run kills the JVM it launched: the group empties (the
    check of `interrupt`), one line, the output kept."""
    out, before = _copy(earlier, tmp_path)
    rc, err, _ = interrupt(out, signal.SIGINT, _jvm_starting, True, "--overwrite")
    rows, kept = one_line(rc, err, signal.SIGINT)
    assert rows == 0 and kept.startswith("previous output kept") and "messages" in kept
    assert fingerprint(out) == before and not _staging(out)


def test_sigterm_while_the_job_runs_keeps_the_earlier_output(earlier: Path, tmp_path: Path) -> None:
    out, before = _copy(earlier, tmp_path)
    rc, err, _ = interrupt(out, signal.SIGTERM, _said("task(s)"), False, "--overwrite")
    rows, kept = one_line(rc, err, signal.SIGTERM)
    assert kept.startswith("previous output kept")
    assert fingerprint(out) == before and not _staging(out)
    consistent(out)


@pytest.fixture(scope="module")
def a_long_task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture whose task takes seconds: api-short.pcapng's section 12 times
    over in one pcapng file (a pcapng may hold many sections; the reader
    reads each)."""
    path = tmp_path_factory.mktemp("long") / "api-short-x12.pcapng"
    path.write_bytes(CAPTURES[1].read_bytes() * 12)
    return path


def test_sigint_after_a_task_wrote_counts_its_rows_and_keeps_the_earlier_output(
    earlier: Path, tmp_path: Path, a_long_task: Path
) -> None:
    """Tasks run one by one (local[1]) in the order of the inputs: after the
    first task's files, a second for the task's end to reach the driver, and
    the signal lands in a later task (the last takes seconds: the run does not
    end before the signal, as a run of two small tasks could)."""
    out, before = _copy(earlier, tmp_path)
    inputs = [*CAPTURES, a_long_task]

    def later(err: str, o: Path) -> bool:
        if not _task_files(err, o):
            return False
        time.sleep(1.0)  # the task's end, and its rows, reach the driver
        return True

    rc, err, _ = interrupt(out, signal.SIGINT, later, True, "--overwrite", inputs=inputs)
    rows, kept = one_line(rc, err, signal.SIGINT)
    if kept.startswith("previous output kept"):
        # the rows of the tasks done (all of them if the job had just ended)
        assert 0 < rows <= input_rows(inputs)
        assert fingerprint(out) == before
    else:  # the later tasks were quicker than the second we waited: the new output, whole
        assert kept.startswith("the new output") and rows == consistent(out)
    assert not _staging(out)


def test_a_first_run_interrupted_leaves_nothing(tmp_path: Path) -> None:
    if not all(c.is_file() for c in CAPTURES):
        pytest.skip("shared captures missing")
    out = tmp_path / "out"
    rc, err, _ = interrupt(out, signal.SIGINT, _said("task(s)"), True)
    rows, kept = one_line(rc, err, signal.SIGINT)
    assert kept.startswith("nothing written")
    assert not out.exists() or list(out.iterdir()) == []


def test_a_signal_at_the_swap_leaves_one_whole_output(earlier: Path, tmp_path: Path) -> None:
    """Sent as the new summary appears (the swap is next or under way): the
    swap is a few renames with the signals held back, so DIR holds either
    the earlier output or the new one, each whole with its own summary."""
    out, before = _copy(earlier, tmp_path)
    rc, err, _ = interrupt(out, signal.SIGTERM, _summary_made, True, "--overwrite")
    rows, kept = one_line(rc, err, signal.SIGTERM)
    if kept.startswith("previous output kept"):
        assert fingerprint(out) == before
    else:
        assert kept.startswith("the new output") and rows == consistent(out)
    consistent(out)
    assert not _staging(out)


# `lbparse pipeline` whose job, once it has returned, has a SIGTERM land: the
# latest a signal can come before the run is over (CI saw one land there: the
# run said "previous output kept" over the new output).
SIGNAL_AFTER_THE_JOB = """\
import os, signal, sys
from lbparse.cli import main
from lbparse.pipeline import job

def run_then_signal(*args, **kwargs):
    summary = job_run(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)
    return summary

job_run, job.run = job.run, run_then_signal
sys.exit(main(sys.argv[1:]))
"""


def test_a_signal_after_the_swap_says_the_new_output_is_in_place(
    earlier: Path, tmp_path: Path
) -> None:
    out, before = _copy(earlier, tmp_path)
    res = subprocess.run(
        [sys.executable, "-P", "-c", SIGNAL_AFTER_THE_JOB, *_command(out, "--overwrite")[4:]],
        capture_output=True,
        text=True,
        timeout=600,
    )
    rows, kept = one_line(res.returncode, res.stderr, signal.SIGTERM)
    assert kept.startswith("the new output was already in place"), res.stderr[-2000:]
    assert rows == consistent(out) and fingerprint(out) != before
    assert not _staging(out)


def test_a_killed_runs_staging_is_removed_by_the_next_run(earlier: Path, tmp_path: Path) -> None:
    """SIGKILL: nothing can clean up, but the earlier output is untouched, and
    the next run into DIR removes what the killed one left."""
    out, before = _copy(earlier, tmp_path)
    proc = subprocess.Popen(
        _command(out, "--overwrite", "-q"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(3000):  # bounded: 300 s
            if _task_files("", out) or proc.poll() is not None:
                break
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    _group_is_gone(proc.pid)
    assert _staging(out), "the killed run had not started writing"
    assert {k: v for k, v in fingerprint(out).items() if not k.startswith(".")} == before
    res = subprocess.run(
        _command(out, "--overwrite", "-q"), capture_output=True, text=True, timeout=600
    )
    assert res.returncode in (0, 1), res.stderr[-3000:]
    assert not _staging(out)
    consistent(out)
