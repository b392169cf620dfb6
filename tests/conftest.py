"""Shared fixtures: a real nats-server on a free loopback port."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest
from support.net import NATS_SERVER, free_port, stop_process as _stop, wait_accepting

if TYPE_CHECKING:
    from support.cluster import ClusterRun

# tests/support is importable as `support`.
sys.path.insert(0, str(Path(__file__).parent))



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

def _cluster(mode: str, factory: pytest.TempPathFactory) -> "ClusterRun":
    from support.cluster import missing_tools, run_cluster

    why = missing_tools()
    if why:
        pytest.skip(why)
    return run_cluster(mode, factory.mktemp(f"liftbridge-{mode}"))


@pytest.fixture(scope="session")
def liftbridge_short(tmp_path_factory: pytest.TempPathFactory) -> "ClusterRun":
    """One `short` run of a real 3-node Liftbridge cluster (~25 s), at most once a
    test run: its capture, data directories and logs."""
    return _cluster("short", tmp_path_factory)


@pytest.fixture(scope="session")
def liftbridge_full(tmp_path_factory: pytest.TempPathFactory) -> "ClusterRun":
    """One `full` run (~90 s, two failovers: the metadata leader, then a partition
    leader SIGKILLed and restarted), at most once a test run."""
    return _cluster("full", tmp_path_factory)
