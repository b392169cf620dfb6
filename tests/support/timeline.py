"""Where a run's minutes go, beyond `--durations`: when each test ran, on which
worker, and how busy the machine's cores were meanwhile.

`--durations` gives each test's own time but not what ran beside it, so a
run's wall time cannot be read from it (a test that starts two JVMs takes
both cores; a worker idle at the end waits for the other). With
LBPARSE_TIMELINE=DIR, each worker appends a line per test to DIR/<worker>.tsv
(start, end, CPU seconds, node id: setup to teardown), and the controller
samples /proc/stat each second into DIR/cpu.tsv. Then

    python tests/support/timeline.py DIR

prints the busy cores by minute, each worker's idle time and last test, and
the tests that ran last: what to move earlier or make cheaper.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ENV = "LBPARSE_TIMELINE"


def _where() -> Path | None:
    d = os.environ.get(ENV)
    return Path(d) if d else None


def _cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all cores, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


class Sampler:
    """The controller's thread: busy cores each second, until stopped."""

    def __init__(self, out: Path) -> None:
        self._out = out
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="timeline-cpu", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        cores = os.cpu_count() or 1
        with open(self._out, "a") as f:
            busy0, total0 = _cpu_times()
            while not self._stop.wait(1.0):  # bounded: stop() ends it
                busy, total = _cpu_times()
                share = (busy - busy0) / max(total - total0, 1.0)
                f.write(f"{time.time():.3f}\t{share * cores:.2f}\n")
                f.flush()
                busy0, total0 = busy, total

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


_SAMPLER: list[Sampler] = []


def start(config: pytest.Config) -> None:
    """In the controller (or a run without workers): sample the cores."""
    where = _where()
    if where is None or hasattr(config, "workerinput"):
        return
    where.mkdir(parents=True, exist_ok=True)
    _SAMPLER.append(Sampler(where / "cpu.tsv"))


def stop() -> None:
    for s in _SAMPLER:
        s.stop()
    _SAMPLER.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    where = _where()
    if where is None:  # the usual run: nothing measured
        yield
        return
    began, cpu = time.time(), _cpu_used()
    yield
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(where / f"{worker}.tsv", "a") as f:
        f.write(f"{began:.3f}\t{time.time():.3f}\t{_cpu_used() - cpu:.2f}\t{item.nodeid}\n")


def _cpu_used() -> float:
    """CPU seconds of this worker and of the children it has reaped (a test's
    commands; not a JVM that outlives the test, counted when it is reaped)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def summarize(where: Path, last: int = 15) -> str:
    """The report `python tests/support/timeline.py DIR` prints."""
    tests: list[tuple[float, float, str, str]] = []
    used: dict[str, float] = {}
    for path in sorted(where.glob("*.tsv")):
        if path.name == "cpu.tsv":
            continue
        for line in path.read_text().splitlines():
            a, b, c, node = line.split("\t", 3)
            tests.append((float(a), float(b), path.stem, node))
            module = node.split("::")[0]
            used[module] = used.get(module, 0.0) + float(c)
    if not tests:
        return f"{where}: no test lines"
    t0 = min(t[0] for t in tests)
    t1 = max(t[1] for t in tests)
    out = [f"{len(tests)} tests, {t1 - t0:.0f} s from the first start to the last end"]
    cpu = (
        [
            (float(a) - t0, float(b))
            for a, b in (ln.split("\t") for ln in (where / "cpu.tsv").read_text().splitlines())
        ]
        if (where / "cpu.tsv").is_file()
        else []
    )
    if cpu:
        out.append("busy cores, by minute of the run:")
        minutes: dict[int, list[float]] = {}
        for t, busy in cpu:
            minutes.setdefault(int(t // 60), []).append(busy)
        for m in sorted(minutes):
            v = minutes[m]
            out.append(f"  {m:3d}  {sum(v) / len(v):4.2f}  {'#' * round(10 * sum(v) / len(v))}")
    out.append("workers:")
    for worker in sorted({t[2] for t in tests}):
        mine = sorted(t for t in tests if t[2] == worker)
        busy = sum(b - a for a, b, _, _ in mine)
        end = mine[-1][1] - t0
        out.append(
            f"  {worker}: {len(mine)} tests, busy {busy:.0f} s, ends at {end:.0f} s, "
            f"last {mine[-1][3]}"
        )
    out.append(f"CPU seconds by module (the worker's and its reaped children's), top {last}:")
    for module, c in sorted(used.items(), key=lambda kv: -kv[1])[:last]:
        out.append(f"  {c:7.1f}  {module}")
    out.append(f"the {last} tests that ended last (start, seconds, worker):")
    for a, b, worker, node in sorted(tests, key=lambda t: t[1])[-last:]:
        out.append(f"  {a - t0:6.0f} {b - a:6.1f}  {worker}  {node}")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/support/timeline.py DIR")
    print(summarize(Path(sys.argv[1])))
