"""A pipeline run: plan the inputs, decode them on Spark, write Parquet and the summary.

`run(spark, options)` does the work in a given session and returns the
`Summary`; `lbparse pipeline` (lbparse/cli/pipeline_cmd.py) wraps it with
a session, progress and the printed summary. `main(argv)` is the entry
point for spark-submit (dist/lbparse_pipeline.py calls it), with the
arguments of `lbparse pipeline`.

Output, under --out DIR:
  DIR/messages/msg_type_name=NAME/part-*.parquet   one row per NATS message
  DIR/entries/stream=NAME/part-*.parquet           one row per stored entry of the
                                                   Liftbridge data directories given
  DIR/summary.json                                 the summary
The data sits in its own directory because Spark reads every file of a
dataset directory as data: summary.json beside the partitions would break
`spark.read.parquet(DIR)`. The tasks write the Parquet files and the driver
commits them (see output.py for why, and how).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from pyarrow.fs import FileSelector, FileSystem, FileType

from lbparse import jsonform
from lbparse.pipeline.decode_arrow import DecodeOptions
from lbparse.pipeline.entries import ENTRIES_DIR, ENTRIES_PARTITION, arrow_entries_schema
from lbparse.pipeline.output import commit, dataset_schema, discard, filesystem
from lbparse.pipeline.schema import PARTITION_COLUMN, arrow_output_schema
from lbparse.pipeline.sources import SourceOptions, Unit, plan
from lbparse.pipeline.summary import Summary
from lbparse.pipeline.tasks import RESULT_SCHEMA, TaskOptions, run_task

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["MESSAGES_DIR", "SUMMARY_FILE", "JobFailed", "PipelineOptions", "group_units", "main",
           "run"]

MESSAGES_DIR = "messages"
SUMMARY_FILE = "summary.json"
# A task's share when files are small (they are grouped up to this), and at
# most (larger files are never split but their own task).
MIN_TASK_BYTES = 1 << 20
MAX_TASK_BYTES = 128 << 20


class JobFailed(RuntimeError):
    """The run itself failed (Spark, a worker, the output's filesystem), as
    opposed to a run that finished and found bad data: nothing was
    committed, and DIR/summary.json says so (`outcome` "failed"). The cause
    is chained (`__cause__`)."""

    def __init__(self, message: str, summary_path: str | None) -> None:
        super().__init__(message)
        self.summary_path = summary_path


@dataclass(frozen=True)
class PipelineOptions:
    inputs: tuple[str, ...]
    out: str
    decode: DecodeOptions = field(default_factory=DecodeOptions)
    source: SourceOptions = field(default_factory=SourceOptions)
    overwrite: bool = False


def group_units(units: Sequence[Unit], slots: int) -> list[list[Unit]]:
    """Units in tasks, in order: about two tasks per core, small files together."""
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


def task_frame(spark: "SparkSession", groups: list[list[Unit]]) -> "DataFrame":
    """One row per task, in a partition of its own: the task's units as JSON.

    Made in the JVM (a range, and the JSON as literals): a Python RDD would
    start a Python worker on every executor just to turn rows into rows.
    """
    from pyspark.sql import functions as F

    texts = F.array(*[F.lit(json.dumps([u.to_json() for u in g])) for g in groups])
    return (spark.range(0, len(groups), 1, numPartitions=len(groups))
            .select(F.element_at(texts, (F.col("id") + 1).cast("int")).alias("units")))


def run(spark: "SparkSession", options: PipelineOptions,
        on_plan: Callable[[list[Unit], int], None] | None = None,
        units: list[Unit] | None = None) -> Summary:
    """Decode every input into DIR/messages and write DIR/summary.json (`units`:
    the inputs already planned, as `lbparse pipeline` does before Spark starts)."""
    start = time.monotonic()
    options.decode.check()
    messages = _join(options.out, MESSAGES_DIR)
    entries = _join(options.out, ENTRIES_DIR)
    fs, dest = filesystem(messages)
    _, entries_dest = filesystem(entries)
    for name, path in ((messages, dest), (entries, entries_dest)):
        if fs.get_file_info(path).type != FileType.NotFound:
            if not options.overwrite and not unfinished(fs, path):
                raise ValueError(f"{name} exists; remove it or pass --overwrite")
            # Overwritten, or what a run that never finished left (no
            # _SUCCESS, nothing committed): nothing to keep.
            fs.delete_dir(path)
    if units is None:
        units = plan(list(options.inputs), options.source)
    if not units:
        raise ValueError(f"no input files in {', '.join(options.inputs)}")
    groups = group_units(units, spark.sparkContext.defaultParallelism)
    if on_plan is not None:
        on_plan(units, len(groups))
    run_id = uuid.uuid4().hex[:12]
    temporary = _join(messages, "_temporary", run_id)
    _, temporary_path = filesystem(temporary)
    entries_temporary = _join(entries, "_temporary", run_id)
    _, entries_temporary_path = filesystem(entries_temporary)
    task_options = TaskOptions(options.decode, options.source)
    fs.create_dir(dest, recursive=True)
    try:
        result = (task_frame(spark, groups)
                  .mapInArrow(lambda batches: run_task(batches, task_options, temporary,
                                                       entries_temporary), RESULT_SCHEMA)
                  .collect())
        # Only the tables that have rows: DuckDB's and Polars' globs fail on
        # a dataset of no files (data directories alone have no messages).
        files = [(r.attempt, r.path) for r in result if r.kind == "file"]
        if files:
            commit(fs, dest, temporary_path, files,
                   dataset_schema(arrow_output_schema(), PARTITION_COLUMN))
        else:
            discard(fs, dest)
        entry_files = [(r.attempt, r.path) for r in result if r.kind == "entries_file"]
        if entry_files:
            fs.create_dir(entries_dest, recursive=True)
            commit(fs, entries_dest, entries_temporary_path, entry_files,
                   dataset_schema(arrow_entries_schema(), ENTRIES_PARTITION))
    except BaseException as exc:
        # A failed run leaves nothing, so that the next one starts clean
        # (issue #12: its half-made DIR/messages made the re-run refuse).
        discard(fs, dest)
        discard(fs, entries_dest)
        if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: not a crash
            raise
        reason = _first_line(exc)
        written = _write_failed_summary(options, units, messages, reason,
                                        time.monotonic() - start)
        raise JobFailed(f"the job failed ({type(exc).__name__}): {reason}", written) from exc
    finally:
        discard(fs, temporary_path)  # no half-written files either way
        discard(fs, entries_temporary_path)
    counts = {r.key: json.loads(r.counts) for r in result if r.kind == "unit"}
    summary = Summary.from_units(units, counts, messages, options.decode.layout,
                                 time.monotonic() - start,
                                 rows_written=sum(r.rows for r in result
                                                  if r.kind in ("file", "entries_file")),
                                 files_written=len(files) + len(entry_files))
    write_summary(summary, _join(options.out, SUMMARY_FILE))
    return summary


def _first_line(exc: BaseException) -> str:
    """What went wrong, in a line: a Spark failure's text is a JVM stack trace
    (py4j's own first line only names the call; the Java exception says why)."""
    java = getattr(exc, "java_exception", None)
    try:
        text = str(java.toString() if java is not None else exc).strip()
    except Exception:  # noqa: BLE001  the JVM may be gone already
        text = str(exc).strip()
    text = text or type(exc).__name__
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "Traceback", "File ")):
            return line[:500]
    return text[:500]


