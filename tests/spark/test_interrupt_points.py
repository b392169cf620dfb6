"""An interrupted `lbparse pipeline` says one line wherever the signal lands (issue #46 item 6).

Ctrl-C 10-12 s into a run printed py4j's tracebacks (`RuntimeError:
reentrant call`, `Py4JNetworkError`): PySpark's SIGINT handler called the
JVM from inside the call the main thread was making, and a handler that
raised there left the connection half read. test_interrupts.py sends a
signal at a handful of points found by what a run writes; here a run is
signalled at many: a sweep of delays spread over a whole run (seeded,
printed) and points found by watching it (its handlers just installed,
Spark a second into its start, the job planned, the driver's commit, the
new summary made, the new output swapped in; its JVM launching and a
task's files written are test_interrupts.py's), SIGINT to the process
group as a terminal's Ctrl-C sends it, SIGTERM to the group or to the
process alone as `kill PID` does.

Every run must end with exit status 130, stderr holding the command's own
lines only (`lbparse pipeline: ...`: no traceback, no py4j, no JVM line)
and ending with the one interrupted line, no process of its group left,
and DIR either as it was, byte for byte, or holding the new output whole
(as the line says), nothing half-written beside it.

The runs go two at a time (the machine's two cores); a run is a JVM start
and a job of a few seconds on copies of a real capture.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.shared import LIFTBRIDGE
from support.system import read_available
from test_interrupts import consistent, fingerprint

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark-interrupts")]

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"
API = LIFTBRIDGE / "samples" / "api-short.pcapng"
COPIES = 4  # of SHORT, with API: ~10 MB in a few tasks of local[2]
# Points of the sweep, one in each equal slice of a run. Each is a JVM's
# start and a job (~12 CPU-s): this sweep was the largest block of `make
# test`'s CPU. A deeper sweep: LBPARSE_INTERRUPT_POINTS=30 (and another
# LBPARSE_INTERRUPT_SEED for other places in the slices).
TIMED = int(os.environ.get("LBPARSE_INTERRUPT_POINTS", "6"))
SEED = int(os.environ.get("LBPARSE_INTERRUPT_SEED", "46"))
LINE = re.compile(
    r"lbparse pipeline: interrupted \((SIGINT|SIGTERM)\) after ([\d,]+) rows; "
    r"(previous output kept \(.*\)|the new output was already in place in .*)"
)
# Belt and braces: the lines must be the command's own anyway.
NOISE = (
    "Traceback",
    "Py4J",
    "py4j",
    "reentrant",
    "Exception",
    "ERROR",
    "WARN",
    "java.",
    "\tat ",
    "Error",
)


@dataclass
class Seen:
    """What a run has shown so far."""

    pid: int
    out: Path
    started: float
    err: str = ""
    stdout: str = ""
    ended: float = 0.0  # seconds from the start to the process's end

    def staging(self, *parts: str) -> bool:
        return any(p.exists() for p in self.out.glob(os.path.join(".lbparse-staging-*", *parts)))


@dataclass
class Point:
    name: str
    sig: int
    group: bool  # to the process group (Ctrl-C), or the process alone (kill PID)
    when: Callable[[Seen], bool]
    # filled in by the run
    rc: int | None = None
    err: str = ""
    stdout: str = ""
    sent_at: float | None = None
    phase: str = ""
    problems: list[str] = field(default_factory=list)
    # a sweep point's place in a run (its delay over the run's time); None: watched
    share: float | None = None


def _command(inputs: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-P",
        "-m",
        "lbparse",
        "pipeline",
        "--test-conf",
        "--master",
        "local[2]",
        str(inputs),
        "-o",
        str(out),
        "--overwrite",
    ]


def _group(pgid: int) -> list[int]:
    """The processes of a process group (the run, its JVM, Spark's Python workers)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
            found.append(int(proc.name))
    return found


def _handlers_installed(pid: int) -> bool:
    """The run catches SIGTERM: `lbparse pipeline` has its handlers in place
    (before that, the interpreter and the command line are starting, not the pipeline)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(int(ln.split()[1], 16) for ln in status.splitlines() if ln.startswith("SigCgt:"))
    return bool(caught >> (signal.SIGTERM - 1) & 1)


def _jvm(seen: Seen) -> bool:
    """Spark's JVM (or the spark-submit script that becomes it) is there."""
    for pid in _group(seen.pid):
        if pid == seen.pid:
            continue
        try:
            if b"SparkSubmit" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _jvm_for(seconds: float) -> Callable[[Seen], bool]:
    """Spark's JVM has been there `seconds` (from when it was first seen)."""
    first: dict[int, float] = {}

    def when(seen: Seen) -> bool:
        if not _jvm(seen):
            return False
        return time.monotonic() - first.setdefault(seen.pid, time.monotonic()) >= seconds

    return when


def _phase(seen: Seen, before_summary: str) -> str:
    """Where the run was when the signal went (as seen from outside)."""
    summary = seen.out / "summary.json"
    if summary.is_file() and summary.read_text() != before_summary:
        return "swapped"
    if seen.staging("summary.json"):
        return "summary"
    if seen.staging("messages"):
        return "commit"
    if seen.staging("_temporary", "*", "*"):
        return "tasks"
    if "task(s)" in seen.err:
        return "job"
    if _jvm(seen):
        return "spark start"
    return "before Spark"


def launch(
    inputs: Path, out: Path, point: Point | None, before_summary: str, limit: float = 300
) -> Seen:
    """Run the pipeline into `out`; send the point's signal when its `when`
    says so. Every process of the run's group is gone when this returns."""
    proc = subprocess.Popen(
        _command(inputs, out),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    fds = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "err"}
    for fd in fds:
        os.set_blocking(fd, False)
    seen = Seen(proc.pid, out, time.monotonic())
    got = {"stdout": b"", "err": b""}

    def take() -> None:
        for fd, name in fds.items():
            got[name] += read_available(fd)
        seen.err, seen.stdout = (got[n].decode(errors="replace") for n in ("err", "stdout"))

    deadline = time.monotonic() + limit
    try:
        while (
            point is not None
            and point.sent_at is None
            and proc.poll() is None
            and time.monotonic() < deadline
        ):  # bounded: `limit`
            take()
            if point.when(seen):
                point.phase = _phase(seen, before_summary)
                (os.killpg if point.group else os.kill)(proc.pid, point.sig)
                point.sent_at = time.monotonic() - seen.started
                break
            time.sleep(0.003)
        while proc.poll() is None and time.monotonic() < deadline:  # bounded: `limit`
            take()
            time.sleep(0.02)
        if proc.poll() is None:
            pytest.fail(f"the run was still going after {limit} s")
        seen.ended = time.monotonic() - seen.started
        take()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        left: list[int] = []
        for _ in range(200):  # bounded: 20 s for the JVM and the workers to go
            left = _group(proc.pid)
            if not left:
                break
            time.sleep(0.1)
        if left:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()
        proc.stderr.close()
    if point is not None:
        point.rc, point.err, point.stdout = proc.returncode, seen.err, seen.stdout
        if left:
            point.problems.append(f"processes of its group left running 20 s after: {left}")
    return seen


@dataclass
class Bench:
    inputs: Path
    earlier: Path  # a whole run's output, which interrupted runs replace (--overwrite)
    seconds: float  # how long that run took, alone


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Bench:
    if not (SHORT.is_file() and API.is_file()):
        pytest.skip("shared captures missing")
    root = tmp_path_factory.mktemp("interrupt-points")
    inputs = root / "inputs"
    inputs.mkdir()
    for i in range(COPIES):
        shutil.copyfile(SHORT, inputs / f"short-{i}.pcapng")
    shutil.copyfile(API, inputs / "api-short.pcapng")
    earlier = root / "earlier"
    start = time.monotonic()
    launch(inputs, earlier, None, "")
    seconds = time.monotonic() - start
    consistent(earlier)
    return Bench(inputs, earlier, seconds)


def _after(delay: float) -> Callable[[Seen], bool]:
    """`delay` s after the start, once the command has its handlers (before them
    the interpreter is importing lbparse: Python's own KeyboardInterrupt)."""
    return lambda seen: time.monotonic() - seen.started >= delay and _handlers_installed(seen.pid)


def _first(*conditions: Callable[[Seen], bool]) -> Callable[[Seen], bool]:
    """A state, or any later one: a short step missed by the polling still
    has its signal sent, a little later."""
    return lambda seen: any(c(seen) for c in conditions)


def watched_points(bench: Bench) -> list[Point]:
    """The points found by watching a run: each phase, by what it writes."""
    before = (bench.earlier / "summary.json").read_text()

    def swapped(seen: Seen) -> bool:
        summary = seen.out / "summary.json"
        try:
            return summary.read_text() != before
        except OSError:
            return False

    summary = _first(lambda s: s.staging("summary.json"), swapped)
    commit = _first(lambda s: s.staging("messages"), summary)
    tasks = _first(lambda s: s.staging("_temporary", "*", "*"), commit)
    planned = _first(lambda s: "task(s)" in s.err, tasks)
    watched = [
        ("handlers installed", lambda s: _handlers_installed(s.pid)),
        ("JVM launched", _first(_jvm, planned)),
        ("job planned", planned),
        ("a task's files written", tasks),
        ("driver's commit", commit),
        ("new summary made", summary),
        ("new output swapped in", swapped),
    ]
    found = []
    for name, when in watched:
        # test_interrupts.py runs these two as they are here (Ctrl-C to the
        # group as the JVM starts; after a task wrote its files), with checks
        # of its own on top: not run twice.
        if name not in ("JVM launched", "a task's files written"):
            found.append(Point(name, signal.SIGINT, True, when))
    # SIGTERM while Spark starts up (its JVM a second old: the gateway and the
    # context coming up), at the commit and at the swap. This point, not the
    # sweep, covers Spark's start: a CI run whose watched runs were slow
    # spread the sweep so wide that its first point landed in the job
    # (test_interrupts.py sends SIGTERM in the job).
    found.append(Point("Spark starting", signal.SIGTERM, True, _first(_jvm_for(1.0), planned)))
    for name, when in watched[4::2]:
        found.append(Point(name, signal.SIGTERM, name != "driver's commit", when))
    return found


def sweep_points(seconds: float) -> list[Point]:
    """The sweep: from just after the handlers are in place to near the end of
    a run that takes `seconds` (the latest watched point's time: a run as long
    as runs are now, beside whatever else the machine does; the setup's run,
    the first of its process and often beside the cluster runs and the other
    worker's start, took 54 s in a CI run where the runs after it took 20, and
    4 of 6 delays came after their runs had ended).

    Stratified: one point in each of TIMED equal slices, placed at random
    within it, covers a run evenly with fewer runs than uniform draws need
    (16 of those cost six JVM runs more, ~40 s of make test). The watched
    points take the phases a slice may miss."""
    found = []
    rng = random.Random(SEED)
    lo, hi = 0.4, 0.9 * seconds
    delays = [lo + (hi - lo) * (i + rng.random()) / TIMED for i in range(TIMED)]
    for i, delay in enumerate(delays):
        sig, group = (
            (signal.SIGTERM, True)
            if i % 4 == 1
            else (signal.SIGTERM, False)
            if i % 4 == 3
            else (signal.SIGINT, True)
        )
        found.append(Point(f"at {delay:.2f} s", sig, group, _after(delay), share=delay / seconds))
    return found


def _over(point: Point) -> bool:
    """The run had printed its whole report when the signal came: it was over
    (the command had returned; Python was exiting), nothing left to interrupt."""
    return (
        "\nsummary: " in "\n" + point.stdout
        and "interrupted" not in point.err
        and point.rc in (0, 130)
    )


def judge(point: Point, out: Path, before: dict[str, str]) -> None:
    """The point's run against what an interrupted run must leave."""
    err = point.err
    lines = err.strip().splitlines()
    if point.rc != 130:
        point.problems.append(f"exit status {point.rc}, not 130")
    strays = [ln for ln in lines if not ln.startswith("lbparse pipeline: ")]
    noise = [w for w in NOISE if w in err]
    if strays or noise:
        point.problems.append(
            f"stderr holds more than the command's lines ({noise}): {strays[:12]}"
        )
    if sum("interrupted" in ln for ln in lines) != 1:
        point.problems.append("not one interrupted line")
    m = LINE.fullmatch(lines[-1]) if lines else None
    if m is None:
        point.problems.append(f"the last line is not the interrupted line: {lines[-1:]}")
        return
    if m.group(1) != signal.Signals(point.sig).name:
        point.problems.append(f"the line names {m.group(1)}")
    if list(out.glob(".lbparse-staging-*")):
        point.problems.append("a staging directory was left in DIR")
    now = fingerprint(out)
    if m.group(3).startswith("previous output kept"):
        if now != before:
            changed = sorted(set(now.items()) ^ set(before.items()))[:6]
            point.problems.append(f"'previous output kept', but DIR changed: {changed}")
    else:
        names = {p.name for p in out.iterdir()}
        if names != {k.split("/", 1)[0] for k in before}:
            point.problems.append(f"the new output's names differ from a run's: {sorted(names)}")
        try:
            rows = consistent(out)
        except AssertionError:
            point.problems.append("the new output's summary does not count its messages")
        else:
            if rows != int(m.group(2).replace(",", "")):
                point.problems.append(f"the line says {m.group(2)} rows, the output has {rows}")


def test_a_signal_anywhere_in_a_run_is_one_line(bench: Bench, tmp_path: Path) -> None:
    before = fingerprint(bench.earlier)
    before_summary = (bench.earlier / "summary.json").read_text()

    def one(index: int, point: Point) -> Point:
        out = tmp_path / f"out-{index}"
        shutil.copytree(bench.earlier, out)
        seen = launch(bench.inputs, out, point, before_summary)
        if point.sent_at is None or _over(point):
            if point.share is not None:
                # A run quicker than the ones the sweep was spread over (the
                # machine's load changes under the suite: 40 s runs, then 15 s
                # ones, in one CI run): once more, at the same share of a run as
                # long as this one was.
                delay = max(0.4, point.share * seen.ended)
                again = Point(
                    f"{point.name} (again at {delay:.2f} s)", point.sig, point.group, _after(delay)
                )
            else:
                # A watched step the run got past before the signal went: the
                # last ones are short (after the swap, the JVM's stop: a few
                # hundred ms, which a loaded machine's polling can miss). Once more.
                again = Point(f"{point.name} (again)", point.sig, point.group, point.when)
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(bench.earlier, out)
            launch(bench.inputs, out, again, before_summary)
            point = again
        if point.sent_at is None or _over(point):
            point.sent_at = None  # the run ended first: judged below, as a point missed
            return point
        judge(point, out, before)
        shutil.rmtree(out, ignore_errors=True)
        return point

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        done = list(pool.map(one, itertools.count(), watched_points(bench)))
        # The sweep spreads over a run as long as the watched ones were.
        seconds = max((p.sent_at for p in done if p.sent_at is not None), default=bench.seconds)
        done += pool.map(one, itertools.count(len(done)), sweep_points(seconds))
    took = time.monotonic() - start
    report = [
        f"seed {SEED}; a whole run alone: {bench.seconds:.1f} s; the sweep over {seconds:.1f} s "
        f"(the latest watched point); {len(done)} runs in {took:.0f} s"
    ]
    for p in done:
        sent = (
            "not sent (the run ended first)"
            if p.sent_at is None
            else (
                f"{signal.Signals(p.sig).name} to the {'group' if p.group else 'process'} "
                f"at {p.sent_at:5.2f} s ({p.phase})"
            )
        )
        report.append(
            f"{p.name:>24}: {sent}: exit {p.rc}" + ("".join(f"\n{'':>26}{x}" for x in p.problems))
        )
    print("\n".join(report))
    sent = [p for p in done if p.sent_at is not None]
    failed = [p for p in sent if p.problems]
    assert not failed, (
        "\n".join(report)
        + "\n\n"
        + "\n\n".join(f"{p.name}: stderr:\n{p.err[-3000:]}" for p in failed[:3])
    )
    # Every watched point is reached before a run ends; some of the sweep's
    # last delays may come after it: its delays are spread over the time the
    # watched runs took, and on a shared machine (CI: the suite beside it) a
    # run may be quicker than those were. Half of the sweep at least is sent,
    # and the phases below are covered whatever the timing.
    missed = [p.name for p in done if p.sent_at is None]
    assert len(missed) <= TIMED // 2, report
    assert not [m for m in missed if not m.startswith("at ")], report
    # The points covered Spark's start, the job, and the end of the run.
    phases = {p.phase for p in sent}
    assert {"spark start", "job"} <= phases, report
    assert phases & {"commit", "summary", "swapped"}, report
