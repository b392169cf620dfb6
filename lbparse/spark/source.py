"""`spark.read.format("liftbridge")`: captures, recordings, payload tables and
Liftbridge data directories as a DataFrame, with Spark 4's Python data source API.

    lbparse.spark.register(spark)
    df = spark.read.format("liftbridge").load("captures/")          # the pipeline's rows
    df = spark.read.format("liftbridge").option("column", "data").load(["a.parquet", "b.pcap"])
    entries = spark.read.format("liftbridge").load("data-dir/")       # stored entries
    msgs = spark.read.format("liftbridge").option("table", "messages").load("captures/")
    acks = spark.read.format("liftbridge").option("table", "proto_Ack").load("captures/")

The inputs are planned on the driver exactly as `lbparse pipeline` plans
them (lbparse.columnar.sources.plan): one input partition per unit (a
capture file, a run of a Parquet file's row groups, a segment file), and
each partition is read and decoded by the pipeline's own pieces
(tasks.decode_unit, entries.read_segment_unit), yielding Arrow batches
in the pipeline's schema: DIR/messages' columns for captures, recordings
and tables, DIR/entries' for data directories (the two cannot be mixed
in one load: their rows differ).

The `table` option names one of lbparse.decode_tables' narrow tables
instead of the wide rows: `messages` (one row per message, no payload
columns) or a payload table (`proto_Ack`: the Acks alone, their fields as
columns, with `source` and `position` to join them to `messages`); the
tables are lbparse.columnar.tables' (tables_of), their schema known before
any reading (table_schema). Data directories have `entries` alone.

Errors in the arguments (a missing input, a wrong `column`, an unknown
option) are raised when the DataFrame is made, before any task runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from lbparse.columnar.sources import Unit
from lbparse.errors import InputError
from lbparse.pipeline.preflight import check_inputs
from lbparse.pipeline.schema import entries_schema
from lbparse.spark.options import ENTRIES, paths, stream_options, table, task_options
from lbparse.spark.stream import DEFAULT_MIN_FILE_AGE, FileStreamReader
from lbparse.spark.units import plan_partitions, read_units, schema_of, storage_inputs

__all__ = ["LiftbridgeDataSource", "UnitReader", "read_units"]

NAME = "liftbridge"


class UnitReader(DataSourceReader):
    """The batch reader: the units planned on the driver, read in the tasks."""

    def __init__(self, options: dict[str, str]) -> None:
        self.inputs = paths(options)
        self.task = task_options(options)
        # entries: the one table of data directories, read as without the option
        name = table(options, storage_inputs(self.inputs))
        self.table = None if name == ENTRIES else name

    def partitions(self) -> Sequence[InputPartition]:
        return plan_partitions(self.inputs, self.task)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_units([Unit.from_json(partition.value)], self.task, self.table)


class LiftbridgeDataSource(DataSource):
    """`format("liftbridge")`: see the module's doc; options in lbparse.spark.options."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        # Called by load(): bad options, a missing input or a wrong column fail there,
        # before any task runs (the inputs are planned again by the reader).
        inputs = paths(self.options)
        task = task_options(dict(self.options), stream=self._streaming())
        name = table(dict(self.options), storage_inputs(inputs))
        schema = schema_of(inputs, None if name == ENTRIES else name)
        if not self._streaming():
            plan_partitions(inputs, task)
        else:
            stream_options(dict(self.options), DEFAULT_MIN_FILE_AGE)
            check_inputs(inputs)
        return schema

    def _streaming(self) -> bool:
        lower = {k.lower() for k in self.options}
        return bool(lower & {"maxfilespertrigger", "minfileage"})

    def reader(self, schema: StructType) -> DataSourceReader:
        return UnitReader(dict(self.options))

    def streamReader(self, schema: StructType) -> Any:
        if schema == entries_schema():
            raise InputError(
                "bad_option",
                "liftbridge data source: readStream reads new capture and "
                "recording files of a directory, not data directories",
            )
        return FileStreamReader(dict(self.options))
