"""The columns of a record, in one table: what each output derives its columns from.

A record is one NATS message as captured (`records.Record`). `RECORD` lists
its columns in order, each with a kind; every output takes its columns and
their types from here:

- `Record.to_json_dict` and JSON Lines (`recordings.write_jsonl`,
  `recordings.read_jsonl`, which checks a line's fields against the kinds),
  which add `JSON_DECODING`, what lbparse made of the record;
- our Parquet recordings (`recordings.parquet_schema`, `read_parquet`), which
  add `DECODING`, the stored decoding;
- the pipeline's record batches and output table (`columnar/schema.py`,
  `columnar/sources.py`), which put `source` and `position` first, the
  decoded envelope after, and `TRAFFIC`, Liftbridge's own non-envelope
  traffic (`pipeline/trafficcols.py`);
- live recordings (`lbparse record`, lbparse/live/), which write records.

Kinds: `TIME_NS` (capture time, integer nanoseconds since the Unix epoch;
JSON: a decimal string, lbparse.codec.jsonform; Parquet: timestamp[ns, UTC]),
`TEXT`, `OPTIONAL_TEXT` (null allowed), `HEADERS` (the NATS header block as
[key, value] pairs in wire order, a NATS status line's code and text first
as `Status` and `Description`, as nats.go and nats.py give them; null
without a block; Parquet: a list of key/value structs), `BYTES` (JSON:
base64; Parquet: binary), `OBJECT` (a JSON object; only in a record's
JSON), `RAFT_RPCS` (the Raft RPCs a message completed; only in the
pipeline, whose schema.py gives its struct).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "BYTES",
    "Column",
    "DECODING",
    "HEADERS",
    "JSON_DECODING",
    "OBJECT",
    "OPTIONAL_TEXT",
    "RAFT_RPCS",
    "RECORD",
    "RECORD_NAMES",
    "REQUIRED",
    "TEXT",
    "TIME_NS",
    "TRAFFIC",
    "column",
]

TIME_NS = "time_ns"
TEXT = "text"
OPTIONAL_TEXT = "optional_text"
HEADERS = "headers"
BYTES = "bytes"
OBJECT = "object"
RAFT_RPCS = "raft_rpcs"


class Column(NamedTuple):
    """One column of the record formats: its name, kind and meaning.

    Attributes:
        name: The column's name.
        kind: Its value kind (TIME_NS, TEXT, OPTIONAL_TEXT, HEADERS, BYTES,
            OBJECT, RAFT_RPCS).
        doc: What it holds, for people (the docs' tables).
        derived: Whether it follows from other columns: written, not needed
            to read a record.
    """

    name: str
    kind: str
    doc: str
    derived: bool = False  # follows from other columns: written, not needed to read a record


RECORD: tuple[Column, ...] = (
    Column("ts", TIME_NS, "capture time, integer nanoseconds since the Unix epoch"),
    Column("src", TEXT, "sender, host:port"),
    Column("dst", TEXT, "receiver, host:port"),
    Column(
        "direction",
        TEXT,
        "client_to_server (PUB, HPUB) or server_to_client (MSG, HMSG)",
        derived=True,
    ),
    Column("verb", TEXT, "PUB, HPUB, MSG or HMSG"),
    Column("subject", TEXT, "the NATS subject"),
    Column("reply", OPTIONAL_TEXT, "the reply subject, null without one"),
    Column("sid", OPTIONAL_TEXT, "the subscription id (MSG, HMSG), null for PUB and HPUB"),
    Column(
        "headers",
        HEADERS,
        "the NATS header block as [key, value] pairs, a status line "
        "first as Status and Description; null without a block",
    ),
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
    Column(
        "liftbridge_json",
        OPTIONAL_TEXT,
        "Liftbridge's own non-envelope traffic "
        "(lbparse.capture.traffic: the Raft transport, its handshake, the bootstrap probe), "
        "JSON text",
    ),
)

# What a record's JSON (Record.to_json_dict) holds after its columns, each
# only when there is one: how lbparse decoded it (for people: reading a
# recording decodes the payload again).
JSON_DECODING: tuple[Column, ...] = (
    Column("envelope", OBJECT, "the decoded envelope's JSON, with its layout"),
    Column("error", OBJECT, "why the payload did not decode: {kind, message} (EnvelopeError)"),
    Column(
        "liftbridge",
        OBJECT,
        "Liftbridge's own non-envelope traffic (lbparse.capture.traffic), "
        "its JSON: the Parquet recordings' liftbridge_json",
    ),
)

# The pipeline's columns of Liftbridge's own non-envelope traffic
# (lbparse.capture.traffic, one reader per unit; pipeline/trafficcols.py), after the
# envelope's.
TRAFFIC: tuple[Column, ...] = (
    Column(
        "traffic",
        OPTIONAL_TEXT,
        "its kind (lbparse.capture.traffic.TRAFFIC_KINDS: raft_request, "
        "raft_accept, ...), null for any other message",
    ),
    Column("traffic_node", OPTIONAL_TEXT, "the node whose subject it is"),
    Column(
        "raft_rpcs",
        RAFT_RPCS,
        "the Raft RPCs the message completed, with their terms, "
        "nodes and log entries (RaftLog commands)",
    ),
    Column(
        "traffic_json",
        OPTIONAL_TEXT,
        "all of it, JSON text (what a record's JSON holds under liftbridge); only "
        "on request (DecodeOptions.json_columns)",
    ),
)

RECORD_NAMES: tuple[str, ...] = tuple(c.name for c in RECORD)
# The columns a record cannot do without (a reader refuses a file without them).
REQUIRED: tuple[str, ...] = tuple(
    c.name for c in RECORD if c.kind in (TIME_NS, TEXT, BYTES) and not c.derived
)


def column(name: str) -> Column:
    """The column named `name`, of any of the column tables.

    Args:
        name: A column name of RECORD, DECODING, JSON_DECODING or TRAFFIC.

    Returns:
        Its Column (the first table's, in that order).

    Raises:
        KeyError: No table has a column of that name.
    """
    for c in RECORD + DECODING + JSON_DECODING + TRAFFIC:
        if c.name == name:
            return c
    raise KeyError(name)
