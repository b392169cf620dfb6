"""`from_envelope(col)`: any binary column of NATS payloads decoded, as a struct column.

    from lbparse.spark import from_envelope
    df.select(from_envelope("value").alias("env")).select("env.msg_type_name",
                                                          "env.proto_Message.stream")

used as Spark's own `from_protobuf(col, messageName)` is: on any DataFrame
(Kafka's `value`, a table's payload column, NATS messages...), no Parquet
written first. The struct holds what `lbparse.decode` answers for each
payload, in the pipeline's columns: the header fields (layout, version,
header_len, flags, crc32c, crc_ok, msg_type, msg_type_name, payload_type),
the error (error_kind, error_message), warnings, the payload, and the
decoded payload as typed structs, one per payload type (proto_Message,
proto_Ack, ..., commitlog_ReplicationResponse) or payload_json. A null
payload gives error_kind "input:null_payload".

It is an Arrow UDF (pyspark.sql.functions.arrow_udf): each Arrow batch of
the column is decoded at once by the pipeline's batch decoder, the numpy
and C paths included, and the struct column goes back as Arrow.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.functions import arrow_udf  # type: ignore[attr-defined]
from pyspark.sql.types import StructType

from lbparse.columnar.api import payload_records
from lbparse.columnar.decode_arrow import DecodeOptions, decoder_for
from lbparse.pipeline.spark_schema import CAPTURE_COLUMNS, output_schema

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["CAPTURE_COLUMNS", "envelope_schema", "decode_payloads", "from_envelope"]

# The pipeline's columns about where a message came from (the capture, the
# connection), which a bare payload has not; and Liftbridge's own traffic,
# which needs the connection's stream to be read.


@cache
def envelope_schema() -> StructType:
    """The struct type from_envelope makes: the pipeline's columns about the envelope.

    Returns:
        A Spark StructType: the columns of `lbparse pipeline`'s messages rows
        less those about where a message came from (the capture, the
        connection: CAPTURE_COLUMNS), which a bare payload has not. Cached: the
        same object each call.
    """
    return StructType([f for f in output_schema().fields if f.name not in CAPTURE_COLUMNS])


def decode_payloads(payloads: pa.Array, options: DecodeOptions) -> pa.StructArray:
    """Decode a binary Arrow array into envelope_schema()'s struct array, row for row.

    This is what from_envelope's Arrow UDF runs on each batch; it can be called
    on an Arrow array directly, without Spark.

    Args:
        payloads: A binary (or large binary) Arrow array of NATS payloads; a
            null payload gives error_kind "input:null_payload".
        options: How to decode (layout, CRC check, leniency, protobuf defaults).

    Returns:
        A struct array as long as `payloads`, its fields envelope_schema()'s.
    """
    out = decoder_for(options)(payload_records(payloads))
    names = [f.name for f in envelope_schema().fields]
    return pa.StructArray.from_arrays(
        [out.column(name) for name in names], fields=[out.schema.field(name) for name in names]
    )


def from_envelope(
    col: Column | str,
    layout: str = "auto",
    *,
    verify_crc: bool = True,
    lenient: bool = False,
    emit_default_values: bool = True,
) -> Column:
    """The envelope struct of each payload of a binary column, as a struct column.

    Used as Spark's own `from_protobuf(col, messageName)` is, on any DataFrame
    (see the module's doc):

        df.select(from_envelope("value").alias("env")).select("env.msg_type_name")

    Args:
        col: The binary column of NATS payloads, a Column or a column's name.
        layout: The header layout, as `lbparse.decode`'s: "v0", "legacy", ...,
            or "auto" (the default: each payload's own).
        verify_crc: As `lbparse.decode`'s: check each envelope's CRC-32C when it
            has one (False: not checked).
        lenient: As `lbparse.decode`'s: accept what Liftbridge itself accepts,
            with a warning, rather than refuse it.
        emit_default_values: Protobuf zeros as values (the default), or, False,
            null as from_protobuf gives them without its emit.default.values.

    Returns:
        A struct column of envelope_schema()'s type, one struct per row: the
        header fields (layout, version, ..., msg_type_name, payload_type), the
        error (error_kind, error_message; a payload that is not an envelope is
        a row with its error, not a failed query), warnings, the payload, and
        the decoded payload as typed structs, one per payload type
        (proto_Message, proto_Ack, ...) or payload_json.

    Raises:
        ValueError: Bad options (an unknown layout, say), here on the driver,
            before any task runs.
    """
    options = DecodeOptions(
        layout=layout, verify_crc=verify_crc, lenient=lenient, emit_defaults=emit_default_values
    )
    options.check()

    def decode(payloads: pa.Array) -> pa.Array:  # the hints make it an Arrow UDF
        return decode_payloads(payloads, options)

    column: Column = arrow_udf(decode, envelope_schema())(col)
    return column
