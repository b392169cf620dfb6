"""The pipeline on a real standalone Spark cluster: a master and a worker on
loopback, started with spark-class from the installed PySpark, and the job
sent with spark-submit and `make dist`'s zip, as the README says."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pyspark
import pytest

from support.tools import load_tool

BIN = Path(pyspark.__file__).parent / "bin"
START_TIMEOUT = 90.0
JOB_TIMEOUT = 180.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    return env


def _start(args: list[str], log: Path) -> subprocess.Popen:
    # Own process group: the worker's executors (and their Python workers)
    # are in it too, so teardown can stop all of them at once. The master's
    # REST submission server would take the fixed port 6066: not needed.
    env = dict(_env(), SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    with open(log, "wb") as f:
        return subprocess.Popen([str(BIN / "spark-class"), *args], stdout=f,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
    try:  # anything left in the group (executors started by the worker)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _master_state(ui_port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return json.load(r)
    except OSError:
        return None


def _wait(what: str, ready: Any, procs: list[tuple[subprocess.Popen, Path]]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for proc, log in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: exited with {proc.returncode}:\n"
                                   f"{log.read_text(errors='replace')[-3000:]}")
        if ready():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not ready within {START_TIMEOUT:.0f} s")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """spark://127.0.0.1:PORT of a master with one worker (2 cores, 1 GB)."""
    d = tmp_path_factory.mktemp("standalone")
    port, ui = _free_port(), _free_port()
    master_log, worker_log = d / "master.log", d / "worker.log"
    master = _start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(ui)], master_log)
    worker = None
    try:
        _wait("master", lambda: _master_state(ui) is not None, [(master, master_log)])
        worker = _start(["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                         "--host", "127.0.0.1", "--webui-port", str(_free_port()),
                         "--cores", "2", "--memory", "1g", "--work-dir", str(d / "work")],
                        worker_log)
        _wait("worker", lambda: (_master_state(ui) or {}).get("aliveworkers", 0) >= 1,
              [(master, master_log), (worker, worker_log)])
        yield f"spark://127.0.0.1:{port}"
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def test_pipeline_on_a_standalone_cluster(standalone: str, run: dict[str, Any],
                                          inputs: dict[str, Path], spark: Any,
                                          tmp_path: Path) -> None:
    zpath, launcher, _ = load_tool("dist").build(tmp_path / "dist")
    out = tmp_path / "out"
    # Inputs named relative to the directory spark-submit runs in, as people
    # type them: the executors run elsewhere, and must still find them.
    where = next(iter(inputs.values())).parent
    cmd = [str(BIN / "spark-submit"), "--master", standalone, "--py-files", str(zpath),
           "--conf", "spark.executor.memory=768m", "--conf", "spark.ui.enabled=false",
           str(launcher), *(p.name for p in inputs.values()), "--out", str(out),
           "--layout", "v0", "--column", "data", "--subject-column", "subj",
           "--timestamp-column", "t", "--batch-rows", "16", "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env(),
                            cwd=where, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=JOB_TIMEOUT)
    finally:
        _stop(proc)
    text = output.decode(errors="replace")
    assert proc.returncode == 1, text[-4000:]  # 1: some inputs are broken on purpose
    assert "rows from 8 file(s)" in text, text[-4000:]

    summary = json.loads((out / "summary.json").read_text())
    assert summary["checks"] == []
    local = run["json"]
    def counts(totals: dict[str, Any]) -> dict[str, Any]:  # all but timings
        return {k: v for k, v in totals.items() if not k.endswith(("seconds", "_mb"))}

    assert counts(summary["totals"]) == counts(local["totals"])
    # The executors decoded with the zip's lbparse, not the one installed here.
    used = {p for f in summary["files"] for p in f["decoded_by"]}
    assert used and all("lbparse.zip" in p for p in used), used

    def keyed(rows: Any) -> list[tuple]:
        return sorted((r.source, r.position, r.error_kind, r.msg_type_name,
                       None if r.payload is None else bytes(r.payload)) for r in rows)

    cluster_rows = spark.read.parquet(str(out / "messages")).collect()
    assert keyed(cluster_rows) == keyed(run["rows"])
