"""Decode captures and tables of NATS payloads on Spark into a Parquet dataset.

INPUT is a pcap or pcapng file, our own records (`lbparse record`: .jsonl
or .parquet), any Parquet table with a binary column of NATS payloads
(--column; --subject-column and --timestamp-column when it has them), a
directory of those, or a Liftbridge data directory (its streams/, a
stream, a partition, .log files): each stored entry becomes one row of
DIR/entries: node, stream, partition, segment, position, offset,
timestamp, leader_epoch, key, value, headers (a map), crc_ok, the error
of damaged parts, and values of known type decoded into struct columns
(__activity, __cursors; envelopes as value_json). Each NATS message
becomes one row of DIR/messages: where it came from (source, position,
ts, src, dst, direction, verb, subject, reply, sid, headers), the
envelope header (layout, version, header_len, flags, crc32c, crc_ok,
msg_type, msg_type_name, payload_type), error_kind and error_message when
it does not decode, and the raw payload. Each decoded payload is one row
of its type's table, DIR/proto_Message, DIR/proto_Ack, DIR/protocol_...,
DIR/commitlog_ReplicationResponse (with its commit-log entries): the
payload's fields as typed columns (as Spark's from_protobuf makes them),
keyed like messages by (source, position). Every table is a directory of
plain Parquet files (no partitions; null is null), read whole by Spark,
pandas, pyarrow, DuckDB and Polars.

Nothing is dropped: a message that does not decode is a row with its
error, and a gap, a truncated or unreadable file is a row too (error_kind
input:...). The summary (printed, and DIR/summary.json) counts per input
file bytes read, packets, messages, gaps and problems, and the rows per
layout, MsgType and error kind; the counts add up.

Spark runs in this process on every core (local[*]) unless --master
names another, e.g. a standalone cluster: --master spark://HOST:7077
(the executors need lbparse: `make dist`, and see the README for the
spark-submit line). Captures are read as streams, one file per task;
Parquet files are split by row groups.

The output (-o DIR) is checked before Spark starts and written beside
the old one (a hidden DIR/.lbparse-staging-* directory), then swapped in
by renames at the end: a run that fails or is interrupted (SIGINT,
SIGTERM) leaves DIR as it was, the earlier output with its own summary.
A run writes DIR/messages, the payload tables, DIR/entries (only with
data directories among the inputs) and DIR/summary.json, and touches
nothing else in DIR. An
earlier run's table or summary is replaced only with --overwrite, which
says what it replaces, and refuses a table holding files a run does not
write; a symbolic link at any of those names is refused; DIR may not be
an input directory or inside one.

Exit status: 0 when every input was read whole, 1 when an input had
problems (gaps, unreadable parts), 2 on bad arguments, 3 when the job
itself failed (Spark, a worker, the output's filesystem: nothing was
written; on a first run DIR/summary.json says "outcome": "failed" with
the reason, otherwise the earlier output is kept as it was), 130 when
interrupted by SIGINT (Ctrl-C) or SIGTERM (one line says which, how many
rows were done and what was kept). summary.json's "outcome" is "ok",
"problems" or "failed".

examples:
  lbparse pipeline nats.pcap -o out/
  lbparse pipeline captures/ traffic.parquet -o out/ --overwrite
  lbparse pipeline payloads.parquet --column data --subject-column subj -o out/
  lbparse pipeline big.pcapng -o out/ --master spark://10.0.0.5:7077
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import Any, TextIO

from lbparse.capture import default_layout
from lbparse.cli.common import add_layout_argument
from lbparse.cli.status import INTERRUPTED, status_of, warn
from lbparse.columnar.decode_arrow import DecodeOptions
from lbparse.columnar.sources import SourceOptions
from lbparse.errors import InputError
from lbparse.extras import need
from lbparse.outputs import Interrupted
from lbparse.pipeline import DEFAULT_BATCH_ROWS, MAX_BATCH_ROWS, class_archive, interrupts, outdir
from lbparse.pipeline import preflight as pf
from lbparse.pipeline.cutting import Cutting
from lbparse.pipeline.datadir_entries import SEGMENT_FORMAT
from lbparse.pipeline.input_plan import plan
from lbparse.pipeline.interrupts import Interrupts
from lbparse.pipeline.session import (
    TEST_CONF,
    run_session,
    session_active,
    under_spark_submit,
)

# Spark is imported when the command runs (the job, through lbparse.extras.need),
# not when `lbparse` builds its parser for every other command.

NAME = "pipeline"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse pipeline`'s options to its parser.

    Args:
        p: The command's parser.
    """
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="pcap, pcapng, .jsonl/.parquet records, Parquet tables, or directories "
        "(not stdin: Spark's tasks open the inputs)",
    )
    add_output_argument(
        p, required=True, help="where DIR/messages (Parquet) and DIR/summary.json go"
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier run's tables (DIR/messages, the payload tables, "
        "DIR/entries when this run writes it) and DIR/summary.json; nothing else "
        "in DIR",
    )
    add_layout_argument(p, default=default_layout())
    p.add_argument(
        "--lenient",
        action="store_true",
        help="accept what the upstream server accepts (recorded in `warnings`)",
    )
    p.add_argument(
        "--no-verify-crc",
        dest="verify_crc",
        action="store_false",
        help="decode payloads whose CRC-32C does not match (crc_ok says false)",
    )
    p.add_argument(
        "--emit-default-values",
        dest="emit_defaults",
        action=argparse.BooleanOptionalAction,
        default=True,
        help='protobuf fields at their default (0, "", an enum\'s first value) as '
        "values (the default); --no-emit-default-values: null, as Spark's "
        "from_protobuf gives them without emit.default.values",
    )
    p.add_argument(
        "--json-columns",
        action="store_true",
        help="also the JSON text columns of the Raft traffic: traffic_json, fields_json, "
        "command_json, last in the traffic, raft_rpcs and raft_entries tables (made row "
        "by row: slower)",
    )
    g = p.add_argument_group("Parquet tables")
    g.add_argument(
        "--column",
        default="payload",
        metavar="NAME",
        help="the binary column of NATS payloads (default: payload)",
    )
    g.add_argument(
        "--subject-column",
        metavar="NAME",
        help="the NATS subject column (default: `subject` when there is one)",
    )
    g.add_argument(
        "--timestamp-column",
        metavar="NAME",
        help="capture time: a timestamp, or seconds since the epoch "
        "(default: `ts` or `timestamp` when there is one)",
    )
    s = p.add_argument_group(
        "Spark",
        # printed as written (the parser's formatter keeps line breaks)
        "A local run maps Spark's classes from an archive the first local run\n"
        "wrote (~150 MB in lbparse's cache, spark-classes/): a start ~4 s sooner.\n"
        "LBPARSE_SPARK_CLASSES=off turns it off, =DIR keeps it in DIR.",
    )
    s.add_argument(
        "--master",
        metavar="URL",
        help="local[N], or spark://HOST:PORT for a standalone cluster "
        "(default: local[*]; under spark-submit, its --master)",
    )
    s.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, repeatable (e.g. spark.executor.memory=4g)",
    )
    s.add_argument(
        "--test-conf",
        action="store_true",
        help="small and quiet settings (no UI, 2 shuffle partitions): tests, demos",
    )
    s.add_argument(
        "--batch-rows",
        type=int,
        default=DEFAULT_BATCH_ROWS,
        metavar="N",
        help=f"rows per Arrow batch (default: {DEFAULT_BATCH_ROWS})",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress, only the summary")


def add_output_argument(
    p: argparse.ArgumentParser, required: bool, help: str, default: str | None = None
) -> None:
    """-o/--output DIR, and --out (its former name, hidden) for the same thing.

    Args:
        p: The command's parser.
        required: Whether the option must be given.
        help: The option's help.
        default: The directory when it is not given.
    """
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("-o", "--output", dest="out", metavar="DIR", default=default, help=help)
    g.add_argument("--out", dest="out", metavar="DIR", default=default, help=argparse.SUPPRESS)


class Signals:
    """The command's side of SIGINT and SIGTERM.

    lbparse.pipeline.interrupts takes the signals (recorded, and acted on by a
    thread of its own while Spark may be inside a call, raised as Interrupted
    elsewhere); this keeps what the one line says about the output.
    """

    def __init__(self) -> None:
        self.interrupts = Interrupts()
        # The earlier output in DIR, kept if the run stops (None: not looked at yet).
        self.kept: list[str] | None = None
        self.done: int | None = None  # rows of the run, once its output is in place

    @property
    def hit(self) -> int | None:
        """The signal that interrupted the run, or None."""
        return self.interrupts.hit

    def install(self) -> None:
        """Put the signal handlers in place (main thread only)."""
        self.interrupts.install()

    def check(self) -> None:
        """Raise Interrupted (lbparse.pipeline.interrupts) if a signal came."""
        self.interrupts.check()

    def quiet_after(self, spark: Any) -> None:
        """Keep Spark's Python side quiet once the run is interrupted.

        PySpark's accumulator server (a socketserver thread of this process) prints
        a traceback when the JVM it serves dies with a SIGTERM to the group; its
        errors are then not reported.

        Args:
            spark: The running SparkSession.
        """
        server = getattr(spark.sparkContext, "_accumulatorServer", None)
        if server is None:
            return
        report = server.handle_error

        def handle_error(request: Any, address: Any) -> None:
            if self.hit is None:
                report(request, address)

        server.handle_error = handle_error


def _conf(args: argparse.Namespace) -> dict[str, str]:
    conf: dict[str, str] = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError("bad_option", f"--conf takes KEY=VALUE, not {item!r}")
        conf[key.strip()] = value.strip()
    if args.test_conf:
        conf = {**TEST_CONF, **conf}
    return conf


class Progress:
    """Tasks done, on stderr: a live line on a terminal, a line a minute elsewhere.

    Args:
        spark: The running SparkSession (its status tracker is polled).
        out: Where to write (stderr).
        quiet: Say nothing (-q).
    """

    def __init__(self, spark: Any, out: TextIO, quiet: bool) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.out = out
        self.tty = out.isatty()
        self.quiet = quiet
        self.stop = threading.Event()
        self.start = time.monotonic()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.context = spark.sparkContext

    def planned(self, units: list[Any], tasks: int) -> None:
        """Say the inputs and tasks planned, and start following the tasks.

        Args:
            units: The planned input units (their files and sizes are said).
            tasks: How many Spark tasks will read them.
        """
        if self.quiet:
            return
        files = len({u.path for u in units})
        total = sum(u.nbytes for u in units)
        self.out.write(
            f"lbparse pipeline: {files} input file(s), {total / 1e6:,.1f} MB, in {tasks} task(s)\n"
        )
        archiving = class_archive.writing_to(
            self.context.getConf().get("spark.driver.extraJavaOptions") or ""
        )
        if archiving is not None:
            # Once: a file of ~150 MB appears, and the JVM outlives the command by seconds.
            self.out.write(
                "lbparse pipeline: Spark's classes are archived as this run's JVM exits, "
                f"for later local runs to start sooner (~150 MB in {archiving}; "
                "LBPARSE_SPARK_CLASSES=off turns this off)\n"
            )
        self.out.flush()
        self.thread.start()

    def _status(self) -> str | None:
        done = total = 0
        for sid in self.tracker.getActiveStageIds():
            info = self.tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        if not total:
            return None
        return f"tasks {done}/{total} done, {time.monotonic() - self.start:,.0f} s"

    def _loop(self) -> None:
        every = 0.5 if self.tty else 60.0
        while not self.stop.wait(every):  # bounded by the run: done() sets stop
            try:
                status = self._status()
            except Exception:
                return
            if status:
                self.out.write(f"\r\033[K{status}" if self.tty else f"{status}\n")
                self.out.flush()

    def done(self) -> None:
        """Stop following the tasks and clear the live line."""
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=2)
        if self.tty and not self.quiet:
            self.out.write("\r\033[K")
            self.out.flush()


