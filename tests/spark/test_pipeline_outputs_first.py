"""The pipeline's output location: checked before any input is read and
before Spark starts (one line, exit 2, no JVM), and a task's write that
fails on a full disk said as the output's problem (issue #47, class 7).

The inputs of the refusals are a FIFO nobody writes: a run that opened it
would wait for ever, so one that refuses in time has not read it. The
read-only place is a real read-only tmpfs, the full disk a real 256 KiB
tmpfs, the immutable directory a real `chattr +i`; all are undone in a
`finally`, and a case skips with its reason where the machine does not
allow it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.shared import LIFTBRIDGE
from support.system import mounted, silent_fifo  # noqa: F401  (a fixture)

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"
ROOT_ONLY = pytest.mark.skipif(os.getuid() != 0, reason="mount and chattr need root")
# Spark's first words on stderr when its JVM starts (log4j's lines, the ivy
# resolution, a WARN of NativeCodeLoader): none may appear in a refusal.
JVM_WORDS = ("WARN", "INFO", "ERROR", "SparkContext", "log4j")


def pipeline(*args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "lbparse",
            "pipeline",
            "--test-conf",
            "--master",
            "local[1]",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done, time.monotonic() - start


def refused_at_once(done: subprocess.CompletedProcess[str], seconds: float, *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    err = done.stderr
    assert err.count("\n") == 1 and err.startswith("lbparse pipeline: "), err
    assert "Errno" not in err and "Traceback" not in err, err
    assert not any(w in err for w in JVM_WORDS), err
    for w in words:
        assert w in err, (w, err)
    assert seconds < 20, seconds  # a JVM start alone takes longer on these machines' 2 cores


@pytest.mark.slow  # `lbparse pipeline` runs (refused before the JVM, after PySpark's import)
@ROOT_ONLY
def test_a_read_only_place_is_refused_before_spark(tmp_path: Path, silent_fifo: Path) -> None:
    """The old run started Spark and failed after 8.5 s with a raw [Errno 30]."""
    with mounted(tmp_path / "ro", "size=64k", "ro") as ro:
        for out, where in ((ro / "out", f"cannot make it in {ro}"), (ro, "cannot write in it")):
            done, seconds = pipeline(str(silent_fifo), "-o", str(out))
            refused_at_once(done, seconds, f"-o/--output {out}", where, "Read-only file system")


@pytest.mark.slow  # `lbparse pipeline` runs (refused before the JVM, after PySpark's import)
@ROOT_ONLY
def test_an_immutable_directory_is_refused_before_spark(tmp_path: Path, silent_fifo: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(["chattr", "+i", str(out)], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"chattr +i not possible here: {done.stderr.strip()}")
    try:
        run, seconds = pipeline(str(silent_fifo), "-o", str(out))
        refused_at_once(run, seconds, "immutable")
    finally:
        subprocess.run(["chattr", "-i", str(out)], capture_output=True, timeout=30)
    assert os.listdir(out) == []


@pytest.mark.slow  # `lbparse pipeline` runs (refused before the JVM, after PySpark's import)
def test_a_place_spark_could_not_write_is_refused_before_spark(
    tmp_path: Path, silent_fifo: Path
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    for out, words in (
        (str(afile / "out"), ("Not a directory",)),
        (str(tmp_path / ("o" * 256)), ("NAME_MAX",)),
        # what the tasks write under DIR would pass PATH_MAX
        (str(tmp_path / "/".join(["d" * 250] * 16)), ("PATH_MAX",)),
        ("", ("an empty name",)),
    ):
        done, seconds = pipeline(str(silent_fifo), "-o", out)
        refused_at_once(done, seconds, *words)


@pytest.mark.slow
@ROOT_ONLY
@pytest.mark.skipif(not SHORT.is_file(), reason=f"shared material missing: {SHORT}")
def test_a_full_disk_in_a_task_is_the_last_line(tmp_path: Path) -> None:
    """The old run's last line was "An exception was thrown from the Python
    worker:", its cause 40 lines above in the JVM's log."""
    with mounted(tmp_path / "full", "size=256k") as full:
        out = full / "p"
        done, _ = pipeline(str(SHORT), "-o", str(out), "-q", timeout=600)
        assert done.returncode == 3, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("lbparse pipeline: FAILED"), last
        assert f"{out}: cannot write: No space left on device" in last, last
        assert "Python worker" not in last, last
        # nothing of the run but what says it failed: no staging directory, no table
        assert set(os.listdir(out)) <= {"summary.json"}, os.listdir(out)
