"""A recording's `ts` that 64 bits of nanoseconds do not hold (issue #47):
the record is read without its time (NO_TIME: null in JSON and in the
tables), and a `bad_record` notice names the line or row and the value;
exit status 1. In the JSON Lines and the Parquet readers, and through
`capture`, `capture --tables`, `report` and the pipeline's sources. Before,
"99999999999999999999" was read as it was, printed as a date or as
`9.22337e+18s`, and stored null with no notice."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.cli import LBPARSE

from lbparse.capture import Notice
from lbparse.capture.recordings import ParquetRecordWriter, parquet_schema, read_jsonl, read_parquet
from lbparse.capture.records import NO_TIME, Record
from lbparse.columnar.sources import SourceOptions, read_unit
from lbparse.columnar.units import UnitStats
from lbparse.pipeline.input_plan import plan

ROOT = Path(__file__).resolve().parents[2]
GOOD = 1_795_298_780_302_883_000
PAST = "99999999999999999999"  # 1e20 ns: the year 5138, past int64


def _record(ts: int, subject: str) -> Record:
    return Record.make(
        ts, "127.0.0.1:4222", "127.0.0.1:40000", "MSG", subject, None, "1", None, b"hello"
    )


def _line(ts: Any, subject: str) -> str:
    d = _record(GOOD, subject).to_json_dict()
    d["ts"] = ts
    return json.dumps(d)


def _jsonl(path: Path, middle: Any) -> Path:
    path.write_text(
        "\n".join([_line(str(GOOD), "a"), _line(middle, "b"), _line(str(GOOD + 1), "c")]) + "\n"
    )
    return path


def _read_jsonl(text: str) -> tuple[list[Record], list[Notice]]:
    notices: list[Notice] = []
    recs = list(read_jsonl(io.BytesIO(text.encode()), "rec.jsonl", notices.append))
    return recs, notices


@pytest.mark.parametrize(
    "value",
    [PAST, str(2**63), str(-(2**63)), "-" + PAST, 1e11, None],
    ids=["past", "2^63", "-2^63", "-past", "seconds-1e11", "null"],
)
def test_jsonl_a_time_past_int64_costs_its_field_with_a_notice(value: Any) -> None:
    lines = "\n".join([_line(str(GOOD), "a"), _line(value, "b"), _line(str(GOOD + 1), "c")])
    recs, notices = _read_jsonl(lines)
    assert [(r.subject, r.ts) for r in recs] == [("a", GOOD), ("b", NO_TIME), ("c", GOOD + 1)]
    assert [n.kind for n in notices] == ["bad_record"]
    assert "rec.jsonl:2" in notices[0].message
    if value is not None:
        assert repr(value) in notices[0].message
    assert recs[1].to_json_dict()["ts"] is None


def test_jsonl_the_int64_extremes_that_fit_are_kept() -> None:
    top, bottom = 2**63 - 1, -(2**63) + 1
    recs, notices = _read_jsonl(_line(str(top), "a") + "\n" + _line(str(bottom), "b"))
    assert [r.ts for r in recs] == [top, bottom] and not notices


def test_jsonl_a_bad_time_before_any_good_record_still_proves_the_file() -> None:
    recs, notices = _read_jsonl(_line(PAST, "a"))
    assert [r.ts for r in recs] == [NO_TIME]
    assert [n.kind for n in notices] == ["bad_record"]


def _parquet(path: Path, column: pa.Array) -> Path:
    """A three-row recording whose ts column is `column`."""
    rows = ParquetRecordWriter(str(path))
    for i, s in enumerate("abc"):
        rows.write(_record(GOOD + i, s))
    rows.close()
    table = pq.read_table(path)
    table = table.set_column(0, pa.field("ts", column.type), column)
    pq.write_table(table, path)
    return path


@pytest.mark.parametrize(
    "column",
    [
        pa.array([GOOD, None, GOOD + 2], pa.timestamp("ns", tz="UTC")),
        pa.array([GOOD, -(2**63), GOOD + 2], pa.timestamp("ns", tz="UTC")),
        pa.array([GOOD / 1e9, 1e11, (GOOD + 2) / 1e9], pa.float64()),
        pa.array([GOOD, 2**63 + 5, GOOD + 2], pa.uint64()),
    ],
    ids=["null", "int64-min", "seconds-1e11", "uint64-past"],
)
def test_parquet_a_time_past_int64_costs_its_field_with_a_notice(
    tmp_path: Path, column: pa.Array
) -> None:
    path = _parquet(tmp_path / "rec.parquet", column)
    notices: list[Notice] = []
    recs = list(read_parquet(str(path), notices.append))
    assert [r.subject for r in recs] == ["a", "b", "c"]
    assert recs[1].ts == NO_TIME
    assert abs(recs[0].ts - GOOD) < 1000 and abs(recs[2].ts - GOOD - 2) < 1000
    assert [n.kind for n in notices] == ["bad_record"]
    assert "row 1" in notices[0].message


def test_parquet_writer_stores_no_time_as_null_and_reads_it_back_so(tmp_path: Path) -> None:
    path = tmp_path / "rec.parquet"
    with ParquetRecordWriter(str(path)) as w:
        w.write(_record(NO_TIME, "a"))
        w.write(_record(GOOD, "b"))
    assert pq.read_table(path).column("ts").to_pylist()[0] is None
    notices: list[Notice] = []
    assert [r.ts for r in read_parquet(str(path), notices.append)] == [NO_TIME, GOOD]
    assert len(notices) == 1
    assert pq.read_schema(path) == parquet_schema()


def _lbparse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LBPARSE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # a command-line run
def test_capture_prints_null_names_the_line_and_exits_1(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "rec.jsonl", PAST)
    run = _lbparse("capture", str(path))
    assert run.returncode == 1, run.stderr
    out = [json.loads(line) for line in run.stdout.splitlines()]
    assert [d["ts"] for d in out] == [str(GOOD), None, str(GOOD + 1)]
    assert "bad_record" in run.stderr and "rec.jsonl:2" in run.stderr and PAST in run.stderr
    table = _lbparse("capture", str(path), "--format", "table")
    assert table.returncode == 1
    assert "e+" not in table.stdout and PAST not in table.stdout, table.stdout


@pytest.mark.slow  # a command-line run
def test_capture_tables_hold_null_and_a_problem_row(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "rec.jsonl", PAST)
    run = _lbparse("capture", str(path), "--tables", str(tmp_path / "t"))
    assert run.returncode == 1, run.stderr
    rows = pq.read_table(tmp_path / "t" / "messages").to_pylist()
    problems = [r for r in rows if (r["error_kind"] or "").startswith("input:")]
    assert [r["error_kind"] for r in problems] == ["input:bad_record"]
    assert PAST in problems[0]["error_message"]
    assert [r["ts_ns"] for r in rows if r["subject"] is not None] == [GOOD, None, GOOD + 1]


@pytest.mark.slow  # a report run
def test_report_counts_it_and_exits_1(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "rec.jsonl", PAST)
    run = _lbparse(
        "report", str(path), "-o", str(tmp_path / "r.html"), "--json", str(tmp_path / "r.json")
    )
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr


def test_pipeline_sources_read_null_times(tmp_path: Path) -> None:
    jsonl = _jsonl(tmp_path / "rec.jsonl", PAST)
    parquet = _parquet(
        tmp_path / "rec.parquet", pa.array([GOOD / 1e9, 1e11, float("inf")], pa.float64())
    )
    options = SourceOptions()
    got: dict[str, list[dict[str, Any]]] = {}
    for unit in plan([str(jsonl), str(parquet)], options):
        rows = got.setdefault(Path(unit.path).suffix, [])
        for batch in read_unit(unit, options, UnitStats(unit.path, unit.format, unit.size)):
            rows.extend(batch.select(["ts_ns", "subject", "error_kind"]).to_pylist())
    assert [r["error_kind"] for r in got[".jsonl"]].count("input:bad_record") == 1
    assert [r["ts_ns"] for r in got[".jsonl"] if r["subject"]] == [GOOD, None, GOOD + 1]
    times = [r["ts_ns"] for r in got[".parquet"]]
    assert abs(times[0] - GOOD) < 1000 and times[1:] == [None, None]


@pytest.mark.slow  # a report run
def test_a_timeless_record_is_on_no_time_axis(tmp_path: Path) -> None:
    """The report counts a record whose time did not fit, and places it in no
    time bin: its axis is the other records' (not stretched back to 1677,
    NO_TIME's year); `capture --format table` shows it as having no time."""
    import json

    from support.cli import run_cli

    path = tmp_path / "r.jsonl"
    path.write_text(
        '{"ts": 1e20, "src": "a:1", "dst": "b:2", "verb": "PUB", "subject": "s", '
        '"payload": "eA=="}\n{"ts": "1700000000000000000", "src": "a:1", '
        '"dst": "b:2", "verb": "PUB", "subject": "s", "payload": "eA=="}\n'
    )
    done = run_cli(
        "report",
        str(path),
        "-o",
        str(tmp_path / "r.html"),
        "--json",
        str(tmp_path / "r.json"),
        "-q",
    )
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    model = json.loads((tmp_path / "r.json").read_text())
    assert model["totals"]["messages"] == 2
    assert (
        model["report"]["first_utc"]
        == model["report"]["last_utc"]
        == "2023-11-14T22:13:20.000000000Z"
    )
    table = run_cli("capture", str(path), "--format", "table")
    rows = table.stdout.decode().splitlines()
    assert rows[0].startswith("(no time)") and rows[1].startswith("2023-11-14T22:13:20")


def test_a_table_timestamp_at_no_time_is_null_in_both_time_columns() -> None:
    """A Parquet table's timestamp column read by the pipeline's sources:
    NO_TIME (-2**63 ns, what numpy and pandas read as NaT) is null in `ts`
    and `ts_ns`, as a null is; the time beside it is read whole."""
    from lbparse.columnar.sources import _table_times

    t = 1_700_000_000 * 10**9
    ts, ts_ns = _table_times(pa.array([NO_TIME, t, None], pa.timestamp("ns", tz="UTC")))
    assert ts_ns.to_pylist() == [None, t, None]
    assert ts.null_count == 2 and ts[1].value == t // 1000
