"""The output table's schema: fixed columns, then one struct per payload type.

Each protobuf payload type becomes the struct that Spark's own
`from_protobuf` derives from the descriptor with default options
(spark-protobuf's `SchemaConverters.toSqlType`): int32/sint32/sfixed32 and
uint32 are `int`, 64-bit integers (uint64 too) are `bigint`, enums are
strings, bytes are binary, repeated fields are `array<T>` without null
elements, maps are `map<K, V>` without null values, and message fields
are nested structs (a message type that contains itself is refused, as
Spark refuses it without `recursive.fields.max.depth`). Deriving it the
same way means a table written here reads like one Spark would have
written with the spark-protobuf jar, which this machine does not have.

ReplicationResponse (payload type `raw`) is not protobuf: its struct is
leader epoch, high watermark and the commit-log entries as an array of
structs, mirroring `lbparse.commitlog`. Payloads of any other kind (the
FlatBuffers layouts) go to `payload_json`, the codec's JSON, so that no
decoded payload is lost; opaque `bytes` payloads are the `payload` column.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Mapping, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, DoubleType,
                               FloatType, IntegerType, LongType, MapType, StringType,
                               StructField, StructType, TimestampType)

from google.protobuf.message import Message as ProtoMessage

from lbparse.layouts import LAYOUTS
from lbparse.capture import fields
from lbparse.payloads import CODECS, REPLICATION_RESPONSE, descriptor_of
from lbparse.wire import REPLICATION_RESPONSE_FIELDS

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["FIXED_COLUMNS", "PARTITION_COLUMN", "RECORD_COLUMNS", "arrow_output_schema",
           "arrow_record_schema", "column_for", "message_struct", "output_schema",
           "payload_columns", "payload_struct", "typed_payloads"]

PARTITION_COLUMN = "msg_type_name"

_SCALARS: Mapping[int, DataType] = {
    FieldDescriptor.TYPE_INT32: IntegerType(), FieldDescriptor.TYPE_SINT32: IntegerType(),
    FieldDescriptor.TYPE_SFIXED32: IntegerType(), FieldDescriptor.TYPE_UINT32: IntegerType(),
    FieldDescriptor.TYPE_FIXED32: IntegerType(),
    FieldDescriptor.TYPE_INT64: LongType(), FieldDescriptor.TYPE_SINT64: LongType(),
    FieldDescriptor.TYPE_SFIXED64: LongType(), FieldDescriptor.TYPE_UINT64: LongType(),
    FieldDescriptor.TYPE_FIXED64: LongType(),
    FieldDescriptor.TYPE_FLOAT: FloatType(), FieldDescriptor.TYPE_DOUBLE: DoubleType(),
    FieldDescriptor.TYPE_BOOL: BooleanType(), FieldDescriptor.TYPE_STRING: StringType(),
    FieldDescriptor.TYPE_BYTES: BinaryType(), FieldDescriptor.TYPE_ENUM: StringType(),
}


def is_map(fd: FieldDescriptor) -> bool:
    mt = fd.message_type
    return fd.is_repeated and mt is not None and mt.GetOptions().map_entry


def _value_type(fd: FieldDescriptor, seen: frozenset[str]) -> DataType | None:
    """The Spark type of one value of `fd` (None: the field is dropped, as Spark drops it)."""
    if fd.type in _SCALARS:
        return _SCALARS[fd.type]
    if fd.type != FieldDescriptor.TYPE_MESSAGE:
        raise ValueError(f"{fd.full_name}: protobuf type {fd.type} has no Spark type "
                         "(spark-protobuf refuses it too)")
    mt = fd.message_type
    assert mt is not None  # a message field has its message type
    if mt.full_name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        # Spark maps these to timestamp / interval; none of Liftbridge's
        # messages use them, so rather than half-support them, say so.
        raise ValueError(f"{fd.full_name}: {mt.full_name} is not supported by lbparse's pipeline")
    if is_map(fd):
        k = _value_type(mt.fields_by_name["key"], seen)
        v = _value_type(mt.fields_by_name["value"], seen)
        return None if k is None or v is None else MapType(k, v, valueContainsNull=False)
    if mt.full_name in seen:
        raise ValueError(f"{fd.full_name}: {mt.full_name} contains itself; spark-protobuf "
                         "refuses recursive messages without recursive.fields.max.depth")
    struct = _fields(mt, seen | {mt.full_name})
    return struct if struct.fields else None  # empty messages are dropped, as in Spark


def _fields(descriptor: Descriptor, seen: frozenset[str]) -> StructType:
    fields = []
    for fd in descriptor.fields:
        dt = _value_type(fd, seen)
        if dt is None:
            continue
        if isinstance(dt, MapType):
            fields.append(StructField(fd.name, dt))
        elif fd.is_repeated:
            fields.append(StructField(fd.name, ArrayType(dt, containsNull=False)))
        else:
            fields.append(StructField(fd.name, dt, nullable=not fd.is_required))
    return StructType(fields)


def message_struct(descriptor: Descriptor) -> StructType:
    """What `from_protobuf(col, messageName)` gives for `descriptor` (default options)."""
    return _fields(descriptor, frozenset({descriptor.full_name}))


# The ReplicationResponse struct follows spec/commitlog.ksy's values (through
# lbparse.wire): 64-bit integers (offsets, epochs, timestamps, some unsigned)
# and 32-bit unsigned ones are bigint (like Spark's uint64, they wrap above
# 2**63), smaller ones int; byte strings binary, strings string, lists arrays
# of structs. Each CRC-32C is followed by `crc_ok`, whether it matched.
_KSY_TYPES: Mapping[str, DataType] = {
    "u1": IntegerType(), "s1": IntegerType(), "u2": IntegerType(), "s2": IntegerType(),
    "s4": IntegerType(), "u4": LongType(), "s8": LongType(), "u8": LongType(),
    "bytes": BinaryType(), "str": StringType(),
}


def _spec_struct(fields: tuple[tuple[str, Any], ...]) -> StructType:
    out = []
    for name, typ in fields:
        if isinstance(typ, tuple):
            out.append(StructField(name, ArrayType(_spec_struct(typ), containsNull=False)))
        else:
            out.append(StructField(name, _KSY_TYPES[typ]))
        if name == "crc32c":
            out.append(StructField("crc_ok", BooleanType()))
    return StructType(out)


REPLICATION_RESPONSE_STRUCT = _spec_struct(REPLICATION_RESPONSE_FIELDS)
COMMITLOG_ENTRY = cast(ArrayType, REPLICATION_RESPONSE_STRUCT["entries"].dataType).elementType


def column_for(payload_type: str) -> str:
    """The struct column of a payload type: `proto.Message` -> `proto_Message`."""
    return ("commitlog_ReplicationResponse" if payload_type == REPLICATION_RESPONSE
            else payload_type.replace(".", "_"))


def _protobuf_classes() -> dict[str, type[ProtoMessage]]:
    found: dict[str, type[ProtoMessage]] = {}
    for codec in CODECS.values():
        cls = codec.python_type
        if isinstance(cls, type) and issubclass(cls, ProtoMessage):
            found.setdefault(cls.DESCRIPTOR.full_name, cls)
    return found


@lru_cache(maxsize=None)
def typed_payloads() -> dict[str, type[ProtoMessage] | None]:
    """Payload types with a struct column -> protobuf class (None for `raw`).

    In the order of the layouts' tables (v0's MsgTypes first), so that the
    columns read like the MsgType table.
    """
    classes = _protobuf_classes()
    order: list[str] = []
    for layout in LAYOUTS.values():
        order += [p for p in layout.payload_types if p not in order]
    order += sorted(p for p in classes if p not in order)
    return {p: classes.get(p) for p in order if p in classes or p == REPLICATION_RESPONSE}


def payload_struct(payload_type: str) -> StructType:
    if payload_type == REPLICATION_RESPONSE:
        return REPLICATION_RESPONSE_STRUCT
    cls = typed_payloads().get(payload_type)
    if cls is None:
        raise ValueError(f"payload type {payload_type!r} has no struct column")
    return message_struct(descriptor_of(cls))


def payload_columns() -> dict[str, str]:
    """payload type -> struct column name."""
    return {p: column_for(p) for p in typed_payloads()}


# The Raft RPCs a transport stream message completed (lbparse.raft.RPC), each
# AppendEntries' log entries with Liftbridge's RaftLog command when it has one
# (the column kind fields.RAFT_RPCS). Terms and indexes are hashicorp/raft's
# uint64: bigint, wrapping above 2**63 as Spark's uint64 does.
RAFT_ENTRY = StructType([
    StructField("index", LongType()), StructField("term", LongType()),
    StructField("type", StringType()), StructField("command", StringType()),
    StructField("command_json", StringType()),
])
RAFT_RPCS = ArrayType(StructType([
    StructField("role", StringType()), StructField("rpc", StringType()),
    StructField("term", LongType()), StructField("node", StringType()),
    StructField("error", StringType()), StructField("fields_json", StringType()),
    StructField("entries", ArrayType(RAFT_ENTRY, containsNull=False)),
]), containsNull=False)


# The record's columns as Spark types, by their kind (lbparse.capture.fields).
# Spark's timestamp holds microseconds: a capture time is also kept whole,
# in integer nanoseconds, as `<name>_ns` beside it.
_SPARK_TYPES: Mapping[str, DataType] = {
    fields.TIME_NS: TimestampType(), fields.TEXT: StringType(),
    fields.OPTIONAL_TEXT: StringType(), fields.BYTES: BinaryType(),
    fields.HEADERS: ArrayType(StructType([
        StructField("key", StringType()), StructField("value", StringType())]),
        containsNull=False),
    fields.RAFT_RPCS: RAFT_RPCS,
}


def _record_fields(columns: tuple[fields.Column, ...]) -> list[StructField]:
    out = []
    for c in columns:
        out.append(StructField(c.name, _SPARK_TYPES[c.kind]))
        if c.kind == fields.TIME_NS:
            out.append(StructField(f"{c.name}_ns", LongType()))
    return out


_PAYLOAD = fields.column("payload")

# One row per NATS message (or per problem found in an input, see sources.py):
# where it came from, the message as captured (fields.RECORD, the payload
# last), the envelope header (for an error: as far as it was read), and
# Liftbridge's own non-envelope traffic (fields.TRAFFIC).
FIXED_COLUMNS = StructType([
    StructField("source", StringType(), False),        # input file
    StructField("position", LongType(), False),        # row of that file (see sources.py)
    *_record_fields(tuple(c for c in fields.RECORD if c is not _PAYLOAD)),
    StructField("layout", StringType()), StructField("version", IntegerType()),
    StructField("header_len", IntegerType()), StructField("flags", IntegerType()),
    StructField("crc32c", LongType()), StructField("crc_ok", BooleanType()),
    StructField("msg_type", IntegerType()), StructField(PARTITION_COLUMN, StringType()),
    StructField("payload_type", StringType()),
    StructField("error_kind", StringType()), StructField("error_message", StringType()),
    StructField("warnings", ArrayType(StringType(), containsNull=False)),
    *_record_fields((_PAYLOAD,)),
    StructField("payload_json", StringType()),  # payloads without a struct column below
    *_record_fields(fields.TRAFFIC),
])


@lru_cache(maxsize=None)
def output_schema() -> StructType:
    fields = list(FIXED_COLUMNS.fields)
    fields += [StructField(col, payload_struct(p)) for p, col in payload_columns().items()]
    return StructType(fields)


@lru_cache(maxsize=None)
def arrow_output_schema() -> "pa.Schema":
    """The Arrow schema Spark expects back from the decoder (computed once per process)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(output_schema(), timezone="UTC")


# What the readers (sources.py) hand the decoder: the message as captured,
# or a problem row with `error_kind` already set and no payload.
RECORD_COLUMNS: tuple[str, ...] = ("source", "position",
                                   *(f.name for f in _record_fields(fields.RECORD)),
                                   "error_kind", "error_message")
# The capture's own columns, which a payload alone does not have (decode_arrow,
# lbparse.spark.from_envelope): the record's but the payload and its error,
# and Liftbridge's non-envelope traffic named from the subject.
CAPTURE_COLUMNS: tuple[str, ...] = tuple(
    n for n in RECORD_COLUMNS if n not in ("payload", "error_kind", "error_message")
) + tuple(c.name for c in fields.TRAFFIC)


@lru_cache(maxsize=None)
def arrow_record_schema() -> "pa.Schema":
    import pyarrow as pa

    out = arrow_output_schema()
    return pa.schema([out.field(name) for name in RECORD_COLUMNS])
