"""The columns of decoded rows, as Arrow types: no Spark here.

Each protobuf payload type becomes the struct that Spark's own
`from_protobuf` derives from the descriptor with default options
(spark-protobuf's `SchemaConverters.toSqlType`), written as Arrow:
int32/sint32/sfixed32 and uint32 are int32, 64-bit integers (uint64 too)
are int64, enums are strings, bytes are binary, repeated fields are lists
without null elements, maps are maps without null values, and message
fields are nested structs (a message type that contains itself is refused,
as Spark refuses it without `recursive.fields.max.depth`). Deriving it the
same way means a table written here reads like one Spark would have written
with the spark-protobuf jar; `lbparse.pipeline.spark_schema` gives the Spark view
of the same columns.

ReplicationResponse (payload type `raw`) is not protobuf: its struct is
leader epoch, high watermark and the commit-log entries as a list of
structs, mirroring `lbparse.codec.commitlog`. Payloads of any other kind (the
FlatBuffers layouts) go to `payload_json`, the codec's JSON, so that no
decoded payload is lost; opaque `bytes` payloads are the `payload` column.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

from lbparse.capture import fields
from lbparse.codec.layouts import LAYOUTS
from lbparse.codec.payloads import CODECS, REPLICATION_RESPONSE, descriptor_of
from lbparse.codec.wire import REPLICATION_RESPONSE_FIELDS
from lbparse.errors import InputError

__all__ = [
    "CAPTURE_COLUMNS",
    "COMMITLOG_ENTRY",
    "FIXED_FIELDS",
    "GRPC_CALL_FIELDS",
    "GRPC_MESSAGE_FIELDS",
    "JSON_COLUMNS",
    "PARTITION_COLUMN",
    "RAFT_ENTRY",
    "RAFT_RPC",
    "RAFT_RPCS",
    "RECORD_COLUMNS",
    "REPLICATION_RESPONSE_TYPE",
    "arrow_output_schema",
    "arrow_record_schema",
    "column_for",
    "fixed_fields",
    "is_map",
    "message_type",
    "payload_columns",
    "payload_type_of",
    "raft_types",
    "typed_payloads",
]

PARTITION_COLUMN = "msg_type_name"

_SCALARS: Mapping[int, pa.DataType] = {
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_UINT32: pa.int32(),
    FieldDescriptor.TYPE_FIXED32: pa.int32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT64: pa.int64(),
    FieldDescriptor.TYPE_FIXED64: pa.int64(),
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
    FieldDescriptor.TYPE_ENUM: pa.string(),
}


def _list(t: pa.DataType) -> pa.DataType:
    """Spark's array<T> without null elements, as its Arrow conversion writes it."""
    return pa.list_(pa.field("element", t, nullable=False))


def is_map(fd: FieldDescriptor) -> bool:
    """Whether a protobuf field is a map (a repeated map-entry message).

    Args:
        fd: The field.

    Returns:
        True for a map field.
    """
    mt = fd.message_type
    return fd.is_repeated and mt is not None and mt.GetOptions().map_entry


def _value_type(fd: FieldDescriptor, seen: frozenset[str]) -> pa.DataType | None:
    """The type of one value of `fd` (None: the field is dropped, as Spark drops it)."""
    if fd.type in _SCALARS:
        return _SCALARS[fd.type]
    if fd.type != FieldDescriptor.TYPE_MESSAGE:
        raise InputError(
            "bad_spec",
            f"{fd.full_name}: protobuf type {fd.type} has no Spark type "
            "(spark-protobuf refuses it too)",
        )
    mt = fd.message_type
    assert mt is not None  # a message field has its message type
    if mt.full_name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        # Spark maps these to timestamp / interval; none of Liftbridge's
        # messages use them, so rather than half-support them, say so.
        raise InputError(
            "bad_spec", f"{fd.full_name}: {mt.full_name} is not supported by lbparse's pipeline"
        )
    if is_map(fd):
        k = _value_type(mt.fields_by_name["key"], seen)
        v = _value_type(mt.fields_by_name["value"], seen)
        return (
            None
            if k is None or v is None
            else pa.map_(pa.field("key", k, nullable=False), pa.field("value", v, nullable=False))
        )
    if mt.full_name in seen:
        raise InputError(
            "bad_spec",
            f"{fd.full_name}: {mt.full_name} contains itself; spark-protobuf "
            "refuses recursive messages without recursive.fields.max.depth",
        )
    struct = _struct(mt, seen | {mt.full_name})
    return struct if struct.num_fields else None  # empty messages are dropped, as in Spark


