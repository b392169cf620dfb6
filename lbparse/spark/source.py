"""`spark.read.format("liftbridge")`: captures, recordings, payload tables and
Liftbridge data directories as a DataFrame, with Spark 4's Python data source API.

    lbparse.spark.register(spark)
    df = spark.read.format("liftbridge").load("captures/")          # the pipeline's rows
    df = spark.read.format("liftbridge").option("column", "data").load(["a.parquet", "b.pcap"])
    entries = spark.read.format("liftbridge").load("data-dir/")       # stored entries
    msgs = spark.read.format("liftbridge").option("table", "messages").load("captures/")
    acks = spark.read.format("liftbridge").option("table", "proto_Ack").load("captures/")

The inputs are planned on the driver exactly as `lbparse pipeline` plans
them (lbparse.pipeline.input_plan.plan): one input partition per unit (a
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
from lbparse.pipeline.spark_schema import entries_schema
from lbparse.spark.file_stream import DEFAULT_MIN_FILE_AGE, FileStreamReader
from lbparse.spark.input_partitions import plan_partitions, read_units, schema_of, storage_inputs
from lbparse.spark.options import ENTRIES, paths, stream_options, table, task_options

__all__ = ["LiftbridgeDataSource", "UnitReader", "read_units"]

NAME = "liftbridge"


class UnitReader(DataSourceReader):
    """The batch reader: the units planned on the driver, read in the tasks.

    Args:
        options: The data source's options (lbparse.spark.options), which give
            the inputs (`path`, `paths`), how to decode them, and the `table`.

    Raises:
        ValueError: A bad option, no path, or inputs that mix data directories
            and captures.
    """

    def __init__(self, options: dict[str, str]) -> None:
        self.inputs = paths(options)
        self.task = task_options(options)
        # entries: the one table of data directories, read as without the option
        name = table(options, storage_inputs(self.inputs))
        self.table = None if name == ENTRIES else name

    def partitions(self) -> Sequence[InputPartition]:
        """The input partitions: one per unit, planned as `lbparse pipeline` plans them.

        Returns:
            The partitions, each holding its unit as JSON.

        Raises:
            ValueError: A missing input, a file in no known format, or a Parquet
                table without the payload column (preflight's checks).
        """
        return plan_partitions(self.inputs, self.task)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read and decode one partition's unit, in a task.

        Args:
            partition: One of partitions()'s.

        Yields:
            Arrow record batches in the rows' schema (the wide rows, the table
            named by `table`, or a data directory's entries); empty ones left out.
        """
        yield from read_units([Unit.from_json(partition.value)], self.task, self.table)


class LiftbridgeDataSource(DataSource):
    """The `liftbridge` data source: captures, recordings, tables and data directories.

    Registered by lbparse.spark.register(); then

        spark.read.format("liftbridge").option("table", "proto_Ack").load("captures/")
        spark.readStream.format("liftbridge").load("incoming/")

    reads the inputs as `lbparse pipeline` does, its rows the pipeline's:
    DIR/messages' columns for captures, recordings and Parquet tables of
    payloads, DIR/entries' for Liftbridge data directories (the two cannot be
    mixed in one load). The options are named as the command's flags
    (case-insensitive; an unknown one is refused):

    | option | flag | value |
    |---|---|---|
    | `layout` | `--layout` | v0, legacy, ..., auto (the default) |
    | `lenient` | `--lenient` | true / false (default) |
    | `verifyCrc` | `--no-verify-crc` | true (default) / false |
    | `emitDefaultValues` | `--emit-default-values` | true (default) / false |
    | `column` | `--column` | a Parquet table's payload column (default: payload) |
    | `subjectColumn` | `--subject-column` | its subject column |
    | `timestampColumn` | `--timestamp-column` | its capture-time column |
    | `batchRows` | `--batch-rows` | rows per Arrow batch |
    | `table` | | `messages` or a payload table (`proto_Message`, ...); none: the wide rows |
    | `minFileAge` | | readStream: seconds a file must stay unchanged (default 2) |
    | `maxFilesPerTrigger` | | readStream: the most files per micro-batch |

    The inputs are load()'s: local paths, `file:` URIs or globs. Bad options, a
    missing input or a wrong `column` raise ValueError when the DataFrame is
    made, before any task runs.
    """

    @classmethod
    def name(cls) -> str:
        """The format's name, "liftbridge".

        Returns:
            The name `format()` takes.
        """
        return NAME

    def schema(self) -> StructType:
        # Called by load(): bad options, a missing input or a wrong column fail there,
        # before any task runs (the inputs are planned again by the reader).
        """The rows' schema, with every check of the options and inputs.

        Spark calls it in load(), so bad options, a missing input or a wrong
        column fail there, before any task runs (the inputs are planned again by
        the reader).

        Returns:
            The pipeline's messages rows (wide, or the `table`'s), or the entries
            of data directories.

        Raises:
            ValueError: A bad or unknown option, a missing input, a file in no
                known format, a Parquet table without the payload column, or
                inputs that mix data directories and captures.
        """
        inputs = paths(self.options)
        task = task_options(dict(self.options), stream=self._streaming())
        name = table(dict(self.options), storage_inputs(inputs))
        schema = schema_of(inputs, None if name == ENTRIES else name, task.decode.json_columns)
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
        """The batch reader of spark.read.

        Args:
            schema: The schema of schema() (the options decide it).

        Returns:
            A UnitReader of this source's options.
        """
        return UnitReader(dict(self.options))

    def streamReader(self, schema: StructType) -> Any:
        """The streaming reader of spark.readStream: new files of the inputs.

        Args:
            schema: The schema of schema().

        Returns:
            A FileStreamReader (lbparse.spark.file_stream) of this source's options.

        Raises:
            InputError: The inputs are data directories: readStream reads new
                capture and recording files, not data directories.
        """
        if schema == entries_schema():
            raise InputError(
                "bad_option",
                "liftbridge data source: readStream reads new capture and "
                "recording files of a directory, not data directories",
            )
        return FileStreamReader(dict(self.options))
