"""What one Spark task runs: read its units, decode them, write them, count them.

`run_task` is the function given to `mapInArrow`. Its input rows carry the
task's units (JSON; see `job.task_frame`). It writes the decoded rows as
Parquet itself, one file per table (`output.TableWriter`, under the run's
temporary directory: `messages` and the payload tables of
lbparse.columnar.tables, `entries` for segments) and returns, as its
result rows, one row of counts per unit and one row per file written; the
driver commits those files and sums those counts. A task holds one batch
(and the writer's bounded buffers) at a time, whatever the size of its
files.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa

from lbparse.capture import HOT_MODULES, Notice, compiled_modules
from lbparse.columnar import crc
from lbparse.columnar.decode_arrow import Decoded, DecodeOptions, decoder_for
from lbparse.columnar.grpctables import Held, grpc_tables, notice_rows
from lbparse.columnar.ordered import decode_in_order
from lbparse.columnar.sources import SourceOptions, Unit, UnitStats, read_unit
from lbparse.columnar.tables import MESSAGES, table_schema, tables_of
from lbparse.columnar.units import INPUT_PROBLEM
from lbparse.pipeline.datadir_entries import (
    ENTRIES_DIR,
    SEGMENT_FORMAT,
    arrow_entries_schema,
    read_segment_unit,
)
from lbparse.pipeline.output import TableWriter, attempt_id, filesystem
from lbparse.pipeline.summary import (
    count_batch,
    count_entries,
    count_entry_problems,
    count_problems,
)

__all__ = [
    "HELD",
    "HELD_ROWS",
    "RESULT_SCHEMA",
    "TaskOptions",
    "count_rows",
    "decode_unit",
    "new_counts",
    "process_segment",
    "process_unit",
    "result_batch",
    "run_task",
    "schema_of",
]

# A task's result: kind "unit" (key, counts as JSON) or "file" (table, attempt, path, rows).
RESULT_SCHEMA = (
    "kind string, key string, table string, attempt string, path string, rows bigint, counts string"
)
_RESULT = pa.schema(
    [
        ("kind", pa.string()),
        ("key", pa.string()),
        ("table", pa.string()),
        ("attempt", pa.string()),
        ("path", pa.string()),
        ("rows", pa.int64()),
        ("counts", pa.string()),
    ]
)
# A range of a cut capture writes the rows it holds back (Held) to this
# table of the run's temporary directory, never committed, and counts them
# as HELD_ROWS: the run's second stage (lbparse.pipeline.http2_stage) reads
# the file's gRPC calls and gives them back.
HELD = "_held"
HELD_ROWS = "held_rows"


@dataclass(frozen=True)
class TaskOptions:
    """How a task reads and decodes its units.

    Attributes:
        decode: How payloads are decoded (layout, CRC check, leniency,
            protobuf defaults).
        source: How inputs are read (a Parquet table's payload, subject and
            timestamp columns; rows per batch).
    """

    decode: DecodeOptions
    source: SourceOptions


def schema_of(table: str, json_columns: bool = False) -> pa.Schema:
    """The schema of a table the pipeline writes.

    Args:
        table: The table's name: entries, messages, a payload table, or
            HELD (messages' rows held back).
        json_columns: With the JSON text columns (DecodeOptions.json_columns).

    Returns:
        Its Arrow schema.
    """
    if table == ENTRIES_DIR:
        return arrow_entries_schema()
    return table_schema(MESSAGES if table == HELD else table, json_columns=json_columns)


def process_segment(unit: Unit, options: TaskOptions, writer: TableWriter) -> dict[str, Any]:
    """Read and write one segment file (a Liftbridge data directory's); its counts.

    Args:
        unit: The segment's unit.
        options: How to read it (rows per batch).
        writer: The task's writer; the entries go to its `entries` table.

    Returns:
        The unit's counts (new_counts()'s keys and the summary's: messages,
        per_stream, ...), for FileSummary.add_unit.
    """
    counts: dict[str, Any] = {
        "rows": 0,
        "problems": 0,
        "read_seconds": 0.0,
        "decode_seconds": 0.0,
        "write_seconds": 0.0,
    }
    breakdowns: dict[str, Counter[str]] = {}
    reading = read_segment_unit(unit, options.source.batch_rows)
    while True:
        t0 = time.perf_counter()
        batch = next(reading, None)
        t1 = time.perf_counter()
        counts["read_seconds"] += t1 - t0
        if batch is None:
            break
        counts["rows"] += batch.num_rows
        counts["problems"] += count_entry_problems(batch)
        count_entries(batch, breakdowns)
        writer.write(ENTRIES_DIR, batch.num_rows, dict(zip(batch.schema.names, batch.columns)))
        counts["write_seconds"] += time.perf_counter() - t1
    counts["messages"] = counts["rows"] - counts["problems"]
    counts["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    counts["lbparse"] = decoded_by()
    counts.update(asdict(UnitStats(unit.path, unit.format, unit.size, bytes_read=unit.size)))
    counts.update({k: dict(v) for k, v in breakdowns.items()})
    return counts


@lru_cache(maxsize=1)
def decoded_by() -> str:
    """Which lbparse this worker imported, and whether it runs compiled: on a cluster,
    a packed environment's (compiled) or the --py-files zip's (pure Python)."""
    where = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the lbparse package
    built = []
    if compiled_modules():
        built.append(f"capture {len(compiled_modules())}/{len(HOT_MODULES)}")
    if crc._native is not None:
        built.append("_kernels")
    return f"{where} ({'compiled: ' + ', '.join(built) if built else 'pure Python'})"


def process_unit(unit: Unit, options: TaskOptions, writer: TableWriter) -> dict[str, Any]:
    """Read, decode and write one unit; its counts.

    It writes `messages` and a table per payload type present; a whole
    capture that may hold HTTP/2 is read again for its gRPC tables.

    Args:
        unit: The unit (a capture, recording or Parquet table, or a run of
            its rows).
        options: How to read and decode it.
        writer: The task's writer.

    Returns:
        The unit's counts (decode_unit()'s), for FileSummary.add_unit.
    """
    counts = new_counts()
    held = Held()
    for decoded in decode_unit(unit, options, counts):
        t = time.perf_counter()
        for name, table in tables_of(decoded).items():
            if name == MESSAGES:
                table = held.take(table)
            _write(writer, name, table)
        counts["write_seconds"] += time.perf_counter() - t
    # The C loop reads NATS only: a whole capture whose rows may show HTTP/2 is
    # read again for its gRPC calls (lbparse.columnar.grpctables). A range of
    # a large capture cannot be: HTTP/2's state (HPACK) runs from the start.
    # Its held rows wait for the run's second stage (http2_stage).
    if held.rows and not (unit.start == 0 and unit.stop < 0):
        for table in held.rows:
            _write(writer, HELD, table)
        counts[HELD_ROWS] = held.count
        return counts
    connections: set[tuple[str, str]] = set()
    notices: list[Notice] = []
    if held.rows:
        t = time.perf_counter()
        for found in grpc_tables(
            unit.path,
            batch_rows=options.source.batch_rows,
            found=connections,
            on_notice=notices.append,
            connections=held.connections(unit.path),
        ):
            for name, table in found.items():
                writer.write_table(name, table)
        counts["read_seconds"] += time.perf_counter() - t
    # What the gRPC reading lost: problem rows numbered after the file's own
    # (as read_capture_tables numbers them); its notes only counted.
    lost = notice_rows(unit.path, unit.first_row + counts["rows"], notices)
    if lost.num_rows:
        _write(writer, MESSAGES, lost)
        count_rows(counts, lost, 1)
    notes = counts.setdefault("notes", {})
    for n in notices:
        if n.info:
            notes[n.kind] = notes.get(n.kind, 0) + 1
    problems, http2 = held.release(connections)
    if problems.num_rows:
        _write(writer, MESSAGES, problems)
    count_rows(counts, http2, -1)
    return counts


def _write(writer: TableWriter, name: str, table: pa.Table) -> None:
    writer.write(name, table.num_rows, {c: _array(table.column(c)) for c in table.column_names})


def count_rows(counts: dict[str, Any], rows: pa.Table, sign: int) -> None:
    """Problem rows into a unit's counts, or out of them.

    Args:
        counts: The unit's counts, changed in place.
        rows: Problem rows of `messages`.
        sign: 1: add the rows, problems, breakdowns and notices decode_unit
            would have made of them; -1: take them out (the rows of HTTP/2
            connections, held, then not written).
    """
    if not rows.num_rows:
        return
    counts["rows"] += sign * rows.num_rows
    counts["problems"] += sign * rows.num_rows
    more: dict[str, Counter[str]] = {}
    count_batch(rows, more)
    for key, c in more.items():
        kept = counts.setdefault(key, {})
        for value, n in c.items():
            kept[value] = kept.get(value, 0) + sign * n
            if kept[value] <= 0:
                del kept[value]
    notices = counts.setdefault("notices", {})
    for kind in rows.column("error_kind").to_pylist():
        name = kind[len(INPUT_PROBLEM) :]
        notices[name] = notices.get(name, 0) + sign
        if notices[name] <= 0:
            del notices[name]


def _array(col: pa.ChunkedArray) -> pa.Array:
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def new_counts() -> dict[str, Any]:
    """A unit's counts before any reading: rows, problems and the seconds, all zero.

    Returns:
        A new dict, for decode_unit() to fill.
    """
    return {
        "rows": 0,
        "problems": 0,
        "read_seconds": 0.0,
        "decode_seconds": 0.0,
        "write_seconds": 0.0,
    }


def decode_unit(unit: Unit, options: TaskOptions, counts: dict[str, Any]) -> Iterator[Decoded]:
    """The decoded batches of one unit, in order.

    `counts` is filled as they go, and completed (the summary's per-unit
    counts) when the unit is done. What `lbparse pipeline`'s tasks write and
    what the Spark data source (lbparse.spark) reads.

    Args:
        unit: The unit to read.
        options: How to read and decode it.
        counts: new_counts()'s dict, updated in place: rows, problems and
            the seconds as the batches go; then messages, peak_rss_mb, lbparse,
            the reading's stats and the breakdowns.

    Yields:
        The decoded batches (Decoded), in the input's order.
    """
    decoder = decoder_for(options.decode)
    stats = UnitStats(unit.path, unit.format, unit.size)
    breakdowns: dict[str, Counter[str]] = {}
    decoding = decode_in_order(_timed(read_unit(unit, options.source, stats), counts), decoder)
    while True:
        t0, read0 = time.perf_counter(), counts["read_seconds"]
        decoded = next(decoding, None)
        # What the step took but reading: the decoding (held batches included).
        counts["decode_seconds"] += time.perf_counter() - t0 - (counts["read_seconds"] - read0)
        if decoded is None:
            break
        counts["rows"] += decoded.num_rows
        counts["problems"] += count_problems(decoded)
        count_batch(decoded, breakdowns)
        yield decoded
    counts["messages"] = counts["rows"] - counts["problems"]
    # The worker's peak memory so far (workers are reused: an upper bound
    # for this unit); flat whatever the file size, since reading streams.
    counts["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    counts["lbparse"] = decoded_by()
    counts.update(asdict(stats))
    counts.update({k: dict(v) for k, v in breakdowns.items()})


def _timed(batches: Iterator[pa.RecordBatch], counts: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    """`batches`, the time spent reading them added to counts["read_seconds"]."""
    while True:
        t0 = time.perf_counter()
        records = next(batches, None)
        counts["read_seconds"] += time.perf_counter() - t0
        if records is None:
            return
        yield records


def result_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """A task's result rows as one batch of RESULT_SCHEMA.

    Args:
        rows: Dicts of RESULT_SCHEMA's columns ("unit" rows and "file" rows).

    Returns:
        The batch mapInArrow yields.
    """
    return pa.RecordBatch.from_pylist(rows, schema=_RESULT)


def run_task(
    batches: Iterator[pa.RecordBatch], options: TaskOptions, temporary: str
) -> Iterator[pa.RecordBatch]:
    """The function given to mapInArrow: read, decode and write a task's units.

    Args:
        batches: The task's input: rows of one string column, each a JSON list
            of units (job.task_frame).
        options: How to read and decode them.
        temporary: RUNDIR/_temporary/RUN, a path or URI; the attempt writes
            under temporary/ATTEMPT/TABLE/.

    Yields:
        One batch in RESULT_SCHEMA: a "unit" row of counts per unit (JSON),
        and a "file" row per Parquet file written.
    """
    fs, base = filesystem(temporary)
    attempt = attempt_id()
    json_columns = options.decode.json_columns
    writer = TableWriter(fs, f"{base}/{attempt}", lambda t: schema_of(t, json_columns))
    done: list[tuple[str, dict[str, Any]]] = []
    try:
        for batch in batches:
            for row in batch.column(0).to_pylist():  # one row per task: its units, as JSON
                for text in json.loads(row):
                    unit = Unit.from_json(text)
                    process = process_segment if unit.format == SEGMENT_FORMAT else process_unit
                    done.append((unit.key, process(unit, options, writer)))
        t = time.perf_counter()
        files = writer.close()
        closing = time.perf_counter() - t
    except BaseException:
        writer.abort()
        raise
    # Closing writes the rows still buffered: their units' writing time.
    rows = sum(c["rows"] for _, c in done) or 1
    for _, c in done:
        c["write_seconds"] += closing * c["rows"] / rows
    yield result_batch(
        [{"kind": "unit", "key": key, "counts": json.dumps(c)} for key, c in done]
        + [
            {"kind": "file", "table": f.table, "attempt": attempt, "path": f.path, "rows": f.rows}
            for f in files
        ]
    )