def run(args: argparse.Namespace) -> int:
    """Run `lbparse pipeline`: decode the inputs on Spark into a Parquet dataset.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 ok, 1 if the data had problems, 3 if the Spark job
        failed (nothing written), 130 if interrupted (SIGINT or SIGTERM; one
        line says what the output directory holds). A usage error raises
        ValueError (status 2, by lbparse.cli.main).
    """
    signals = Signals()
    try:
        signals.install()  # in the try: a signal the instant its handler is in place
        return _run(args, signals)
    except BaseException as exc:  # noqa: B036  the interruption, however it surfaces
        if isinstance(exc, SystemExit) or (
            signals.hit is None and not isinstance(exc, KeyboardInterrupt)
        ):
            raise
        # Once a signal came, whatever ends the run is the interruption: a call
        # to a JVM cancelled, stopped or killed under it fails as it must.
        signals.interrupts.taken()  # a second signal: not a second interruption
        outdir.remove_own(args.out)  # Spark is stopped now: nothing writes there any more
        stopped = exc if isinstance(exc, Interrupted) else Interrupted(signals.hit or signal.SIGINT)
        if signals.done is not None:  # after the swap: the new output is whole
            stopped.rows, stopped.finished, stopped.kept = signals.done, True, []
        elif not (stopped.rows or stopped.kept or stopped.finished):
            # Stopped before the job: what preflight found, or (stopped before
            # it looked) what of a run's output DIR holds.
            stopped.kept = signals.kept if signals.kept is not None else _there(args.out)
        print(interrupted_line(stopped, args.out), file=sys.stderr, flush=True)
        return INTERRUPTED  # for SIGTERM too: one status for "stopped, results kept"
    finally:
        signals.interrupts.close()


