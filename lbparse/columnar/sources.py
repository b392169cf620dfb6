"""Input files: cut into units, then read as Arrow record batches.

`plan_files(paths, options)` lists the input files (directories are walked),
tells their formats apart by their first bytes and cuts them into
`Unit`s, the pieces one task reads: a whole capture file (pcap, pcapng,
or our JSON Lines records), since TCP reassembly reads it front to back,
or a run of row groups of a Parquet file. Nothing is read whole: captures
are streamed by `lbparse.capture.CaptureReader`, Parquet by row group and
batch, so a file larger than a task's memory is fine (Spark's
`binaryFile` source would hold each file in memory, and stops at 2 GB).
The pipeline's planning (lbparse.pipeline.input_plan.plan) puts Liftbridge
data directories first and hands every other input to `plan_files`.

`read_unit(unit, options, stats)` yields Arrow batches of records in the
schema `schema.arrow_record_schema()`: one row per NATS message, and one
row per problem in the input (`error_kind` "input:KIND", no payload):

  input:gap, input:incomplete, input:protocol, input:truncated,
  input:retransmission
      what the capture reader noticed (see lbparse.capture.notices);
  input:unknown_format, input:bad_header, input:bad_block,
  input:unsupported_linktype, input:bad_record
      a capture file that cannot be read on (lbparse.capture.errors);
      input:bad_record is also a line (row) of our recordings that is not
      a record, read past;
  input:unreadable    the file cannot be opened or read (OSError), or is
                      not a regular file (a FIFO is never opened);
  input:bad_parquet   a Parquet footer or row group that does not read;
  input:bad_column    the payload column is missing or not binary;
  input:reader_error  anything else the reader raised (a bug: say so).

`position` numbers the rows of a file from 0 in reading order (for
Parquet, it is the row's index in the file), so (source, position) is a
key of the output.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbparse.capture import (
    CaptureError,
    CaptureReader,
    Notice,
    fields,
    native_batches,
    parse_headers,
)
from lbparse.capture.connects import remember
from lbparse.capture.formats import MISSING, PARQUET, PCAP, PCAPNG, regular_file, sniff
from lbparse.capture.records import COLUMNS, NO_TIME, fits_int64, record_columns
from lbparse.codec.limits import Limits
from lbparse.columnar import BATCH_BYTES, DEFAULT_BATCH_ROWS
from lbparse.columnar.schema import arrow_record_schema
from lbparse.columnar.units import Unit, UnitStats
from lbparse.textform import utf8_text

__all__ = [
    "SourceOptions",
    "Unit",
    "UnitStats",
    "cut_captures",
    "cuttable",
    "plan_files",
    "read_unit",
]

# A task's share of a Parquet file: row groups are grouped up to this much
# compressed data (Spark's own default split is 128 MB).
PARQUET_UNIT_BYTES = 64 << 20
# A task's share of a large pcap/pcapng file read by the C capture loop: the
# driver's index pass cuts it at the first record boundary past every this
# many bytes (Spark's own default split is 128 MB).
CAPTURE_UNIT_BYTES = 128 << 20
# Columns of our own recordings (`lbparse record`) carried over when present:
# the record's (fields.RECORD) but those every table input names itself.
CARRIED = tuple(n for n in fields.RECORD_NAMES if n not in ("ts", "subject", "payload"))


@dataclass(frozen=True)
class SourceOptions:
    """Which Parquet columns hold what (`None`: the usual name when present).

    Attributes:
        column: The payload column of a Parquet table.
        subject_column: The subject column; None: "subject" when present.
        timestamp_column: The time column; None: "ts", else "timestamp".
        batch_rows: The most rows a batch holds.
        unit_bytes: A task's share of a Parquet file, bytes.
        capture_unit_bytes: A task's share of a large capture, bytes.
    """

    column: str = "payload"
    subject_column: str | None = None  # default: "subject"
    timestamp_column: str | None = None  # default: "ts", else "timestamp"
    batch_rows: int = DEFAULT_BATCH_ROWS
    unit_bytes: int = PARQUET_UNIT_BYTES  # a task's share of a Parquet file
    capture_unit_bytes: int = CAPTURE_UNIT_BYTES  # a task's share of a large capture


# -- cutting files into units (driver) -----------------------------------------

Skipped = list[tuple[str, str]]  # (path, why it was not read)
NOT_DATA = "named with a leading . or _: not data (Spark's rule for a directory)"
# A file whose name is not UTF-8 (an old system's Latin-1): rows name their
# file as text (`source`, the problems' messages), and Arrow's text is UTF-8.
NOT_UTF8 = (
    "a file name that is not UTF-8 text, which the rows name their file in; "
    "not read (rename it: mv, or convmv)"
)


def _files(paths: list[str], skipped: Skipped | None = None) -> Iterator[str]:
    # Absolute: the tasks that open these files run elsewhere (an executor's
    # working directory is not the driver's).
    for p in map(os.path.abspath, paths):
        if os.path.isdir(p):
            yield from _walk(p, [] if skipped is None else skipped)
        else:
            yield p


def _walk(top: str, skipped: Skipped) -> Iterator[str]:
    """The files of a directory, sorted; what is left out said in `skipped`."""

    def unreadable(exc: OSError) -> None:
        skipped.append((str(exc.filename or top), f"cannot be listed: {exc.strerror or exc}"))

    for root, dirs, names in os.walk(top, onerror=unreadable):
        for d in sorted(dirs):
            path = os.path.join(root, d)
            if d.startswith((".", "_")):
                skipped.append((path, NOT_DATA))
            elif os.path.islink(path):  # os.walk does not follow it
                skipped.append((path, "a link to a directory: not followed"))
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for name in sorted(names):
            # Spark's own rule: names starting with . or _ are not data.
            if name.startswith((".", "_")):
                skipped.append((os.path.join(root, name), NOT_DATA))
            else:
                yield os.path.join(root, name)


def plan_files(
    paths: list[str],
    options: SourceOptions,
    skipped: Skipped | None = None,
    *,
    cut: bool = True,
) -> list[Unit]:
    """The files of `paths` as units, in the order given.

    Directories are walked, sorted. A file that cannot be read is a unit
    with its problem; a large capture is cut into ranges, a large Parquet
    file into row-group units.

    Args:
        paths: Files and directories, as given.
        options: Which columns hold what, and the units' sizes.
        skipped: Gets what a directory holds and is not read (names with a
            leading . or _, links to directories, folders that cannot be
            listed), with why; None to drop that.
        cut: Cut large captures into ranges now (their index pass reads each
            whole); False leaves each one unit, for `cut_captures` later.

    Returns:
        The units.
    """
    units: list[Unit] = []
    for path in _files(paths, skipped):
        name = utf8_text(path)
        if name != path:
            # Every row names its file as text (`source`, the messages): a name
            # that is not UTF-8 (an old system's Latin-1, say) has none. Said as
            # the name's bytes escaped, never opened.
            units.append(
                Unit(
                    name,
                    "missing",
                    0,
                    0,
                    error=("input:unreadable", f"{name}: {NOT_UTF8}"),
                )
            )
            continue
        if os.path.exists(path) and not regular_file(path):
            # Never opened: a FIFO blocks the opener until someone writes.
            units.append(
                Unit(
                    path,
                    "missing",
                    0,
                    0,
                    error=(
                        "input:unreadable",
                        f"{path}: not a regular file (a FIFO, socket or device); not read",
                    ),
                )
            )
            continue
        fmt = sniff(path)
        try:
            size = os.path.getsize(path)
        except OSError as exc:
            units.append(
                Unit(
                    path,
                    "missing",
                    0,
                    0,
                    error=("input:unreadable", f"{path}: {exc.strerror or exc}"),
                )
            )
            continue
        if fmt == MISSING:
            units.append(
                Unit(path, fmt, size, 0, error=("input:unreadable", f"{path}: cannot be opened"))
            )
        elif fmt == PARQUET:
            units += _plan_parquet(path, size, options)
        elif cut and _cuttable(fmt, size, options):
            units += _plan_capture(path, fmt, size, options)
        else:
            units.append(Unit(path, fmt, size, size))
    return units


def _cuttable(fmt: str, size: int, options: SourceOptions) -> bool:
    return (
        fmt in (PCAP, PCAPNG) and size > options.capture_unit_bytes and native_batches.available()
    )


def cuttable(unit: Unit, options: SourceOptions) -> bool:
    """Whether `cut_captures` would cut this unit into ranges.

    Args:
        unit: A unit planned with cut=False.
        options: The options it was planned with.

    Returns:
        True for a whole capture file (pcap, pcapng) larger than
        `options.capture_unit_bytes`, when the C capture reader is here.
    """
    return (
        unit.error is None
        and unit.nbytes == unit.size
        and unit.start == 0
        and unit.stop < 0
        and _cuttable(unit.format, unit.size, options)
    )


def cut_captures(units: list[Unit], options: SourceOptions) -> list[Unit]:
    """The units of `plan_files(..., cut=False)` with the large captures cut.

    Exactly what `plan_files(..., cut=True)` would have planned: the index
    pass is the slow part of planning (it reads each large capture whole),
    and the pipeline runs it beside Spark's start (lbparse.pipeline.cutting).
    It never raises for the capture's sake: a capture it cannot index stays
    one unit, whose task says what is wrong.

    Args:
        units: Units planned with cut=False.
        options: The options they were planned with.

    Returns:
        The units, each large capture's replaced by its ranges.
    """
    out: list[Unit] = []
    for u in units:
        if cuttable(u, options):
            out += _plan_capture(u.path, u.format, u.size, options)
        else:
            out.append(u)
    return out


def _plan_capture(path: str, fmt: str, size: int, options: SourceOptions) -> list[Unit]:
    """A large capture as ranges, so that several tasks read it: the index
    pass (one reading, framing only, in C) cuts it at record boundaries with
    the reader's state there, and each range's task restores that state and
    reads on. Together the ranges give exactly one reading's rows."""
    try:
        cuts, _ = native_batches.NativeCapture(path).index(options.capture_unit_bytes)
    except (native_batches.NativeUnsupported, OSError, CaptureError):
        return [Unit(path, fmt, size, size)]  # one task reads it, and says what is wrong
    cuts = [c for c in cuts if c.offset < size]
    starts = [0, *(c.offset for c in cuts)]
    stops = [*(c.offset for c in cuts), -1]
    units = []
    for i, (start, stop) in enumerate(zip(starts, stops)):
        cut = cuts[i - 1] if i else None
        units.append(
            Unit(
                path,
                fmt,
                size,
                (size if stop < 0 else stop) - start,
                i,
                start=start,
                stop=stop,
                first_row=cut.rows if cut else 0,
                snapshot=cut.snapshot if cut else None,
            )
        )
    return units


