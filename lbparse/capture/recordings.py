"""Our capture format for recorded traffic: records in JSON Lines and in Parquet.

A JSON Lines record is `Record.to_json_dict()` written by lbparse's JSON
convention (lbparse.codec.jsonform: `ts` a decimal string of nanoseconds,
`payload` base64), then `envelope` (the decoded envelope's JSON, with its
`layout`) or `error` ({"kind", "message"}), and `liftbridge` for
Liftbridge's own non-envelope traffic (lbparse.capture.traffic; fields.JSON_DECODING).
The Parquet file has the same columns (lbparse.capture.fields.RECORD; `ts`
a timestamp[ns, UTC], `payload` binary, `headers` a list of key/value
structs, a NATS status first as Status and Description) and the decoding as
`fields.DECODING` (`envelope_json` JSON text, or `error_kind` /
`error_message`; `liftbridge_json`). Reading either back decodes the
payload again (a status back on the header block's first line, byte for
byte: records.build_header_block): the bytes are the truth, the stored
decoding is for people. Recordings of older versions, whose `ts` was float
seconds, read too.

`lbparse record` writes them (`record_writer`); `CaptureReader` reads them
like a pcap.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import sys
from collections.abc import Callable, Iterator
from decimal import Decimal, InvalidOperation
from typing import IO, Any, BinaryIO, TextIO

from lbparse.capture.errors import CaptureError
from lbparse.capture.fields import (
    BYTES,
    DECODING,
    HEADERS,
    OPTIONAL_TEXT,
    RECORD,
    REQUIRED,
    TEXT,
    TIME_NS,
)
from lbparse.capture.notices import Notice
from lbparse.capture.records import NO_TIME, Record, build_header_block, fits_int64
from lbparse.codec.jsonform import dumps, int64
from lbparse.errors import InputError
from lbparse.extras import need  # pyarrow late: for Parquet recordings only, not pcaps

__all__ = [
    "JsonlRecordWriter",
    "ParquetRecordWriter",
    "arrow_type",
    "parquet_schema",
    "read_jsonl",
    "read_parquet",
    "record_writer",
    "ts_from_json",
    "write_jsonl",
]


# -- JSON Lines -------------------------------------------------------------


def write_jsonl(out: IO[str], rec: Record) -> None:
    """Write one record as a line of our JSON Lines format.

    Args:
        out: The text stream written to.
        rec: The record (its JSON: Record.to_json_dict).
    """
    out.write(dumps(rec.to_json_dict()) + "\n")


NS_PER_S = 1_000_000_000
_INF = float("inf")


def ts_from_json(value: Any) -> int:
    """A record's `ts` from JSON, as integer nanoseconds.

    A decimal string of nanoseconds (lbparse's convention), or a number of
    seconds (as older versions wrote it). It must be a time: not infinite,
    not NaN, and within 2^128 ns, more than any capture format's clock holds
    (pcapng's 64-bit count of whole seconds included); an integer of 400
    digits is none, and one of 4,300 could not even be written back out.

    Args:
        value: The JSON value of a record's `ts`.

    Returns:
        The time in nanoseconds since the Unix epoch (it may not fit 64 bits:
        see `fits_int64`).

    Raises:
        TypeError: The value is neither a string nor a number.
        InputError: It is not a time: not a decimal string, infinite, NaN,
            or past 2^128 ns.
    """
    if isinstance(value, str):
        ns = int64(value, "ts")
    else:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(
                "bad_input", f"ts is {_short(value)}, not nanoseconds (a decimal string) or seconds"
            )
        if isinstance(value, float) and (value != value or value in (_INF, -_INF)):
            raise InputError("bad_input", f"ts is {value!r}, not a time")
        # By the number's decimal digits, not its binary value: 1700000000.25
        # seconds is exactly ...250000000 ns.
        try:
            ns = int((Decimal(repr(value)) * NS_PER_S).to_integral_value())
        except (ValueError, InvalidOperation):  # int's digit limit
            raise InputError("bad_input", f"ts is {_short(value)}, not a time") from None
    if not -(2**128) < ns < 2**128:
        raise InputError("bad_input", f"ts is {_short(value)}, past any time a capture holds")
    return ns


def _no_time(value: Any) -> str:
    """Why a record's `ts` was left out (the value as the file gave it)."""
    if value is None:
        return "ts is null: the record is read without its time"
    return (
        f"ts {_short(value)} does not fit 64 bits of nanoseconds (the years 1677 to "
        "2262): the record is read without its time"
    )


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_headers(headers: Any) -> None:
    if headers is not None and not (
        isinstance(headers, list)
        and all(
            isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h)
            for h in headers
        )
    ):
        raise InputError("bad_input", "headers is not a list of [key, value] strings")


def _check_record_types(d: Any) -> None:
    """Valid JSON is not yet a record: fields of other types would fail far
    from here (a numeric subject in subject matching, say). By the kinds of
    fields.RECORD."""
    if not isinstance(d, dict):
        raise InputError("bad_input", f"a record is a JSON object, not {type(d).__name__}")
    for c in RECORD:
        if c.derived:
            continue  # recomputed from the others
        value = d.get(c.name)
        if c.kind in (TEXT, BYTES) and not isinstance(value, str):
            raise InputError("bad_input", f"{c.name} is {value!r}, not a string")
        if c.kind == OPTIONAL_TEXT and value is not None and not isinstance(value, str):
            raise InputError("bad_input", f"{c.name} is {value!r}, not a string or null")
        if c.kind == HEADERS:
            _check_headers(value)


# Bad lines (rows) held while no good record has shown the file is ours.
MAX_HELD = 1000


class _BadRecords:
    """The lines (rows) of one of our files that are not records.

    Once the file has given a good record, each is a `bad_record` notice and
    reading goes on: one bad line must not cost the rest of a recording
    (issue #19: it ended the file). Until then they are held (the first
    MAX_HELD, the rest counted); a file that gives no record at all is not
    ours, and `end` raises CaptureError with the first of them."""

    def __init__(self, on_notice: Callable[[Notice], None] | None) -> None:
        self.on_notice = on_notice
        self.held: list[str] = []
        self.more = 0
        self.good = False

    def bad(self, message: str) -> None:
        if self.good:
            self._emit(message)
        elif len(self.held) < MAX_HELD:
            self.held.append(message)
        else:
            self.more += 1

    def ok(self) -> None:
        if not self.good:
            self.good = True
            for message in self.held:
                self._emit(message)
            if self.more:
                self._emit(f"... and {self.more} more that are not capture records")
            self.held = []

    def bad_field(self, message: str) -> None:
        """A record read with one field left out: the record is good (it
        counts as the file's proof), the field a notice of its own."""
        self.ok()
        if self.on_notice is not None:
            self.on_notice(Notice("bad_record", message))

    def end(self) -> None:
        if not self.good and self.held:
            others = len(self.held) - 1 + self.more
            raise CaptureError(
                "bad_record",
                self.held[0] + (f" (and {others} more, and not one record)" if others else ""),
            )

    def _emit(self, message: str) -> None:
        if self.on_notice is not None:
            self.on_notice(Notice("bad_record", message + "; skipped, reading on"))


# The "grpc" of the gRPC records `lbparse capture` writes among the NATS
# ones (lbparse.capture.grpc): its output, read back, skips them.
GRPC_LINES = ("message", "call")


def read_jsonl(
    f: IO[bytes], name: str, on_notice: Callable[[Notice], None] | None = None
) -> Iterator[Record]:
    """Records of our JSON Lines format.

    A line that is not one is a notice (see `_BadRecords`), and reading goes
    on; gRPC lines that `lbparse capture` writes are skipped.

    Args:
        f: The file, opened for binary reading.
        name: How notices name the file.
        on_notice: Called with each bad_record Notice, if given.

    Yields:
        The Records, in file order.
    """
    bad = _BadRecords(on_notice)
    for lineno, line in enumerate(f, 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            d = json.loads(line)
            if isinstance(d, dict) and d.get("grpc") in GRPC_LINES:
                continue  # lbparse capture's gRPC records: not NATS messages, not read back
            _check_record_types(d)
            raw_ts = d["ts"]
            # A time we cannot hold costs its own field, not the record
            # (issue #47: one past int64 printed as 9.22337e+18s, stored null, unsaid).
            ts = NO_TIME if raw_ts is None else ts_from_json(raw_ts)
            record = Record.make(
                ts if fits_int64(ts) else NO_TIME,
                d["src"],
                d["dst"],
                d["verb"],
                d["subject"],
                d.get("reply"),
                d.get("sid"),
                build_header_block(d.get("headers")),
                base64.b64decode(d["payload"], validate=True),
            )
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            bad.bad(f"{where}: not a capture record: {exc}")
            continue
        except RecursionError:  # json nests as deep as the line does
            bad.bad(f"{where}: not a capture record: JSON nested too deeply")
            continue
        if record.ts == NO_TIME:
            bad.bad_field(f"{where}: {_no_time(raw_ts)}")
        else:
            bad.ok()
        yield record
    bad.end()


# -- Parquet ------------------------------------------------------------------


def arrow_type(kind: str) -> Any:
    """The Arrow type of a column kind (fields.py) in our Parquet recordings.

    Args:
        kind: A column kind of lbparse.capture.fields.

    Returns:
        The pyarrow DataType.
    """
    pa = need("pyarrow")

    if kind == TIME_NS:
        return pa.timestamp("ns", tz="UTC")
    if kind == HEADERS:
        return pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
    if kind == BYTES:
        return pa.binary()
    return pa.string()


def parquet_schema() -> Any:
    """The schema of a Parquet recording: fields.RECORD, then fields.DECODING.

    Returns:
        A pyarrow Schema.
    """
    pa = need("pyarrow")

    return pa.schema([(c.name, arrow_type(c.kind)) for c in RECORD + DECODING])


# What a Parquet writer holds before it writes a row group, counted as the
# rows' bytes (payload, texts, decoded JSON); Arrow's copy and the encoder's
# pages come to about twice that again while it is written. A row count alone
# held 4,096 rows whatever their size: a flood of 4 KB messages made the
# recorder 400 MB, of 60 KB ones 2.5 GB (issue #47).
WRITER_BATCH_BYTES = 4 << 20
# A row's own objects besides its texts' bytes: the dict, its slots, the
# str and bytes headers (tracemalloc: about 800 bytes in all for a row of a
# small message; rounded up).
_ROW_HELD = 1024


class ParquetRecordWriter:
    """Writes records to a Parquet recording, in bounded row groups.

    Row groups hold at most `batch` rows and about `max_bytes`, so memory
    stays flat whatever the messages' size.

    Args:
        path: The file to write (the stream's name when `stream` is given).
        batch: The most rows in a row group.
        stream: Write to this binary stream instead (closed with the writer).
        max_bytes: About the most bytes of rows held before a row group is
            written (see WRITER_BATCH_BYTES).
    """

    def __init__(
        self,
        path: str,
        batch: int = 4096,
        stream: BinaryIO | None = None,
        max_bytes: int = WRITER_BATCH_BYTES,
    ) -> None:
        pq = need("pyarrow.parquet")

        self.schema = parquet_schema()
        self._writer = pq.ParquetWriter(path if stream is None else stream, self.schema)
        self._stream = stream
        self._rows: list[dict[str, Any]] = []
        self._batch = batch
        self._max_bytes = max_bytes
        self._held = 0
        # Arrow's first zoned timestamp array imports pandas (50 MB): paid
        # here, before a recorder listens, not inside its first flood.
        need("pyarrow").array([], self.schema.field("ts").type)

    def write(self, rec: Record) -> None:
        """Add a record, with its decoding; a full row group is written.

        Args:
            rec: The record.
        """
        env = rec.envelope
        row: dict[str, Any] = {c.name: getattr(rec, c.name) for c in RECORD}
        if not fits_int64(row["ts"]):
            row["ts"] = None  # NO_TIME, or a damaged capture's clock past what Parquet holds
        headers = row["headers"]
        row["headers"] = None if headers is None else [{"key": k, "value": v} for k, v in headers]
        row.update(
            {
                "layout": env.layout if env is not None else None,
                "msg_type_name": env.msg_type_name if env is not None else None,
                "envelope_json": dumps(env.to_json_dict()) if env is not None else None,
                "error_kind": rec.error.kind if rec.error is not None else None,
                "error_message": rec.error.message if rec.error is not None else None,
                "liftbridge_json": (
                    dumps(rec.traffic.to_json_dict()) if rec.traffic is not None else None
                ),
            }
        )
        self._rows.append(row)
        self._held += (
            _ROW_HELD
            + len(row["payload"])
            + sum(
                len(row[k])
                for k in ("subject", "reply", "envelope_json", "error_message", "liftbridge_json")
                if row[k] is not None
            )
        )
        if len(self._rows) >= self._batch or self._held >= self._max_bytes:
            self.flush()

    def flush(self) -> None:
        """Write the rows held as a row group (nothing if none)."""
        pa = need("pyarrow")

        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self.schema))
            self._rows = []
            self._held = 0

    def close(self) -> None:
        """Write the rows held and end the file (closing the stream, if given)."""
        self.flush()
        self._writer.close()
        if self._stream is not None:
            self._stream.close()

    def __enter__(self) -> ParquetRecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JsonlRecordWriter:
    """Records as JSON Lines.

    Args:
        path: The file to write, or `-`: to standard output (left open).
        stream: Write to this binary stream (opened for `path`) instead of
            opening `path`.
    """

    def __init__(self, path: str, stream: BinaryIO | None = None) -> None:
        self._own = path != "-"
        self._f: TextIO = (
            sys.stdout
            if not self._own
            else open(path, "w", encoding="utf-8")
            if stream is None
            else io.TextIOWrapper(stream, encoding="utf-8", newline="\n")
        )

    def write(self, rec: Record) -> None:
        """Write one record as a line.

        Args:
            rec: The record.
        """
        write_jsonl(self._f, rec)

    def flush(self) -> None:
        """Flush the lines written to the file."""
        self._f.flush()

    def close(self) -> None:
        """Close the file (standard output is flushed, left open)."""
        if self._own:
            self._f.close()
        else:
            self._f.flush()

    def __enter__(self) -> JsonlRecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def record_writer(
    path: str, stream: BinaryIO | None = None, *, device: bool = False
) -> JsonlRecordWriter | ParquetRecordWriter:
    """A writer of our capture format, chosen by the file name's extension.

    A `device` or FIFO of another name gets JSON Lines, as `-` does; the
    writer writes to `stream` (opened for `path`, e.g. by lbparse.outputs)
    when given.

    Args:
        path: The output's name (.parquet: Parquet; .jsonl, .json, `-`:
            JSON Lines).
        stream: The stream to write to, instead of opening `path`.
        device: `path` is a device or FIFO: its name is not checked.

    Returns:
        A ParquetRecordWriter for .parquet, else a JsonlRecordWriter.

    Raises:
        ValueError: `path` (not a device) ends in none of the extensions
            (from check_record_name).
    """
    if not device:
        check_record_name(path)
    if path.endswith(".parquet"):
        return ParquetRecordWriter(path, stream=stream)
    return JsonlRecordWriter(path, stream)


