"""Shared fixtures: a real nats-server on a free loopback port, a real Liftbridge
cluster; Spark tests marked slow; a session cache for what lbparse installs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest
from support.net import NATS_SERVER, free_port, stop_process as _stop, wait_accepting

if TYPE_CHECKING:
    from support.cluster import ClusterRun

# tests/support is importable as `support`.
sys.path.insert(0, str(Path(__file__).parent))

# What lbparse installs for a user (the Kaitai compiler, on first use of an
# installed lbparse: lbparse/resources.py) goes to a cache of this session,
# not the user's ~/.cache, unless LBPARSE_CACHE_DIR names one.
_OWN_CACHE = None if os.environ.get("LBPARSE_CACHE_DIR") else \
    tempfile.mkdtemp(prefix="lbparse-test-cache-")
if _OWN_CACHE is not None:
    os.environ["LBPARSE_CACHE_DIR"] = _OWN_CACHE


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


SLOW_FIXTURES = {"spark", "liftbridge_short", "liftbridge_full"}


# Fixtures started once a session: on several workers (pytest-xdist, `make
# test`), the tests that use one run on one worker (--dist loadgroup), so it
# starts once a run, not once a worker.
ONCE_A_RUN = {"liftbridge_short": "cluster", "liftbridge_full": "cluster", "spark": "spark"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that starts Spark (the `spark` fixture of tests/spark) or a
    Liftbridge cluster, directly or through another fixture, is slow: `make
    test-fast` leaves it out; and it runs on its fixture's worker."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if SLOW_FIXTURES & names:
            item.add_marker(pytest.mark.slow)
        groups = sorted({ONCE_A_RUN[n] for n in names & set(ONCE_A_RUN)})
        if groups:
            item.add_marker(pytest.mark.xdist_group("+".join(groups)))


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[str]:
    """The URL of a fresh nats-server on 127.0.0.1, stopped after the test."""
    if not os.path.exists(NATS_SERVER):
        pytest.skip("nats-server is not installed")
    last: Exception | None = None
    for _ in range(3):  # another process may take the port between probe and bind
        port = free_port()
        log = open(tmp_path / f"nats-server-{port}.log", "wb")
        proc = subprocess.Popen([NATS_SERVER, "-a", "127.0.0.1", "-p", str(port)],
                                stdout=log, stderr=subprocess.STDOUT)
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

def _cluster(mode: str, factory: pytest.TempPathFactory, capture_api: bool = False
             ) -> "ClusterRun":
    from support.cluster import missing_tools, run_cluster

    why = missing_tools()
    if why:
        pytest.skip(why)
    return run_cluster(mode, factory.mktemp(f"liftbridge-{mode}"), capture_api=capture_api)


@pytest.fixture(scope="session")
def liftbridge_short(tmp_path_factory: pytest.TempPathFactory) -> "ClusterRun":
    """One `short` run of a real 3-node Liftbridge cluster (~25 s), at most once a
    test run: its capture, data directories and logs."""
    return _cluster("short", tmp_path_factory)


@pytest.fixture(scope="session")
def liftbridge_full(tmp_path_factory: pytest.TempPathFactory) -> "ClusterRun":
    """One `full` run (~90 s, two failovers: the metadata leader, then a partition
    leader SIGKILLed and restarted), at most once a test run; its capture holds
    the clients' gRPC calls too (CAPTURE_API=1), as the client side's tests
    and the report's want."""
    return _cluster("full", tmp_path_factory, capture_api=True)
