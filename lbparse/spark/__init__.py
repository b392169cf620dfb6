"""lbparse on Spark: a data source and a column function.

    import lbparse.spark
    lbparse.spark.register(spark)

    spark.read.format("liftbridge").load("captures/")            # captures, recordings, tables
    spark.read.format("liftbridge").load("data-dir/")            # Liftbridge data directories
    spark.read.format("liftbridge").option("table", "proto_Ack").load("captures/")  # one table
    spark.readStream.format("liftbridge").load("incoming/")      # new files as they appear
    df.select(lbparse.spark.from_envelope("value"))              # any binary column
    spark.read.format("liftbridge-streams").option("servers", "127.0.0.1:9292") \
        .option("stream", "orders").load()                       # live streams, by offset

The data source (source.py, file_stream.py) plans and reads its inputs with
the pipeline's pieces, so its rows are `lbparse pipeline`'s; options are
named as the command's flags (options.py). `from_envelope` (functions.py)
decodes a column as `from_protobuf` does, through an Arrow UDF. The streams
source (streams_source.py) reads through Liftbridge's gRPC API and needs the
extra `streams` (grpcio): register() leaves it out where that is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lbparse.extras import MissingExtra, need
from lbparse.spark.functions import envelope_schema, from_envelope
from lbparse.spark.source import NAME, LiftbridgeDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["NAME", "LiftbridgeDataSource", "envelope_schema", "from_envelope", "register"]


def register(spark: SparkSession) -> None:
    """Make the lbparse data sources known to a Spark session.

    `format("liftbridge")` (spark.read and spark.readStream) is registered
    always, and `format("liftbridge-streams")` where the extra `streams`
    (grpcio) is installed; without it that format stays unknown to the
    session, and the file source works alone.

    Args:
        spark: The session to register the data sources with (Spark 4's Python
            data source API: `spark.dataSource.register`).
    """
    spark.dataSource.register(LiftbridgeDataSource)
    try:
        streams = need("lbparse.spark.streams_source")
    except MissingExtra:
        return  # the file source alone: format("liftbridge-streams") stays unknown
    spark.dataSource.register(streams.LiftbridgeStreamsDataSource)
