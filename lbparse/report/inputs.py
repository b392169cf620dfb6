"""The report's inputs, each read once into an Aggregator.

- captures (pcap, pcapng) and our recordings (JSON Lines, Parquet from
  `lbparse record`): `lbparse.capture.CaptureReader`, whose `Stats` are
  the counts `lbparse capture --stats` prints;
- the pipeline's output (`lbparse pipeline --out DIR`: DIR, or DIR/messages):
  its rows in time order, each payload decoded again (as our recordings
  are: the bytes are the truth); its `input:*` rows are the reader's notices.

- data directories of Liftbridge nodes (one node's, or a folder of them):
  segments, checkpoints and raft.db, read with lbparse.storage (`storage`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]

from lbparse.capture import CaptureReader, Notice, Record, Stats, default_layout
from lbparse.capture.formats import sniff
from lbparse.capture.pipe import STDIN
from lbparse.capture.records import build_header_block, decode_into
from lbparse.columnar.grpctables import Held, read_grpc
from lbparse.columnar.tables import GRPC_CALLS, GRPC_MESSAGES, GRPC_TABLES
from lbparse.columnar.units import INPUT_PROBLEM
from lbparse.errors import InputError
from lbparse.extras import need
from lbparse.report.aggregate import Aggregator
from lbparse.report.fast_path import add_batch, arrow_batches
from lbparse.report.storage import read_data_dir
from lbparse.report.timebins import MS, exact_time
from lbparse.storage.datadir import is_data_dir
from lbparse.textform import utf8_text

PIPELINE_COLUMNS = (
    "source",
    "position",
    "ts_ns",
    "src",
    "dst",
    "verb",
    "subject",
    "reply",
    "sid",
    "headers",
    "payload",
    "error_kind",
    "error_message",
)
BATCH = 8192


@dataclass
class ReadOptions:
    """How the report reads its inputs.

    Attributes:
        layout: The envelope layout to decode with; None for the capture
            reader's default (auto).
        limits: An lbparse.codec.limits.Limits, or None for the defaults.
        on_progress: Called with (name, done, total) as an input is read, if given.
        on_notice: Called with (where, notice) for each capture reader notice,
            if given.
        fast: Read captures through the columnar fast path (report.fast_path);
            None: where it holds the record path's answers (pcap and pcapng
            files with the default limits and layout auto).
    """

    layout: str | None = None  # None: the capture reader's default (auto)
    limits: Any = None  # lbparse.codec.limits.Limits, or None for the defaults
    on_progress: Callable[[str, int, int], None] | None = None  # (name, done, total)
    on_notice: Callable[[str, Notice], None] | None = None
    # Captures through the columnar fast path (report.fast_path); None: where it
    # holds the record path's answers (pcap and pcapng files).
    fast: bool | None = None


@dataclass
class InputSummary:
    """What one input held, as the model's `inputs` lists it.

    Attributes:
        path: The input's path ("-" for standard input).
        format: What it was read as ("pcap", "pcapng", "records", "pipeline",
            or a data directory's format).
        messages: How many messages it held.
        problems: How many problems reading it found.
        extra: Further facts of the input's kind, merged into its JSON.
    """

    path: str
    format: str
    messages: int = 0
    problems: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        """The summary as the model's JSON.

        Returns:
            path, format, messages, problems and the `extra` keys in one dict.
        """
        return {
            "path": self.path,
            "format": self.format,
            "messages": self.messages,
            "problems": self.problems,
            **self.extra,
        }


def kind_of(path: str) -> str:
    """capture | pipeline | data_dir; `-` (stdin) is a capture or a recording.

    Args:
        path: An input path, or "-" for standard input.

    Returns:
        "capture", "pipeline" (the output of `lbparse pipeline` or
        `capture --tables`) or "data_dir" (a Liftbridge data directory, or a
        folder of them).

    Raises:
        InputError: The path does not exist, or is a directory of none of
            those kinds.
    """
    if path == STDIN:
        return "capture"
    if os.path.isdir(path):
        if _pipeline_dataset(path) is not None or _grpc_only_output(path):
            return "pipeline"
        if _looks_like_data_dir(path):
            return "data_dir"
        raise InputError(
            "bad_input",
            f"{path}: a directory, but neither the output of `lbparse pipeline` "
            "or `capture --tables` (DIR/messages or DIR/grpc_calls with Parquet "
            "files) nor a Liftbridge data directory",
        )
    if not os.path.exists(path):
        raise InputError("no_input", f"{path}: no such file or directory")
    return "capture"


def _pipeline_dataset(path: str) -> str | None:
    for candidate in (os.path.join(path, "messages"), path):
        if os.path.isdir(candidate) and any(
            name.startswith("msg_type_name=") or name.endswith(".parquet")
            for name in os.listdir(candidate)
        ):
            return candidate
    return None


def _grpc_only_output(path: str) -> bool:
    """The tables of captures that held gRPC alone (`lbparse pipeline`,
    `capture --tables`): no `messages` table (it has no row), a gRPC table
    with Parquet files."""
    for name in GRPC_TABLES:
        table = os.path.join(path, name)
        if os.path.isdir(table) and any(f.endswith(".parquet") for f in os.listdir(table)):
            return True
    return False


def _looks_like_data_dir(path: str) -> bool:
    """A node's data directory, or a folder of them (lbparse.storage's test)."""
    root = Path(path)
    return is_data_dir(root) or any(is_data_dir(p) for p in root.iterdir() if p.is_dir())


def read_input(path: str, agg: Aggregator, stats: Stats, options: ReadOptions) -> InputSummary:
    """Read one input of any kind into the aggregator.

    Args:
        path: A capture, recording, pipeline output or data directory ("-" for
            standard input).
        agg: The report's Aggregator.
        stats: The capture reader's counts, added to.
        options: How to read it.

    Returns:
        The input's summary.

    Raises:
        ValueError: The path is of no kind the report reads (kind_of).
    """
    kind = kind_of(path)
    if kind == "capture":
        return read_capture(path, agg, stats, options)
    if kind == "pipeline":
        return read_pipeline(path, agg, stats, options)

    found = agg.problems.model()["total"]
    extra = read_data_dir(path, agg.storage(), options.limits)
    summary = InputSummary(path, extra.pop("format"), 0, agg.problems.model()["total"] - found)
    extra.pop("path"), extra.pop("messages"), extra.pop("problems")
    summary.extra = extra
    return summary


def read_capture(path: str, agg: Aggregator, stats: Stats, options: ReadOptions) -> InputSummary:
    """Read a capture or recording, by the columnar path where it pays, else record by record.

    Args:
        path: The capture file, or "-" for standard input.
        agg: The report's Aggregator, fed every record.
        stats: The capture reader's counts, added to.
        options: How to read (layout, limits, callbacks, fast path).

    Returns:
        The input's summary (format, messages, problems, first/last time).
    """
    if options.fast or (options.fast is None and _columns_pay(path, options)):
        return read_capture_columns(path, agg, stats, options)
    return read_capture_records(path, agg, stats, options)


def _columns_pay(path: str, options: ReadOptions) -> bool:
    """Whether the columnar path is the faster here (bench/bench_report.py):
    for `auto`, where the batch decoder classifies a batch at once (0.33x the
    record path's time with the C capture reader, 0.49x without); for a fixed
    layout the record path is faster either way (1.36x, 1.42x). It reads with
    the default limits (the pipeline's reader). Not for a file whose name is
    not UTF-8: the columns name their file as text, so the columnar reading
    refuses it; the records read it as `lbparse capture` does."""
    return (
        options.limits is None
        and utf8_text(path) == path
        and _capture_kind(path) in ("pcap", "pcapng")
        and (options.layout or "auto") == "auto"
    )


def _capture_kind(path: str) -> str:
    if path == STDIN:  # read once, as it comes: the record path (it spools what it must)
        return "unknown"
    try:
        return str(sniff(path))
    except (OSError, ValueError):
        return "unknown"


def read_capture_columns(
    path: str, agg: Aggregator, stats: Stats, options: ReadOptions
) -> InputSummary:
    """The fast path: decoded rows in Arrow batches, counted over columns.

    Args:
        path: The capture file, or "-" for standard input.
        agg: The report's Aggregator, fed every record.
        stats: The capture reader's counts, added to.
        options: How to read (layout, limits, callbacks, fast path).

    Returns:
        The input's summary (format, messages, problems, first/last time).
    """
    units: list[Any] = []
    first: int | None = None
    last: int | None = None
    mine = Stats()
    done = 0
    held = Held()  # rows that may be HTTP/2's bytes, said once the gRPC reading tells
    for tables in arrow_batches(path, options.layout or "auto", units):
        tables = {**tables, "messages": held.take(tables["messages"])}
        span = add_batch(agg, tables, mine, path, options.on_notice)
        if span is not None:
            first = span[0] if first is None else min(first, span[0])
            last = span[1] if last is None else max(last, span[1])
        done += tables["messages"].num_rows
        if options.on_progress is not None:
            options.on_progress(path, done, 0)
    fmt = "records"
    for u in units:
        mine.packets += u.packets
        mine.bytes_read += u.bytes_read
        mine.gap_bytes += u.gap_bytes
        for k, n in u.notices.items():
            mine.notices[k] += n
        fmt = {"pcap": "pcap", "pcapng": "pcapng"}.get(u.format, "records")
        mine.connect_names.update(u.connect_names)
    agg.connect_names(mine.connect_names)
    if held.rows:
        _read_http2(path, agg, mine, held, options.on_notice, options.limits)
    stats.merge(mine)
    # NATS control lines (PING, SUB...) are not counted on this path.
    return InputSummary(
        path,
        fmt,
        mine.messages,
        sum(mine.notices.values()),
        {
            "packets": mine.packets,
            "bytes_read": mine.bytes_read,
            "reader": "columns",
            **_span(first, last),
        },
    )


def _read_http2(
    path: str,
    agg: Aggregator,
    stats: Stats,
    held: Held,
    on_notice: Callable[[str, Notice], None] | None,
    limits: Any = None,
) -> None:
    """The C loop reads NATS only: a capture whose rows may show HTTP/2 is read
    again for the client's gRPC calls (and HTTP/2's notices). The held rows
    of the connections that were HTTP/2 are not problems (the record path,
    which reads HTTP/2 as it goes, has none); the others are said."""

    def said(n: Notice) -> None:
        where = f"{path}: {n.src} -> {n.dst}" if n.src else path
        if n.info:  # normal behaviour: information, not a problem
            agg.note(n.kind, n.ts, where, n.message)
            stats.notes[n.kind] += 1
            if on_notice is not None:
                on_notice(path, n)
            return
        agg.notice(n.kind, n.ts, where, n.message)
        stats.notices[n.kind] += 1
        if on_notice is not None:
            on_notice(path, n)

    # The rows name the file as the reading planned it (its absolute path),
    # not as given: by `path`, a relative one, no row names a connection.
    names = held.sources()
    connections = held.connections(names.pop()) if len(names) == 1 else None
    found = read_grpc(path, agg.client.add, limits=limits, on_notice=said, connections=connections)
    problems, theirs = held.release(found)
    for kind in theirs.column("error_kind").to_pylist():
        name = kind[len(INPUT_PROBLEM) :]
        stats.notices[name] -= 1
        if stats.notices[name] <= 0:
            del stats.notices[name]  # as the record path, which never counted it
    add_batch(agg, {"messages": problems}, stats, path, on_notice)


def read_capture_records(
    path: str, agg: Aggregator, stats: Stats, options: ReadOptions
) -> InputSummary:
    """The reference path: CaptureReader's records, one by one.

    Args:
        path: The capture file, or "-" for standard input.
        agg: The report's Aggregator, fed every record.
        stats: The capture reader's counts, added to.
        options: How to read (layout, limits, callbacks, fast path).

    Returns:
        The input's summary (format, messages, problems, first/last time).
    """

    def notice(n: Notice) -> None:
        where = f"{path}: {n.src} -> {n.dst}" if n.src else path
        if n.info:  # normal behaviour: information, not a problem
            agg.note(n.kind, n.ts, where, n.message)
        else:
            agg.notice(n.kind, n.ts, where, n.message)
        if options.on_notice is not None:
            options.on_notice(path, n)

    reader = CaptureReader(
        path, layout=options.layout, limits=options.limits, on_notice=notice, on_grpc=agg.client.add
    )
    add = agg.add
    first: int | None = None
    last: int | None = None
    progress = options.on_progress
    for k, rec in enumerate(reader):
        add(rec)
        if first is None:
            first = rec.ts
        last = rec.ts
        if progress is not None and not k & 4095:
            progress(path, reader.bytes_read, reader.size)
    agg.connect_names(reader.stats.connect_names)
    stats.merge(reader.stats)
    s = reader.stats
    return InputSummary(
        path,
        _capture_format(reader),
        s.messages,
        sum(s.notices.values()),
        {"packets": s.packets, "bytes_read": s.bytes_read, **_span(first, last)},
    )


def _span(first: int | None, last: int | None) -> dict[str, Any]:
    """An input's first and last message: milliseconds (chart coordinates),
    and exact (nanoseconds, UTC text)."""
    return {
        "first": None if first is None else first / MS,
        "last": None if last is None else last / MS,
        **exact_time("first", first),
        **exact_time("last", last),
    }


def _capture_format(reader: CaptureReader) -> str:
    """pcap, pcapng, or records (ours: JSON Lines or Parquet), as the reader found it."""
    name = type(reader._source).__name__ if reader._source is not None else ""
    return {"PcapSource": "pcap", "PcapngSource": "pcapng"}.get(name, "records")


def read_pipeline(path: str, agg: Aggregator, stats: Stats, options: ReadOptions) -> InputSummary:
    """The rows of `lbparse pipeline` output, in capture-time order.

    Args:
        path: The pipeline's output directory (or its messages dataset).
        agg: The report's Aggregator, fed each row as a record.
        stats: The capture reader's counts, added to: each row's message
            and the reader's notices the rows keep (`input:KIND`).
        options: How to read (its layout; the pipeline's default otherwise).

    Returns:
        The input's summary, with the pipeline's own summary when it wrote one.
    """
    dataset_dir = _pipeline_dataset(path)
    out = path if dataset_dir is None else os.path.dirname(dataset_dir.rstrip("/"))
    layout = options.layout or _default_layout()
    summary = InputSummary(path, "pipeline")
    first: int | None = None
    last: int | None = None
    rows = 0
    for row in _pipeline_rows(dataset_dir) if dataset_dir is not None else ():
        rows += 1
        kind = row["error_kind"]
        if kind is not None and kind.startswith("input:"):
            summary.problems += 1
            agg.notice(
                kind[len("input:") :], _row_ns(row), f"{row['source']}", row["error_message"] or ""
            )
            stats.notices[kind[len("input:") :]] += 1
            if options.on_notice is not None:  # a problem row: the run's verdict too
                options.on_notice(
                    path,
                    Notice(
                        kind[len("input:") :],
                        row["error_message"] or "",
                        _row_ns(row),
                        row["src"],
                        row["dst"],
                    ),
                )
            continue
        rec = _record(row)
        decode_into(rec, layout)
        agg.add(rec)
        stats.count(rec)
        summary.messages += 1
        first = rec.ts if first is None else first
        last = rec.ts
        if options.on_progress is not None and not rows & 4095:
            options.on_progress(path, rows, 0)
    summary.extra = {"rows": rows, **_span(first, last)}
    summary.problems += _pipeline_grpc(out, agg, options.on_notice)
    summary_file = os.path.join(out, "summary.json")
    if os.path.isfile(summary_file):
        with open(summary_file) as f:
            totals = json.load(f).get("totals", {})
        summary.extra["pipeline_summary"] = {
            k: totals[k] for k in ("rows", "messages", "problems") if k in totals
        }
        # The notes (normal behaviour) are counted there, not rows: counted here too
        for kind, n in totals.get("notes", {}).items():
            agg.problems.count_notes(kind, n)
    return summary


def _pipeline_grpc(
    out: str, agg: Aggregator, on_notice: Callable[[str, Notice], None] | None = None
) -> int:
    """The client's gRPC calls the pipeline wrote (DIR/grpc_calls, DIR/grpc_messages);
    the problems found in them (a message_json that is not JSON: a notice
    naming the table, the message left undecoded)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for name in GRPC_TABLES:
        path = os.path.join(out, name)
        # A table without rows is not written (calls that carried no message).
        rows[name] = (
            need("pyarrow.dataset").dataset(path, format="parquet").to_table().to_pylist()
            if os.path.isdir(path)
            else []
        )
    if not (rows[GRPC_CALLS] or rows[GRPC_MESSAGES]):
        return 0
    bad = agg.client.add_tables(rows[GRPC_CALLS], rows[GRPC_MESSAGES])
    table = os.path.join(out, GRPC_MESSAGES)
    said = [
        f"{where}: message_json is not JSON ({why}); the message is left undecoded"
        for where, why in bad[:MAX_SAID]
    ]
    if len(bad) > MAX_SAID:
        said.append(f"{len(bad) - MAX_SAID} more rows whose message_json is not JSON")
    for text in said:
        agg.notice("bad_record", None, table, text)
        if on_notice is not None:  # a problem of the input: the command's exit status says it
            on_notice(table, Notice("bad_record", text))
    return len(bad)


MAX_SAID = 20  # notices of bad rows said one by one, a table; the rest counted


def _default_layout() -> str:
    return default_layout()


def _row_ns(row: dict[str, Any]) -> int | None:
    ts = row["ts_ns"]
    return None if ts is None else int(ts)


def _record(row: dict[str, Any]) -> Record:
    headers = row["headers"]
    block = (
        None if headers is None else build_header_block([(h["key"], h["value"]) for h in headers])
    )
    return Record.make(
        row["ts_ns"] or 0,
        row["src"],
        row["dst"],
        row["verb"],
        row["subject"],
        row["reply"],
        row["sid"],
        block,
        row["payload"] or b"",
    )


def _pipeline_rows(dataset_dir: str) -> Iterator[dict[str, Any]]:
    """Rows sorted by capture time (then file and position): the files are
    one per task (and, from runs before one table per type, per MsgType), so
    they are not in time order. DIR/messages holds every row (the payload
    tables hold the payloads decoded again here, from the bytes)."""
    # "hive": an earlier run's msg_type_name=NAME/ directories read too.
    # Late (lbparse.extras.LATE): pyarrow.dataset imports pandas, 0.6 s that
    # `lbparse --help` (which imports this module) would pay.
    data = need("pyarrow.dataset").dataset(dataset_dir, format="parquet", partitioning="hive")
    names = [c for c in PIPELINE_COLUMNS if c in data.schema.names]
    if "ts_ns" not in names:
        # Output of a pipeline before ts_ns: its ts (a timestamp) is what there is.
        names.insert(names.index("position") + 1 if "position" in names else 0, "ts")
    table = data.to_table(columns=names)
    if "ts_ns" not in names:
        ts = table.column("ts")
        if pa.types.is_timestamp(ts.type):
            ts = pc.cast(pc.cast(ts, pa.timestamp("ns", tz=ts.type.tz)), pa.int64())
        at = names.index("ts")
        table = table.set_column(at, "ts_ns", ts)
        names[at] = "ts_ns"
    table = table.sort_by(
        [("ts_ns", "ascending"), ("source", "ascending"), ("position", "ascending")]
    )
    for batch in table.to_batches(max_chunksize=BATCH):
        cols = {n: batch.column(n).to_pylist() for n in names}
        for k in range(batch.num_rows):
            yield {n: (cols[n][k] if n in cols else None) for n in PIPELINE_COLUMNS}
