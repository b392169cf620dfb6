"""The record: one NATS message and what lbparse made of it; and our own
capture format for recorded traffic, as JSON Lines and as Parquet.

A JSON Lines record is `Record.to_json_dict()`: `ts` (float seconds),
`src` and `dst` (`host:port`), `direction` (`client_to_server` or
`server_to_client`), `verb` (PUB, HPUB, MSG, HMSG), `subject`, `reply`,
`sid` (null for PUB/HPUB), `headers` (list of [key, value]; null without a
header block; a NATS status first, as Status and Description), `payload`
(base64), then `envelope` (the decoded envelope's JSON, with its `layout`)
or `error` ({"kind", "message"}), and `liftbridge` for Liftbridge's own
non-envelope traffic (lbparse.traffic: the Raft transport, its handshake,
the bootstrap probe). The Parquet file has the same columns, `payload` as
binary, `headers` as a list of key/value structs, and the decoding as
`envelope_json` (JSON text) or `error_kind`/`error_message`, and
`liftbridge_json`. Reading either back decodes the payload again: the
bytes are the truth, the stored decoding is for people.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import IO, Any, Callable, Iterator

from lbparse.capture.errors import CaptureError
from lbparse.capture.nats import Frame
from lbparse.capture.notices import Notice
from lbparse.envelope import Envelope
from lbparse.errors import EnvelopeError

CLIENT_TO_SERVER = "client_to_server"
SERVER_TO_CLIENT = "server_to_client"
DIRECTION_OF_VERB = {"PUB": CLIENT_TO_SERVER, "HPUB": CLIENT_TO_SERVER,
                     "MSG": SERVER_TO_CLIENT, "HMSG": SERVER_TO_CLIENT}


class Endpoints:
    """The two ends of a record's direction, as `host:port` strings."""

    __slots__ = ("src", "dst")

    def __init__(self, src: str, dst: str) -> None:
        self.src = src
        self.dst = dst


class Record:
    """One NATS message; `envelope` or `error` once decoded (both None if not).

    Built from the parser's `Frame` and the connection direction it came
    on, so that reading a capture makes one small object per message; the
    fields are views of those. `Record.make` builds one from plain values.
    `direction` follows from the verb: clients publish, servers deliver.
    """

    __slots__ = ("ts", "_ends", "_frame", "envelope", "error", "traffic")

    def __init__(self, ts: float, ends: Any, frame: Frame,
                 envelope: Envelope | None = None, error: EnvelopeError | None = None) -> None:
        self.ts = ts
        self._ends = ends    # anything with .src and .dst
        self._frame = frame
        self.envelope = envelope
        self.error = error
        # Liftbridge's own non-envelope traffic (lbparse.traffic.Traffic), when it is.
        self.traffic: Any = None

    @classmethod
    def make(cls, ts: float, src: str, dst: str, verb: str, subject: str, reply: str | None,
             sid: str | None, header_block: bytes | None, payload: bytes) -> "Record":
        if verb not in DIRECTION_OF_VERB:
            raise ValueError(f"a record's verb is PUB, HPUB, MSG or HMSG, not {verb!r}")
        return cls(ts, Endpoints(src, dst), Frame(verb, subject, reply, sid, header_block, payload))

    @property
    def src(self) -> str:
        """sender, host:port"""
        return self._ends.src

    @property
    def dst(self) -> str:
        """receiver, host:port"""
        return self._ends.dst

    @property
    def verb(self) -> str:
        """PUB, HPUB, MSG or HMSG"""
        return self._frame.verb

    @property
    def subject(self) -> str:
        return self._frame.subject

    @property
    def reply(self) -> str | None:
        """reply subject, None if none"""
        return self._frame.reply

    @property
    def sid(self) -> str | None:
        """subscription id (MSG/HMSG), else None"""
        return self._frame.sid

    @property
    def header_block(self) -> bytes | None:
        """the raw NATS/1.0 header block, None without one"""
        return self._frame.header_block

    @property
    def payload(self) -> bytes:
        return self._frame.payload

    @property
    def direction(self) -> str:
        return DIRECTION_OF_VERB[self._frame.verb]

    @property
    def headers(self) -> list[list[str]] | None:
        """The header block as [key, value] pairs in wire order (None without one)."""
        block = self._frame.header_block
        return None if block is None else parse_headers(block)

    @property
    def layout(self) -> str | None:
        return self.envelope.layout if self.envelope is not None else None

    def to_json_dict(self) -> dict[str, Any]:
        f = self._frame
        verb, subject, reply, sid, payload = f.verb, f.subject, f.reply, f.sid, f.payload
        d: dict[str, Any] = {
            "ts": self.ts, "src": self._ends.src, "dst": self._ends.dst,
            "direction": DIRECTION_OF_VERB[verb], "verb": verb, "subject": subject,
            "reply": reply, "sid": sid, "headers": self.headers,
            "payload": base64.b64encode(payload).decode("ascii"),
        }
        if self.envelope is not None:
            d["envelope"] = self.envelope.to_json_dict()
        elif self.error is not None:
            d["error"] = {"kind": self.error.kind, "message": self.error.message}
        if self.traffic is not None:
            d["liftbridge"] = self.traffic.to_json_dict()
        return d

    def __repr__(self) -> str:
        return (f"<Record {self.ts:.6f} {self.src}->{self.dst} {self.verb} {self.subject} "
                f"{len(self.payload)} bytes>")


