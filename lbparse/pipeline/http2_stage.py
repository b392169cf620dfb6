"""The second stage of a run over cut captures: their gRPC tables.

A capture over `capture_unit_bytes` is read as ranges by several tasks
(lbparse.columnar.sources). The C loop of each reads NATS only; an HTTP/2
connection's bytes (the clients' gRPC calls) are problem rows to it, which
`Held` (lbparse.columnar.grpctables) holds back. A whole capture's task
then reads the file again for its gRPC tables and gives back the held rows
that were not HTTP/2 after all. A range's task cannot: HPACK's state and a
connection's frames run from the connection's start, which may be in
another range.

A range's held rows are written aside (tasks.HELD, a table of the run's
temporary directory, never committed) and counted in the unit's counts
(tasks.HELD_ROWS). Once every range is done, the driver asks for one stage-2
task per capture that held rows (`requests`): it reads the whole file's
gRPC calls on the connections the held rows name, writes the gRPC tables,
writes the held rows that were not HTTP/2 as the problems they are, and
what the gRPC reading lost as problem rows numbered after the file's own,
exactly as a one-task reading of the file does; its counts are added to
the file's first unit's (`merge`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbparse.capture import Notice
from lbparse.columnar.grpctables import Held, grpc_tables, notice_rows
from lbparse.columnar.tables import MESSAGES
from lbparse.columnar.units import Unit
from lbparse.pipeline.output import TableWriter, attempt_id, filesystem
from lbparse.pipeline.tasks import (
    HELD_ROWS,
    TaskOptions,
    count_rows,
    new_counts,
    result_batch,
    schema_of,
)

__all__ = ["merge", "requests", "run_stage"]


def requests(
    units: Sequence[Unit],
    counts: Mapping[str, dict[str, Any]],
    held_files: Sequence[tuple[str, str]],
) -> list[str]:
    """The stage-2 tasks the first stage's results call for, one per capture.

    Args:
        units: The run's units.
        counts: Each unit's counts by key, as the first stage returned them.
        held_files: (attempt directory, HELD/part file) of each HELD file
            the first stage wrote.

    Returns:
        One JSON request per capture that held rows in a range: its path,
        its units (key and first position, in order), the position its
        notice rows start at (after the file's last row), and every HELD
        file (rows of other captures are read past).
    """
    by_path: dict[str, list[Unit]] = {}
    for u in units:
        by_path.setdefault(u.path, []).append(u)
    out = []
    for path, mine in by_path.items():
        if not any(counts.get(u.key, {}).get(HELD_ROWS) for u in mine):
            continue
        after = max(u.first_row + counts.get(u.key, {}).get("rows", 0) for u in mine)
        ranges = [[u.key, u.first_row] for u in sorted(mine, key=lambda u: u.first_row)]
        held = [list(f) for f in held_files]
        out.append(json.dumps({"path": path, "units": ranges, "after": after, "held": held}))
    return out


def run_stage(
    batches: Iterator[pa.RecordBatch], options: TaskOptions, temporary: str
) -> Iterator[pa.RecordBatch]:
    """The function given to mapInArrow for the second stage: one capture per request.

    Args:
        batches: Rows of one string column, each a request of `requests`.
        options: The run's task options (rows per batch, the JSON columns).
        temporary: RUNDIR/_temporary/RUN, as the first stage's tasks had it.

    Yields:
        One batch in tasks.RESULT_SCHEMA: "unit" rows of counts to add to
        units' counts and take from them (merge's `stage`), and a "file" row
        per file written.
    """
    fs, base = filesystem(temporary)
    attempt = attempt_id()
    json_columns = options.decode.json_columns
    writer = TableWriter(fs, f"{base}/{attempt}", lambda t: schema_of(t, json_columns))
    batch_rows = options.source.batch_rows
    done: list[tuple[str, dict[str, Any]]] = []
    try:
        for batch in batches:
            for text in batch.column(0).to_pylist():
                request = json.loads(text)
                done += _stage(request, fs, base, batch_rows, writer)
        files = writer.close()
    except BaseException:
        writer.abort()
        raise
    yield result_batch(
        [{"kind": "unit", "key": key, "counts": json.dumps(c)} for key, c in done]
        + [
            {"kind": "file", "table": f.table, "attempt": attempt, "path": f.path, "rows": f.rows}
            for f in files
        ]
    )


def _stage(
    request: dict[str, Any], fs: Any, base: str, batch_rows: int, writer: TableWriter
) -> list[tuple[str, dict[str, Any]]]:
    """One capture's second stage; by unit key, the counts it adds to the
    unit's and takes from them (merge's `stage`): what it read and wrote to
    the first unit's, each HTTP/2 row from the unit that counted it."""
    path = request["path"]
    t = time.perf_counter()
    held = Held()
    # Taken at once: past MAX_HELD rows (the ranges' together), a one-task
    # reading would leave the batches after the one that passed it as they
    # are (problems), and not read every connection they name.
    passed = held.take(_held_rows(fs, base, request["held"], path))
    connections: set[tuple[str, str]] = set()
    notices: list[Notice] = []
    for found in grpc_tables(
        path,
        batch_rows=batch_rows,
        found=connections,
        on_notice=notices.append,
        connections=held.connections(path),
    ):
        for name, table in found.items():
            writer.write_table(name, table)
    counts = new_counts()
    counts["read_seconds"] = time.perf_counter() - t
    lost = notice_rows(path, request["after"], notices)
    notes: dict[str, int] = {}
    for n in notices:
        if n.info:
            notes[n.kind] = notes.get(n.kind, 0) + 1
    counts["notes"] = notes
    problems, http2 = held.release(connections)
    t = time.perf_counter()
    for table in (lost, passed, problems):
        if table.num_rows:
            writer.write_table(MESSAGES, table)
    counts["write_seconds"] += time.perf_counter() - t
    count_rows(counts, lost, 1)  # new rows
    keys = [key for key, _ in request["units"]]
    out = {keys[0]: {"add": counts, "take": new_counts()}}
    # Each held row was counted by its range, the unit whose positions hold it.
    starts = np.array([first for _, first in request["units"]], np.int64)
    unit_of = np.searchsorted(starts, np.asarray(http2.column("position")), "right") - 1
    for i in np.unique(unit_of).tolist():
        mine = out.setdefault(keys[i], {"add": new_counts(), "take": new_counts()})
        count_rows(mine["take"], http2.filter(pa.array(unit_of == i)), 1)
    return list(out.items())


