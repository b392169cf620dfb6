"""`lbparse pipeline`'s errors a Spark user understands: one line on stderr and exit 2,
before any work and before Spark starts (no JVM stack trace, no minute of retries)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.net import free_port

from lbparse.cli import main

SAMPLE = str(Path(__file__).parents[2] / "lbparse" / "examples" / "sample.pcap")


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark must not start: starting it fails the test."""
    from lbparse.pipeline import session

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "spark_session", refuse)


@pytest.fixture
def table(tmp_path: Path) -> str:
    path = tmp_path / "payloads.parquet"
    pq.write_table(
        pa.table({"data": pa.array([b"\xb9\x0eC\xb4"], pa.binary()), "n": pa.array([1])}), path
    )
    return str(path)


def _fails(capsys: pytest.CaptureFixture[str], args: list[str], *expected: str) -> str:
    code = main(["pipeline", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lbparse pipeline: ")
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "master, expected",
    [
        ("foo", "not a Spark master URL"),
        ("local[0]", "not a Spark master URL"),
        ("spark://127.0.0.1", "is not HOST:PORT"),
        ("spark://127.0.0.1:99999", "is not HOST:PORT"),
        ("http://127.0.0.1:7077", "not a Spark master URL"),
    ],
)
def test_a_bad_master(
    no_spark: None, capsys: pytest.CaptureFixture[str], tmp_path: Path, master: str, expected: str
) -> None:
    _fails(capsys, [SAMPLE, "--out", str(tmp_path), "--master", master], expected)


def test_an_unreachable_master(
    no_spark: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    port = free_port()  # nothing listens there
    line = _fails(
        capsys,
        [SAMPLE, "--out", str(tmp_path), "--master", f"spark://127.0.0.1:{port}"],
        "no Spark master answers",
        f"127.0.0.1:{port}",
    )
    assert "refused" in line.lower()


@pytest.mark.parametrize(
    "conf, expected",
    [
        ("spark.executor.memory", "KEY=VALUE"),
        ("executor.memory=4g", "not a Spark setting"),
        ("spark.driver.memory=lots", "not a size"),
        ("spark.executor.cores=two", "not a whole number"),
    ],
)
def test_a_bad_conf(
    no_spark: None, capsys: pytest.CaptureFixture[str], tmp_path: Path, conf: str, expected: str
) -> None:
    _fails(capsys, [SAMPLE, "--out", str(tmp_path), "--conf", conf], expected)


def test_a_missing_input(
    no_spark: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = str(tmp_path / "nope.pcap")
    _fails(capsys, [SAMPLE, missing, "--out", str(tmp_path / "out")], "no such input", missing)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "flags, expected",
    [
        ([], "no column 'payload' (columns: data, n); name the payload column with --column"),
        (["--column", "nope"], "no column 'nope'"),
        (["--column", "n"], "column 'n' is int64, not bytes"),
        (["--column", "data", "--subject-column", "subj"], "no column 'subj'"),
        (["--column", "data", "--timestamp-column", "t"], "--timestamp-column"),
    ],
)
def test_a_wrong_column(
    no_spark: None,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    table: str,
    flags: list[str],
    expected: str,
) -> None:
    _fails(capsys, [table, "--out", str(tmp_path / "out"), *flags], table, expected)


@pytest.mark.slow
def test_spark_refusing_to_start_is_one_line(tmp_path: Path) -> None:
    """A setting only Spark's start finds wrong (a heap too small for the JVM): the
    reason in one line, not the Java gateway's trace."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lbparse",
            "pipeline",
            SAMPLE,
            "--out",
            str(tmp_path / "out"),
            "--master",
            "local[1]",
            "--conf",
            "spark.driver.memory=1k",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    ours = [line for line in proc.stderr.splitlines() if line.startswith("lbparse pipeline:")]
    assert len(ours) == 1 and "Spark did not start" in ours[0], proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
