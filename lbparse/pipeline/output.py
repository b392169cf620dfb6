"""The tables: each task writes its own Parquet files; the driver commits them.

Why the tasks write, not Spark's DataFrameWriter: handing the decoded
columns to the JVM turns them into rows and back, field by field; measured
on local[2], that alone halves the throughput before any decoding is done.

A run writes one directory per table (lbparse.columnar.tables: `messages`,
one narrow table per payload type, and `entries` for data directories),
each of plain Parquet files, `TABLE/part-*.parquet`, with no Hive
partitions: every column is in the files, and null is null. So every
reader takes a table whole with nothing passed by hand (pandas, pyarrow,
DuckDB, Polars and Spark read a directory of files of one schema), and no
reader has to guess a partition value's type or spell a null one (Spark's
`__HIVE_DEFAULT_PARTITION__` fails pandas, issue 55400; a sentinel such as
"(none)" is a lie in a data column). A file holds its table's whole schema;
tables are narrow, so few of its columns are null (the Parquet writer pays
3-7 ns per row for each null leaf).

Commit protocol (that of Hadoop's FileOutputCommitter, v1):
- a task attempt writes under RUNDIR/_temporary/RUN/ATTEMPT/TABLE/;
- it returns the list of its files as rows of its result;
- Spark hands the driver the result of exactly one successful attempt per
  task, and the driver moves those files to RUNDIR/TABLE/, then deletes
  RUNDIR/_temporary/RUN: files of failed or duplicate (speculative)
  attempts are never listed and go with it.
A table's directory holds its part files and `_SUCCESS`, nothing else
(Polars refuses a directory holding a `_common_metadata`).

Paths may be local or any URI pyarrow.fs opens (file://, hdfs://, s3://).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lbparse.columnar.pandas_meta import dataset_schema
from lbparse.extras import need
from lbparse.pipeline.outdir import STAGING_PREFIX

__all__ = [
    "TableWriter",
    "WrittenFile",
    "attempt_id",
    "commit",
    "dataset_schema",
    "discard",
    "filesystem",
    "parquet_writer",
]

# Rows of one table are gathered up to this much Arrow data before they are
# written as a row group, and a task holds at most TASK_BUFFER.
ROW_GROUP_BYTES = 64 << 20
TASK_BUFFER = 128 << 20


def filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem of a path or URI, and the path in it.

    Args:
        path: A local path, or a URI pyarrow.fs opens (file://, hdfs://,
            s3://).

    Returns:
        (filesystem, path in it): a local path made absolute, on the local
        filesystem.
    """
    if "://" in path:
        fs, inner = pafs.FileSystem.from_uri(path)
        return fs, str(inner)
    return pafs.LocalFileSystem(), os.path.abspath(path)


@dataclass(frozen=True)
class WrittenFile:
    """One Parquet file a task attempt wrote.

    Attributes:
        path: The file, relative to the attempt's directory:
            TABLE/part-....parquet.
        table: The table it belongs to.
        rows: How many rows it holds.
    """

    path: str  # relative to the attempt's directory: TABLE/part-....parquet
    table: str
    rows: int


