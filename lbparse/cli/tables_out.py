"""`lbparse capture --tables DIR`: the narrow tables of captures, without Spark.

The files are read by the public columnar core (lbparse.read_capture_tables,
the reader and decoder `lbparse pipeline` runs in its tasks) and each table
is written as DIR/<table>/part-00000.parquet: the layout the pipeline
writes, so what reads one reads the other. Tables without rows are not
written. DIR is made whole beside itself and renamed into place at the
end: a run that fails or is interrupted leaves no DIR (and nothing
beside it), an existing DIR with anything in it is refused before any
reading, and so is a DIR that could not be made there (lbparse.outputs:
a missing or read-only parent, a name too long). A write that fails (a
full disk) is said as DIR's problem, never an input's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbparse.capture.notices import Notice
from lbparse.codec.limits import Limits
from lbparse.columnar.api import read_capture_tables
from lbparse.columnar.tables import table_schema
from lbparse.columnar.units import INPUT_PROBLEM, input_problems
from lbparse.outputs import (
    OutputError,
    check_dir,
    check_folder,
    signals_deferred,
    temp_name,
    write_failed,
)
from lbparse.pipeline.output import parquet_writer

__all__ = ["TablesRun", "check_tables_dir", "write_tables"]

PART = "part-00000.parquet"


@dataclass
class TablesRun:
    """What a run wrote.

    Attributes:
        rows: Table name -> rows written.
        problems: The inputs' problems, as (kind, message): a gap, a damaged
            block, a file that cannot be read.
        notes: Per input, the information notices (Notice.info: normal
            behaviour, no rows).
    """

    rows: dict[str, int] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    notes: dict[str, list[Notice]] = field(default_factory=dict)


def check_tables_dir(path: str, inputs: Sequence[str]) -> None:
    """DIR may be made: absent or an empty directory, not an input (one line, exit 2).

    Args:
        path: The --tables directory.
        inputs: The input files, which DIR may not be.

    Raises:
        OutputError: DIR exists and is not empty, is no directory or an input,
            or its parent cannot be written.
    """
    check_dir(path, "--tables", inputs)
    if os.path.isdir(path) and os.listdir(path):
        raise OutputError(
            "refused",
            f"--tables {path}: exists and is not empty; the tables are written "
            "to a new directory (remove it or name another)",
        )
    # DIR is made beside itself and renamed into place: its parent is written
    check_folder(path.rstrip("/") or path, f"--tables {path}")


def write_tables(
    path: str,
    files: Sequence[str],
    layout: str,
    *,
    verify_crc: bool,
    lenient: bool,
    limits: Limits | None,
    on_problem: Callable[[str, str], None],
    json_columns: bool = False,
) -> TablesRun:
    """Read `files` in order into the tables of DIR `path` (checked before).

    The tables are written in a new directory beside DIR and renamed into
    place at the end: DIR gets all of them or nothing.

    Args:
        path: The --tables directory (checked by check_tables_dir).
        files: The captures or recordings, read in this order.
        layout: The envelope layout to decode with.
        verify_crc: Whether to check the CRC-32C.
        lenient: Accept what the upstream server accepts, with warnings.
        limits: The run's limits; None for the defaults.
        on_problem: Called with (kind, message) for each input problem, as
            they come.
        json_columns: Also the JSON text columns (read_capture_tables').

    Returns:
        What the run wrote: rows per table, problems, notes.

    Raises:
        OutputError: The tables could not be written or put in place (a full
            disk, say); nothing is written then.
    """
    where = f"--tables {path}"
    work = _work_dir(path.rstrip("/") or path, where)
    writers: dict[str, pq.ParquetWriter] = {}
    run = TablesRun()
    try:
        for name in files:
            notes = run.notes.setdefault(name, [])
            for tables in read_capture_tables(
                name,
                layout,
                verify_crc=verify_crc,
                lenient=lenient,
                limits=limits,
                on_info=notes.append,
                json_columns=json_columns,
            ):
                _problems(tables["messages"], run, on_problem)
                for table, rows in tables.items():
                    try:
                        _write(work, writers, table, rows, run, json_columns)
                    except OSError as exc:  # the output's (a full disk), not the input's
                        raise write_failed(where, exc) from None
        try:
            for w in writers.values():
                w.close()
        except OSError as exc:
            raise write_failed(where, exc) from None
        writers.clear()
        with signals_deferred():  # the swap whole or not at all
            try:
                if os.path.isdir(path):
                    os.rmdir(path)  # empty (checked); a file put there since: the rename fails
                os.rename(work, path)
            except OSError as exc:
                raise OutputError(
                    "write_failed",
                    f"{where}: cannot put the tables in place: {exc.strerror}; nothing written",
                ) from None
    finally:
        for w in writers.values():
            _close_quietly(w)
        shutil.rmtree(work, ignore_errors=True)
    return run


def _work_dir(path: str, where: str) -> str:
    """A new directory beside `path` (a random name that fits NAME_MAX), with
    the permissions the umask gives a new directory, as DIR would have."""
    for _ in range(100):
        work = temp_name(path)
        try:
            os.mkdir(work, 0o777)
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputError(
                "write_failed", f"{where}: cannot make a directory beside it: {exc.strerror}"
            ) from None
        return work
    raise OutputError("write_failed", f"{where}: cannot make a new directory beside it")


def _close_quietly(w: pq.ParquetWriter) -> None:
    """Close a writer of a run that failed: its file goes with the work
    directory. A close that fails (the disk that failed the run) is not
    tried again when pyarrow collects the writer (its __del__ would print
    a traceback)."""
    with contextlib.suppress(Exception):
        w.close()
    w.is_open = False


def _write(
    work: str,
    writers: dict[str, pq.ParquetWriter],
    table: str,
    rows: pa.Table,
    run: TablesRun,
    json_columns: bool,
) -> None:
    if not rows.num_rows:
        return
    w = writers.get(table)
    if w is None:
        os.mkdir(os.path.join(work, table))
        schema = table_schema(table, json_columns=json_columns)
        w = writers[table] = parquet_writer(os.path.join(work, table, PART), schema)
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