def _there(out: str) -> list[str]:
    """The names of a run's output in DIR now, as preflight's plan lists them."""
    plan = outdir.OutPlan(out, (*outdir.tables_written(True), outdir.SUMMARY_FILE))
    try:
        return [plan.path(n) for n in plan.writes if os.path.lexists(plan.path(n))]
    except (OSError, ValueError):  # a path no system call takes: nothing there
        return []


def _run(args: argparse.Namespace, signals: Signals) -> int:
    # The options are checked before Spark is imported: a usage error is said at once.
    if not 1 <= args.batch_rows <= MAX_BATCH_ROWS:
        raise InputError(
            "bad_option",
            f"--batch-rows must be at least 1 and at most {MAX_BATCH_ROWS:,}, "
            f"not {args.batch_rows:,}",
        )
    if "-" in args.inputs:
        raise InputError(
            "bad_option",
            "'-' (stdin) cannot be a pipeline input: Spark's tasks open the inputs "
            "themselves; save it to a file (`lbparse capture -` reads stdin)",
        )
    conf = _conf(args)
    job = need("lbparse.pipeline.job")  # Spark's: the spark extra
    options = job.PipelineOptions(
        inputs=tuple(args.inputs),
        out=args.out,
        overwrite=args.overwrite,
        decode=DecodeOptions(
            layout=args.layout,
            verify_crc=args.verify_crc,
            lenient=args.lenient,
            emit_defaults=args.emit_defaults,
            json_columns=args.json_columns,
        ),
        source=SourceOptions(
            column=args.column,
            subject_column=args.subject_column,
            timestamp_column=args.timestamp_column,
            batch_rows=args.batch_rows,
        ),
    )
    try:
        units, out_plan = preflight(args, options)
        signals.kept = out_plan.replaces + out_plan.kept
        say_replaced(out_plan)
        # From Spark's start to its stop the main thread may be inside a call
        # to the JVM at any moment: a signal is recorded there, not raised, and
        # signals.check() raises it between the run's steps. The large
        # captures' index pass (a second a gigabyte) runs beside the JVM's start
        # (a session already up, as in a test or a bench, has none).
        with (
            Cutting(units, options.source, beside=not session_active()) as cutting,
            interrupts.spark_calls(),
            run_session(args.master, conf=conf) as spark,
        ):
            signals.interrupts.reinstall()  # should Spark have put its own in place
            signals.quiet_after(spark)
            with interrupts.spark_calls(lambda: _quiet(spark)):
                signals.check()
                progress = Progress(spark, sys.stderr, args.quiet)

                def planned(units: list[Any], tasks: int) -> None:
                    signals.check()
                    progress.planned(units, tasks)

                def swapped(summary: Any) -> None:
                    signals.done = summary.totals()["rows"]

                try:
                    summary = job.run(
                        spark,
                        options,
                        on_plan=planned,
                        units=cutting.result(),
                        check_interrupt=signals.check,
                        on_swapped=swapped,
                    )
                finally:
                    progress.done()
            signals.check()  # Spark's stop, next, needs no cancelling
    except job.JobFailed as exc:
        # Not the data's fault, and not a usage error: its own exit status.
        where = (
            f"; the earlier output is kept ({', '.join(exc.kept)})"
            if exc.kept
            else f"; {exc.summary_path} says so"
            if exc.summary_path
            else ""
        )
        print(f"lbparse pipeline: FAILED, nothing written: {exc}{where}", file=sys.stderr)
        return status_of(exc)
    signals.check()  # a signal during Spark's stop
    print_report(summary, options.out)
    return {"ok": 0, "problems": 1}[summary.outcome]


