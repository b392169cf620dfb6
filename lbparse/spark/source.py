"""`spark.read.format("liftbridge")`: captures, recordings, payload tables and
Liftbridge data directories as a DataFrame, with Spark 4's Python data source API.

    lbparse.spark.register(spark)
    df = spark.read.format("liftbridge").load("captures/")          # the pipeline's rows
    df = spark.read.format("liftbridge").option("column", "data").load(["a.parquet", "b.pcap"])
    entries = spark.read.format("liftbridge").load("data-dir/")       # stored entries
    msgs = spark.read.format("liftbridge").option("table", "messages").load("captures/")
    acks = spark.read.format("liftbridge").option("table", "proto_Ack").load("captures/")

The inputs are planned on the driver exactly as `lbparse pipeline` plans
them (lbparse.pipeline.sources.plan): one input partition per unit (a
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

from typing import Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from lbparse.pipeline.entries import SEGMENT_FORMAT, entries_schema, plan_storage
from lbparse.pipeline.preflight import check_inputs, check_units
from lbparse.pipeline.schema import output_schema
from lbparse.pipeline.sources import Unit, plan
from lbparse.pipeline.tasks import TaskOptions
from lbparse.spark.options import ENTRIES, paths, stream_options, table, task_options

__all__ = ["LiftbridgeDataSource", "UnitReader", "read_units"]

NAME = "liftbridge"


def is_storage(path: str) -> bool:
    """Whether a path is Liftbridge's storage (its rows are entries, not messages)."""
    try:
        return plan_storage(path) is not None
    except OSError:
        return False


def storage_inputs(inputs: Sequence[str]) -> bool:
    """Whether the inputs are data directories (entries) rather than captures (messages)."""
    storage = [is_storage(p) for p in inputs]
    if any(storage) and not all(storage):
        both = [p for p, s in zip(inputs, storage) if s][:1] + \
            [p for p, s in zip(inputs, storage) if not s][:1]
        raise ValueError("liftbridge data source: data directories and captures have "
                         f"different rows (entries, messages): load them apart ({', '.join(both)})")
    return bool(storage) and all(storage)


def schema_of(inputs: Sequence[str], name: str | None = None) -> StructType:
    """The rows' schema: the pipeline's messages (wide, or table `name`), or the
    entries of data directories."""
    if storage_inputs(inputs):
        return entries_schema()
    return output_schema() if name is None else table_struct(name)


def table_struct(name: str) -> StructType:
    """A narrow table's schema, as Spark's: its Arrow schema converted."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from lbparse.columnar.tables import table_schema

    return from_arrow_schema(table_schema(name))


def plan_partitions(inputs: list[str], task: TaskOptions) -> list[InputPartition]:
    """One input partition per unit, as the pipeline plans them (refusing what
    `lbparse pipeline` refuses before any work)."""
    check_inputs(inputs)
    units = plan(inputs, task.source)
    check_units(units, task.source.column)
    return [InputPartition(u.to_json()) for u in units]


def read_units(units: Sequence[Unit], task: TaskOptions, name: str | None = None
               ) -> Iterator[pa.RecordBatch]:
    """The rows of the units, as the pipeline's Arrow batches (the wide rows,
    or those of table `name`)."""
    from lbparse.pipeline.entries import read_segment_unit
    from lbparse.pipeline.tasks import decode_unit, new_counts

    for unit in units:
        if unit.format == SEGMENT_FORMAT:
            batches = read_segment_unit(unit, task.source.batch_rows)
        elif name is None:
            batches = (d.to_batch() for d in decode_unit(unit, task, new_counts()))
        else:
            batches = _table_batches(decode_unit(unit, task, new_counts()), name)
        for batch in batches:
            if batch.num_rows:
                yield batch


def _table_batches(decoded: Iterator[Any], name: str) -> Iterator[pa.RecordBatch]:
    """Table `name` of each decoded batch (lbparse.columnar.tables.tables_of)."""
    from lbparse.columnar.tables import tables_of

    for d in decoded:
        found = tables_of(d).get(name)
        if found is not None:
            yield from found.to_batches()


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
            from lbparse.spark.stream import DEFAULT_MIN_FILE_AGE

            stream_options(dict(self.options), DEFAULT_MIN_FILE_AGE)
            check_inputs(inputs)
        return schema

    def _streaming(self) -> bool:
        lower = {k.lower() for k in self.options}
        return bool(lower & {"maxfilespertrigger", "minfileage"})

    def reader(self, schema: StructType) -> DataSourceReader:
        return UnitReader(dict(self.options))

    def streamReader(self, schema: StructType) -> Any:
        from lbparse.spark.stream import FileStreamReader

        if schema == entries_schema():
            raise ValueError("liftbridge data source: readStream reads new capture and "
                             "recording files of a directory, not data directories")
        return FileStreamReader(dict(self.options))
