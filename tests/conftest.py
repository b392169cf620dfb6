"""Shared fixtures: a real nats-server on a free loopback port, a real Liftbridge
cluster; Spark tests marked slow; a session cache for what lbparse installs."""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support import jvm, lanes, testrun, timeline
from support.net import NATS_SERVER, free_port, wait_accepting
from support.net import stop_process as _stop

if TYPE_CHECKING:
    from support.cluster import ClusterRun

# tests/support is importable as `support`.
sys.path.insert(0, str(Path(__file__).parent))

# What lbparse installs for a user (the Kaitai compiler, on first use of an
# installed lbparse: lbparse/resources.py) goes to a cache of this run, in its
# temporary directory and removed with it, not the user's ~/.cache, unless
# LBPARSE_CACHE_DIR names one.
if not os.environ.get("LBPARSE_CACHE_DIR"):
    os.environ["LBPARSE_CACHE_DIR"] = os.path.join(testrun.PATH, "lbparse-cache")
    # 0700 whatever the umask: lbparse refuses a cache others may write to
    os.makedirs(os.environ["LBPARSE_CACHE_DIR"], mode=0o700, exist_ok=True)

# lbparse's own class archive of Spark (lbparse/pipeline/class_archive.py) is
# off: the suite's JVMs map support/jvm.py's, made once a run from a wider
# workload, and a JVM writing lbparse's would outlive its test by seconds.
# tests/pipeline/test_class_archive.py turns it on where it tests it.
os.environ.setdefault("LBPARSE_SPARK_CLASSES", "off")

# Every JVM Spark starts in the tests runs with support/jvm.py's flags (and,
# once it is made, its class archive), unless the caller chose its own (an
# xdist worker finds the controller's, which is ours).
_JVM_OPTS = (
    None
    if os.environ.get("SPARK_SUBMIT_OPTS", "") not in ("", jvm.options(None))
    else jvm.options(None)
)
if _JVM_OPTS is not None:
    os.environ["SPARK_SUBMIT_OPTS"] = _JVM_OPTS
    os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", jvm.FLAGS)


def pytest_addoption(parser: pytest.Parser) -> None:
    lanes.addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    lanes.add_the_lane(config)
    timeline.start(config)
    config.pluginmanager.register(timeline, "lbparse-timeline")