def _quiet(spark: Any) -> None:
    """After an interruption (run by the interrupts' watcher thread, on a py4j
    connection of its own): the JVM logs nothing more, and its jobs stop."""
    spark.sparkContext.setLogLevel("OFF")
    spark.sparkContext.cancelAllJobs()


def interrupted_line(exc: Interrupted, out: str) -> str:
    """The one line an interrupted run ends with: rows done, and what DIR holds.

    Args:
        exc: The interruption, with its rows, finished and kept.
        out: The output directory.

    Returns:
        The line.
    """
    head = (
        f"lbparse pipeline: interrupted ({signal.Signals(exc.signum).name}) after {exc.rows:,} rows"
    )
    if exc.finished:
        return f"{head}; the new output was already in place in {out}"
    if exc.kept:
        return f"{head}; previous output kept ({', '.join(exc.kept)})"
    return f"{head}; nothing written to {out}"


def say_replaced(out_plan: Any) -> None:
    """What --overwrite (or an unfinished earlier run) makes this run replace, on stderr.

    Args:
        out_plan: The output directory's plan (pipeline.outdir.OutPlan).
    """
    if out_plan.replaces:
        warn(NAME, f"--overwrite: replacing {', '.join(out_plan.replaces)} at the end of the run")
    if out_plan.leftovers:
        warn(NAME, f"replacing what an unfinished run left: {', '.join(out_plan.leftovers)}")
    if out_plan.kept:
        warn(NAME, f"keeping {', '.join(out_plan.kept)} (this run does not write it)")