def check_record_name(path: str) -> None:
    """ValueError unless `path` names a format record_writer writes."""
    if not (path.endswith((".parquet", ".jsonl", ".json")) or path == "-"):
        raise InputError("bad_option", f"{path}: the output name must end in .jsonl or .parquet")


def _kind_check(kind: str) -> Callable[[Any], bool]:
    """What Arrow types a Parquet column of a kind may have (fields.py)."""
    pa = need("pyarrow")

    t = pa.types
    if kind == TIME_NS:  # a timestamp; numbers are seconds (older recordings)
        return lambda x: bool(t.is_timestamp(x) or t.is_floating(x) or t.is_integer(x))
    if kind == BYTES:
        return lambda x: bool(t.is_binary(x) or t.is_large_binary(x))
    if kind == HEADERS:
        return lambda x: bool(x == arrow_type(HEADERS))
    return lambda x: bool(t.is_string(x) or t.is_large_string(x))


def _wrong_column_types(schema: Any) -> str:
    """Columns whose type is not what a record needs (as `name: type`)."""
    names = set(schema.names)
    bad = [
        f"{c.name}: {schema.field(c.name).type}"
        for c in RECORD
        if c.name in names and not c.derived and not _kind_check(c.kind)(schema.field(c.name).type)
    ]
    return ", ".join(bad)


