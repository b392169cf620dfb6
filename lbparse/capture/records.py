"""The record: one NATS message as captured, and what lbparse made of it.

`Record` is built from the NATS parser's `Frame` and the connection it came
on (or from plain values, `Record.make`); its columns, their order and their
types come from one table, `lbparse.capture.fields.RECORD`: `ts` (capture
time, integer nanoseconds since the Unix epoch), `src` and `dst`
(`host:port`), `direction`, `verb`, `subject`, `reply`, `sid`, `headers`
([key, value] pairs, a NATS status first as Status and Description; null
without a header block), `payload`. What lbparse made of it is `envelope`
or `error`, and `traffic` for Liftbridge's own non-envelope traffic
(lbparse.capture.traffic); its JSON adds them as `fields.JSON_DECODING` says.
`record_columns` turns many records into columns for the pipeline. Our
files of records (JSON Lines, Parquet) are lbparse.capture.recordings.

Compiled with the rest of the capture hot path (setup.py).
"""

from __future__ import annotations

import base64
from typing import Any

from lbparse.capture.fields import BYTES, RECORD, RECORD_NAMES, TIME_NS
from lbparse.capture.nats import Frame
from lbparse.codec.api import decode
from lbparse.codec.envelope import Envelope
from lbparse.codec.jsonform import Int64
from lbparse.errors import EnvelopeError, InputError

# The time of a record that has none we can hold: a recording's `ts` past
# 64 bits of nanoseconds (or null). The C capture loop's null, and
# sources.ns_array's: the tables hold it as null, and so does its JSON.
NO_TIME = -(2**63)


def fits_int64(ns: int) -> bool:
    """Whether a time is one our records hold: 64 bits of nanoseconds.

    Args:
        ns: A time, integer nanoseconds since the Unix epoch.

    Returns:
        True for the years 1677 to 2262, -2**63 itself (NO_TIME) excluded.
    """
    return -(2**63) < ns < 2**63


CLIENT_TO_SERVER = "client_to_server"
SERVER_TO_CLIENT = "server_to_client"
DIRECTION_OF_VERB = {
    "PUB": CLIENT_TO_SERVER,
    "HPUB": CLIENT_TO_SERVER,
    "MSG": SERVER_TO_CLIENT,
    "HMSG": SERVER_TO_CLIENT,
}


