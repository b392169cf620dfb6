"""The dataset: each task writes its own Parquet files; the driver commits them.

Why the tasks write, not Spark's DataFrameWriter: a row carries one struct
column per payload type, and all but one are null. Handed to the JVM, every
null struct still crosses as full Arrow buffers (about 600 bytes a row) and
is turned into rows and written field by field; measured on local[2], that
alone halves the throughput before any decoding is done.

Every file holds every column of the dataset's schema (all-null where its
rows have none of it), so that any reader takes the dataset whole with
nothing passed by hand: pyarrow.dataset, pandas (through pq.read_table),
DuckDB and Polars take the schema of one file and refuse or drop columns
that other files lack or add. What it costs: about 3 ns per row for each
leaf column a file's rows leave null (the Parquet writer encodes a
definition level per row and leaf), ~0.35 us a row for the 150 leaves a
Publish or Ack file leaves null (README, Speed). The dataset's schema is
also DIR/_common_metadata, which Spark reads first when it infers one.

A partition value is never null: rows without one (no MsgType: errors,
non-envelope traffic, input problems) go to `NO_VALUE`, "(none)", the
summary's name for them. Spark's own null directory,
__HIVE_DEFAULT_PARTITION__, is read as null by Spark, pyarrow, DuckDB and
Polars, but pandas.read_parquet (pyarrow's dictionary-typed partitions)
fails on it ("Cannot yet unify dictionaries with nulls", pandas issue
55400, open).

Commit protocol (that of Hadoop's FileOutputCommitter, v1):
- a task attempt writes under DIR/_temporary/RUN/ATTEMPT/msg_type_name=V/;
- it returns the list of its files as rows of its result;
- Spark hands the driver the result of exactly one successful attempt per
  task, and the driver moves those files to DIR/msg_type_name=V/, then
  deletes DIR/_temporary/RUN: files of failed or duplicate (speculative)
  attempts are never listed and go with it.
Directory names are Spark's: values escaped as Spark escapes them, and the
partition column is not in the files, so `spark.read.parquet(DIR)` reads the
dataset as Spark wrote it.

Paths may be local or any URI pyarrow.fs opens (file://, hdfs://, s3://).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from functools import lru_cache
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

__all__ = ["NO_VALUE", "PartitionedWriter", "WrittenFile", "attempt_id", "commit",
           "dataset_schema", "discard", "filesystem", "partition_dir"]

NO_VALUE = "(none)"  # the partition of rows whose value is null (see above)
# Rows of one partition value are gathered up to this much Arrow data before
# they are written as a row group, and a task holds at most TASK_BUFFER.
ROW_GROUP_BYTES = 64 << 20
TASK_BUFFER = 128 << 20
# Spark's ExternalCatalogUtils.escapePathName: these become %XX.
_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x20)}


def partition_dir(column: str, value: str | None) -> str:
    if value is None:
        value = NO_VALUE
    return column + "=" + "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in value)


def filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem of a path or URI, and the path in it (local paths made absolute)."""
    if "://" in path:
        fs, inner = pafs.FileSystem.from_uri(path)
        return fs, str(inner)
    return pafs.LocalFileSystem(), os.path.abspath(path)


@dataclass(frozen=True)
class WrittenFile:
    path: str  # relative to the attempt's directory: msg_type_name=V/part-....parquet
    partition: str | None
    rows: int