def preflight(args: argparse.Namespace, options: Any) -> tuple[list[Any], Any]:
    """Everything that can be wrong with the arguments, found before Spark starts.

    Args:
        args: The parsed command line.
        options: The job's PipelineOptions.

    Returns:
        The inputs, planned (units; large captures not cut yet: that is
        `Cutting`'s, beside Spark's start), and what the output directory
        will get (pipeline.outdir's plan).

    Raises:
        InputError: An argument is wrong (one line, exit 2); here, no input
            files were found (the checks it calls raise it too).
    """
    conf = _conf(args)
    outdir.check_location(options.out, options.inputs)  # before any input is read
    if not under_spark_submit():  # spark-submit has its own --master and --conf
        pf.check_master(args.master)
        pf.check_conf(conf)
    pf.check_inputs(args.inputs)
    options.decode.check()
    units = plan(list(args.inputs), options.source, cut=False)
    pf.check_units(units, args.column)
    pf.check_formats(args.inputs, units)
    if not units:
        raise InputError("no_input", f"no input files in {', '.join(args.inputs)}")
    out_plan = outdir.check(
        options.out,
        options.overwrite,
        options.inputs,
        any(u.format == SEGMENT_FORMAT for u in units),
    )
    if not under_spark_submit():
        pf.check_reachable(args.master)
    return units, out_plan


def print_report(summary: Any, out: str) -> None:
    """The summary table, the throughput, and where the data and summary went.

    Args:
        summary: The job's summary.
        out: The output directory.
    """
    t = summary.totals()
    print(summary.table())
    print(
        f"\n{t['rows']:,} rows from {t['files']} file(s) in {summary.seconds:,.1f} s "
        f"({summary.rows_per_second:,.0f} rows/s)"
    )
    # The tables written (only those with rows), with their rows.
    for table in summary.tables.values():
        print(f"Parquet: {table['path']}  ({table['rows']:,} rows)")
    print(f"summary: {out.rstrip('/')}/summary.json")