def _held_rows(fs: Any, base: str, files: list[list[str]], path: str) -> pa.Table:
    """The held rows of capture `path`, in the order of a one-task reading."""
    tables = []
    for attempt, rel in files:
        with fs.open_input_file(f"{base}/{attempt}/{rel}") as f:
            table = pq.read_table(f)
        tables.append(table.filter(pc.equal(table.column("source"), path)))
    return pa.concat_tables(tables).sort_by([("position", "ascending")])


def merge(into: dict[str, Any], stage: Mapping[str, Any]) -> None:
    """A second stage's counts for one unit into the unit's own.

    Args:
        into: The unit's counts, changed in place.
        stage: What the stage's task returned for the unit: counts to add
            ("add": what the stage read and wrote, for the file's first
            unit) and to take out ("take": its held rows that were HTTP/2).
    """
    _sum(into, stage["add"], 1)
    _sum(into, stage["take"], -1)


def _sum(into: dict[str, Any], more: Mapping[str, Any], sign: int) -> None:
    """Numbers summed, breakdowns (dicts) key by key, a breakdown's count
    that falls to zero removed (a breakdown lists what is there)."""
    for key, value in more.items():
        if isinstance(value, dict):
            mine = into.setdefault(key, {})
            _sum(mine, value, sign)
            for k in [k for k, v in mine.items() if isinstance(v, (int, float)) and v <= 0]:
                del mine[k]
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + sign * value
