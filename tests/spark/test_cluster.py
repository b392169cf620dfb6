"""The pipeline on a real standalone Spark cluster: a master and a worker on
loopback, started with spark-class from the installed PySpark, and the job
sent with spark-submit as the README says: with `make dist`'s packed
environment (--archives: the executors run the compiled modules), and with
its zip (--py-files: pure Python). Also lbparse.spark's data source and
from_envelope on the cluster's executors."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest
from support import jvm
from support.net import free_port
from support.tools import load_tool

# One standalone cluster (and one packed environment) for the module: its tests
# run on one xdist worker, which starts them once.
pytestmark = pytest.mark.xdist_group("spark-standalone")

BIN = Path(pyspark.__file__).parent / "bin"
ROOT = Path(__file__).resolve().parent.parent.parent
START_TIMEOUT = 90.0
JOB_TIMEOUT = 180.0


def _env() -> dict[str, str]:
    env = dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    return env


def _jvm_options() -> str:
    """The tests' JVM flags and class archive (conftest puts them in
    SPARK_SUBMIT_OPTS) for the JVMs spark-submit does not start: the master,
    the worker and its executors, whose class path is the driver's (the
    archive maps: 6,900 of their 9,100 classes, an executor's CPU 5.8 s to 4).
    Not the drivers' Spark settings (jvm.DRIVER): an executor's JVM options may
    not set Spark options (INVALID_EXECUTOR_SPARK_OPTIONS)."""
    given = (os.environ.get("SPARK_SUBMIT_OPTS") or jvm.FLAGS).split()
    return " ".join(o for o in given if o not in jvm.DRIVER.split())


def _start(args: list[str], log: Path) -> subprocess.Popen:
    # Own process group: the worker's executors (and their Python workers)
    # are in it too, so teardown can stop all of them at once. The master's
    # REST submission server would take the fixed port 6066: not needed.
    env = dict(
        _env(),
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        SPARK_DAEMON_JAVA_OPTS=_jvm_options(),
    )
    # A worker's executors see what the cluster ships them (--py-files, --archives),
    # not a developer's PYTHONPATH (which would come before either).
    env.pop("PYTHONPATH", None)
    with open(log, "wb") as f:
        return subprocess.Popen(
            [str(BIN / "spark-class"), *args],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


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
                raise RuntimeError(
                    f"{what}: exited with {proc.returncode}:\n"
                    f"{log.read_text(errors='replace')[-3000:]}"
                )
        if ready():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not ready within {START_TIMEOUT:.0f} s")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """spark://127.0.0.1:PORT of a master with one worker (2 cores, 1 GB)."""
    d = tmp_path_factory.mktemp("standalone")
    port, ui = free_port(), free_port()
    master_log, worker_log = d / "master.log", d / "worker.log"
    master = _start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        master_log,
    )
    worker = None
    try:
        _wait("master", lambda: _master_state(ui) is not None, [(master, master_log)])
        worker = _start(
            [
                "org.apache.spark.deploy.worker.Worker",
                f"spark://127.0.0.1:{port}",
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(free_port()),
                "--cores",
                "2",
                "--memory",
                "1g",
                "--work-dir",
                str(d / "work"),
            ],
            worker_log,
        )
        _wait(
            "worker",
            lambda: (_master_state(ui) or {}).get("aliveworkers", 0) >= 1,
            [(master, master_log), (worker, worker_log)],
        )
        yield f"spark://127.0.0.1:{port}"
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
        # The executors' copies of the packed environment (~350 MB unpacked);
        # the logs stay until the run ends.
        shutil.rmtree(d / "work", ignore_errors=True)