def _plan_parquet(path: str, size: int, options: SourceOptions) -> list[Unit]:
    try:
        meta = pq.ParquetFile(path).metadata
        meta.schema.to_arrow_schema()  # a footer whose schema Arrow cannot take is unreadable too
    except Exception as exc:
        return [
            Unit(
                path,
                "parquet",
                size,
                size,
                error=("input:bad_parquet", f"{path}: Parquet footer unreadable: {exc}"),
            )
        ]
    problem = _column_problem(meta.schema.to_arrow_schema(), options)
    if problem is not None:
        return [Unit(path, "parquet", size, size, error=("input:bad_column", f"{path}: {problem}"))]
    units: list[Unit] = []
    groups: list[int] = []
    firsts: list[int] = []
    first = rows = nbytes = 0
    for rg in range(meta.num_row_groups):
        g = meta.row_group(rg)
        groups.append(rg)
        firsts.append(first)
        first += g.num_rows
        rows += g.num_rows
        nbytes += sum(g.column(j).total_compressed_size for j in range(g.num_columns))
        if nbytes >= options.unit_bytes or rg == meta.num_row_groups - 1:
            units.append(Unit(path, "parquet", size, nbytes, len(units), groups, firsts, rows))
            groups, firsts, rows, nbytes = [], [], 0, 0
    return units or [Unit(path, "parquet", size, 0, 0, [], [], 0)]


