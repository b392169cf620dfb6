"""The pipeline's Parquet, read whole by every common reader with nothing passed by hand.

pandas.read_parquet(DIR), pyarrow.dataset.dataset(DIR, partitioning="hive"),
DuckDB's read_parquet('DIR/**/*.parquet', hive_partitioning=true) and
Polars' scan_parquet('DIR/**/*.parquet', hive_partitioning=True) each see
every row and every column of the dataset, in the types Spark reads, with
the values Spark reads (DIR/messages and DIR/entries, over every kind of
input: broken ones, a real Liftbridge cluster's capture and data directories).
"""

from __future__ import annotations

import datetime as dt
import math
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")
pd = pytest.importorskip("pandas")

KEY = ("source", "position")  # (as conftest's `datasets` sorts its tables)


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in KEY])


def _plain(v: Any, as_float: bool = False) -> Any:
    """A value as plain Python, the same whichever reader gave it: maps as lists of
    (key, value), times as UTC microseconds, NaN (pandas' null) as None; with
    `as_float`, integers nested in structs and lists as float64 makes them."""
    if isinstance(v, dict):
        if set(v) == {"key", "value"}:  # a map's entry, as Polars and DuckDB give it
            return (_plain(v["key"], as_float), _plain(v["value"], as_float))
        return {k: _plain(x, as_float) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x, as_float) for x in v] if not (isinstance(v, tuple) and len(v) == 2
                                                         and isinstance(v[0], str)) \
            else (_plain(v[0], as_float), _plain(v[1], as_float))
    if isinstance(v, dt.datetime):
        return round(v.timestamp() * 1e6)
    if isinstance(v, float) and math.isnan(v):
        return None
    if as_float and isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return v


def _same_rows(got: pa.Table, want: pa.Table, reader: str, nested_as_float: bool = False
               ) -> None:
    assert sorted(got.column_names) == sorted(want.column_names), reader
    assert got.num_rows == want.num_rows, reader
    got = _sorted(got.select(want.column_names))
    for name in want.column_names:
        lossy = nested_as_float and pa.types.is_nested(want.schema.field(name).type)
        g = [_plain(v, lossy) for v in got.column(name).to_pylist()]
        w = [_plain(v, lossy) for v in want.column(name).to_pylist()]
        if g != w:
            i = next(i for i, (a, b) in enumerate(zip(g, w)) if a != b)
            raise AssertionError(f"{reader}: column {name} differs from Spark's at row {i} "
                                 f"({got.column('source')[i]}#{got.column('position')[i]}): "
                                 f"{g[i]!r} != {w[i]!r}")


