"""The Spark view of the decoded columns (lbparse.columnar.schema, as Spark types).

The columns are declared once, in Arrow, by the columnar core; Spark's own
Arrow conversion turns them into the StructType that `from_protobuf`
would derive (tests/spark/test_schema.py holds the two equal, field by
field, nullability included).
"""

from __future__ import annotations

from functools import cache

import pyarrow as pa
from google.protobuf.descriptor import Descriptor
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type
from pyspark.sql.types import StructType

from lbparse.columnar.schema import (
    CAPTURE_COLUMNS,
    FIXED_FIELDS,
    PARTITION_COLUMN,
    RECORD_COLUMNS,
    arrow_output_schema,
    arrow_record_schema,
    column_for,
    is_map,
    message_type,
    payload_columns,
    payload_type_of,
    typed_payloads,
)
from lbparse.pipeline.datadir_entries import arrow_entries_schema

__all__ = [
    "CAPTURE_COLUMNS",
    "FIXED_COLUMNS",
    "PARTITION_COLUMN",
    "RECORD_COLUMNS",
    "arrow_output_schema",
    "arrow_record_schema",
    "column_for",
    "entries_schema",
    "is_map",
    "message_struct",
    "output_schema",
    "payload_columns",
    "payload_struct",
    "typed_payloads",
]


def _spark(t: pa.DataType) -> StructType:
    out = from_arrow_type(t)
    assert isinstance(out, StructType)
    return out


def message_struct(descriptor: Descriptor) -> StructType:
    """What `from_protobuf(col, messageName)` gives for `descriptor` (default options).

    Args:
        descriptor: A protobuf message's descriptor.

    Returns:
        The message's Spark struct type.
    """
    return _spark(message_type(descriptor))


def payload_struct(payload_type: str) -> StructType:
    """The Spark struct of one payload type's decoded values.

    Args:
        payload_type: A payload type with a struct column ("proto.Message",
            "proto.Ack", ...: typed_payloads()'s keys).

    Returns:
        The struct type of that payload type's column.

    Raises:
        ValueError: The payload type has no struct column.
    """
    return _spark(payload_type_of(payload_type))


FIXED_COLUMNS: StructType = from_arrow_schema(pa.schema(list(FIXED_FIELDS)))


@cache
def output_schema(json_columns: bool = False) -> StructType:
    """Spark's view of the wide row: the fixed columns, then a struct column per payload type.

    Args:
        json_columns: With the JSON text columns (DecodeOptions.json_columns).

    Returns:
        The StructType of the pipeline's messages rows (cached: the same object
        each call).
    """
    return from_arrow_schema(arrow_output_schema(json_columns))


@cache
def entries_schema() -> StructType:
    """Spark's view of the entries table (lbparse.pipeline.datadir_entries).

    Returns:
        The StructType of a data directory's entries (cached).
    """
    return from_arrow_schema(arrow_entries_schema())
