"""The columns of a record, in one table: what each output derives its columns from.

A record is one NATS message as captured (`records.Record`). `RECORD` lists
its columns in order, each with a kind; every output takes its columns and
their types from here:

- `Record.to_json_dict` and JSON Lines (`recordings.write_jsonl`,
  `recordings.read_jsonl`, which checks a line's fields against the kinds);
- our Parquet recordings (`recordings.parquet_schema`, `read_parquet`), which
  add `DECODING`, the stored decoding;
- the pipeline's record batches and output table (`pipeline/schema.py`,
  `pipeline/sources.py`), which put `source` and `position` first and the
  decoded envelope after;
- live recordings (`lbparse record`, lbparse/live.py), which write records.

Kinds: `TIME_NS` (capture time, integer nanoseconds since the Unix epoch;
JSON: a decimal string, lbparse.jsonform; Parquet: timestamp[ns, UTC]),
`TEXT`, `OPTIONAL_TEXT` (null allowed), `HEADERS` (the NATS header block as
[key, value] pairs in wire order; null without one; Parquet: a list of
key/value structs), `BYTES` (JSON: base64; Parquet: binary).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["BYTES", "Column", "DECODING", "HEADERS", "OPTIONAL_TEXT", "RECORD", "RECORD_NAMES",
           "REQUIRED", "TEXT", "TIME_NS", "column"]

TIME_NS = "time_ns"
TEXT = "text"
OPTIONAL_TEXT = "optional_text"
HEADERS = "headers"
BYTES = "bytes"


class Column(NamedTuple):
    name: str
    kind: str
    doc: str
    derived: bool = False  # follows from other columns: written, not needed to read a record


RECORD: tuple[Column, ...] = (
    Column("ts", TIME_NS, "capture time, integer nanoseconds since the Unix epoch"),
    Column("src", TEXT, "sender, host:port"),
    Column("dst", TEXT, "receiver, host:port"),
    Column("direction", TEXT, "client_to_server (PUB, HPUB) or server_to_client (MSG, HMSG)",
           derived=True),
    Column("verb", TEXT, "PUB, HPUB, MSG or HMSG"),
    Column("subject", TEXT, "the NATS subject"),
    Column("reply", OPTIONAL_TEXT, "the reply subject, null without one"),
    Column("sid", OPTIONAL_TEXT, "the subscription id (MSG, HMSG), null for PUB and HPUB"),
    Column("headers", HEADERS, "the NATS header block as [key, value] pairs, null without one"),
    Column("payload", BYTES, "the NATS payload"),
)

# What a Parquet recording stores of each record's decoding (for people:
# reading a recording decodes the payload again).
DECODING: tuple[Column, ...] = (
    Column("layout", OPTIONAL_TEXT, "the envelope's layout, null when it did not decode"),
    Column("msg_type_name", OPTIONAL_TEXT, "the envelope's MsgType name"),
    Column("envelope_json", OPTIONAL_TEXT, "the decoded envelope, JSON text"),
    Column("error_kind", OPTIONAL_TEXT, "why the payload did not decode (EnvelopeError.kind)"),
    Column("error_message", OPTIONAL_TEXT, "what the error says"),
)

RECORD_NAMES: tuple[str, ...] = tuple(c.name for c in RECORD)
# The columns a record cannot do without (a reader refuses a file without them).
REQUIRED: tuple[str, ...] = tuple(c.name for c in RECORD
                                  if c.kind in (TIME_NS, TEXT, BYTES) and not c.derived)


def column(name: str) -> Column:
    for c in RECORD + DECODING:
        if c.name == name:
            return c
    raise KeyError(name)