def _column_problem(schema: pa.Schema, options: SourceOptions) -> str | None:
    """Why the columns named (--column, --subject-column, --timestamp-column) cannot be
    read from a table of this schema, or None."""
    names = schema.names
    listed = f"(columns: {', '.join(names)})"
    if options.column not in names:
        return f"no column {options.column!r} {listed}; name the payload column with --column"
    typ = schema.field(options.column).type
    if not (
        pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_fixed_size_binary(typ)
    ):
        return (
            f"column {options.column!r} is {typ}, not bytes {listed}; name the payload "
            "column with --column"
        )
    for flag, name in (
        ("--subject-column", options.subject_column),
        ("--timestamp-column", options.timestamp_column),
    ):
        if name is not None and name not in names:
            return f"no column {name!r} {listed} ({flag})"
    return None


# -- reading (tasks) -------------------------------------------------------------


class _Problem(NamedTuple):
    ts: int | None  # nanoseconds
    src: str | None
    dst: str | None
    kind: str
    message: str


class _Rows:
    """Records (and problem rows) of one file, in order, until a batch is full.

    The records are kept as they come and turned into columns once per
    batch, one pass per column: a capture yields hundreds of thousands of
    messages a second, and a dict of lists per record costs more than that.
    """

    def __init__(self, source: str, first: int) -> None:
        self.source = source
        self.next = first
        self.items: list[Any] = []
        self.problems = 0

    def __len__(self) -> int:
        return len(self.items)

    def problem(
        self,
        kind: str,
        message: str,
        ts: int | None = None,
        src: str | None = None,
        dst: str | None = None,
    ) -> None:
        self.items.append(_Problem(ts, src, dst, kind, message))
        self.problems += 1

    def batch(self) -> pa.RecordBatch:
        schema = arrow_record_schema()
        items, n = self.items, len(self.items)
        self.items = []
        col = _columns(items) if not self.problems else _columns_with_problems(items)
        self.problems = 0
        arrays = []
        for f in schema:
            if f.name == "source":
                arrays.append(pa.repeat(pa.scalar(self.source, pa.string()), n))
            elif f.name == "position":
                arrays.append(pa.array(np.arange(self.next, self.next + n, dtype=np.int64)))
            elif f.name == "ts":
                ts, ts_ns = _times_ns(ns_array(col["ts"]))
                arrays.append(ts)
            elif f.name == "ts_ns":
                arrays.append(ts_ns)
            else:
                arrays.append(pa.array(col[f.name], f.type))
        self.next += n
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _headers(blocks: list[bytes | None]) -> list[Any]:
    return [
        None if b is None else [{"key": k, "value": v} for k, v in parse_headers(b)] for b in blocks
    ]


