"""A file whose name is not UTF-8 (an old system's Latin-1 name; Python keeps
the bytes as lone surrogates). Arrow, Parquet and JSON hold UTF-8 text alone:
`capture --tables` and `report` stopped with a raw "'utf-8' codec can't
encode character '\\udcff'" naming no file. Now every reading says the name
with its bytes as `\\xNN` (lbparse.textform.utf8_text): the readings that
name each row's file (the tables, the pipeline) refuse it in one line, a
problem row where a directory holds it; the records and the report read it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.cli import run_cli

import lbparse
from lbparse.textform import utf8_text, utf8_values

SAMPLE = Path(lbparse.__file__).parent / "examples" / "sample.pcap"
LATIN1 = os.fsdecode(b"caf\xe9.pcap")  # "café" in Latin-1: not UTF-8
SHOWN = "caf\\xe9.pcap"


def _copy(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    shutil.copyfile(SAMPLE, path)
    return path


def test_a_name_that_is_not_utf8_is_its_bytes_escaped() -> None:
    assert utf8_text(LATIN1) == SHOWN
    assert utf8_text("café.pcap") == "café.pcap"  # UTF-8 stays as it is
    assert utf8_text("x\ud800") == "x\\ud800"  # a lone surrogate from escaped JSON
    value = {"inputs": [{"path": LATIN1, "n": 1}], LATIN1: ["ok"], "kept": {"a": "b"}}
    clean = utf8_values(value)
    assert clean == {"inputs": [{"path": SHOWN, "n": 1}], SHOWN: ["ok"], "kept": {"a": "b"}}
    assert clean["kept"] is value["kept"]  # untouched parts are not copied
    json.dumps(clean, ensure_ascii=False).encode("utf-8")  # UTF-8 all through
    unchanged = {"a": ["b", {"c": 1}]}
    assert utf8_values(unchanged) is unchanged


def test_the_tables_say_the_name_in_one_problem_row(tmp_path: Path) -> None:
    path = _copy(tmp_path, LATIN1)
    (batch,) = lbparse.read_capture_tables(str(path))
    rows = batch["messages"].to_pylist()
    assert [(r["source"], r["error_kind"]) for r in rows] == [
        (utf8_text(str(path)), "input:unreadable")
    ]
    assert rows[0]["error_message"].startswith(f"{utf8_text(str(path))}: a file name")
    assert "not UTF-8" in rows[0]["error_message"]


@pytest.mark.slow  # command-line runs
def test_every_command_says_the_name_and_the_records_read_it(tmp_path: Path) -> None:
    odd, plain = _copy(tmp_path, LATIN1), _copy(tmp_path, "plain.pcap")
    here = {"cwd": tmp_path}  # the names as people type them
    for args in (["capture", LATIN1, "--tables", "t"], ["pipeline", LATIN1, "--out", "p"]):
        done = run_cli(*args, **here)
        err = done.stderr.decode()
        assert done.returncode == 2, err
        assert f"{SHOWN}: a file name that is not UTF-8" in err and "Traceback" not in err
    assert not (tmp_path / "p").exists()  # refused before Spark, nothing written
    # the records name no file: read as the same file under another name
    assert run_cli("capture", LATIN1, "-o", "odd.jsonl", **here).returncode == 0
    assert run_cli("capture", str(plain), "-o", "plain.jsonl", **here).returncode == 0
    assert (tmp_path / "odd.jsonl").read_bytes() == (tmp_path / "plain.jsonl").read_bytes()
    reports = {}
    for name, path in (("odd", odd.name), ("plain", plain.name)):
        done = run_cli("report", path, "-o", f"{name}.html", "--json", f"{name}.json", **here)
        assert done.returncode == 0, done.stderr.decode()
        reports[name] = json.loads((tmp_path / f"{name}.json").read_bytes().decode("utf-8"))
    assert [i["path"] for i in reports["odd"]["inputs"]] == [SHOWN]
    assert reports["odd"]["inputs"][0]["messages"] == reports["plain"]["inputs"][0]["messages"]
    assert SHOWN in (tmp_path / "odd.html").read_bytes().decode("utf-8")


@pytest.mark.slow  # a command-line run
def test_a_folder_holding_one_is_read_but_for_it(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    _copy(folder, LATIN1)
    _copy(folder, "plain.pcap")
    done = run_cli("capture", str(folder), "--tables", str(tmp_path / "t"))
    assert done.returncode == 2, done.stderr.decode()  # an unreadable input, as a missing one
    messages = pq.read_table(tmp_path / "t" / "messages").to_pandas()
    problems = messages[
        messages["error_kind"].notna() & messages["error_kind"].str.startswith("input:")
    ]
    assert problems["source"].tolist() == [utf8_text(str(folder / LATIN1))]
    read = messages[messages["source"] == str(folder / "plain.pcap")]
    assert len(read) == len(messages) - 1 and len(read) > 100
