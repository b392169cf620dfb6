"""`lbparse report` on tables (the review's class 8 of #47): the output of a
capture that held gRPC alone has no `messages` table and is read all the
same, and a `message_json` that is not JSON (invalid, or nested past Python's
stack) costs its message, named with the table, never the report."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.capwriter import unary_capture
from support.cli import run_cli

pytest.importorskip("altair")


def _tables(tmp_path: Path) -> Path:
    out = tmp_path / "tables"
    done = run_cli("capture", str(unary_capture(tmp_path)), "--tables", str(out))
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert not (out / "messages").exists() and (out / "grpc_calls").is_dir()
    return out


def _report(tables: Path, tmp_path: Path) -> tuple[int, str, dict[str, object]]:
    model = tmp_path / "model.json"
    done = run_cli("report", str(tables), "-o", str(tmp_path / "r.html"), "--json", str(model))
    err = done.stderr.decode()
    assert "Traceback" not in err, err[-3000:]
    return done.returncode, err, json.loads(model.read_text()) if model.exists() else {}


@pytest.mark.slow  # capture --tables, then report: two command-line runs
def test_the_tables_of_a_grpc_only_capture_are_reported(tmp_path: Path) -> None:
    rc, err, model = _report(_tables(tmp_path), tmp_path)
    assert rc == 0, err
    assert '"FetchCursor"' in json.dumps(model)  # the two calls' method, in the client part


@pytest.mark.slow  # capture --tables, then report: two command-line runs
@pytest.mark.parametrize(
    "bad", ["{not json", "[" * 100_000 + "]" * 100_000], ids=["invalid", "deep"]
)
def test_a_message_json_that_is_not_json_costs_its_message(tmp_path: Path, bad: str) -> None:
    tables = _tables(tmp_path)
    part = next((tables / "grpc_messages").glob("*.parquet"))
    table = pq.read_table(part)
    texts = table.column("message_json").to_pylist()
    texts[0] = bad
    i = table.schema.get_field_index("message_json")
    pq.write_table(table.set_column(i, table.schema.field(i), pa.array(texts, pa.string())), part)
    rc, err, model = _report(tables, tmp_path)
    assert rc == 1, err
    said = json.dumps(model)
    assert "message_json is not JSON" in said and str(tables / "grpc_messages") in said
    assert '"FetchCursor"' in said  # the calls are read on