def _arrow_type(t: T.DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(t, timezone="UTC")


def _same_arrow_type(got: pa.DataType, want: pa.DataType) -> bool:
    """Equal but for the names of list elements (Spark's `element`, Arrow's `item`)."""
    if pa.types.is_list(want):
        return pa.types.is_list(got) and _same_arrow_type(got.value_type, want.value_type)
    if pa.types.is_map(want):
        return pa.types.is_map(got) and _same_arrow_type(got.key_type, want.key_type) and \
            _same_arrow_type(got.item_type, want.item_type)
    if pa.types.is_struct(want):
        return pa.types.is_struct(got) and [f.name for f in got] == [f.name for f in want] and \
            all(_same_arrow_type(g.type, w.type) for g, w in zip(got, want))
    if pa.types.is_timestamp(want):
        return pa.types.is_timestamp(got) and got.unit == want.unit and got.tz in ("UTC",
                                                                                   "Etc/UTC")
    return got == want


def _duckdb_type(t: T.DataType) -> Any:
    S = duckdb.sqltypes
    flat: dict[type, Any] = {T.StringType: S.VARCHAR, T.LongType: S.BIGINT,
                             T.IntegerType: S.INTEGER, T.BooleanType: S.BOOLEAN,
                             T.BinaryType: S.BLOB, T.DoubleType: S.DOUBLE, T.FloatType: S.FLOAT,
                             T.TimestampType: S.TIMESTAMP_TZ}
    if isinstance(t, T.ArrayType):
        return duckdb.list_type(_duckdb_type(t.elementType))
    if isinstance(t, T.MapType):
        return duckdb.map_type(_duckdb_type(t.keyType), _duckdb_type(t.valueType))
    if isinstance(t, T.StructType):
        return duckdb.struct_type({f.name: _duckdb_type(f.dataType) for f in t.fields})
    return flat[type(t)]


def _polars_type(t: T.DataType) -> Any:
    flat: dict[type, Any] = {T.StringType: pl.String, T.LongType: pl.Int64,
                             T.IntegerType: pl.Int32, T.BooleanType: pl.Boolean,
                             T.BinaryType: pl.Binary, T.DoubleType: pl.Float64,
                             T.FloatType: pl.Float32, T.TimestampType: pl.Datetime("us", "UTC")}
    if isinstance(t, T.ArrayType):
        return pl.List(_polars_type(t.elementType))
    if isinstance(t, T.MapType):
        return pl.Map(_polars_type(t.keyType), _polars_type(t.valueType))
    if isinstance(t, T.StructType):
        return pl.Struct({f.name: _polars_type(f.dataType) for f in t.fields})
    return flat[type(t)]


DATASETS = ("messages", "entries")


@pytest.mark.parametrize("name", DATASETS)
def test_pyarrow_dataset_reads_it_whole(datasets: dict[str, Any], name: str) -> None:
    import pyarrow.dataset as ds

    d = datasets[name]
    table = ds.dataset(d["path"], partitioning="hive").to_table()
    for f in d["schema"].fields:
        got = table.schema.field(f.name).type
        assert _same_arrow_type(got, _arrow_type(f.dataType)), (f.name, got)
    _same_rows(table, d["table"], "pyarrow.dataset")


def _pandas_dtype(f: T.StructField, nullable: bool) -> str:
    if isinstance(f.dataType, (T.IntegerType, T.LongType)):
        bits = 32 if isinstance(f.dataType, T.IntegerType) else 64
        return f"Int{bits}" if nullable else f"int{bits}"
    if isinstance(f.dataType, T.BooleanType):
        return "boolean"
    if isinstance(f.dataType, T.TimestampType):
        return "datetime64[us, UTC]"
    return "object"


@pytest.mark.parametrize("name", DATASETS)
def test_pandas_reads_it_whole(datasets: dict[str, Any], name: str) -> None:
    d = datasets[name]
    want = d["table"]
    df = pd.read_parquet(d["path"])
    assert sorted(df.columns) == sorted(want.column_names)
    partition = {"messages": "msg_type_name", "entries": "stream"}[name]
    files = pq.read_schema(os.path.join(d["path"], "_common_metadata"))
    for f in d["schema"].fields:  # integers stay integers (the files' pandas metadata)
        expected = "category" if f.name == partition else \
            _pandas_dtype(f, files.field(f.name).nullable)
        assert str(df[f.name].dtype) == expected, (f.name, df[f.name].dtype)
    # Every value is Spark's (pandas makes integers nested beside a null float64, as
    # numpy has no null integer: those are compared as float64).
    table = pa.Table.from_pandas(df[want.column_names], schema=want.schema, preserve_index=False)
    _same_rows(table, want, "pandas", nested_as_float=True)
    # and exactly Spark's, types included, with pandas' Arrow dtypes
    exact = pd.read_parquet(d["path"], dtype_backend="pyarrow")
    _same_rows(pa.Table.from_pandas(exact[want.column_names], preserve_index=False)
               .cast(want.schema), want, "pandas (dtype_backend='pyarrow')")


@pytest.mark.parametrize("name", DATASETS)
def test_duckdb_reads_it_whole(datasets: dict[str, Any], name: str) -> None:
    d = datasets[name]
    rel = duckdb.sql(f"SELECT * FROM read_parquet('{d['path']}/**/*.parquet', "
                     "hive_partitioning=true)")
    types = dict(zip(rel.columns, rel.types))
    for f in d["schema"].fields:
        assert types[f.name] == _duckdb_type(f.dataType), (f.name, types[f.name])
    _same_rows(rel.to_arrow_table(), d["table"], "duckdb")


@pytest.mark.parametrize("name", DATASETS)
def test_polars_reads_it_whole(datasets: dict[str, Any], name: str) -> None:
    d = datasets[name]
    frame = pl.scan_parquet(f"{d['path']}/**/*.parquet", hive_partitioning=True).collect()
    for f in d["schema"].fields:
        assert frame.schema[f.name] == _polars_type(f.dataType), (f.name, frame.schema[f.name])
    _same_rows(frame.to_arrow(), d["table"], "polars")


def test_rows_without_a_msg_type_are_in_a_partition_every_reader_reads(
        datasets: dict[str, Any]) -> None:
    d = datasets["messages"]
    parts = {p.name for p in Path(d["path"]).iterdir() if p.is_dir()}
    assert "msg_type_name=(none)" in parts and not any("__HIVE_DEFAULT" in p for p in parts)
    names = d["table"].column("msg_type_name").to_pylist()
    assert None not in names and "(none)" in names