@pytest.hookimpl(optionalhook=True)  # xdist's hook: a run without xdist has none
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    return lanes.scheduler(config, log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    timeline.stop()
    hostile = sys.modules.get("support.hostile_streams")
    if hostile is not None:  # its gRPC server, started by the first test that asked
        hostile.stop()
    for job in _ARCHIVING:  # of no use once the tests are over
        job.stop()
    for thread in _AHEAD:  # each stops by its own timeout; its processes are ours
        thread.join()
    if testrun.OWN is not None:  # the controller's, after its workers are gone
        shutil.rmtree(testrun.OWN, ignore_errors=True)


SLOW_FIXTURES = {"spark", "liftbridge_short", "liftbridge_full"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that starts Spark (the `spark` fixture of tests/spark) or a
    Liftbridge cluster, directly or through another fixture, is slow: `make
    test-fast` leaves it out. (A cluster is made once a run whichever worker
    asks: support/testrun.py; Spark once a worker.)"""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh nats-server on 127.0.0.1, stopped after the test."""
    if not os.path.exists(NATS_SERVER):
        pytest.skip("nats-server is not installed")
    last: Exception | None = None
    for _ in range(3):  # another process may take the port between probe and bind
        port = free_port()
        log = open(tmp_path / f"nats-server-{port}.log", "wb")
        proc = subprocess.Popen(
            [NATS_SERVER, "-a", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
        )
        try:
            wait_accepting(port, proc)
        except RuntimeError as exc:
            last = exc
            _stop(proc)
            log.close()
            continue
        try:
            yield f"nats://127.0.0.1:{port}"
        finally:
            _stop(proc)
            log.close()
        return
    raise RuntimeError(f"could not start nats-server: {last}")


# -- a real Liftbridge cluster (shared/liftbridge/run_cluster.sh) -----------------

# fixture -> (run_cluster.sh mode, the clients' gRPC captured too, `lbparse tap` beside it),
# in the order the runs are made ahead
CLUSTER_MODES = {
    "liftbridge_short": ("short", False, True),
    "liftbridge_full": ("full", True, True),
    "liftbridge_short_api": ("short", True, False),
}
_AHEAD: list[threading.Thread] = []
_ARCHIVING: list[jvm.ArchiveJob] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    # The run's temporary directory, made here before any thread asks for it
    # (two threads making it at once: FileExistsError, CI's INTERNALERROR).
    session.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    # the lane runs none of their tests; --collect-only none at all (it waited
    # for the cluster runs it had started: 97 s to list one module)
    if not lanes.is_lane_worker(session.config) and not session.config.option.collectonly:
        _clusters_ahead(session)
        _class_archive_ahead(session)
    _freeze_the_heap()


def _freeze_the_heap() -> None:
    """What the session holds once collected (the modules imported, the items,
    hypothesis' and the vectors' tables: up to two million objects a worker)
    lives to its end: frozen, the collector's full collections, which the
    tests' own allocations set off, no longer walk it each time. (`make
    test-fast`: ~10 % less CPU.)"""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Frozen again once the run is over: the interpreter's exit makes full
    collections of its own, which walked everything the tests left behind
    (a worker's last 1.5 to 3 s of `make test-fast`, its summary waiting for
    them; 0.03 s frozen). Whatever is left is the process's until it ends."""
    gc.freeze()


def _clusters_ahead(session: pytest.Session) -> None:
    """The cluster runs the collected tests use start now, in a thread: a run is
    mostly the script's own waits (a minute and a half for `full`), which a
    worker that asked for it only when a test needed it spent idle. The
    first test that needs one waits for what is left (support/testrun.py: a
    run is made once whichever worker starts it)."""
    from support.cluster import missing_tools

    used = set().union(*(getattr(i, "fixturenames", ()) for i in session.items))
    wanted = [name for name in CLUSTER_MODES if name in used]
    if not wanted or missing_tools():
        return
    factory = session.config._tmp_path_factory  # type: ignore[attr-defined]

    def ahead() -> None:
        for name in wanted:  # one after the other: each is three nodes, a client and a capture
            try:
                _cluster(name, factory)
            except BaseException:
                pass

    _AHEAD.append(threading.Thread(target=ahead, name="clusters ahead", daemon=True))
    _AHEAD[-1].start()


# Slow tests selected before a run makes the JVMs' class archive: it costs one
# pipeline run (~30 CPU-s) and saves ~5 CPU-s on each Spark JVM after it, which
# a run of a few slow tests would not pay back.
ARCHIVE_AFTER = 50


def _class_archive_ahead(session: pytest.Session) -> None:
    """Every worker's Spark JVMs use support/jvm.py's class archive of this
    run from when it is there; the first worker here makes it, in a thread.
    Not under a sanitizer's LD_PRELOAD (tools/sanitize.py): the archiving JVM
    would run under it too."""
    slow = sum(1 for i in session.items if i.get_closest_marker("slow"))
    if (
        _JVM_OPTS is None
        or slow < ARCHIVE_AFTER
        or os.environ.get("LD_PRELOAD")
        or importlib.util.find_spec("pyspark") is None
    ):
        return
    from support.testrun import run_dir

    root = run_dir(session.config._tmp_path_factory)  # type: ignore[attr-defined]
    archive = root / "spark-classes.jsa"
    os.environ["SPARK_SUBMIT_OPTS"] = jvm.options(archive)
    try:
        (root / "spark-classes.started").touch(exist_ok=False)  # one worker makes it
    except FileExistsError:
        return
    try:
        _ARCHIVING.append(jvm.ArchiveJob(archive, root / "spark-classes"))
    except OSError:
        return  # the JVMs run without it
    # Its outcome is only ever a file that is there or not (its log: spark-classes/archive.log).
    _AHEAD.append(threading.Thread(target=_ARCHIVING[-1].wait, name="class archive", daemon=True))
    _AHEAD[-1].start()


def _cluster(fixture: str, factory: pytest.TempPathFactory) -> ClusterRun:
    """The run of CLUSTER_MODES[fixture], made once a test run (named by the fixture)."""
    from support.cluster import missing_tools, run_cluster
    from support.testrun import once_a_run

    why = missing_tools()
    if why:
        pytest.skip(why)
    mode, capture_api, tap_too = CLUSTER_MODES[fixture]
    return once_a_run(
        factory,
        fixture,
        lambda out: run_cluster(mode, out, tap_too=tap_too, capture_api=capture_api),
    )


@pytest.fixture(scope="session")
def liftbridge_short(tmp_path_factory: pytest.TempPathFactory) -> ClusterRun:
    """One `short` run of a real 3-node Liftbridge cluster (~25 s), once a test
    run, whichever worker asks first: its capture, data directories and logs."""
    return _cluster("liftbridge_short", tmp_path_factory)


@pytest.fixture(scope="session")
def liftbridge_full(tmp_path_factory: pytest.TempPathFactory) -> ClusterRun:
    """One `full` run (~90 s, two failovers: the metadata leader, then a partition
    leader SIGKILLed and restarted), once a test run; its capture holds
    the clients' gRPC calls too (CAPTURE_API=1), as the client side's tests
    and the report's want."""
    return _cluster("liftbridge_full", tmp_path_factory)


@pytest.fixture(scope="session")
def liftbridge_short_api(tmp_path_factory: pytest.TempPathFactory) -> ClusterRun:
    """A `short` run of its own with the clients' gRPC calls captured too
    (CAPTURE_API=1; `liftbridge_short` captures NATS only), no tap, once a
    test run: made ahead, after the two above, where a worker asking for it
    waited ~23 s for its script."""
    return _cluster("liftbridge_short_api", tmp_path_factory)
