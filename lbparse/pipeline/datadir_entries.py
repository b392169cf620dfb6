"""Liftbridge data directories as pipeline inputs: one row per stored entry.

A data directory (or a node's streams/, one stream, one partition, single
`.log` files) named as an input of `lbparse pipeline` is planned here into
one unit per segment file; a task reads its segment as a stream
(`lbparse.storage.iter_segment`, a part at a time) and makes Arrow batches
of the entries schema below, written to DIR/entries (plain Parquet
files like every table of the pipeline, the stream a column) beside
DIR/messages.

A row is a stored entry: where it is (source = the .log, position = its
byte position, node, stream, partition, segment), its header (offset,
timestamp in ns and as `time`, leader_epoch, size), its body (crc32c,
crc_ok, magic, attributes, key, value, headers as a map), and its value
decoded where its type is known: a struct column per known value type
(spec/segment.ksy `-data-dir`: __activity's proto.ActivityStreamEvent,
__cursors' protocol.Cursor), and `value_json` for values that are
themselves envelopes. Nothing is lost: damage the reader finds (a torn
entry, garbage, zeros, a malformed entry) is a row too, with error_kind
`segment:KIND`, its message, and the entry header where it is readable.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lbparse.codec import jsonform
from lbparse.codec.commitlog import CommitLogEntry
from lbparse.codec.payloads import message_class
from lbparse.codec.wire import MAGIC
from lbparse.columnar.columns import struct_builder
from lbparse.columnar.schema import message_type
from lbparse.columnar.units import Unit
from lbparse.storage.datadir import (
    STREAMS,
    find_partitions,
    is_data_dir,
    locate,
    looks_like_partition,
    partition_number,
    segment_name,
    unreadable_files,
)
from lbparse.storage.errors import StorageError
from lbparse.storage.segment import SegmentReading, base_offset_of, entry_json, iter_segment
from lbparse.storage.values import KNOWN_STREAMS, stored_envelope

__all__ = [
    "ENTRIES_DIR",
    "ENTRIES_PARTITION",
    "SEGMENT_FORMAT",
    "arrow_entries_schema",
    "plan_storage",
    "read_segment_unit",
    "value_columns",
]

ENTRIES_DIR = "entries"
ENTRIES_PARTITION = "stream"
SEGMENT_FORMAT = "segment"  # a Unit's format for a segment file

# Declared in Arrow (what the tasks write); Spark's view derived from it
# (lbparse.pipeline.spark_schema.entries_schema), as for the messages, so that
# reading data directories needs no Spark.
FIXED: tuple[pa.Field, ...] = (
    pa.field("source", pa.string(), False),  # the .log file
    pa.field("position", pa.int64(), False),  # byte position of the entry (or damage)
    pa.field("node", pa.string()),
    pa.field(ENTRIES_PARTITION, pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("segment", pa.int64()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.int64()),  # as stored: Unix nanoseconds
    pa.field("time", pa.timestamp("us", tz="UTC")),  # the same, as Spark's timestamp (us)
    pa.field("leader_epoch", pa.int64()),
    pa.field("size", pa.int64()),
    pa.field("crc32c", pa.int64()),
    pa.field("crc_ok", pa.bool_()),
    pa.field("magic", pa.int32()),
    pa.field("attributes", pa.int32()),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field(
        "headers",
        pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.binary(), False)),
    ),
    pa.field("format", pa.string()),  # the segment's generation
    pa.field("error_kind", pa.string()),
    pa.field("error_message", pa.string()),
    pa.field("value_type", pa.string()),  # the decoded value's type, if known
    pa.field("value_error", pa.string()),  # why a value of known type did not decode
    pa.field("value_json", pa.string()),  # a value that is an envelope, as JSON
)


def value_columns() -> dict[str, str]:
    """Known value type -> its struct column.

    `proto.ActivityStreamEvent` -> `proto_ActivityStreamEvent`.

    Returns:
        The struct column of each value type Liftbridge's own streams hold.
    """
    return {t: t.replace(".", "_") for t in dict.fromkeys(KNOWN_STREAMS.values())}


@cache
def arrow_entries_schema() -> pa.Schema:
    """The entries table: the fixed columns, then one struct column per known value type.

    Returns:
        Its Arrow schema.
    """
    fields = list(FIXED)
    for type_name, column in value_columns().items():
        descriptor: Any = message_class(type_name).DESCRIPTOR
        fields.append(pa.field(column, message_type(descriptor)))
    return pa.schema(fields)


# -- planning (driver) ---------------------------------------------------------


def plan_storage(path: str) -> list[Unit] | None:
    """One unit per segment file of a data directory.

    Args:
        path: A data directory, its streams/, a stream, a partition, or a
            .log file.

    Returns:
        The units (a file that cannot be read is a unit with its problem);
        None when `path` is none of those.
    """
    if not _looks_like_storage(path):
        return None
    try:
        parts = find_partitions([path])
    except StorageError:
        return None
    units = []
    for part in parts:
        for f in unreadable_files(part):  # never opened: a FIFO blocks its opener
            units.append(
                Unit(
                    os.path.abspath(f.path),
                    "missing",
                    0,
                    0,
                    error=("input:unreadable", f"{f.path}: {f.message}"),
                )
            )
        for seg in part.segments:
            if seg.log is None:
                continue
            log = os.path.abspath(seg.log)
            size = os.path.getsize(log)
            units.append(Unit(log, SEGMENT_FORMAT, size, size))
    return units


def _looks_like_storage(path: str) -> bool:
    """A path named as input that is Liftbridge's storage rather than captures."""
    p = Path(path)
    if p.is_file():
        return segment_name(p.name) is not None and p.name.endswith(".log")
    if not p.is_dir():
        return False
    if is_data_dir(p) or p.name == STREAMS or looks_like_partition(p):
        return True
    children = [c for c in p.iterdir() if c.is_dir()]
    return any(looks_like_partition(c) or is_data_dir(c) for c in children)