# The columns of `record_columns`, in its order.
COLUMNS = ("ts", "src", "dst", "direction", "verb", "subject", "reply", "sid", "header_block",
           "payload")


def record_columns(recs: list[Record]) -> dict[str, list[Any]]:
    """The fields of many records as columns (one list per name of COLUMNS),
    in one pass: what the pipeline turns into Arrow arrays. Compiled with
    the rest of this module, it costs a fraction of a getattr per field."""
    cols: list[list[Any]] = [[] for _ in COLUMNS]
    ts, src, dst, direction, verb, subject, reply, sid, block, payload = cols
    ends: Any = None
    s = d = ""
    for r in recs:
        if r._ends is not ends:  # a connection's records share one
            ends = r._ends
            s, d = ends.src, ends.dst
        f = r._frame
        ts.append(r.ts)
        src.append(s)
        dst.append(d)
        direction.append(DIRECTION_OF_VERB[f.verb])
        verb.append(f.verb)
        subject.append(f.subject)
        reply.append(f.reply)
        sid.append(f.sid)
        block.append(f.header_block)
        payload.append(f.payload)
    return dict(zip(COLUMNS, cols))


# A NATS header block starts with its version line; the server may put a
# status after it (`NATS/1.0 503`, `NATS/1.0 404 No Messages`): nats.go and
# nats.py give it to applications as the headers Status and Description.
HEADER_LINE = b"NATS/1.0"
STATUS = "Status"
DESCRIPTION = "Description"


def parse_headers(block: bytes) -> list[list[str]]:
    """`NATS/1.0[ status[ description]]\r\nKey: Value\r\n...\r\n` as [key, value]
    pairs; a status (three digits, as nats.py and nats.go read it) comes first
    as ["Status", code] and its text as ["Description", text]."""
    out: list[list[str]] = []
    lines = block.split(b"\r\n")
    first = lines[0]
    if first.startswith(HEADER_LINE) and len(first) > len(HEADER_LINE):
        status = first[len(HEADER_LINE):].strip(b" \t")
        code = status[:3]
        if len(code) == 3 and code.isdigit():
            out.append([STATUS, code.decode("ascii")])
            text = status[3:].strip(b" \t")
            if text:
                out.append([DESCRIPTION, text.decode("utf-8", "replace")])
    for line in lines[1:]:
        if not line:
            continue
        key, sep, value = line.partition(b":")
        if sep:
            out.append([key.decode("utf-8", "replace"),
                        value.strip(b" \t").decode("utf-8", "replace")])
    return out


def build_header_block(headers: list[list[str]] | list[tuple[str, str]] | None) -> bytes | None:
    """The header block of `headers` (parse_headers' inverse): a leading Status of
    three digits, and the Description after it, go back into the first line."""
    if headers is None:
        return None
    first = HEADER_LINE
    rest = list(headers)
    if rest and rest[0][0] == STATUS and len(rest[0][1]) == 3 and rest[0][1].isdigit():
        first += b" " + rest[0][1].encode()
        rest = rest[1:]
        if rest and rest[0][0] == DESCRIPTION:
            first += b" " + rest[0][1].encode()
            rest = rest[1:]
    return first + b"\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in rest) + b"\r\n"


def decode_into(rec: Record, layout: str) -> Record:
    from lbparse.api import decode

    try:
        rec.envelope = decode(rec.payload, layout)
    except EnvelopeError as exc:
        rec.error = exc
    return rec


# -- JSON Lines -------------------------------------------------------------

def write_jsonl(out: IO[str], rec: Record) -> None:
    out.write(json.dumps(rec.to_json_dict(), ensure_ascii=False) + "\n")