def _submit(
    standalone: str, args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[int, str]:
    cmd = [
        str(BIN / "spark-submit"),
        "--master",
        standalone,
        "--conf",
        "spark.executor.memory=768m",
        "--conf",
        "spark.ui.enabled=false",
        # the executors' JVMs are the worker's: SPARK_SUBMIT_OPTS reaches the driver only
        "--conf",
        f"spark.executor.defaultJavaOptions={_jvm_options()}",
        *args,
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env or _env(),
        cwd=cwd,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=JOB_TIMEOUT)
    finally:
        _stop(proc)
    return proc.returncode, output.decode(errors="replace")


def _pipeline_args(inputs: dict[str, Path], out: Path) -> list[str]:
    # Inputs named relative to the directory spark-submit runs in, as people
    # type them: the executors run elsewhere, and must still find them. (A
    # missing input, and a file in no format the pipeline reads, are refused
    # before any work: not given here.)
    return [
        *(p.name for name, p in inputs.items() if name not in REFUSED),
        "--out",
        str(out),
        "--layout",
        "v0",
        "--column",
        "data",
        "--subject-column",
        "subj",
        "--timestamp-column",
        "t",
        "--batch-rows",
        "16",
        "-q",
    ]


# Inputs the command line refuses before any work (the in-process run reads
# each as one problem row), by the kind of that row
REFUSED = {"missing.pcap": "input:unreadable", "garbage.bin": "input:unknown_format"}


def _same_as_local(out: Path, run: dict[str, Any], spark: Any) -> dict[str, Any]:
    summary = json.loads((out / "summary.json").read_text())
    assert summary["checks"] == []
    local = run["json"]
    refused = [f for f in local["files"] if f["path"].endswith(tuple(REFUSED))]

    def counts(totals: dict[str, Any]) -> dict[str, Any]:  # all but timings
        return {k: v for k, v in totals.items() if not k.endswith(("seconds", "_mb"))}

    got, want = counts(summary["totals"]), counts(local["totals"])
    # the local run had the refused inputs (one problem row each): out of its totals
    n = len(REFUSED)
    for k in ("files", "rows", "problems", "files_with_problems", "rows_written"):
        want[k] -= n
    want["size"] -= sum(f["size"] for f in refused)
    want["per_error_kind"] = dict(want["per_error_kind"])
    for kind in REFUSED.values():
        want["per_error_kind"][kind] -= 1
    want["per_error_kind"] = {k: v for k, v in want["per_error_kind"].items() if v}
    want["per_layout"] = {k: v - n * (k == "(none)") for k, v in want["per_layout"].items()}
    want["per_msg_type"] = {k: v - n * (k == "(none)") for k, v in want["per_msg_type"].items()}
    assert [f["rows"] for f in refused] == [1] * n
    assert got == want

    def keyed(rows: Any) -> list[tuple]:
        return sorted(
            (
                r.source,
                r.position,
                r.error_kind,
                r.msg_type_name,
                None if r.payload is None else bytes(r.payload),
            )
            for r in rows
            if not r.source.endswith(tuple(REFUSED))
        )

    cluster_rows = spark.read.parquet(str(out / "messages")).collect()
    assert keyed(cluster_rows) == keyed(run["rows"])
    return summary


def test_pipeline_with_the_zip(
    standalone: str, run: dict[str, Any], inputs: dict[str, Path], spark: Any, tmp_path: Path
) -> None:
    """--py-files: for clusters without --archives; the executors run pure Python."""
    zpath, launcher, _ = load_tool("dist").build(tmp_path / "dist")
    out = tmp_path / "out"
    where = next(iter(inputs.values())).parent
    code, text = _submit(
        standalone, ["--py-files", str(zpath), str(launcher), *_pipeline_args(inputs, out)], where
    )
    assert code == 1, text[-4000:]  # 1: some inputs are broken on purpose
    assert "rows from 6 file(s)" in text, text[-4000:]
    summary = _same_as_local(out, run, spark)
    # The executors decoded with the zip's lbparse, not the one installed here.
    used = {p for f in summary["files"] for p in f["decoded_by"]}
    assert used and all("lbparse.zip" in p and "(pure Python)" in p for p in used), used
    assert "decoded by:" in text and "lbparse.zip" in text


@pytest.fixture(scope="module")
def env_archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`make dist`'s packed virtualenv. In CI (LBPARSE_EXPECT_INSTALLED) from the
    wheel that CI built from this tree and installed (dist/); elsewhere built
    from the tree, which compiles lbparse again (minutes). Its dependencies are
    the pinned ones installed here, not fetched from the package index
    (`from_here`: network only to 127.0.0.1; in CI the fixture took 31 s, most
    of it downloading pyarrow, pandas and numpy, and now 4 s). gzip level 1:
    354 MB to 120 MB, and Spark keeps two copies of it (the driver's and the
    executor's) beside the unpacked one: the module's peak of disk went from
    2.1 GB (level 0) to 1.2 GB, for ~4 s more of CPU (a CI machine with less
    disk had run out)."""
    pytest.importorskip("venv_pack")
    out = tmp_path_factory.mktemp("dist-env")
    wheels = sorted((ROOT / "dist").glob("lbparse-*.whl"))
    wheel = wheels[0] if os.environ.get("LBPARSE_EXPECT_INSTALLED") and len(wheels) == 1 else None
    try:
        yield load_tool("dist").build_env(out, wheel=wheel, compress_level=1, from_here=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)  # of no use once the module is done


@pytest.mark.slow
def test_pipeline_with_the_packed_environment(
    standalone: str,
    run: dict[str, Any],
    inputs: dict[str, Path],
    spark: Any,
    env_archive: Path,
    tmp_path: Path,
) -> None:
    """--archives, as the README says: the executors run the environment's Python
    and lbparse's compiled modules (the summary says which lbparse, and compiled)."""
    _, launcher, _ = load_tool("dist").build(tmp_path / "dist")
    out = tmp_path / "out"
    where = next(iter(inputs.values())).parent
    env = dict(_env(), PYSPARK_PYTHON="./environment/bin/python")
    code, text = _submit(
        standalone,
        ["--archives", f"{env_archive}#environment", str(launcher), *_pipeline_args(inputs, out)],
        where,
        env,
    )
    assert code == 1, text[-4000:]
    summary = _same_as_local(out, run, spark)
    used = {p for f in summary["files"] for p in f["decoded_by"]}
    assert used, summary
    for p in used:  # the executors' unpacked environment, compiled
        assert "/environment/lib/" in p and "(compiled: capture 5/5, _kernels)" in p, used
    assert "decoded by:" in text and "compiled" in text


APP = """\
import sys
from pyspark.sql import SparkSession
import lbparse.spark

spark = SparkSession.builder.getOrCreate()
lbparse.spark.register(spark)
df = spark.read.format("liftbridge").options(layout="v0", column="data").load(sys.argv[1:])
n = df.count()
env = df.where("payload is not null").select(
    lbparse.spark.from_envelope("payload", layout="v0").alias("e"))
kinds = sorted((r[0] or "", r[1]) for r in env.groupBy("e.msg_type_name").count().collect())
print("ROWS", n, "DECODED", sum(k for _, k in kinds))
print("TYPES", kinds)
"""


def test_data_source_and_from_envelope_on_the_cluster(
    standalone: str, run: dict[str, Any], inputs: dict[str, Path], tmp_path: Path
) -> None:
    zpath, _, _ = load_tool("dist").build(tmp_path / "dist")
    app = tmp_path / "app.py"
    app.write_text(APP)
    names = ["capture.pcap", "gap.pcap", "table.parquet", "records.jsonl"]
    code, text = _submit(
        standalone, ["--py-files", str(zpath), str(app), *(str(inputs[n]) for n in names)], tmp_path
    )
    assert code == 0, text[-4000:]
    local = [r for r in run["rows"] if any(r.source.endswith(n) for n in names)]
    with_payload = [r for r in local if r.payload is not None]
    assert f"ROWS {len(local)} DECODED {len(with_payload)}" in text, text[-3000:]
