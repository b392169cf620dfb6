"""Smaller habits of the command line (issue #46, item 8), each through the real
`lbparse` in a subprocess: the pipeline refuses an input in no format it reads
before Spark starts, as `capture` and `report` do; `pipeline -q` leaves stderr
to the summary's own problems; the pipeline's summary tells its rows apart
when the inputs' paths differ only in their middle; `capture` prints a table
on a terminal and JSON Lines elsewhere when no --format is given."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import LBPARSE, run_cli

SAMPLE = Path(__file__).parents[2] / "lbparse" / "examples" / "sample.pcap"


def _java_that_tells(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose Java writes a file when anything starts it: Spark's
    launcher (spark-class) runs $JAVA_HOME/bin/java first thing."""
    home, started = tmp_path / "java-home", tmp_path / "java-was-started"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\ntouch '{started}'\nexit 1\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "JAVA_HOME": str(home)}, started


# --- 1. pipeline: an input in no format it reads is refused before Spark starts ---


@pytest.mark.slow  # `lbparse pipeline` runs: PySpark's import, a second or more
def test_pipeline_refuses_a_text_file_at_once_without_a_jvm(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("meeting notes, not a capture\nsecond line\n")
    env, started = _java_that_tells(tmp_path)
    t0 = time.monotonic()
    res = run_cli(
        "pipeline", str(SAMPLE), str(notes), "-o", str(tmp_path / "out"), env=env, timeout=60
    )
    took = time.monotonic() - t0
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert err.splitlines() == [
        f"lbparse pipeline: {notes}: neither pcap, pcapng, JSON Lines nor Parquet "
        "(text: 'meeting notes, not a capture')"
    ], err
    assert not started.exists(), "a JVM was started"
    # Spark's JVM takes 5 to 10 s to start here; the refusal is the Python alone.
    assert took < 5, took
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # `lbparse pipeline` runs: PySpark's import, a second or more
def test_pipeline_says_what_a_refused_file_holds(tmp_path: Path) -> None:
    """A gzipped capture and a file of other bytes, each named with what was found."""
    packed = tmp_path / "nats.pcap.gz"
    packed.write_bytes(b"\x1f\x8b\x08\x00" + bytes(20))
    other = tmp_path / "other.bin"
    other.write_bytes(bytes(range(7, 40)))
    env, started = _java_that_tells(tmp_path)
    res = run_cli("pipeline", str(packed), str(other), "-o", str(tmp_path / "out"), env=env)
    assert res.returncode == 2, res.stderr
    assert res.stderr.decode().splitlines() == [
        f"lbparse pipeline: {packed}: neither pcap, pcapng, JSON Lines nor Parquet "
        f"(gzip-compressed: uncompress it first); {other}: neither pcap, pcapng, JSON Lines "
        "nor Parquet (first bytes 0708090a0b0c0d0e)"
    ]
    assert not started.exists()


# --- 3. the pipeline's summary: rows told apart ---------------------------------


def test_summary_rows_differ_where_the_paths_do() -> None:
    """Paths alike but for a directory in their middle: each row keeps that
    directory (below the directory they share, named once above the table)."""
    from lbparse.pipeline.summary import FileSummary, Summary

    top = "/srv/captures/a-rather-long-directory-of-the-team/nightly"
    paths = [
        f"{top}/run-{i:02d}/node1/metadata-raft-traffic/of-the-cluster/capture.pcapng"
        for i in range(21)
    ]
    summary = Summary(
        [FileSummary(p, "pcapng", 10, rows=1, messages=1) for p in paths], "out", "auto"
    )
    lines = summary.table().splitlines()
    assert lines[0] == f"inputs under {top}/"
    rows = [line.split("  ")[0] for line in lines[2:23]]
    assert len(set(rows)) == 21, rows
    for i, row in enumerate(rows):
        assert row.startswith(f"run-{i:02d}/") and row.endswith("capture.pcapng"), row
        assert len(row) <= 44, row


def test_summary_rows_of_segments_keep_node_stream_and_partition() -> None:
    """A data directory's segments (all named 00000000000000000000.log): each
    row keeps what tells it apart, the whole path when a cut would not."""
    from lbparse.pipeline.summary import FileSummary, Summary

    log = "00000000000000000000.log"
    paths = [
        f"/var/lib/liftbridge/data/node{n}/streams/{s}/{p}/{log}"
        for n in (1, 2, 3)
        for s in ("orders", "__activity", "a-stream-with-a-long-name")
        for p in (0, 1)
    ][:21]
    table = Summary([FileSummary(p, "segment", 10) for p in paths], "out", "auto").table()
    lines = table.splitlines()
    assert lines[0] == "inputs under /var/lib/liftbridge/data/"
    rows = [line.split("  ")[0] for line in lines[2 : 2 + len(paths)]]
    assert len(set(rows)) == len(paths), rows
    for path, row in zip(paths, rows):
        node, stream, part = path.split("/")[5], path.split("/")[7], path.split("/")[8]
        assert row.startswith(node + "/") and row.endswith(f"{part}/{log}"), row
        assert stream in row or "…" not in row, row


def test_summary_of_one_long_path_keeps_both_ends() -> None:
    from lbparse.pipeline.summary import shown_paths

    path = "/home/someone/work/2026-11-28/cluster-a/captures/node1/capture-of-the-night.pcapng"
    under, (shown,) = shown_paths([path])
    assert under == "" and len(shown) <= 44
    assert shown.startswith("/home/") and shown.endswith("/capture-of-the-night.pcapng"), shown


# --- 2 and 3: a real run, quiet, of inputs whose paths differ in their middle ----


@pytest.mark.slow
def test_quiet_pipeline_says_only_its_summary(tmp_path: Path) -> None:
    """`pipeline -q`: stdout holds the summary, stderr nothing at all (no JVM
    banner, no log4j line, no progress bar of Spark's); and the summary's rows
    of three captures at paths alike but for a directory in their middle are
    three different rows."""
    top = tmp_path / "captures-of-the-cluster-taken-during-the-long-night"
    inputs = []
    for run in ("run-01", "run-02", "run-03"):
        path = top / run / "node1" / "metadata-raft-traffic" / "capture.pcap"
        path.parent.mkdir(parents=True)
        shutil.copy(SAMPLE, path)
        inputs.append(str(path))
    out = tmp_path / "out"
    res = run_cli("pipeline", "-q", *inputs, "-o", str(out), "--master", "local[1]", timeout=300)
    err, text = res.stderr.decode(), res.stdout.decode()
    assert res.returncode == 0, err
    assert err == "", err  # not even Java's "WARNING: Using incubator modules"
    lines = text.splitlines()
    assert lines[0] == f"inputs under {top}/"
    rows = [line.split("  ")[0] for line in lines[2:5]]
    assert rows == [
        f"{run}/…/metadata-raft-traffic/capture.pcap" for run in ("run-01", "run-02", "run-03")
    ], text
    assert lines[-1] == f"summary: {out}/summary.json"


# --- 4. capture: a table on a terminal, JSON Lines elsewhere ----------------------

TABLE_ROW = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z  \S+ -> \S+")


def _on_a_terminal(*args: str, timeout: float = 60) -> tuple[int, str]:
    """Run `lbparse ARGS...` with its stdout on a new pseudo-terminal; its exit
    status and what it wrote there (the terminal's CR LF as LF)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([*LBPARSE, *args], stdout=slave, stderr=subprocess.PIPE)
    finally:
        os.close(slave)  # the child's copy stays: EOF (EIO) once it exits
    got = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not chunk:
                break
            got += chunk
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
    return rc, got.decode().replace("\r\n", "\n")


@pytest.mark.slow  # five runs of lbparse: most of a second
def test_capture_prints_a_table_on_a_terminal_and_json_lines_elsewhere(tmp_path: Path) -> None:
    rc, text = _on_a_terminal("capture", str(SAMPLE))
    assert rc == 0, text
    lines = text.splitlines()
    assert lines and all(TABLE_ROW.match(line) for line in lines), lines[:3]
    # The same run through a pipe: JSON Lines, one record each, the same many.
    piped = run_cli("capture", str(SAMPLE))
    assert piped.returncode == 0, piped.stderr
    records = [json.loads(line) for line in piped.stdout.decode().splitlines()]
    assert len(records) == len(lines) and all("ts" in r for r in records)
    # On a terminal, into a file: JSON Lines there (the file is not the terminal).
    out = tmp_path / "records.jsonl"
    rc, text = _on_a_terminal("capture", str(SAMPLE), "-o", str(out))
    assert rc == 0 and text == "", text
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    # Asked for, each format is what it says wherever it goes.
    rc, text = _on_a_terminal("capture", str(SAMPLE), "--json")
    assert rc == 0 and [json.loads(line) for line in text.splitlines()] == records
    table = run_cli("capture", str(SAMPLE), "--format", "table")
    assert table.stdout.decode().splitlines() == lines


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_capture_help_says_the_default_follows_the_output() -> None:
    res = run_cli("capture", "--help", env={**os.environ, "COLUMNS": "80"})
    text = " ".join(res.stdout.decode().split())
    assert "(default: a table on a terminal, else jsonl)" in text, text
