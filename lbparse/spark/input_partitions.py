"""The data source's units, batch and streaming alike: the inputs planned on
the driver as `lbparse pipeline` plans them (one input partition per unit),
their schema, and each unit read in its task (source.py's UnitReader,
file_stream.py's FileStreamReader)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from lbparse.capture import Notice
from lbparse.capture.formats import PCAP, PCAPNG
from lbparse.columnar.grpctables import Held, grpc_tables, notice_rows, read_grpc
from lbparse.columnar.sources import Unit
from lbparse.columnar.tables import GRPC_TABLES, MESSAGES, table_schema, tables_of
from lbparse.errors import InputError
from lbparse.pipeline.datadir_entries import SEGMENT_FORMAT, plan_storage, read_segment_unit
from lbparse.pipeline.input_plan import plan
from lbparse.pipeline.preflight import check_inputs, check_units
from lbparse.pipeline.spark_schema import entries_schema, output_schema
from lbparse.pipeline.tasks import TaskOptions, decode_unit, new_counts

__all__ = [
    "is_storage",
    "plan_partitions",
    "read_units",
    "schema_of",
    "storage_inputs",
    "table_struct",
]


def is_storage(path: str) -> bool:
    """Whether a path is Liftbridge's storage (its rows are entries, not messages).

    Args:
        path: A data directory (or its streams/, a stream, a partition, a .log
            file), or any other input.

    Returns:
        True for Liftbridge storage; False otherwise, or when it cannot be
        read.
    """
    try:
        return plan_storage(path) is not None
    except OSError:
        return False


def storage_inputs(inputs: Sequence[str]) -> bool:
    """Whether the inputs are data directories (entries) rather than captures (messages).

    Args:
        inputs: The input paths.

    Returns:
        True when every input is Liftbridge storage; False when none is (or
        there are no inputs).

    Raises:
        InputError: Some inputs are storage and some are not: their rows
            differ, so they are loaded apart.
    """
    storage = [is_storage(p) for p in inputs]
    if any(storage) and not all(storage):
        both = [p for p, s in zip(inputs, storage) if s][:1] + [
            p for p, s in zip(inputs, storage) if not s
        ][:1]
        raise InputError(
            "bad_option",
            "liftbridge data source: data directories and captures have "
            f"different rows (entries, messages): load them apart ({', '.join(both)})",
        )
    return bool(storage) and all(storage)


def schema_of(
    inputs: Sequence[str], name: str | None = None, json_columns: bool = False
) -> StructType:
    """The rows' schema for these inputs.

    The pipeline's messages (wide, or table `name`), or the entries of data
    directories.

    Args:
        inputs: The input paths.
        name: A narrow table of lbparse.columnar.tables; None: the wide rows.
        json_columns: With the JSON text columns (the `jsonColumns` option).

    Returns:
        The Spark schema of the rows read.

    Raises:
        ValueError: Inputs that mix data directories and captures.
    """
    if storage_inputs(inputs):
        return entries_schema()
    return output_schema(json_columns) if name is None else table_struct(name, json_columns)


def table_struct(name: str, json_columns: bool = False) -> StructType:
    """A narrow table's schema, as Spark's: its Arrow schema converted.

    Args:
        name: The table (`messages`, `proto_Ack`, ...: lbparse.columnar.tables).
        json_columns: With the JSON text columns (DecodeOptions.json_columns).

    Returns:
        The table's Spark StructType.
    """
    return from_arrow_schema(table_schema(name, json_columns=json_columns))


def plan_partitions(inputs: list[str], task: TaskOptions) -> list[InputPartition]:
    """One input partition per unit, as the pipeline plans them.

    What `lbparse pipeline` refuses before any work is refused here too.

    Args:
        inputs: The input paths.
        task: The options the units are read with (the payload column).

    Returns:
        The partitions, each holding its unit as JSON.

    Raises:
        ValueError: A missing input, a file in no known format, or a Parquet
            table without the payload column.
    """
    check_inputs(inputs)
    units = plan(inputs, task.source)
    check_units(units, task.source.column)
    return [InputPartition(u.to_json()) for u in units]


def read_units(
    units: Sequence[Unit], task: TaskOptions, name: str | None = None
) -> Iterator[pa.RecordBatch]:
    """The rows of the units, as the pipeline's Arrow batches.

    Args:
        units: The units to read, in order.
        task: How to decode them.
        name: A narrow table to give (lbparse.columnar.tables); None: the wide
            rows. Segment units always give their entries.

    Yields:
        Record batches of the wide rows, or of table `name`; empty ones left
        out.
    """
    for unit in units:
        if unit.format == SEGMENT_FORMAT:
            batches = read_segment_unit(unit, task.source.batch_rows)
        elif name in GRPC_TABLES:
            batches = _grpc_batches(unit, name, task)
        else:
            batches = _table_batches(unit, task, name)
        for batch in batches:
            if batch.num_rows:
                yield batch


def _grpc_batches(unit: Unit, name: str, task: TaskOptions) -> Iterator[pa.RecordBatch]:
    """gRPC table `name` of a capture (lbparse.columnar.grpctables), read whole
    by the task of its first unit: HPACK's state runs from a connection's
    start, so a range of a capture cannot be read alone. Asked for, it is
    read: no NATS reading decides whether the file holds HTTP/2."""
    if unit.format not in (PCAP, PCAPNG) or unit.index != 0 or unit.error is not None:
        return
    for found in grpc_tables(unit.path, batch_rows=task.source.batch_rows):
        yield from found[name].to_batches()


def _table_batches(unit: Unit, task: TaskOptions, name: str | None) -> Iterator[pa.RecordBatch]:
    """Table `name` of each decoded batch of `unit` (lbparse.columnar.tables.tables_of),
    or the wide rows (`name` None); `messages` and the wide rows as the
    pipeline writes them: without the rows of HTTP/2 connections, with what
    the gRPC reading lost as problem rows after the unit's own (a whole
    capture `unit` is read again for them: Held, as lbparse.pipeline.tasks)."""
    counts = new_counts()
    held = Held()
    schema = None
    for d in decode_unit(unit, task, counts):
        if name is None:
            schema = d.schema
            found: pa.Table | None = pa.Table.from_batches([d.to_batch()])
        else:
            found = tables_of(d).get(name)
        if found is not None:
            yield from (held.take(found) if name in (None, MESSAGES) else found).to_batches()
    if not held.rows:  # only `messages` and the wide rows hold any
        return
    connections: set[tuple[str, str]] = set()
    notices: list[Notice] = []
    if unit.start == 0 and unit.stop < 0:  # a range cannot be: HPACK runs from the start
        connections = read_grpc(
            unit.path,
            None,
            on_notice=notices.append,
            connections=held.connections(unit.path),
        )
    yield from notice_rows(unit.path, unit.first_row + counts["rows"], notices, schema).to_batches()
    problems, _ = held.release(connections)
    yield from problems.to_batches()
