"""`lbparse capture --tables DIR`: the columnar core's tables written without
Spark, each read whole by pandas, pyarrow.dataset, DuckDB and Polars."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from support.capwriter import ETHERNET, Conn, link, pub, write_pcap
from support.cli import run_cli
from support.reading import concat_tables
from support.shared import LIFTBRIDGE

import lbparse
from lbparse.columnar.tables import MESSAGES, TRAFFIC_TABLES, table_schema

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"
needs_short = pytest.mark.skipif(not SHORT.is_file(), reason=f"shared material missing: {SHORT}")


def _core_tables(path: Path) -> dict[str, pa.Table]:
    """The tables read_capture_tables gives that have rows (--tables writes those)."""
    return {k: t for k, t in concat_tables(lbparse.read_capture_tables(path)).items() if t.num_rows}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")
    out = tmp_path_factory.mktemp("tables") / "out"
    done = run_cli("capture", str(SHORT), "--tables", str(out), timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().startswith(f"{out}: 17 tables (messages 7,538, ")
    return out


@pytest.mark.slow
@needs_short
def test_the_tables_are_the_columnar_cores(written: Path) -> None:
    want = _core_tables(SHORT)
    assert set(TRAFFIC_TABLES) | {MESSAGES, "proto_Message"} <= set(want)
    assert sorted(p.name for p in written.iterdir()) == sorted(want)
    for name, table in want.items():
        got = ds.dataset(str(written / name)).to_table()
        assert got.schema == table_schema(name), name
        assert got.equals(table), name
    assert not [p for p in written.parent.iterdir() if p.name.startswith(".out.")]  # no leftovers


@pytest.mark.slow  # the command line's run (`written`)
@needs_short
def test_every_reader_reads_every_table_whole(written: Path) -> None:
    import duckdb
    import pandas as pd
    import polars as pl

    for d in written.iterdir():
        rows = ds.dataset(str(d)).count_rows()
        assert len(pd.read_parquet(d)) == rows, d.name
        assert pl.scan_parquet(str(d / "*.parquet")).select(pl.len()).collect().item() == rows
        assert duckdb.sql(f"SELECT count(*) FROM '{d}/*.parquet'").fetchall() == [(rows,)]
    msgs = pd.read_parquet(written / MESSAGES)
    assert msgs["msg_type_name"].isna().sum() > 0  # null is null, no sentinel
    joined = duckdb.sql(
        f"SELECT m.msg_type_name, count(*) FROM '{written}/messages/*.parquet' m "
        f"JOIN '{written}/raft_rpcs/*.parquet' r USING (source, position) "
        "GROUP BY 1"
    ).fetchall()
    assert joined == [(None, 2416)]  # the Raft RPCs are traffic, no envelope


@pytest.mark.slow  # the command line's run (`written`)
@needs_short
def test_the_readmes_raft_query_runs_on_the_tables(written: Path) -> None:
    """The manual's DuckDB query over the Raft tables, as written but for DIR."""
    import re

    import duckdb
    from support.docs import manual

    (query,) = re.findall(r"<!-- sql example: raft_entries -->\n```sql\n(.*?)```", manual(), re.S)
    rows = duckdb.sql(query.replace("'out/", f"'{written}/")).fetchall()
    ops = [op for _, _, op in rows]
    assert ops.count("CreateStream") == 5 and "PublishActivity" in ops  # the run made 5 streams
    assert [i for i, _, _ in rows] == sorted({i for i, _, _ in rows})  # each index once, in order


@pytest.mark.slow  # the command line's run (`written`)
@needs_short
def test_the_manuals_command_query_reads_the_typed_command_columns(written: Path) -> None:
    """The manual's query over raft_entries' RaftLog columns, as written but for DIR."""
    import re

    import duckdb
    from support.docs import manual

    (query,) = re.findall(r"<!-- sql example: raft_commands -->\n```sql\n(.*?)```", manual(), re.S)
    rows = duckdb.sql(query.replace("'out/", f"'{written}/")).fetchall()
    created = {s for _, c, s, _, _ in rows if c == "CreateStream"}
    deleted = {s for _, c, s, _, _ in rows if c == "DeleteStream"}
    assert len(created) == 5 and "__activity" in created, rows  # the run made 5 streams
    assert deleted and deleted <= created, rows
    assert [i for i, *_ in rows] == sorted({i for i, *_ in rows})  # each index once, in order