def _columns(recs: list[Any]) -> dict[str, list[Any]]:
    col = record_columns(recs)
    col["headers"] = _headers(col.pop("header_block"))
    col["error_kind"] = col["error_message"] = [None] * len(recs)
    return col


def _columns_with_problems(items: list[Any]) -> dict[str, list[Any]]:
    col: dict[str, list[Any]] = {name: [] for name in (*COLUMNS, "error_kind", "error_message")}
    for it in items:
        if isinstance(it, _Problem):
            for name, v in (
                ("ts", it.ts),
                ("src", it.src),
                ("dst", it.dst),
                ("error_kind", it.kind),
                ("error_message", it.message),
            ):
                col[name].append(v)
            for name in ("direction", "verb", "subject", "reply", "sid", "payload", "header_block"):
                col[name].append(None)
        else:
            for name in COLUMNS:
                col[name].append(getattr(it, name))
            col["error_kind"].append(None)
            col["error_message"].append(None)
    col["headers"] = _headers(col.pop("header_block"))
    return col


def ns_array(values: list[int | None]) -> pa.Array:
    """Capture times (integer nanoseconds) as an int64 array; a time that
    64 bits do not hold (a damaged capture's clock, past the year 2262) is
    null there, the row kept. So is -2**63 itself: numpy and pandas read it
    as NaT (the C capture loop's null, too)."""
    try:
        arr = pa.array(values, pa.int64())
    except (OverflowError, pa.ArrowInvalid):
        return pa.array([v if v is None or fits_int64(v) else None for v in values], pa.int64())
    return _no_time_null(arr)