class PartitionedWriter:
    """One task attempt's files: per partition value, row groups of ~64 MB.

    `write(value, n, columns)` takes the rows of one partition value as
    columns by name; a column not given is null for those rows. Every file
    has the whole schema (see above); a partition value has one file per
    task attempt.
    """

    def __init__(self, fs: pafs.FileSystem, base: str, schema: pa.Schema, column: str) -> None:
        self.fs = fs
        self.base = base
        self.column = column
        self.schema = dataset_schema(schema, column)
        self.options = _options(self.schema)
        self.part = uuid.uuid4().hex[:12]
        self.buffers: dict[str | None, list[tuple[int, dict[str, pa.Array]]]] = {}
        self.buffered: dict[str | None, int] = {}
        self.writers: dict[str | None, tuple[str, pq.ParquetWriter]] = {}
        self.files: list[WrittenFile] = []
        self.rows: dict[str, int] = {}
        self.count = 0

    def write(self, value: str | None, n: int, columns: dict[str, pa.Array]) -> None:
        if not n:
            return
        self.buffers.setdefault(value, []).append((n, columns))
        self.buffered[value] = self.buffered.get(value, 0) + sum(a.nbytes for a in columns.values())
        if self.buffered[value] >= ROW_GROUP_BYTES:
            self._flush(value)
        while sum(self.buffered.values()) > TASK_BUFFER:
            self._flush(max(self.buffered, key=self.buffered.__getitem__))

    def _flush(self, value: str | None) -> None:
        parts = self.buffers.pop(value, [])
        self.buffered.pop(value, None)
        if not parts:
            return
        schema = self.schema
        open_ = self.writers.get(value)
        if open_ is None:
            d = partition_dir(self.column, value)
            rel = f"{d}/part-{self.part}-{self.count}.parquet"
            self.count += 1
            self.fs.create_dir(f"{self.base}/{d}", recursive=True)
            sink = self.fs.open_output_stream(f"{self.base}/{rel}")
            open_ = self.writers[value] = (rel, pq.ParquetWriter(sink, schema, **self.options))
            self.rows[rel] = 0
        rel, writer = open_
        total = sum(n for n, _ in parts)
        arrays: list[pa.Array | pa.ChunkedArray] = []
        for f in schema:
            pieces = [cols.get(f.name) for _, cols in parts]
            if all(p is None for p in pieces):
                # A column none of these rows fill: one null array, not one per
                # part (the writer's cost is per chunk and leaf: 1.3 against 0.4 us
                # a row on the bench's mix).
                arrays.append(pa.nulls(total, f.type))
            else:
                arrays.append(pa.chunked_array(
                    [p if p is not None else pa.nulls(n, f.type)
                     for (n, _), p in zip(parts, pieces)], f.type))
        table = pa.Table.from_arrays(arrays, schema=schema)
        writer.write_table(table, row_group_size=table.num_rows)
        self.rows[rel] += table.num_rows

    def _close(self, value: str | None) -> None:
        rel, writer = self.writers.pop(value)
        writer.close()
        self.files.append(WrittenFile(rel, value, self.rows[rel]))

    def close(self) -> list[WrittenFile]:
        for value in list(self.buffers):
            self._flush(value)
        for value in list(self.writers):
            self._close(value)
        return self.files

    def abort(self) -> None:
        for _, writer in self.writers.values():
            try:
                writer.close()
            except Exception:  # noqa: BLE001  the files are discarded anyway
                pass
        self.writers.clear()


def dataset_schema(schema: pa.Schema, column: str) -> pa.Schema:
    """The files' full schema: the output schema without the partition column, and
    what pandas needs to read integers as integers (`pandas_metadata`)."""
    out = pa.schema([f for f in schema if f.name != column])
    return out.with_metadata({**(out.metadata or {}), b"pandas": pandas_metadata(out)})