_TEXT_FIELDS = ("src", "dst", "verb", "subject", "payload")
_OPTIONAL_TEXT = ("reply", "sid")


def _check_ts(ts: Any) -> float:
    """A record's capture time as float seconds: a finite number (a 400-digit
    integer overflowed float() and `1e999` read as infinity, written back out
    as `Infinity`, which is not JSON)."""
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        raise TypeError(f"ts is {_short_repr(ts)}, not a number")
    try:
        value = float(ts)
    except OverflowError:
        raise TypeError(f"ts is {_short_repr(ts)}, too large for a time") from None
    if not math.isfinite(value):
        raise TypeError(f"ts is {ts!r}, not a finite number")
    return value


def _short_repr(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_record_types(d: Any) -> float:
    """Valid JSON is not yet a record: fields of other types would fail far
    from here (a numeric subject in subject matching, say). Returns ts."""
    if not isinstance(d, dict):
        raise TypeError(f"a record is a JSON object, not {type(d).__name__}")
    ts = _check_ts(d.get("ts"))
    for key in _TEXT_FIELDS:
        if not isinstance(d.get(key), str):
            raise TypeError(f"{key} is {_short_repr(d.get(key))}, not a string")
    for key in _OPTIONAL_TEXT:
        if d.get(key) is not None and not isinstance(d[key], str):
            raise TypeError(f"{key} is {_short_repr(d[key])}, not a string or null")
    headers = d.get("headers")
    if headers is not None and not (isinstance(headers, list) and all(
            isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h)
            for h in headers)):
        raise TypeError("headers is not a list of [key, value] strings")
    return ts


# Bad lines (rows) held while no good record has shown the file is ours.
MAX_HELD = 1000


class _BadRecords:
    """The lines (rows) of one of our files that are not records.

    Once the file has given a good record, each is a `bad_record` notice and
    reading goes on: one bad line must not cost the rest of a recording.
    Until then they are held (the first MAX_HELD, the rest counted); a file
    that gives no record at all is not ours, and `end` raises CaptureError
    with the first of them."""

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

    def end(self) -> None:
        if not self.good and self.held:
            others = len(self.held) - 1 + self.more
            raise CaptureError("bad_record", self.held[0] + (
                f" (and {others} more, and not one record)" if others else ""))

    def _emit(self, message: str) -> None:
        if self.on_notice is not None:
            self.on_notice(Notice("bad_record", message + "; skipped, reading on"))


def read_jsonl(f: IO[bytes], name: str,
               on_notice: Callable[[Notice], None] | None = None) -> Iterator[Record]:
    """Records of our JSON Lines format; a line that is not one is a notice
    (see `_BadRecords`)."""
    bad = _BadRecords(on_notice)
    for lineno, line in enumerate(f, 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            d = json.loads(line)
            ts = _check_record_types(d)
            record = Record.make(ts, d["src"], d["dst"], d["verb"], d["subject"],
                                 d.get("reply"), d.get("sid"), build_header_block(d.get("headers")),
                                 base64.b64decode(d["payload"], validate=True))
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            bad.bad(f"{where}: not a capture record: {exc}")
            continue
        except RecursionError:  # json nests as deep as the line does
            bad.bad(f"{where}: not a capture record: JSON nested too deeply")
            continue
        bad.ok()
        yield record
    bad.end()


# -- Parquet ------------------------------------------------------------------

def parquet_schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("ts", pa.float64()), ("src", pa.string()), ("dst", pa.string()),
        ("direction", pa.string()), ("verb", pa.string()), ("subject", pa.string()),
        ("reply", pa.string()), ("sid", pa.string()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))),
        ("payload", pa.binary()), ("layout", pa.string()), ("msg_type_name", pa.string()),
        ("envelope_json", pa.string()), ("error_kind", pa.string()),
        ("error_message", pa.string()), ("liftbridge_json", pa.string()),
    ])