class TableWriter:
    """One task attempt's files: per table, one file of row groups of ~64 MB.

    `write(table, n, columns)` takes `n` rows of one table as columns by
    name; a column not given is null for those rows. Every file has its
    table's whole schema.

    Args:
        fs: The filesystem written to.
        base: The attempt's directory in `fs`; a table's file goes to
            base/TABLE/part-RANDOM.parquet.
        schema_of: The schema of a table, by its name.
    """

    def __init__(
        self, fs: pafs.FileSystem, base: str, schema_of: Callable[[str], pa.Schema]
    ) -> None:
        self.fs = fs
        self.base = base
        self.schema_of = schema_of
        self.part = uuid.uuid4().hex[:12]
        self.buffers: dict[str, list[tuple[int, dict[str, pa.Array]]]] = {}
        self.buffered: dict[str, int] = {}
        self.writers: dict[str, tuple[str, pq.ParquetWriter, pa.Schema]] = {}
        self.files: list[WrittenFile] = []
        self.rows: dict[str, int] = {}

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A write that fails (a full disk) said as the output's, in one line:
        the driver's last line is the exception line of this task's
        traceback, which pyarrow words as bytes not written to some file."""
        try:
            yield
        except OSError as exc:
            code = exc.errno if isinstance(exc.errno, int) and exc.errno > 0 else None
            why = os.strerror(code) if code is not None else str(exc)
            # the staging directory of DIR is the task's detail: DIR is the output
            out = self.base.split("/" + STAGING_PREFIX, 1)[0]
            raise OSError(f"{out}: cannot write: {why}") from exc

    def write(self, table: str, n: int, columns: dict[str, pa.Array]) -> None:
        """Take `n` rows of `table`, as columns by name.

        The rows are buffered, and written as a row group once the table's
        buffer reaches ROW_GROUP_BYTES (or the task's, TASK_BUFFER).

        Args:
            table: The table's name.
            n: How many rows; 0 writes nothing.
            columns: The rows' columns by name, each `n` long; a column of the
                table's schema not given is null for those rows.

        Raises:
            OSError: A write failed (a full disk), said as the output's in one
                line: "DIR: cannot write: why".
        """
        with self._writing():
            self._write(table, n, columns)

    def _write(self, table: str, n: int, columns: dict[str, pa.Array]) -> None:
        if not n:
            return
        self.buffers.setdefault(table, []).append((n, columns))
        self.buffered[table] = self.buffered.get(table, 0) + sum(a.nbytes for a in columns.values())
        if self.buffered[table] >= ROW_GROUP_BYTES:
            self._flush(table)
        while sum(self.buffered.values()) > TASK_BUFFER:
            self._flush(max(self.buffered, key=self.buffered.__getitem__))

    def write_table(self, name: str, table: pa.Table) -> None:
        """All the rows of an Arrow table of `name` (its columns by name), as write().

        Args:
            name: The table's name.
            table: The rows; its columns are named as the table's schema's.
        """
        self.write(
            name, table.num_rows, {c: table.column(c).combine_chunks() for c in table.column_names}
        )

    def _open(self, table: str) -> tuple[str, pq.ParquetWriter, pa.Schema]:
        open_ = self.writers.get(table)
        if open_ is None:
            schema = dataset_schema(self.schema_of(table))
            rel = f"{table}/part-{self.part}.parquet"
            self.fs.create_dir(f"{self.base}/{table}", recursive=True)
            sink = self.fs.open_output_stream(f"{self.base}/{rel}")
            open_ = self.writers[table] = (rel, parquet_writer(sink, schema), schema)
            self.rows[rel] = 0
        return open_

    def _flush(self, table: str) -> None:
        parts = self.buffers.pop(table, [])
        self.buffered.pop(table, None)
        if not parts:
            return
        rel, writer, schema = self._open(table)
        total = sum(n for n, _ in parts)
        arrays: list[pa.Array | pa.ChunkedArray] = []
        for f in schema:
            pieces = [cols.get(f.name) for _, cols in parts]
            if all(p is None or p.null_count == len(p) for p in pieces):
                # A column none of these rows fill: one null array, not one per
                # part (the writer's cost is per chunk and leaf: 1.3 against 0.4 us
                # a row on the bench's mix).
                arrays.append(pa.nulls(total, f.type))
            else:
                arrays.append(
                    pa.chunked_array(
                        [
                            p if p is not None else pa.nulls(n, f.type)
                            for (n, _), p in zip(parts, pieces)
                        ],
                        f.type,
                    )
                )
        data = pa.Table.from_arrays(arrays, schema=schema)
        writer.write_table(data, row_group_size=data.num_rows)
        self.rows[rel] += data.num_rows

    def close(self) -> list[WrittenFile]:
        """Write what is buffered and close every file.

        Returns:
            Every file written by this writer, each with its table and rows.

        Raises:
            OSError: A write failed (a full disk), said as the output's in one
                line.
        """
        with self._writing():
            return self._close()

    def _close(self) -> list[WrittenFile]:
        for table in list(self.buffers):
            self._flush(table)
        for table in list(self.writers):
            rel, writer, _ = self.writers.pop(table)
            writer.close()
            self.files.append(WrittenFile(rel, table, self.rows[rel]))
        return self.files

    def abort(self) -> None:
        """Close the open files, ignoring errors (a task that failed); the files are not listed."""
        for _, writer, _ in self.writers.values():
            try:
                writer.close()
            except Exception:
                pass
        self.writers.clear()


def parquet_writer(where: Any, schema: pa.Schema) -> pq.ParquetWriter:
    """A Parquet writer of one table as every lbparse writer writes it.

    The pipeline and `capture --tables` write through it: `dataset_schema`'s
    pandas metadata, so pandas reads integers as integers, and `_options`'
    dictionaries and statistics.

    Args:
        where: A path or an output stream.
        schema: The table's schema (its pandas metadata added here).

    Returns:
        An open pyarrow ParquetWriter; the caller closes it.
    """
    full = dataset_schema(schema)
    return pq.ParquetWriter(where, full, **_options(full))


# Top-level string columns whose row-group min/max let a query skip data.
STRING_STATISTICS = ("source", "subject", "msg_type_name")


def _options(schema: pa.Schema) -> dict[str, list[str]]:
    # Dictionaries pay for names (subjects, streams, enum values), not for
    # payload bytes. Statistics serve queries on numbers and times; on the
    # strings inside payloads (keys, inboxes, correlation IDs) and on bytes
    # nobody filters by row-group range, and string min/max cost about 0.15
    # us a row to compute.
    leaves = _leaves(schema)
    return {
        "use_dictionary": [p for p, t in leaves if pa.types.is_string(t)],
        "write_statistics": [
            p
            for p, t in leaves
            if p in STRING_STATISTICS or not (pa.types.is_binary(t) or pa.types.is_string(t))
        ],
    }


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


def commit(
    fs: pafs.FileSystem, dest: str, temporary: str, files: list[tuple[str, str]]
) -> list[str]:
    """Move the attempts' files into dest/TABLE/ and mark each table written.

    Each (attempt dir, TABLE/part file) is moved to dest/TABLE/, `temporary`
    dropped, and each table given its _SUCCESS.

    Args:
        fs: The filesystem of the output.
        dest: The run's directory (the staging directory of DIR).
        temporary: RUNDIR/_temporary/RUN, under which the attempts wrote.
        files: (attempt directory, TABLE/part file) of every file of the
            successful attempts.

    Returns:
        The tables, in the order first seen.
    """
    tables: list[str] = []
    for attempt, rel in files:
        table = rel.split("/", 1)[0]
        if table not in tables:
            fs.create_dir(f"{dest}/{table}", recursive=True)
            tables.append(table)
        fs.move(f"{temporary}/{attempt}/{rel}", f"{dest}/{rel}")
    discard(fs, temporary)
    for table in tables:
        with fs.open_output_stream(f"{dest}/{table}/_SUCCESS"):
            pass
    return tables


def discard(fs: pafs.FileSystem, path: str) -> None:
    """Delete a directory tree if it is there; remove _temporary when it is left empty.

    Args:
        fs: The filesystem.
        path: The directory, in `fs`.
    """
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
    """This task attempt's directory name (stage, partition, attempt).

    Returns:
        "stageS-taskP-attemptA" in a Spark task; outside Spark (tests of the
        pieces) "local-" and a random part.
    """
    ctx = need("pyspark").TaskContext.get()  # a Spark task's; the pieces run without Spark
    if ctx is None:  # outside Spark (tests of the pieces)
        return f"local-{uuid.uuid4().hex[:8]}"
    return f"stage{ctx.stageId()}-task{ctx.partitionId()}-attempt{ctx.attemptNumber()}"