@pytest.mark.slow  # the command line's run (`written`)
@needs_short
def test_dir_is_made_with_the_users_umask(written: Path) -> None:
    mask = os.umask(0o22)
    os.umask(mask)
    assert stat.S_IMODE(written.stat().st_mode) == 0o777 & ~mask


@pytest.mark.slow
def test_a_damaged_capture_is_written_and_said(tmp_path: Path) -> None:
    conn = Conn()
    frames = conn.handshake() + conn.send(
        "c", pub("lb.x", bytes.fromhex("b90e43b40008000b0a027331"))
    )
    path = tmp_path / "t.pcap"
    write_pcap(path, [(1.0 + i, link(ETHERNET, f)) for i, f in enumerate(frames)])
    path.write_bytes(path.read_bytes()[:-5])  # the last packet cut short
    out = tmp_path / "out"
    done = run_cli("capture", str(path), "--tables", str(out))
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert err.startswith(f"lbparse capture: {path}"), err
    assert (out / MESSAGES).is_dir()


@pytest.mark.slow
def test_a_file_that_cannot_be_read_is_status_2(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_cli("capture", str(tmp_path / "nosuch.pcap"), "--tables", str(out))
    assert done.returncode == 2
    assert "nosuch.pcap: No such file or directory" in done.stderr.decode()


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra,word",
    [
        (["--subject", "a.>"], "--subject"),
        (["-c", "3"], "-c/--count"),
        (["--stats"], "--stats"),
        (["-o", "x.jsonl"], "-o/--output"),
        (["--format", "table"], "--format"),
    ],
)
def test_options_that_do_not_go_with_tables(tmp_path: Path, extra: list[str], word: str) -> None:
    done = run_cli("capture", "x.pcap", "--tables", str(tmp_path / "o"), *extra)
    err = done.stderr.decode()
    assert done.returncode == 2 and err.count("\n") == 1 and word in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_a_dir_with_something_in_it_is_refused_and_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    done = run_cli("capture", str(tmp_path / "x.pcap"), "--tables", str(out))
    assert done.returncode == 2
    assert done.stderr.decode() == (
        f"lbparse capture: --tables {out}: exists and is not empty; "
        "the tables are written to a new directory (remove it or "
        "name another)\n"
    )
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


@pytest.mark.slow
def test_stdin_and_an_input_as_dir_are_refused(tmp_path: Path) -> None:
    done = run_cli("capture", "-", "--tables", str(tmp_path / "o"))
    assert done.returncode == 2 and "not '-' (stdin)" in done.stderr.decode()
    cap = tmp_path / "c.pcap"
    cap.write_bytes(b"")
    done = run_cli("capture", str(cap), "--tables", str(cap))
    assert done.returncode == 2 and "not a directory" in done.stderr.decode()
    assert cap.read_bytes() == b""


@pytest.mark.slow
@needs_short
def test_json_columns_are_written_on_request(tmp_path: Path) -> None:
    """--json-columns: the traffic tables end with their JSON text columns, as
    read_capture_tables(json_columns=True) gives them; without it, none."""
    out = tmp_path / "out"
    done = run_cli("capture", str(SHORT), "--tables", str(out), "--json-columns", timeout=300)
    assert done.returncode == 0, done.stderr
    want = concat_tables(lbparse.read_capture_tables(SHORT, json_columns=True))
    for name, column in (
        ("traffic", "traffic_json"),
        ("raft_rpcs", "fields_json"),
        ("raft_entries", "command_json"),
    ):
        got = ds.dataset(str(out / name)).to_table()
        assert got.schema == table_schema(name, json_columns=True), name
        assert got.column_names[-1] == column
        assert got.equals(want[name]), name
        assert column not in table_schema(name).names


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_json_columns_go_with_tables_only(tmp_path: Path) -> None:
    done = run_cli("capture", str(tmp_path / "x.pcap"), "--json-columns")
    assert done.returncode == 2
    assert "--json-columns goes with --tables DIR" in done.stderr.decode()