class ParquetRecordWriter:
    """Writes records in row groups of `batch` so memory stays flat."""

    def __init__(self, path: str, batch: int = 4096) -> None:
        import pyarrow.parquet as pq

        self.schema = parquet_schema()
        self._writer = pq.ParquetWriter(path, self.schema)
        self._rows: list[dict[str, Any]] = []
        self._batch = batch

    def write(self, rec: Record) -> None:
        env = rec.envelope
        headers = rec.headers
        self._rows.append({
            "ts": rec.ts, "src": rec.src, "dst": rec.dst, "direction": rec.direction,
            "verb": rec.verb, "subject": rec.subject, "reply": rec.reply, "sid": rec.sid,
            "headers": None if headers is None else [{"key": k, "value": v} for k, v in headers],
            "payload": rec.payload,
            "layout": env.layout if env is not None else None,
            "msg_type_name": env.msg_type_name if env is not None else None,
            "envelope_json": (json.dumps(env.to_json_dict(), ensure_ascii=False)
                              if env is not None else None),
            "error_kind": rec.error.kind if rec.error is not None else None,
            "error_message": rec.error.message if rec.error is not None else None,
            "liftbridge_json": (json.dumps(rec.traffic.to_json_dict(), ensure_ascii=False)
                                if rec.traffic is not None else None),
        })
        if len(self._rows) >= self._batch:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self.schema))
            self._rows = []

    def close(self) -> None:
        self.flush()
        self._writer.close()

    def __enter__(self) -> "ParquetRecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JsonlRecordWriter:
    def __init__(self, path: str) -> None:
        self._f = open(path, "w", encoding="utf-8")

    def write(self, rec: Record) -> None:
        write_jsonl(self._f, rec)

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "JsonlRecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def record_writer(path: str) -> JsonlRecordWriter | ParquetRecordWriter:
    """A writer of our capture format, chosen by the file name's extension."""
    if path.endswith(".parquet"):
        return ParquetRecordWriter(path)
    if path.endswith((".jsonl", ".json")):
        return JsonlRecordWriter(path)
    raise ValueError(f"{path}: the output name must end in .jsonl or .parquet")


def _wrong_column_types(schema: Any) -> str:
    """Columns whose type is not what a record needs (as `name: type`)."""
    import pyarrow as pa

    t = pa.types
    want = {"ts": lambda x: t.is_floating(x) or t.is_integer(x), "payload": lambda x: t.is_binary(x)
            or t.is_large_binary(x), "headers": lambda x: x == parquet_schema().field("headers").type}
    text = lambda x: t.is_string(x) or t.is_large_string(x)  # noqa: E731
    bad = []
    for f in schema:
        check = want.get(f.name, text if f.name in ("src", "dst", "direction", "verb", "subject",
                                                     "reply", "sid") else None)
        if check is not None and not check(f.type):
            bad.append(f"{f.name}: {f.type}")
    return ", ".join(bad)


def read_parquet(path: str, on_notice: Callable[[Notice], None] | None = None
                 ) -> Iterator[Record]:
    """Records of our Parquet format. A row that is not a record (a null
    where a record has a value, a time that is not a finite number) or a
    row group that does not read is a notice, and reading goes on (see
    `_BadRecords`); a file without the columns of a record is CaptureError."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid for bad files
        raise CaptureError("bad_record", f"{path}: not a readable Parquet file: {exc}") from None
    missing = {"ts", "src", "dst", "direction", "verb", "subject", "payload"} - set(pf.schema_arrow.names)
    if missing:
        raise CaptureError("bad_record", f"{path}: Parquet file lacks the columns "
                           f"{', '.join(sorted(missing))} of a capture record")
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
                for row in batch.to_pylist():
                    try:
                        record = _parquet_record(row)
                    except (ValueError, TypeError) as exc:
                        bad.bad(f"{path}: row {index}: not a capture record: {exc}")
                    else:
                        bad.ok()
                        yield record
                    index += 1
        except Exception as exc:  # noqa: BLE001  pyarrow's own errors: a damaged row group
            bad.bad(f"{path}: row group {rg} (rows {index}..{first - 1}) does not read: {exc}")
    bad.end()


def _parquet_record(row: dict[str, Any]) -> Record:
    ts = _check_ts(row["ts"])
    for key in ("src", "dst", "verb", "subject"):
        if not isinstance(row[key], str):
            raise TypeError(f"{key} is {_short_repr(row[key])}, not a string")
    if not isinstance(row["payload"], bytes):
        raise TypeError(f"payload is {_short_repr(row['payload'])}, not bytes")
    headers = row.get("headers")
    if headers is not None and not all(
            isinstance(h, dict) and isinstance(h.get("key"), str) and isinstance(h.get("value"), str)
            for h in headers):
        raise TypeError("headers hold a null key or value")
    block = (None if headers is None
             else build_header_block([(h["key"], h["value"]) for h in headers]))
    return Record.make(ts, row["src"], row["dst"], row["verb"], row["subject"], row.get("reply"),
                       row.get("sid"), block, row["payload"])