def _write_failed_summary(options: PipelineOptions, units: Sequence[Unit], output: str,
                          reason: str, seconds: float) -> str | None:
    """DIR/summary.json for a run that did not finish; its path, or None if it
    could not be written (the same filesystem may be what failed)."""
    location = _join(options.out, SUMMARY_FILE)
    try:
        write_summary(Summary.failed(units, output, options.decode.layout, seconds, reason),
                      location)
    except Exception:  # noqa: BLE001  the failure being reported comes first
        return None
    return location


def unfinished(fs: FileSystem, dest: str) -> bool:
    """Whether `dest` is what a run that did not finish left: no _SUCCESS, and
    nothing in it but _temporary (a killed run never cleans up)."""
    try:
        names = {info.base_name for info in fs.get_file_info(FileSelector(dest))}
    except (FileNotFoundError, NotADirectoryError, OSError):
        return False
    return names <= {"_temporary"}


def _join(location: str, *parts: str) -> str:
    """A path or URI with parts appended (local paths made absolute: tasks run elsewhere)."""
    base = location.rstrip("/") if "://" in location else os.path.abspath(location)
    return "/".join([base, *parts])


def write_summary(summary: Summary, location: str) -> None:
    fs, path = filesystem(location)
    text = jsonform.dumps(summary.to_json_dict(), indent=1) + "\n"  # lbparse's JSON
    with fs.open_output_stream(path) as f:
        f.write(text.encode("utf-8"))


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit's entry point: `lbparse pipeline` with these arguments."""
    import sys

    from lbparse.cli import main as cli_main

    return cli_main(["pipeline", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