# -- reading (tasks) -----------------------------------------------------------


def _where(log: str) -> tuple[str, str, int | None, int]:
    """node, stream, partition and base offset of a segment file, from its path."""
    part_dir = Path(log).parent
    node, stream = locate(part_dir)
    return node, stream, partition_number(part_dir.name), base_offset_of(log) or 0


def read_segment_unit(unit: Unit, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of one segment file, a part at a time, in file order.

    Args:
        unit: The segment's unit (`plan_storage`).
        batch_rows: The most rows a batch holds.

    Yields:
        Entries-table RecordBatches; a file that cannot be read is one
        problem row (`segment:unreadable`).
    """
    node, stream, partition, base = _where(unit.path)
    head = {
        "source": unit.path,
        "node": node,
        ENTRIES_PARTITION: stream,
        "partition": partition,
        "segment": base,
    }
    try:
        for reading in iter_segment(unit.path):
            rows = _rows(reading, stream)
            for start in range(0, len(rows), batch_rows):
                yield _batch(head, reading, rows[start : start + batch_rows], stream)
    except (OSError, StorageError) as exc:
        yield _batch(
            head, None, [("problem", 0, "segment:unreadable", f"{unit.path}: {exc}", {})], stream
        )


Row = tuple[Any, ...]  # ("entry", position, entry) or ("problem", position, kind, message, header)


def _rows(reading: SegmentReading, stream: str) -> list[Row]:
    rows: list[Row] = [("entry", pos, e) for pos, e in reading]
    for f in reading.damage:
        pos = f.position or 0
        rows.append(
            ("problem", pos, f"segment:{f.kind}", f.line(), reading.damaged_headers.get(pos, {}))
        )
    if reading.damage:
        rows.sort(key=lambda r: r[1])
    return rows


def _batch(
    head: dict[str, Any], reading: SegmentReading | None, rows: list[Row], stream: str
) -> pa.RecordBatch:
    schema = arrow_entries_schema()
    n = len(rows)
    cols: dict[str, list[Any]] = {f.name: [None] * n for f in schema}
    for name, value in head.items():
        cols[name] = [value] * n
    fmt = reading.format if reading is not None else None
    cols["format"] = [fmt.name if fmt is not None else None] * n
    entries: list[tuple[int, CommitLogEntry]] = []
    for i, row in enumerate(rows):
        cols["position"][i] = row[1]
        if row[0] == "entry":
            entries.append((i, row[2]))
            _entry_row(cols, i, row[2], fmt)
        else:
            cols["error_kind"][i], cols["error_message"][i] = row[2], row[3]
            for k, v in row[4].items():
                if k in cols:
                    cols[k][i] = v
    _values(cols, entries, stream)
    arrays = []
    for f in schema:
        if f.name == "time":
            arrays.append(_times(cols["timestamp"], f.type))
        elif f.name in _typed_columns():
            arrays.append(
                cols[f.name] if isinstance(cols[f.name], pa.Array) else pa.nulls(n, f.type)
            )
        else:
            arrays.append(pa.array(cols[f.name], f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _entry_row(cols: dict[str, list[Any]], i: int, e: CommitLogEntry, fmt: Any) -> None:
    d = entry_json(e, fmt)
    for name in (
        "offset",
        "timestamp",
        "leader_epoch",
        "size",
        "crc32c",
        "crc_ok",
        "magic",
        "attributes",
    ):
        cols[name][i] = d[name]
    cols["key"][i] = e.key
    cols["value"][i] = e.value
    # A map keeps one value per key; Liftbridge's headers are a Go map too.
    cols["headers"][i] = list(dict(e.headers).items())


def _times(ns: list[int | None], typ: pa.DataType) -> pa.Array:
    mask = np.array([v is None for v in ns], dtype=bool)
    micros = np.array([0 if v is None else v // 1000 for v in ns], dtype=np.int64)
    return pa.array(micros, pa.int64(), mask=mask if mask.any() else None).cast(typ)


@cache
def _typed_columns() -> dict[str, str]:
    return {column: type_name for type_name, column in value_columns().items()}


def _values(cols: dict[str, Any], entries: list[tuple[int, CommitLogEntry]], stream: str) -> None:
    """Decode the values of a known type into their struct column; envelopes to JSON."""
    type_name = KNOWN_STREAMS.get(stream)
    if type_name is not None:
        _typed(cols, entries, type_name)
        return
    for i, e in entries:
        if e.value is not None and e.value[: len(MAGIC)] == MAGIC:
            _envelope(cols, i, e.value)


def _typed(cols: dict[str, Any], entries: list[tuple[int, CommitLogEntry]], type_name: str) -> None:
    cls = message_class(type_name)
    n = len(cols["position"])
    decoded: list[Any] = []
    where: list[int | None] = [None] * n
    for i, e in entries:
        if e.value is None:
            continue
        cols["value_type"][i] = type_name
        try:
            msg = cls.FromString(e.value)
        except Exception as exc:
            cols["value_error"][i] = f"not a {type_name}: {exc}"
            continue
        where[i] = len(decoded)
        decoded.append(msg)
    column = value_columns()[type_name]
    arrow_type = arrow_entries_schema().field(column).type
    built = struct_builder(cls.DESCRIPTOR, arrow_type).build(decoded)
    cols[column] = built.take(pa.array(where, pa.int64()))


def _envelope(cols: dict[str, Any], i: int, value: bytes) -> None:
    env = stored_envelope(value)
    if env is not None:
        cols["value_type"][i] = f"envelope {env.layout} {env.msg_type_name}"
        cols["value_json"][i] = jsonform.dumps(env.to_json_dict())  # 64-bit values as strings