def _struct(descriptor: Descriptor, seen: frozenset[str]) -> pa.StructType:
    out = []
    for fd in descriptor.fields:
        dt = _value_type(fd, seen)
        if dt is None:
            continue
        if isinstance(dt, pa.MapType):
            out.append(pa.field(fd.name, dt))
        elif fd.is_repeated:
            out.append(pa.field(fd.name, _list(dt)))
        else:
            out.append(pa.field(fd.name, dt, nullable=not fd.is_required))
    return pa.struct(out)


def message_type(descriptor: Descriptor) -> pa.StructType:
    """What `from_protobuf(col, messageName)` gives for `descriptor`, as Arrow.

    Args:
        descriptor: The message type.

    Returns:
        Its struct type.
    """
    return _struct(descriptor, frozenset({descriptor.full_name}))


# The ReplicationResponse struct follows spec/commitlog.ksy's values (through
# lbparse.codec.wire): 64-bit integers (offsets, epochs, timestamps, some unsigned)
# and 32-bit unsigned ones are int64 (like Spark's uint64, they wrap above
# 2**63), smaller ones int32; byte strings binary, strings string, lists of
# structs. Each CRC-32C is followed by `crc_ok`, whether it matched.
_KSY_TYPES: Mapping[str, pa.DataType] = {
    "u1": pa.int32(),
    "s1": pa.int32(),
    "u2": pa.int32(),
    "s2": pa.int32(),
    "s4": pa.int32(),
    "u4": pa.int64(),
    "s8": pa.int64(),
    "u8": pa.int64(),
    "bytes": pa.binary(),
    "str": pa.string(),
}


def _spec_struct(spec: tuple[tuple[str, Any], ...]) -> pa.StructType:
    out = []
    for name, typ in spec:
        if isinstance(typ, tuple):
            out.append(pa.field(name, _list(_spec_struct(typ))))
        else:
            out.append(pa.field(name, _KSY_TYPES[typ]))
        if name == "crc32c":
            out.append(pa.field("crc_ok", pa.bool_()))
    return pa.struct(out)


REPLICATION_RESPONSE_TYPE = _spec_struct(REPLICATION_RESPONSE_FIELDS)
COMMITLOG_ENTRY: pa.StructType = REPLICATION_RESPONSE_TYPE.field("entries").type.value_type


def column_for(payload_type: str) -> str:
    """The struct column of a payload type: `proto.Message` -> `proto_Message`.

    Args:
        payload_type: The payload type.

    Returns:
        The column's name.
    """
    return (
        "commitlog_ReplicationResponse"
        if payload_type == REPLICATION_RESPONSE
        else payload_type.replace(".", "_")
    )


def _protobuf_classes() -> dict[str, type[ProtoMessage]]:
    found: dict[str, type[ProtoMessage]] = {}
    for codec in CODECS.values():
        cls = codec.python_type
        if isinstance(cls, type) and issubclass(cls, ProtoMessage):
            found.setdefault(cls.DESCRIPTOR.full_name, cls)
    return found


@cache
def typed_payloads() -> dict[str, type[ProtoMessage] | None]:
    """Payload types with a struct column -> protobuf class (None for `raw`).

    In the order of the layouts' tables (v0's MsgTypes first), so that the
    columns read like the MsgType table.

    Returns:
        Each payload type's protobuf class; None for a ReplicationResponse.
    """
    classes = _protobuf_classes()
    order: list[str] = []
    for layout in LAYOUTS.values():
        order += [p for p in layout.payload_types if p not in order]
    order += sorted(p for p in classes if p not in order)
    return {p: classes.get(p) for p in order if p in classes or p == REPLICATION_RESPONSE}


def payload_type_of(payload_type: str) -> pa.StructType:
    """The struct of one payload type's decoded values.

    Args:
        payload_type: The payload type.

    Returns:
        Its Arrow struct type.

    Raises:
        InputError: The payload type has no struct column.
    """
    if payload_type == REPLICATION_RESPONSE:
        return REPLICATION_RESPONSE_TYPE
    cls = typed_payloads().get(payload_type)
    if cls is None:
        raise InputError("bad_spec", f"payload type {payload_type!r} has no struct column")
    return message_type(descriptor_of(cls))


def payload_columns() -> dict[str, str]:
    """payload type -> struct column name.

    Returns:
        The struct column of each payload type, in `typed_payloads` order.
    """
    return {p: column_for(p) for p in typed_payloads()}


# The JSON text columns: all of a traffic message, a Raft RPC's fields and a log
# entry's RaftLog command as canonical JSON (lbparse.codec.jsonform). Each is
# made row by row in Python, and nothing in lbparse reads them back, so they
# are built only where a user asks for them (DecodeOptions.json_columns, the
# writers' --json-columns, the data source's jsonColumns); every writer adds
# them alike, in the places below, so the layout stays one.
JSON_COLUMNS: tuple[str, ...] = ("traffic_json", "fields_json", "command_json")