class Endpoints:
    """The two ends of a record's direction, as `host:port` strings.

    Args:
        src: The sender, host:port.
        dst: The receiver, host:port.
    """

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

    Args:
        ts: Capture time, integer nanoseconds since the Unix epoch (NO_TIME:
            none).
        ends: Anything with `.src` and `.dst` (host:port strings), shared by
            a connection direction's records.
        frame: The parser's Frame of the message.
        envelope: The decoded envelope, if decoded.
        error: Why the payload did not decode, if it did not.
    """

    __slots__ = ("ts", "_ends", "_frame", "envelope", "error", "traffic")

    def __init__(
        self,
        ts: int,
        ends: Any,
        frame: Frame,
        envelope: Envelope | None = None,
        error: EnvelopeError | None = None,
    ) -> None:
        self.ts = ts  # capture time, integer nanoseconds since the Unix epoch
        self._ends = ends  # anything with .src and .dst
        self._frame = frame
        self.envelope = envelope
        self.error = error
        # Liftbridge's own non-envelope traffic (lbparse.capture.traffic.Traffic), when it is.
        self.traffic: Any = None

    @classmethod
    def make(
        cls,
        ts: int,
        src: str,
        dst: str,
        verb: str,
        subject: str,
        reply: str | None,
        sid: str | None,
        header_block: bytes | None,
        payload: bytes,
    ) -> Record:
        """Build a record from plain values.

        Args:
            ts: Capture time, integer nanoseconds since the Unix epoch.
            src: The sender, host:port.
            dst: The receiver, host:port.
            verb: PUB, HPUB, MSG or HMSG.
            subject: The NATS subject.
            reply: The reply subject, None without one.
            sid: The subscription id (MSG/HMSG), else None.
            header_block: The raw NATS/1.0 header block, None without one.
            payload: The message bytes.

        Returns:
            A new, undecoded Record.

        Raises:
            InputError: `verb` is not one of the four message verbs.
        """
        if verb not in DIRECTION_OF_VERB:
            raise InputError(
                "bad_input", f"a record's verb is PUB, HPUB, MSG or HMSG, not {verb!r}"
            )
        return cls(ts, Endpoints(src, dst), Frame(verb, subject, reply, sid, header_block, payload))

    @property
    def src(self) -> str:
        """The sender, host:port."""
        src: str = self._ends.src
        return src

    @property
    def dst(self) -> str:
        """The receiver, host:port."""
        dst: str = self._ends.dst
        return dst

    @property
    def verb(self) -> str:
        """The message verb: PUB, HPUB, MSG or HMSG."""
        return self._frame.verb

    @property
    def subject(self) -> str:
        """The NATS subject."""
        return self._frame.subject

    @property
    def reply(self) -> str | None:
        """The reply subject, None if none."""
        return self._frame.reply

    @property
    def sid(self) -> str | None:
        """The subscription id (MSG/HMSG), else None."""
        return self._frame.sid

    @property
    def header_block(self) -> bytes | None:
        """The raw NATS/1.0 header block, None without one."""
        return self._frame.header_block

    @property
    def payload(self) -> bytes:
        """The message bytes."""
        return self._frame.payload

    @property
    def direction(self) -> str:
        """client_to_server (PUB, HPUB) or server_to_client (MSG, HMSG), from the verb."""
        return DIRECTION_OF_VERB[self._frame.verb]

    @property
    def headers(self) -> list[list[str]] | None:
        """The header block as [key, value] pairs in wire order (None without one)."""
        block = self._frame.header_block
        return None if block is None else parse_headers(block)

    @property
    def layout(self) -> str | None:
        """The decoded envelope's layout, None when not decoded."""
        return self.envelope.layout if self.envelope is not None else None

    def to_json_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict; `jsonform.dumps` writes it.

        Returns:
            A new dict: the record's columns (fields.RECORD, in order) as JSON
            values (ts an Int64 or None, payload base64), then `envelope` or
            `error`, and `liftbridge` (fields.JSON_DECODING), each when there is
            one.
        """
        d: dict[str, Any] = {}
        for c in RECORD:
            value = getattr(self, c.name)
            if c.kind == TIME_NS:
                value = None if value == NO_TIME else Int64(value)
            elif c.kind == BYTES:
                value = base64.b64encode(value).decode("ascii")
            d[c.name] = value
        if self.envelope is not None:
            d["envelope"] = self.envelope.to_json_dict()
        elif self.error is not None:
            d["error"] = {"kind": self.error.kind, "message": self.error.message}
        if self.traffic is not None:
            d["liftbridge"] = self.traffic.to_json_dict()
        return d

    def __repr__(self) -> str:
        return (
            f"<Record {self.ts} {self.src}->{self.dst} {self.verb} {self.subject} "
            f"{len(self.payload)} bytes>"
        )


# The columns of `record_columns`: the record's, with the raw header block
# in place of the parsed headers.
COLUMNS: tuple[str, ...] = tuple("header_block" if n == "headers" else n for n in RECORD_NAMES)


def record_columns(recs: list[Record]) -> dict[str, list[Any]]:
    """The fields of many records as columns, in one pass.

    What the pipeline turns into Arrow arrays. Compiled with the rest of this
    module, it costs a fraction of a getattr per field.

    Args:
        recs: The records.

    Returns:
        A dict from each name of COLUMNS to a list of the records' values
        (header_block raw, not parsed), in the records' order.
    """
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
    r"""A NATS header block as [key, value] pairs, in wire order.

    The block is `NATS/1.0[ status[ description]]\r\nKey: Value\r\n...\r\n`;
    a status (three digits, as nats.py and nats.go read it) comes first as
    ["Status", code] and its text as ["Description", text].

    Args:
        block: The raw header block.

    Returns:
        A new list of [key, value] lists (text decoded as UTF-8, errors
        replaced); lines without a colon are left out.
    """
    out: list[list[str]] = []
    lines = block.split(b"\r\n")
    first = lines[0]
    if first.startswith(HEADER_LINE) and len(first) > len(HEADER_LINE):
        status = first[len(HEADER_LINE) :].strip(b" \t")
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
            out.append(
                [key.decode("utf-8", "replace"), value.strip(b" \t").decode("utf-8", "replace")]
            )
    return out


def build_header_block(headers: list[list[str]] | list[tuple[str, str]] | None) -> bytes | None:
    """The header block of `headers` (parse_headers' inverse).

    A leading Status of three digits, and the Description after it, go back
    into the first line.

    Args:
        headers: [key, value] pairs (or tuples), or None.

    Returns:
        The raw NATS/1.0 header block, or None for None.
    """
    if headers is None:
        return None
    # Parts joined once, never bytes + bytes: mypyc 1.13 leaks the left operand.
    parts = [HEADER_LINE]
    rest = list(headers)
    if rest and rest[0][0] == STATUS and len(rest[0][1]) == 3 and rest[0][1].isdigit():
        parts += (b" ", rest[0][1].encode())
        rest = rest[1:]
        if rest and rest[0][0] == DESCRIPTION:
            parts += (b" ", rest[0][1].encode())
            rest = rest[1:]
    parts.append(b"\r\n")
    parts += (f"{k}: {v}\r\n".encode() for k, v in rest)
    parts.append(b"\r\n")
    return b"".join(parts)


def decode_into(rec: Record, layout: str) -> Record:
    """Decode a record's payload, setting its `envelope` or its `error`.

    Args:
        rec: The record; changed in place.
        layout: The envelope layout to decode as (as `lbparse.decode` takes
            it).

    Returns:
        The same record.
    """
    try:
        rec.envelope = decode(rec.payload, layout)
    except EnvelopeError as exc:
        rec.error = exc
    return rec
