"""`spark.read.format("liftbridge")`: captures, recordings, payload tables and
Liftbridge data directories as a DataFrame, with Spark 4's Python data source API.

    lbparse.spark.register(spark)
    df = spark.read.format("liftbridge").load("captures/")          # the pipeline's rows
    df = spark.read.format("liftbridge").option("column", "data").load(["a.parquet", "b.pcap"])
    entries = spark.read.format("liftbridge").load("data-dir/")       # stored entries

The inputs are planned on the driver exactly as `lbparse pipeline` plans
them (lbparse.pipeline.sources.plan): one input partition per unit (a
capture file, a run of a Parquet file's row groups, a segment file), and
each partition is read and decoded by the pipeline's own pieces
(tasks.decode_unit, entries.read_segment_unit), yielding Arrow batches
in the pipeline's schema: DIR/messages' columns for captures, recordings
and tables, DIR/entries' for data directories (the two cannot be mixed
in one load: their rows differ).

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
from lbparse.spark.options import paths, task_options

__all__ = ["LiftbridgeDataSource", "UnitReader", "read_units"]

NAME = "liftbridge"


def is_storage(path: str) -> bool:
    """Whether a path is Liftbridge's storage (its rows are entries, not messages)."""
    try:
        return plan_storage(path) is not None
    except OSError:
        return False


def schema_of(inputs: Sequence[str]) -> StructType:
    """The rows' schema: the pipeline's messages, or the entries of data directories."""
    storage = [is_storage(p) for p in inputs]
    if any(storage) and not all(storage):
        both = [p for p, s in zip(inputs, storage) if s][:1] + \
            [p for p, s in zip(inputs, storage) if not s][:1]
        raise ValueError("liftbridge data source: data directories and captures have "
                         f"different rows (entries, messages): load them apart ({', '.join(both)})")
    return entries_schema() if storage and all(storage) else output_schema()


def plan_partitions(inputs: list[str], task: TaskOptions) -> list[InputPartition]:
    """One input partition per unit, as the pipeline plans them (refusing what
    `lbparse pipeline` refuses before any work)."""
    check_inputs(inputs)
    units = plan(inputs, task.source)
    check_units(units, task.source.column)
    return [InputPartition(u.to_json()) for u in units]


def read_units(units: Sequence[Unit], task: TaskOptions) -> Iterator[pa.RecordBatch]:
    """The rows of the units, as the pipeline's Arrow batches."""
    from lbparse.pipeline.entries import read_segment_unit
    from lbparse.pipeline.tasks import decode_unit, new_counts

    for unit in units:
        if unit.format == SEGMENT_FORMAT:
            batches = read_segment_unit(unit, task.source.batch_rows)
        else:
            batches = (d.to_batch() for d in decode_unit(unit, task, new_counts()))
        for batch in batches:
            if batch.num_rows:
                yield batch


class UnitReader(DataSourceReader):
    """The batch reader: the units planned on the driver, read in the tasks."""

    def __init__(self, options: dict[str, str]) -> None:
        self.inputs = paths(options)
        self.task = task_options(options)

    def partitions(self) -> Sequence[InputPartition]:
        return plan_partitions(self.inputs, self.task)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_units([Unit.from_json(partition.value)], self.task)


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
        schema = schema_of(inputs)
        if not self._streaming():
            plan_partitions(inputs, task)
        else:
            check_inputs(inputs)
        return schema

    def _streaming(self) -> bool:
        lower = {k.lower() for k in self.options}
        return bool(lower & {"maxfilespertrigger", "minfileage"})

    def reader(self, schema: StructType) -> DataSourceReader:
        return UnitReader(dict(self.options))

    def streamReader(self, schema: StructType) -> Any:
        from lbparse.spark.stream import FileStreamReader

        if schema != output_schema():
            raise ValueError("liftbridge data source: readStream reads new capture and "
                             "recording files of a directory, not data directories")
        return FileStreamReader(dict(self.options))