def _no_time_null(ns: pa.Array) -> pa.Array:
    """An int64 array of times with NO_TIME (-2**63) made null."""
    if len(ns) > ns.null_count and pc.min(ns).as_py() == NO_TIME:
        return pc.if_else(pc.equal(ns, NO_TIME), pa.scalar(None, pa.int64()), ns)
    return ns


def _times_ns(ns: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The `ts` and `ts_ns` columns from capture times in integer
    nanoseconds: Spark's timestamp (microseconds, rounded down) and the
    nanoseconds whole."""
    typ = arrow_record_schema().field("ts").type
    null = np.asarray(ns.is_null())
    micros = np.asarray(ns.fill_null(0), np.int64) // 1000
    return pa.array(micros, pa.int64(), mask=null).cast(typ), ns


def _table_times(arr: pa.Array) -> tuple[pa.Array, pa.Array]:
    """`ts` and `ts_ns` from a table's time column: a timestamp of any unit
    (exact), or numbers of seconds since the epoch."""
    if pa.types.is_timestamp(arr.type):
        ns = arr.cast(pa.timestamp("ns", tz=arr.type.tz)).cast(pa.int64())
        return _times_ns(_no_time_null(ns))
    secs = np.asarray(arr.cast(pa.float64()).fill_null(0.0))
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.round(secs * 1e9)
    # Seconds past 64 bits of nanoseconds (an older recording's damaged
    # clock), NaN and infinities are null, as the record readers make them;
    # astype made them -2**63 or worse, unsaid.
    past = ~(np.abs(scaled) < 2.0**63)
    ns = np.where(past, 0.0, scaled).astype(np.int64)
    return _times_ns(pa.array(ns, pa.int64(), mask=np.asarray(arr.is_null()) | past))


def read_unit(unit: Unit, options: SourceOptions, stats: UnitStats) -> Iterator[pa.RecordBatch]:
    """The records of one unit, as batches of at most `options.batch_rows` rows.

    Args:
        unit: The unit (`plan`).
        options: Which columns hold what.
        stats: Gets what the reading saw (bytes, packets, notices...).

    Yields:
        Record batches in reading order; a unit planned with a problem is
        one problem row.
    """
    if unit.error is not None:
        rows = _Rows(unit.path, 0)
        rows.problem(*unit.error)
        stats.file_error = f"{unit.error[0]}: {unit.error[1]}"
        yield rows.batch()
    elif unit.format == "parquet":
        yield from _read_parquet(unit, options, stats)
    else:
        yield from read_capture(unit, options, stats)


def read_capture(
    unit: Unit,
    options: SourceOptions,
    stats: UnitStats,
    *,
    limits: Limits | None = None,
    native: bool | None = None,
) -> Iterator[pa.RecordBatch]:
    """The C capture loop when it is built and takes the file, else the
    reference (`native`: True or False to choose, for tests)."""
    if native is None:
        native = native_batches.available()
    if unit.start or unit.stop >= 0:  # a range of a large capture (_plan_capture)
        cut = native_batches.Cut(unit.start, unit.first_row, unit.snapshot or b"")
        capture = native_batches.NativeCapture(unit.path, limits=limits, resume=cut, stop=unit.stop)
        yield from _read_capture_native(unit, options, stats, capture)
        return
    if native:
        try:
            capture = native_batches.NativeCapture(unit.path, limits=limits)
        except (native_batches.NativeUnsupported, OSError):
            pass  # the reference reads it, or reports it in its own words
        else:
            yield from _read_capture_native(unit, options, stats, capture)
            return
    yield from read_capture_reference(unit, options, stats, limits=limits)


def _file_problem(
    unit: Unit, stats: UnitStats, kind: str, message: str, position: int
) -> pa.RecordBatch:
    rows = _Rows(unit.path, position)
    rows.problem(kind, message)
    stats.file_error = f"{kind}: {message}"
    return rows.batch()


def _read_capture_native(
    unit: Unit, options: SourceOptions, stats: UnitStats, capture: native_batches.NativeCapture
) -> Iterator[pa.RecordBatch]:
    """read_capture_reference's rows and counts, read by the C loop (native_batches.py)."""
    position = capture.first
    problem: tuple[str, str] | None = None
    try:
        for batch in capture.batches(
            arrow_record_schema(),
            source=unit.path,
            max_rows=options.batch_rows,
            max_bytes=BATCH_BYTES,
        ):
            position += batch.num_rows
            yield batch
    except CaptureError as exc:
        problem = (f"input:{exc.kind}", str(exc))
    except OSError as exc:
        problem = ("input:unreadable", f"{unit.path}: {type(exc).__name__}: {exc}")
    finally:
        counts = capture.stats
        capture.close()
    stats.packets = counts["packets"]
    for kind, n in counts["notices"].items():
        stats.notices[kind] = stats.notices.get(kind, 0) + n
    stats.gaps += counts["notices"].get("gap", 0)
    stats.gap_bytes += counts["gap_bytes"]
    for endpoint, text in counts.get("connects", ()):
        remember(stats.connect_names, endpoint, text)
    if unit.start or unit.stop >= 0:
        stats.bytes_read = unit.nbytes  # this range's share of the file
    elif problem is None:
        stats.bytes_read = counts["bytes_read"] or unit.size
    else:
        stats.bytes_read = counts["bytes_read"]
    if problem is not None:
        yield _file_problem(unit, stats, *problem, position)


def read_capture_reference(
    unit: Unit, options: SourceOptions, stats: UnitStats, *, limits: Limits | None = None
) -> Iterator[pa.RecordBatch]:
    """The rows of a capture read by lbparse.capture's Python reader: the reference."""
    rows = _Rows(unit.path, 0)
    pending: list[Notice] = []
    reader: CaptureReader | None = None

    def flush_notices() -> None:
        for n in pending:
            stats.notice(n)
            if n.info:  # information: counted, not a problem row
                continue
            rows.problem(f"input:{n.kind}", f"{unit.path}: {n}", n.ts, n.src, n.dst)
        pending.clear()

    try:
        reader = CaptureReader(unit.path, decode=False, on_notice=pending.append, limits=limits)
        limit = options.batch_rows
        items = rows.items
        start = 0
        for rec in reader:  # the hot loop: nothing but appending
            if pending:
                flush_notices()
            items.append(rec)
            if len(items) >= limit or (
                not len(items) & 1023 and reader.bytes_read - start >= BATCH_BYTES
            ):
                yield rows.batch()
                items = rows.items
                start = reader.bytes_read
        flush_notices()
        stats.packets = reader.stats.packets
        stats.bytes_read = reader.stats.bytes_read or unit.size
        stats.connect_names.update(reader.stats.connect_names)
    except Exception as exc:
        flush_notices()
        if isinstance(exc, CaptureError):
            kind = f"input:{exc.kind}"
        elif isinstance(exc, OSError):
            kind = "input:unreadable"
        else:
            kind = "input:reader_error"
        message = (
            str(exc)
            if isinstance(exc, CaptureError)
            else f"{unit.path}: {type(exc).__name__}: {exc}"
        )
        rows.problem(kind, message)
        stats.file_error = f"{kind}: {message}"
        if reader is not None:
            stats.packets = reader.stats.packets
            stats.bytes_read = reader.bytes_read or reader.stats.bytes_read
    if len(rows):
        yield rows.batch()


def _read_parquet(unit: Unit, options: SourceOptions, stats: UnitStats) -> Iterator[pa.RecordBatch]:
    try:
        pf = pq.ParquetFile(unit.path)
        names = pf.schema_arrow.names
    except Exception as exc:
        rows = _Rows(unit.path, (unit.first_rows or [0])[0])
        message = f"{unit.path}: Parquet footer unreadable: {exc}"
        rows.problem("input:bad_parquet", message)
        stats.file_error = f"input:bad_parquet: {message}"
        yield rows.batch()
        return
    wanted = {"payload": options.column}
    subject = options.subject_column or ("subject" if "subject" in names else None)
    ts = options.timestamp_column or next((c for c in ("ts", "timestamp") if c in names), None)
    for name, col in (("subject", subject), ("ts", ts)):
        if col is not None:
            wanted[name] = col
    for name in CARRIED:
        if name in names and name not in wanted:
            wanted[name] = name
    missing = [c for c in wanted.values() if c not in names]
    columns = list(dict.fromkeys(wanted.values()))
    meta = pf.metadata
    for rg, first in zip(unit.row_groups or [], unit.first_rows or []):
        expected = meta.row_group(rg).num_rows
        done = 0
        try:
            if missing:
                raise _ColumnError(
                    f"{unit.path}: no column {', '.join(map(repr, missing))} "
                    f"(columns: {', '.join(names)})"
                )
            g = meta.row_group(rg)
            chunks = [
                g.column(j)
                for j in range(g.num_columns)
                if g.column(j).path_in_schema.split(".")[0] in columns
            ]
            stats.bytes_read += sum(c.total_compressed_size for c in chunks)
            row_bytes = sum(c.total_uncompressed_size for c in chunks) / max(g.num_rows, 1)
            size = max(1, min(options.batch_rows, int(BATCH_BYTES / max(row_bytes, 1))))
            for batch in pf.iter_batches(
                batch_size=size, row_groups=[rg], columns=columns, use_threads=False
            ):
                yield _table_batch(unit.path, first + done, batch, wanted)
                done += batch.num_rows
        except Exception as exc:
            kind = "input:bad_column" if isinstance(exc, _ColumnError) else "input:bad_parquet"
            lost = expected - done
            message = (
                f"{unit.path}: row group {rg} (rows {first}..{first + expected - 1}): "
                f"{lost} rows not read: {exc}"
            )
            rows = _Rows(unit.path, first + done)
            rows.problem(kind, message)
            stats.file_error = f"{kind}: {message}"
            yield rows.batch()


class _ColumnError(ValueError):
    pass


def _table_batch(
    path: str, first: int, batch: pa.RecordBatch, wanted: dict[str, str]
) -> pa.RecordBatch:
    """A batch of a Parquet table as records: payload, subject, ts and our columns."""
    schema = arrow_record_schema()
    n = batch.num_rows
    arrays = []
    times = _ts_column(batch.column(wanted["ts"]), wanted["ts"]) if "ts" in wanted else None
    for f in schema:
        if f.name == "source":
            arrays.append(pa.repeat(pa.scalar(path, pa.string()), n))
        elif f.name == "position":
            arrays.append(pa.array(np.arange(first, first + n, dtype=np.int64)))
        elif f.name in ("ts", "ts_ns") and times is not None:
            arrays.append(times[f.name == "ts_ns"])
        elif f.name in wanted:
            col = batch.column(wanted[f.name])
            arrays.append(_convert(f, col, wanted[f.name]))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _ts_column(col: pa.Array, name: str) -> tuple[pa.Array, pa.Array]:
    if not (
        pa.types.is_timestamp(col.type)
        or pa.types.is_integer(col.type)
        or pa.types.is_floating(col.type)
    ):
        raise _ColumnError(
            f"timestamp column {name!r} is {col.type}, not a timestamp or seconds since the epoch"
        )
    return _table_times(col)


def _convert(f: pa.Field, col: pa.Array, name: str) -> pa.Array:
    if col.type == f.type:
        return col
    try:
        return col.cast(f.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _ColumnError(
            f"column {name!r} is {col.type}, which does not convert to {f.type}: {exc}"
        ) from None
