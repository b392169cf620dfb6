"""`lbparse capture --tables DIR`: the narrow tables of captures, without Spark.

The files are read by the public columnar core (lbparse.read_capture_tables,
the reader and decoder `lbparse pipeline` runs in its tasks) and each table
is written as DIR/<table>/part-00000.parquet: the layout the pipeline
writes, so what reads one reads the other. Tables without rows are not
written. DIR is made whole beside itself and renamed into place at the
end: a run that fails or is interrupted leaves no DIR, and an existing
DIR with anything in it is refused before any reading.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbparse.capture.notices import Notice
from lbparse.codec.limits import Limits
from lbparse.columnar.api import read_capture_tables
from lbparse.columnar.tables import table_schema
from lbparse.columnar.units import INPUT_PROBLEM, input_problems
from lbparse.outputs import OutputError, check_dir, signals_deferred
from lbparse.pipeline.output import parquet_writer

__all__ = ["TablesRun", "check_tables_dir", "write_tables"]

PART = "part-00000.parquet"


@dataclass
class TablesRun:
    """What a run wrote: rows per table, the inputs' problems (as (kind,
    message): a gap, a damaged block, a file that cannot be read), and per
    input the information notices (Notice.info: normal behaviour, no rows)."""

    rows: dict[str, int] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    notes: dict[str, list[Notice]] = field(default_factory=dict)


def check_tables_dir(path: str, inputs: Sequence[str]) -> None:
    """DIR may be made: absent or an empty directory, not an input (one line, exit 2)."""
    check_dir(path, "--tables", inputs)
    if os.path.isdir(path) and os.listdir(path):
        raise OutputError(f"--tables {path}: exists and is not empty; the tables are written "
                          "to a new directory (remove it or name another)")


def write_tables(path: str, files: Sequence[str], layout: str, *, verify_crc: bool,
                 lenient: bool, limits: Limits | None,
                 on_problem: Callable[[str, str], None]) -> TablesRun:
    """Read `files` in order into the tables of DIR `path` (checked before)."""
    parent = os.path.dirname(os.path.abspath(path))
    work = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", dir=parent)
    os.chmod(work, 0o777 & ~_umask())  # mkdtemp's 0700 would hide DIR from its group
    writers: dict[str, pq.ParquetWriter] = {}
    run = TablesRun()
    try:
        for name in files:
            notes = run.notes.setdefault(name, [])
            for tables in read_capture_tables(name, layout, verify_crc=verify_crc,
                                              lenient=lenient, limits=limits,
                                              on_info=notes.append):
                _problems(tables["messages"], run, on_problem)
                for table, rows in tables.items():
                    _write(work, writers, table, rows, run)
        for w in writers.values():
            w.close()
        writers.clear()
        with signals_deferred():  # the swap whole or not at all
            if os.path.isdir(path):
                os.rmdir(path)  # empty (checked); a file put there since: the rename fails
            os.rename(work, path)
    finally:
        for w in writers.values():
            w.close()
        shutil.rmtree(work, ignore_errors=True)
    return run


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def _write(work: str, writers: dict[str, pq.ParquetWriter], table: str, rows: pa.Table,
           run: TablesRun) -> None:
    if not rows.num_rows:
        return
    w = writers.get(table)
    if w is None:
        os.mkdir(os.path.join(work, table))
        w = writers[table] = parquet_writer(os.path.join(work, table, PART),
                                            table_schema(table))
    w.write_table(rows)
    run.rows[table] = run.rows.get(table, 0) + rows.num_rows


def _problems(messages: pa.Table, run: TablesRun, on_problem: Callable[[str, str], None]) -> None:
    """The reader's problem rows (error_kind input:KIND), said as they come."""
    found = input_problems(messages.column("error_kind"))
    if not pc.any(found).as_py():
        return
    for row in messages.filter(found).select(["error_kind", "error_message"]).to_pylist():
        kind = row["error_kind"].removeprefix(INPUT_PROBLEM)
        run.problems.append((kind, row["error_message"]))
        on_problem(kind, row["error_message"])
