"""The pipeline's output directory, checked before Spark starts (issue #25).

The old pipeline refused an existing messages/ only after Spark had
started (52 s), deleted DIR/entries on --overwrite (a user's
entries/precious.txt with it), overwrote summary.json without
--overwrite, and wrote it through a link planted in a shared sticky
directory. Each refusal here is one line, exit 2, before Spark starts
(the run never gets to plan its tasks), and leaves everything as it was.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support.system import throwaway_user

from lbparse.cli import main

SAMPLE = str(resources.files("lbparse.examples").joinpath("sample.pcap"))


def pipeline(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
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
        timeout=600,
    )


def refused(res: subprocess.CompletedProcess[str], *words: str) -> None:
    assert res.returncode == 2, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lbparse pipeline: "), res.stderr
    assert "task(s)" not in res.stderr and "Traceback" not in res.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.mark.slow
def test_a_link_planted_at_summary_json_in_a_sticky_directory_is_never_written(
    tmp_path: Path,
) -> None:
    """Another user's link at DIR/summary.json, DIR a shared sticky directory
    (as /tmp is), pointing at a file of ours (standing for ~/.bashrc)."""
    victim = tmp_path / "bashrc"
    victim.write_text("mine\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    link = shared / "summary.json"
    link.symlink_to(victim)
    with throwaway_user() as uid:
        if uid is not None:
            os.lchown(link, uid, uid)
        for extra in ([], ["--overwrite"]):
            refused(pipeline(SAMPLE, "-o", str(shared), *extra), "summary.json", "symbolic link")
    assert victim.read_text() == "mine\n" and os.readlink(link) == str(victim)
    assert sorted(os.listdir(shared)) == ["summary.json"]


@pytest.mark.slow
@pytest.mark.skipif(os.getuid() != 0, reason="mknod needs root")
def test_a_device_at_summary_json_is_refused_and_stays_a_device(tmp_path: Path) -> None:
    dev = tmp_path / "summary.json"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    refused(pipeline(SAMPLE, "-o", str(tmp_path), "--overwrite"), "not a regular file")
    assert stat.S_ISCHR(dev.lstat().st_mode)


@pytest.mark.slow
def test_an_earlier_run_is_refused_before_spark_starts(tmp_path: Path) -> None:
    (tmp_path / "messages" / "msg_type_name=Ack").mkdir(parents=True)  # the layout before
    (tmp_path / "messages" / "_SUCCESS").write_text("")
    refused(pipeline(SAMPLE, "-o", str(tmp_path)), "messages exists", "--overwrite")
    table = tmp_path / "t" / "proto_Ack"  # a payload table alone
    table.mkdir(parents=True)
    (table / "part-0.parquet").write_bytes(b"PAR1")
    refused(pipeline(SAMPLE, "-o", str(tmp_path / "t")), "proto_Ack exists", "--overwrite")
    summary_only = tmp_path / "s"
    summary_only.mkdir()
    (summary_only / "summary.json").write_text('{"outcome": "ok"}')
    refused(pipeline(SAMPLE, "--out", str(summary_only)), "summary.json exists")
    assert (summary_only / "summary.json").read_text() == '{"outcome": "ok"}'


@pytest.mark.slow
def test_overwrite_refuses_a_table_holding_a_users_files(tmp_path: Path) -> None:
    table = tmp_path / "messages"
    (table / "msg_type_name=Ack").mkdir(parents=True)
    (table / "msg_type_name=Ack" / "part-0.parquet").write_bytes(b"PAR1")
    (table / "precious.txt").write_text("mine")
    (table / "msg_type_name=Ack" / "notes.md").write_text("mine too")
    refused(
        pipeline(SAMPLE, "-o", str(tmp_path), "--overwrite"),
        "messages/msg_type_name=Ack/notes.md",
        "messages/precious.txt",
    )
    assert (table / "precious.txt").read_text() == "mine"
    payloads = tmp_path / "p" / "proto_Message"
    payloads.mkdir(parents=True)
    (payloads / "part-0.parquet").write_bytes(b"PAR1")
    (payloads / "x=1").mkdir()  # a partition directory only messages and entries had
    (payloads / "x=1" / "part-0.parquet").write_bytes(b"PAR1")
    refused(
        pipeline(SAMPLE, "-o", str(tmp_path / "p"), "--overwrite"),
        "holds files lbparse pipeline does not write (proto_Message/x=1)",
    )
    assert (payloads / "x=1" / "part-0.parquet").read_bytes() == b"PAR1"


@pytest.mark.slow
def test_an_output_in_or_at_an_input_is_refused(tmp_path: Path) -> None:
    captures = tmp_path / "captures"
    captures.mkdir()
    (captures / "a.pcap").write_bytes(Path(SAMPLE).read_bytes())
    refused(pipeline(str(captures), "-o", str(captures)), "is the input")
    refused(pipeline(str(captures), "-o", str(captures / "out")), "inside the input")
    refused(pipeline(str(captures / "a.pcap"), "-o", str(captures / "a.pcap")), "not a directory")
    out = tmp_path / "out"
    (out / "messages").mkdir(parents=True)
    (out / "messages" / "old.pcap").write_bytes(Path(SAMPLE).read_bytes())
    refused(
        pipeline(str(out / "messages" / "old.pcap"), "-o", str(out), "--overwrite"),
        "which this run replaces",
    )


@pytest.mark.slow
def test_output_option_spellings_and_help() -> None:
    res = subprocess.run(
        [sys.executable, "-P", "-m", "lbparse", "pipeline", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "-o DIR, --output DIR" in res.stdout and "--out " not in res.stdout
    res = pipeline(SAMPLE)
    assert res.returncode == 2 and "-o/--output" in res.stderr


def test_overwrite_replaces_only_what_the_run_writes(
    spark: Any, tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A capture-only run writes no entries: DIR/entries (with a user's file in
    it) and the user's own files in DIR stay; what is replaced is said. A
    payload table the run writes but has no rows for is moved away: its rows
    were not this run's (joined to the new messages, they would lie)."""
    assert main(["pipeline", SAMPLE, "-o", str(tmp_path), "-q"]) == 0
    tables = list(json.loads((tmp_path / "summary.json").read_text())["tables"])
    assert len(tables) == 16  # messages and the 15 payload types of the sample
    entries = tmp_path / "entries"
    entries.mkdir()
    (entries / "precious.txt").write_text("mine")
    (tmp_path / "notes.txt").write_text("mine too")
    old_summary = (tmp_path / "summary.json").read_text()
    capsys.readouterr()
    assert main(["pipeline", SAMPLE, "--out", str(tmp_path), "--overwrite", "-q"]) == 0
    err = capsys.readouterr().err
    replaced = ", ".join(f"{tmp_path}/{t}" for t in tables)
    assert (
        f"--overwrite: replacing {replaced}, {tmp_path}/summary.json at the end of the run"
    ) in err
    assert f"keeping {tmp_path}/entries (this run does not write it)" in err
    assert (entries / "precious.txt").read_text() == "mine"
    assert (tmp_path / "notes.txt").read_text() == "mine too"
    assert (tmp_path / "summary.json").read_text() != old_summary
    assert json.loads((tmp_path / "summary.json").read_text())["totals"]["rows"] == 196
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["entries", "notes.txt", "summary.json", *tables]
    )
    # A run of no payloads: the payload tables go, entries and the user's files stay.
    # (named, a file in no format is refused before any work; inside a folder, a row)
    junk = tmp_path.parent / f"{tmp_path.name}-junk"
    junk.mkdir()
    (junk / "garbage.bin").symlink_to(inputs["garbage.bin"])
    assert main(["pipeline", str(junk), "--out", str(tmp_path), "--overwrite", "-q"]) == 1
    assert json.loads((tmp_path / "summary.json").read_text())["tables"] == {
        "messages": {"path": f"{tmp_path}/messages", "rows": 1}
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "entries",
        "messages",
        "notes.txt",
        "summary.json",
    ]
    assert (entries / "precious.txt").read_text() == "mine"


@pytest.mark.slow
def test_demo_checks_its_output_before_it_runs(tmp_path: Path) -> None:
    """`lbparse demo -o DIR` replaces DIR/messages (and the payload tables) each run:
    never a user's files."""
    (tmp_path / "messages").mkdir()
    (tmp_path / "messages" / "precious.txt").write_text("mine")
    res = subprocess.run(
        [sys.executable, "-P", "-m", "lbparse", "demo", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "Decoded" not in res.stdout, res.stderr
    assert res.stderr.startswith("lbparse demo: ") and "precious.txt" in res.stderr
    assert (tmp_path / "messages" / "precious.txt").read_text() == "mine"
    page = tmp_path / "other" / "report.html"
    page.parent.mkdir()
    page.symlink_to(tmp_path / "messages" / "precious.txt")
    res = subprocess.run(
        [sys.executable, "-P", "-m", "lbparse", "demo", "--no-pipeline", "--out", str(page.parent)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "Decoded" not in res.stdout and "symbolic link" in res.stderr
    assert (tmp_path / "messages" / "precious.txt").read_text() == "mine"