@lru_cache(maxsize=8)
def pandas_metadata(schema: pa.Schema) -> bytes:
    """The `pandas` schema metadata (Arrow's pandas_compat format): nullable integer
    and boolean columns as pandas' Int32, Int64 and boolean dtypes.

    Without it pandas.read_parquet turns an integer column with a null into
    float64 (version, msg_type, crc32c...); with it the columns keep Spark's
    int and bigint. Nested values are pandas' business (dicts and arrays;
    `dtype_backend="pyarrow"` keeps them as Arrow, exactly).
    """
    import json

    from pyarrow.pandas_compat import get_logical_type

    columns = []
    for f in schema:
        numpy_type, extra = "object", None
        if pa.types.is_integer(f.type):
            numpy_type = f"Int{f.type.bit_width}" if f.nullable else str(f.type)
        elif pa.types.is_boolean(f.type):
            numpy_type = "boolean" if f.nullable else "bool"
        elif pa.types.is_timestamp(f.type):
            numpy_type = f"datetime64[{f.type.unit}]"
            extra = {"timezone": f.type.tz} if f.type.tz else None
        columns.append({"name": f.name, "field_name": f.name,
                        "pandas_type": get_logical_type(f.type), "numpy_type": numpy_type,
                        "metadata": extra})
    return json.dumps({"index_columns": [], "column_indexes": [], "columns": columns,
                       "attributes": {}, "creator": {"library": "lbparse"}}).encode()


# Top-level string columns whose row-group min/max let a query skip data.
STRING_STATISTICS = ("source", "subject")


def _options(schema: pa.Schema) -> dict[str, list[str]]:
    # Dictionaries pay for names (subjects, streams, enum values), not for
    # payload bytes. Statistics serve queries on numbers and times; on the
    # strings inside payloads (keys, inboxes, correlation IDs) and on bytes
    # nobody filters by row-group range, and string min/max cost about 0.15
    # us a row to compute.
    leaves = _leaves(schema)
    return {"use_dictionary": [p for p, t in leaves if pa.types.is_string(t)],
            "write_statistics": [p for p, t in leaves if p in STRING_STATISTICS or not (
                pa.types.is_binary(t) or pa.types.is_string(t))]}


def _leaves(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """Every leaf column as Parquet names its path (lists and maps as pyarrow writes them)."""
    out: list[tuple[str, pa.DataType]] = []

    def walk(path: list[str], t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for f in t:
                walk(path + [f.name], f.type)
        elif pa.types.is_map(t):
            walk(path + ["key_value", "key"], t.key_type)
            walk(path + ["key_value", "value"], t.item_type)
        elif pa.types.is_list(t):
            walk(path + ["list", "element"], t.value_type)
        else:
            out.append((".".join(path), t))

    for f in schema:
        walk([f.name], f.type)
    return out


def commit(fs: pafs.FileSystem, dest: str, temporary: str, files: list[tuple[str, str]],
           schema: pa.Schema) -> None:
    """Move each (attempt dir, relative path) under `dest`, drop `temporary`, write the
    dataset's schema (_common_metadata) and mark success."""
    made: set[str] = set()
    for attempt, rel in files:
        parent = f"{dest}/{rel.rsplit('/', 1)[0]}"
        if parent not in made:
            fs.create_dir(parent, recursive=True)
            made.add(parent)
        fs.move(f"{temporary}/{attempt}/{rel}", f"{dest}/{rel}")
    discard(fs, temporary)
    pq.write_metadata(schema, f"{dest}/_common_metadata", filesystem=fs)
    with fs.open_output_stream(f"{dest}/_SUCCESS"):
        pass


def discard(fs: pafs.FileSystem, path: str) -> None:
    """Delete a directory tree if it is there; remove _temporary when it is left empty."""
    try:
        fs.delete_dir(path)
    except FileNotFoundError:
        pass
    parent = path.rsplit("/", 1)[0]
    if parent.endswith("/_temporary"):
        try:
            if not fs.get_file_info(pafs.FileSelector(parent)):
                fs.delete_dir(parent)
        except (FileNotFoundError, OSError):
            pass


def attempt_id() -> str:
    """This task attempt's directory name (stage, partition, attempt)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:  # outside Spark (tests of the pieces)
        return f"local-{uuid.uuid4().hex[:8]}"
    return f"stage{ctx.stageId()}-task{ctx.partitionId()}-attempt{ctx.attemptNumber()}"
