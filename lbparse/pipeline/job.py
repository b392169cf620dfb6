"""A pipeline run: plan the inputs, decode them on Spark, write Parquet and the summary.

`run(spark, options)` does the work in a given session and returns the
`Summary`; `lbparse pipeline` (lbparse/cli/pipeline_cmd.py) wraps it with
a session, progress and the printed summary; spark-submit's application
file (dist/lbparse_pipeline.py, tools/dist.py) calls that command line.

Output, under --out DIR, one directory per table (lbparse.columnar.tables):
  DIR/messages/part-*.parquet        one row per NATS message (or input problem)
  DIR/proto_Message/part-*.parquet   one per payload type present: its rows' payloads,
  DIR/...                            flat columns, keyed like messages by (source, position)
  DIR/entries/part-*.parquet         one row per stored entry of the Liftbridge
                                     data directories given
  DIR/summary.json                   the summary (its "tables": each table's path and rows)
Each table sits in its own directory because Spark reads every file of a
directory as data: summary.json beside the files would break
`spark.read.parquet(DIR/messages)`. The tasks write the Parquet files and
the driver commits them (see output.py for why, and how).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pyarrow.fs import FileSystem, LocalFileSystem
from pyspark.sql import functions as F

from lbparse.codec import jsonform
from lbparse.columnar.decode_arrow import DecodeOptions
from lbparse.columnar.sources import SourceOptions, Unit
from lbparse.errors import InputError, OperationalError
from lbparse.outputs import Interrupted, signals_deferred
from lbparse.pipeline import outdir
from lbparse.pipeline.datadir_entries import ENTRIES_DIR, SEGMENT_FORMAT
from lbparse.pipeline.http2_stage import merge, requests, run_stage
from lbparse.pipeline.input_plan import plan
from lbparse.pipeline.outdir import MESSAGES_DIR, SUMMARY_FILE
from lbparse.pipeline.output import commit, discard, filesystem
from lbparse.pipeline.summary import Summary
from lbparse.pipeline.tasks import HELD, HELD_ROWS, RESULT_SCHEMA, TaskOptions, run_task
from lbparse.scratch import replace_file

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["MESSAGES_DIR", "SUMMARY_FILE", "JobFailed", "PipelineOptions", "group_units", "run"]

# The tables of one row per input row (a message, an entry, a problem): the
# rows the summary counts. The payload tables hold some of messages' rows again.
ROW_TABLES = (MESSAGES_DIR, ENTRIES_DIR)
# A task's share when files are small (they are grouped up to this), and at
# most (larger files are never split but their own task).
MIN_TASK_BYTES = 1 << 20
MAX_TASK_BYTES = 128 << 20


class JobFailed(OperationalError):
    """The run itself failed: Spark, a worker or the output's filesystem.

    As opposed to a run that finished and found bad data: nothing was
    committed, and DIR/summary.json says so (`outcome` "failed"; its path is
    `summary_path`, and `path`). The cause is chained (`__cause__`).

    Args:
        kind: "failed".
        message: What failed, the real cause's words.
        summary_path: The summary.json that says the run failed, if written.
        kept: An earlier run's outputs, left as they were.
    """

    KINDS: ClassVar[frozenset[str]] = frozenset({"failed"})

    def __init__(
        self, kind: str, message: str, *, summary_path: str | None, kept: Sequence[str] = ()
    ) -> None:
        super().__init__(kind, message, path=summary_path)
        self.summary_path = summary_path
        self.kept = list(kept)  # an earlier run's output, left as it was


@dataclass(frozen=True)
class PipelineOptions:
    """What a run reads, how it decodes, and where it writes.

    Attributes:
        inputs: The input paths (captures, recordings, Parquet tables of
            payloads, Liftbridge data directories; files or directories).
        out: DIR, the output directory (a local path or a filesystem URI).
        decode: How payloads are decoded (layout, CRC check, leniency,
            protobuf defaults).
        source: How inputs are read (a Parquet table's payload, subject and
            timestamp columns; rows per batch).
        overwrite: Replace an earlier run's output in DIR (--overwrite);
            without it, one is refused.
    """

    inputs: tuple[str, ...]
    out: str
    decode: DecodeOptions = field(default_factory=DecodeOptions)
    source: SourceOptions = field(default_factory=SourceOptions)
    overwrite: bool = False


def group_units(units: Sequence[Unit], slots: int) -> list[list[Unit]]:
    """Units in tasks, in order: about two tasks per core, small files together.

    A task's share is the total over twice `slots`, at least MIN_TASK_BYTES
    and at most MAX_TASK_BYTES; a unit larger than that is a task of its own.

    Args:
        units: The planned units, in the order they are to be read.
        slots: The cores the session has (its default parallelism).

    Returns:
        The tasks, each a list of consecutive units; together every unit once,
        in order.
    """
    total = sum(u.nbytes for u in units)
    target = min(max(total // max(2 * slots, 1) + 1, MIN_TASK_BYTES), MAX_TASK_BYTES)
    groups: list[list[Unit]] = []
    cur: list[Unit] = []
    size = 0
    for u in units:
        if cur and size + u.nbytes > target:
            groups.append(cur)
            cur, size = [], 0
        cur.append(u)
        size += u.nbytes
    if cur:
        groups.append(cur)
    return groups


def task_frame(spark: SparkSession, groups: list[list[Unit]]) -> DataFrame:
    """One row per task, in a partition of its own: the task's units as JSON.

    Made in the JVM (a range, and the JSON as literals): a Python RDD would
    start a Python worker on every executor just to turn rows into rows.
    """
    return _frame(spark, [json.dumps([u.to_json() for u in g]) for g in groups])


def _frame(spark: SparkSession, texts: list[str]) -> DataFrame:
    """One row per text, each in a partition of its own (task_frame's way)."""
    values = F.array(*[F.lit(t) for t in texts])
    return spark.range(0, len(texts), 1, numPartitions=len(texts)).select(
        F.element_at(values, (F.col("id") + 1).cast("int")).alias("units")
    )


def run(
    spark: SparkSession,
    options: PipelineOptions,
    on_plan: Callable[[list[Unit], int], None] | None = None,
    units: list[Unit] | None = None,
    check_interrupt: Callable[[], None] | None = None,
    on_swapped: Callable[[Summary], None] | None = None,
) -> Summary:
    """Decode every input into DIR's tables and write DIR/summary.json.

    The new output is written beside the old one and swapped in at the end
    (outdir.py): a run that fails or is interrupted (Interrupted, or
    KeyboardInterrupt, raised on as Interrupted with the rows done and what
    was kept) leaves DIR as it was.

    Args:
        spark: The session to run in.
        options: The inputs, how to decode them, DIR and --overwrite.
        on_plan: Called with the units and the number of tasks once they are
            planned, before the job starts (for progress); None: not called.
        units: The inputs already planned, as `lbparse pipeline` does before
            Spark starts; None: planned here.
        check_interrupt: Raises Interrupted if the run was interrupted: it is
            called between the steps (a caller whose signal handler only
            records the signal while Spark may be inside a call, as
            lbparse.pipeline.interrupts does, is stopped there), last before
            the swap, and when the job fails (a signal to the process group
            stops the JVM too, and the job then fails by the interruption, not
            by itself); a job cancelled for the signal fails that way too.
        on_swapped: Called with the summary as the new output is in place, with
            the signals still held back: a caller told so cannot mistake a
            signal that comes after it, wherever it lands, for one that kept
            the earlier output.

    Returns:
        The run's summary, as written to DIR/summary.json.

    Raises:
        InputError: Bad decode options, or no input files.
        OutputError: DIR cannot be written, or holds what the run may not
            replace (outdir.check), before any work.
        OSError: No staging directory could be made in DIR.
        Interrupted: The run was interrupted; DIR is as it was unless the swap
            was done (`finished`).
        JobFailed: The job itself failed (Spark, a worker, the filesystem):
            nothing was committed; the cause is chained.
    """
    start = time.monotonic()
    options.decode.check()
    skipped: list[tuple[str, str]] = []
    if units is None:
        units = plan(list(options.inputs), options.source, skipped)
    if not units:
        raise InputError("no_input", f"no input files in {', '.join(options.inputs)}")
    segments = any(u.format == SEGMENT_FORMAT for u in units)
    out_plan = outdir.check(options.out, options.overwrite, options.inputs, segments)
    groups = group_units(units, spark.sparkContext.defaultParallelism)
    if on_plan is not None:
        on_plan(units, len(groups))
    fs, out_path = filesystem(options.out)
    outdir.clear_stale(fs, out_path)
    staging = outdir.make_staging(fs, out_path)
    run_id = uuid.uuid4().hex[:12]
    temporary = f"{staging}/_temporary/{run_id}"
    task_options = TaskOptions(options.decode, options.source)
    rows = spark.sparkContext.accumulator(0)  # rows of the tasks done, for an interruption
    swapped = False
    try:
        # The tasks open the same place by path or URI (they may run elsewhere).
        where = _join(options.out, staging.rsplit("/", 1)[1])
        task_dir = _join(where, "_temporary", run_id)
        task = _counted(rows, task_options, task_dir)
        frame = task_frame(spark, groups).mapInArrow(task, RESULT_SCHEMA)
        _check(check_interrupt)
        result = frame.collect()
        _check(check_interrupt)  # a job that ended as the signal came was not cancelled
        counts = {r.key: json.loads(r.counts) for r in result if r.kind == "unit"}
        files = [r for r in result if r.kind == "file" and r.table != HELD]
        files += _second_stage(spark, units, counts, result, task_options, rows, task_dir)
        _check(check_interrupt)
        # Only the tables that have rows: DuckDB's and Polars' globs fail on
        # a table of no files (data directories alone have no messages).
        commit(fs, staging, temporary, [(r.attempt, r.path) for r in files])
        _check(check_interrupt)
        summary = Summary.from_units(
            units,
            counts,
            out_plan.path(MESSAGES_DIR),
            options.decode.layout,
            time.monotonic() - start,
            rows_written=sum(r.rows for r in files if r.table in ROW_TABLES),
            files_written=len(files),
        )
        summary.skipped = [{"path": p, "reason": why} for p, why in skipped]
        table_rows: dict[str, int] = {}
        for r in files:
            table_rows[r.table] = table_rows.get(r.table, 0) + r.rows
        summary.tables = {
            name: {"path": out_plan.path(name), "rows": table_rows[name]}
            for name in out_plan.writes
            if name in table_rows
        }
        write_summary(summary, f"{staging}/{SUMMARY_FILE}", fs)
        _check(check_interrupt)
        with signals_deferred():  # a signal now waits for the renames to be done
            outdir.swap(fs, staging, out_path, out_plan.writes)
            swapped = True
            if on_swapped is not None:
                on_swapped(summary)
    except BaseException as exc:
        stopped = _interruption(exc, check_interrupt)
        if stopped is not None:
            stopped.rows, stopped.finished = int(rows.value), swapped
            stopped.kept = [] if swapped else out_plan.replaces + out_plan.kept
            _discard_quietly(fs, staging)
            if stopped is exc:
                raise
            raise stopped from None
        if not isinstance(exc, Exception):  # SystemExit: not a crash
            _discard_quietly(fs, staging)
            raise
        _discard_quietly(fs, staging)
        reason = _first_line(exc)
        written = (
            None
            if out_plan.previous
            else _write_failed_summary(
                options, units, out_plan.path(MESSAGES_DIR), reason, time.monotonic() - start
            )
        )
        raise JobFailed(
            "failed",
            f"the job failed ({type(exc).__name__}): {reason}",
            summary_path=written,
            kept=out_plan.replaces + out_plan.kept,
        ) from exc
    try:
        _discard_quietly(fs, staging)  # the previous output, moved there by the swap
    except KeyboardInterrupt as exc:  # the new output is in place, whole
        stopped = exc if isinstance(exc, Interrupted) else Interrupted()
        stopped.rows, stopped.finished, stopped.kept = summary.totals()["rows"], True, []
        raise stopped from None
    return summary


def _second_stage(
    spark: SparkSession,
    units: list[Unit],
    counts: dict[str, dict[str, Any]],
    result: list[Any],
    options: TaskOptions,
    rows: Accumulator[int],
    task_dir: str,
) -> list[Any]:
    """The gRPC tables of the cut captures that held rows (lbparse.pipeline.http2_stage):
    a job of one task per capture; its counts added to `counts`, its files returned."""
    held = [(r.attempt, r.path) for r in result if r.kind == "file" and r.table == HELD]
    asked = requests(units, counts, held)
    for c in counts.values():
        c.pop(HELD_ROWS, None)
    if not asked:
        return []
    task = _counted(rows, options, task_dir, run_stage)
    second = _frame(spark, asked).mapInArrow(task, RESULT_SCHEMA).collect()
    for r in second:
        if r.kind == "unit":
            merge(counts[r.key], json.loads(r.counts))
    return [r for r in second if r.kind == "file"]


def _check(check_interrupt: Callable[[], None] | None) -> None:
    if check_interrupt is not None:
        check_interrupt()


def _interruption(exc: BaseException, check: Callable[[], None] | None) -> Interrupted | None:
    """The interruption that stopped the run, if it was one."""
    if isinstance(exc, Interrupted):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        return Interrupted()
    if isinstance(exc, Exception) and check is not None:
        try:
            check()
        except Interrupted as stop:
            return stop
    return None


def _counted(
    rows: Accumulator[int],
    options: TaskOptions,
    temporary: str,
    body: Callable[[Iterator[Any], TaskOptions, str], Iterator[Any]] = run_task,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The task (`body`: run_task, or the second stage's), adding the rows of
    each messages or entries file it wrote to `rows` (the driver sees them
    as tasks finish: what an interrupted run had done)."""

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        for result in body(batches, options, temporary):
            tables, counts = result.column("table").to_pylist(), result.column("rows").to_pylist()
            rows.add(sum(n or 0 for t, n in zip(tables, counts) if t in ROW_TABLES))
            yield result

    return task


def _discard_quietly(fs: FileSystem, path: str) -> None:
    try:
        discard(fs, path)
    except OSError:
        pass  # left for the next run into DIR (outdir.clear_stale)


def _first_line(exc: BaseException) -> str:
    """What went wrong, in a line: a Spark failure's text is a JVM stack trace
    (py4j's own first line only names the call; the Java exception says why)."""
    java = getattr(exc, "java_exception", None)
    try:
        text = str(java.toString() if java is not None else exc).strip()
    except Exception:
        text = str(exc).strip()
    text = text or type(exc).__name__
    worker = _worker_error(text)
    if worker is not None:
        return worker[:500]
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "Traceback", "File ")):
            return line[:500]
    return text[:500]


def _worker_error(text: str) -> str | None:
    """The exception line of the last Python traceback in `text`: a task that
    failed in its Python worker (a full disk: `OSError: DIR: cannot write:
    No space left on device`), whose text begins by saying only that the
    worker failed. The traceback's first line not indented is the exception."""
    at = text.rfind("Traceback (most recent call last):")
    if at < 0:
        return None
    for line in text[at:].splitlines()[1:]:
        if line.strip() and not line[0].isspace():
            return line.strip()
    return None


def _write_failed_summary(
    options: PipelineOptions, units: Sequence[Unit], output: str, reason: str, seconds: float
) -> str | None:
    """DIR/summary.json for a run that did not finish; its path, or None if it
    could not be written (the same filesystem may be what failed)."""
    location = _join(options.out, SUMMARY_FILE)
    try:
        write_summary(
            Summary.failed(units, output, options.decode.layout, seconds, reason), location
        )
    except Exception:
        return None
    return location


def _join(location: str, *parts: str) -> str:
    """A path or URI with parts appended (local paths made absolute: tasks run elsewhere)."""
    base = location.rstrip("/") if "://" in location else os.path.abspath(location)
    return "/".join([base, *parts])


def write_summary(summary: Summary, location: str, fs: FileSystem | None = None) -> None:
    """The summary at `location` (with `fs`: a path in it, else a path or URI).
    A local one is made whole through a new file renamed into place: a link
    found at the name is replaced, never written through."""
    text = jsonform.dumps(summary.to_json_dict(), indent=1) + "\n"  # lbparse's JSON
    if fs is None:
        fs, location = filesystem(location)
    if isinstance(fs, LocalFileSystem):
        replace_file(location, text)
        return
    with fs.open_output_stream(location) as f:
        f.write(text.encode("utf-8"))