@cache
def _raft_types(json_columns: bool) -> tuple[pa.StructType, pa.StructType, pa.DataType]:
    """(RAFT_ENTRY, RAFT_RPC, RAFT_RPCS) without the JSON text columns, or with them."""
    entry = pa.struct(
        [
            pa.field("index", pa.int64()),
            pa.field("term", pa.int64()),
            pa.field("type", pa.string()),
            pa.field("command", pa.string()),
            pa.field("command_data", pa.binary()),
            *([pa.field("command_json", pa.string())] if json_columns else []),
        ]
    )
    rpc = pa.struct(
        [
            pa.field("role", pa.string()),
            pa.field("rpc", pa.string()),
            pa.field("term", pa.int64()),
            pa.field("node", pa.string()),
            pa.field("error", pa.string()),
            *([pa.field("fields_json", pa.string())] if json_columns else []),
            pa.field("entries", _list(entry)),
        ]
    )
    return entry, rpc, _list(rpc)


# The Raft RPCs a transport stream message completed (lbparse.raft.RPC), each
# AppendEntries' log entries with Liftbridge's RaftLog command when it has one
# (the column kind fields.RAFT_RPCS): its label, and its bytes (a LogCommand's
# data), which raft_entries decodes into typed columns (columnar.commands).
# Terms and indexes are hashicorp/raft's uint64: int64, wrapping above 2**63 as
# Spark's uint64 does. Without the JSON text columns; raft_types(True) gives
# them with.
RAFT_ENTRY, RAFT_RPC, RAFT_RPCS = _raft_types(False)


def raft_types(json_columns: bool = False) -> tuple[pa.StructType, pa.StructType, pa.DataType]:
    """The Raft columns' types: a log entry, an RPC, the list of RPCs.

    Args:
        json_columns: With the JSON text columns (`fields_json` in an RPC,
            `command_json` in an entry).

    Returns:
        (RAFT_ENTRY, RAFT_RPC, RAFT_RPCS), with or without the JSON text columns.
    """
    return _raft_types(json_columns) if json_columns else (RAFT_ENTRY, RAFT_RPC, RAFT_RPCS)


# The record's columns by their kind (lbparse.capture.fields). A timestamp
# holds microseconds (Spark's): a capture time is also kept whole, in
# integer nanoseconds, as `<name>_ns` beside it.
_TYPES: Mapping[str, pa.DataType] = {
    fields.TIME_NS: pa.timestamp("us", tz="UTC"),
    fields.TEXT: pa.string(),
    fields.OPTIONAL_TEXT: pa.string(),
    fields.BYTES: pa.binary(),
    fields.HEADERS: _list(
        pa.struct([pa.field("key", pa.string()), pa.field("value", pa.string())])
    ),
    fields.RAFT_RPCS: RAFT_RPCS,
}


def _record_fields(
    columns: tuple[fields.Column, ...], json_columns: bool = False
) -> list[pa.Field]:
    out = []
    for c in columns:
        if c.name in JSON_COLUMNS and not json_columns:
            continue
        typ = (
            _raft_types(True)[2] if c.kind == fields.RAFT_RPCS and json_columns else _TYPES[c.kind]
        )
        out.append(pa.field(c.name, typ))
        if c.kind == fields.TIME_NS:
            out.append(pa.field(f"{c.name}_ns", pa.int64()))
    return out


_PAYLOAD = fields.column("payload")


def fixed_fields(json_columns: bool = False) -> tuple[pa.Field, ...]:
    """The fixed columns of the wide row.

    One row per NATS message (or per problem found in an input, see
    lbparse.columnar.sources): where it came from, the message as captured
    (fields.RECORD, the payload last), the envelope header (for an error: as
    far as it was read), and Liftbridge's own non-envelope traffic
    (fields.TRAFFIC).

    Args:
        json_columns: With the JSON text columns (JSON_COLUMNS).

    Returns:
        The fields, in order.
    """
    return (
        pa.field("source", pa.string(), False),  # input file
        pa.field("position", pa.int64(), False),  # row of that file (see sources.py)
        *_record_fields(tuple(c for c in fields.RECORD if c is not _PAYLOAD)),
        pa.field("layout", pa.string()),
        # How `layout` was decided (layout auto, lbparse.codec.detect): Envelope.confidence,
        # .ambiguous and the decisive one of its .reasons (decode_arrow.decisive_reason);
        # a named layout decides nothing (null, false, null).
        pa.field("layout_confidence", pa.float64()),
        pa.field("layout_ambiguous", pa.bool_()),
        pa.field("layout_reason", pa.string()),
        pa.field("version", pa.int32()),
        pa.field("header_len", pa.int32()),
        pa.field("flags", pa.int32()),
        pa.field("crc32c", pa.int64()),
        pa.field("crc_ok", pa.bool_()),
        pa.field("msg_type", pa.int32()),
        pa.field(PARTITION_COLUMN, pa.string()),
        pa.field("payload_type", pa.string()),
        pa.field("error_kind", pa.string()),
        pa.field("error_message", pa.string()),
        pa.field("warnings", _list(pa.string())),
        *_record_fields((_PAYLOAD,)),
        pa.field("payload_json", pa.string()),  # payloads without a struct column below
        *_record_fields(fields.TRAFFIC, json_columns),
    )