def _ts_ns(column: Any) -> list[int | str | None]:
    """A Parquet recording's `ts` column as integer nanoseconds: timestamps
    of any unit exactly, floating point numbers as seconds (older
    recordings), integers as nanoseconds. A value that is no time (an
    infinite float) is the reason, as text: its row is a bad record."""
    pa = need("pyarrow")

    typ = column.type
    if pa.types.is_timestamp(typ):
        column = column.cast(pa.timestamp("ns", tz=typ.tz)).cast(pa.int64())
    elif pa.types.is_floating(typ):
        return [None if v is None else _ts_or_why(v) for v in column.to_pylist()]
    elif pa.types.is_unsigned_integer(typ):  # a uint64 past int64 would fail the row group's cast
        return list(column.to_pylist())
    values: list[int | str | None] = column.cast(pa.int64()).to_pylist()
    return values


def _ts_or_why(value: float) -> int | str:
    try:
        return ts_from_json(value)
    except (ValueError, TypeError) as exc:
        return str(exc)


def read_parquet(path: str, on_notice: Callable[[Notice], None] | None = None) -> Iterator[Record]:
    """Records of our Parquet format.

    A row that is not a record (a null where a record has a value: a
    TypeError traceback before, issue #19) or a row group that does not read
    is a notice, and reading goes on (see `_BadRecords`).

    Args:
        path: The Parquet file.
        on_notice: Called with each bad_record Notice, if given.

    Yields:
        The Records, in file order.

    Raises:
        CaptureError: The file is not a readable Parquet file, or lacks the
            columns of a record, or has them of the wrong type (kind
            bad_record).
    """
    pq = need("pyarrow.parquet")

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid for bad files
        raise CaptureError("bad_record", f"{path}: not a readable Parquet file: {exc}") from None
    missing = set(REQUIRED) - set(pf.schema_arrow.names)
    if missing:
        raise CaptureError(
            "bad_record",
            f"{path}: Parquet file lacks the columns "
            f"{', '.join(sorted(missing))} of a capture record",
        )
    wrong = _wrong_column_types(pf.schema_arrow)
    if wrong:
        raise CaptureError("bad_record", f"{path}: Parquet columns of the wrong type: {wrong}")
    bad = _BadRecords(on_notice)
    first = 0
    for rg in range(pf.metadata.num_row_groups):
        index = first
        first += pf.metadata.row_group(rg).num_rows
        try:
            for batch in pf.iter_batches(batch_size=4096, row_groups=[rg]):
                times = _ts_ns(batch.column("ts"))
                # without ts: pyarrow makes a nanosecond timestamp a Python
                # value only through pandas (a pandas.Timestamp), and refuses
                # where pandas is not there (the light install, a command's
                # process: lbparse.cli.arrow_start); `times` has them
                rows = batch.drop_columns(["ts"]).to_pylist()
                for ts, row in zip(times, rows):
                    try:
                        record = _parquet_record(ts, row)
                    except (ValueError, TypeError) as exc:
                        bad.bad(f"{path}: row {index}: not a capture record: {exc}")
                    else:
                        if record.ts == NO_TIME:
                            bad.bad_field(f"{path}: row {index}: {_no_time(ts)}")
                        else:
                            bad.ok()
                        yield record
                    index += 1
        except (ValueError, TypeError, OSError) as exc:  # pyarrow's errors are ValueError, OSError
            bad.bad(f"{path}: row group {rg} (rows {index}..{first - 1}) does not read: {exc}")
    bad.end()


def _parquet_record(ts: int | str | None, row: dict[str, Any]) -> Record:
    if isinstance(ts, str):
        raise InputError("bad_input", ts)
    for key in ("src", "dst", "verb", "subject"):
        if not isinstance(row[key], str):
            raise InputError("bad_input", f"{key} is {_short(row[key])}, not a string")
    if not isinstance(row["payload"], bytes):
        raise InputError("bad_input", f"payload is {_short(row['payload'])}, not bytes")
    headers = row.get("headers")
    if headers is not None and not all(
        isinstance(h, dict) and isinstance(h.get("key"), str) and isinstance(h.get("value"), str)
        for h in headers
    ):
        raise InputError("bad_input", "headers hold a null key or value")
    block = (
        None if headers is None else build_header_block([(h["key"], h["value"]) for h in headers])
    )
    # A null time is one no timestamp could hold (the writer's rule): none.
    return Record.make(
        NO_TIME if ts is None or not fits_int64(ts) else ts,
        row["src"],
        row["dst"],
        row["verb"],
        row["subject"],
        row.get("reply"),
        row.get("sid"),
        block,
        row["payload"],
    )