# The fixed columns without the JSON text columns (the default layout).
FIXED_FIELDS: tuple[pa.Field, ...] = fixed_fields()


def _time(name: str) -> tuple[pa.Field, pa.Field]:
    """A capture time as the record's TIME_NS kind gives it: microseconds, and whole as `_ns`."""
    return (pa.field(name, _TYPES[fields.TIME_NS]), pa.field(f"{name}_ns", pa.int64()))


# The client's gRPC calls (lbparse.capture.grpc.GrpcCall; lbparse.columnar.grpctables),
# after the join keys: one row per call. `position` in the gRPC tables numbers a
# file's calls (in the order they were first seen), not its NATS rows.
GRPC_CALL_FIELDS: tuple[pa.Field, ...] = (
    pa.field("client", pa.string()),
    pa.field("server", pa.string()),  # the connection
    pa.field("stream_id", pa.int64()),  # HTTP/2 stream id
    pa.field("method", pa.string()),  # null: its :path was not read or is unknown
    pa.field("path", pa.string()),
    pa.field("request_count", pa.int64()),
    pa.field("response_count", pa.int64()),
    pa.field("http_status", pa.string()),
    pa.field("grpc_status", pa.int32()),
    pa.field("grpc_message", pa.string()),
    *_time("request_ts"),
    *_time("first_response_ts"),
    *_time("trailers_ts"),
    *_time("end_ts"),
    # how it ended: trailers, rst_stream, goaway, closed, capture_end, dropped
    pa.field("end", pa.string()),
    pa.field("rst_stream_error", pa.int64()),
)
# One row per gRPC message, keyed by its call's (source, position) and its place
# among the call's messages (`message_seq`, both directions, from 0).
GRPC_MESSAGE_FIELDS: tuple[pa.Field, ...] = (
    pa.field("message_seq", pa.int32(), False),
    *_time("ts"),
    pa.field("src", pa.string()),
    pa.field("dst", pa.string()),
    pa.field("direction", pa.string()),
    pa.field("stream_id", pa.int64()),
    pa.field("method", pa.string()),
    pa.field("type", pa.string()),  # the protobuf message type, proto.PublishRequest
    pa.field("index", pa.int32()),  # its place on its side of the call
    pa.field("compressed", pa.bool_()),
    pa.field("length", pa.int64()),
    pa.field("message_json", pa.string()),  # canonical protobuf JSON (lbparse.codec.jsonform)
    pa.field("error", pa.string()),  # why it did not decode
)


@cache
def arrow_output_schema(json_columns: bool = False) -> pa.Schema:
    """The wide row: the fixed columns, then one struct column per payload type.

    Args:
        json_columns: With the JSON text columns (JSON_COLUMNS): `traffic_json`,
            and `fields_json` and `command_json` inside `raft_rpcs`.

    Returns:
        The decoder's output schema.
    """
    structs = [pa.field(col, payload_type_of(p)) for p, col in payload_columns().items()]
    return pa.schema([*fixed_fields(json_columns), *structs])


# What the readers (lbparse.columnar.sources) hand the decoder: the message
# as captured, or a problem row with `error_kind` already set and no payload.
RECORD_COLUMNS: tuple[str, ...] = (
    "source",
    "position",
    *(f.name for f in _record_fields(fields.RECORD)),
    "error_kind",
    "error_message",
)
# The capture's own columns, which a payload alone does not have (decode_arrow,
# lbparse.spark.from_envelope): the record's but the payload and its error,
# and Liftbridge's non-envelope traffic named from the subject.
CAPTURE_COLUMNS: tuple[str, ...] = tuple(
    n for n in RECORD_COLUMNS if n not in ("payload", "error_kind", "error_message")
) + tuple(c.name for c in fields.TRAFFIC)


@cache
def arrow_record_schema() -> pa.Schema:
    """The decoder's input: the record columns of the output schema.

    Returns:
        The schema of a batch of records (RECORD_COLUMNS).
    """
    out = arrow_output_schema()
    return pa.schema([out.field(name) for name in RECORD_COLUMNS])
