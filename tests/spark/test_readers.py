"""The pipeline's tables, each read whole by every common reader with nothing passed by hand.

spark.read.parquet(DIR/TABLE), pandas.read_parquet(DIR/TABLE),
pyarrow.dataset.dataset(DIR/TABLE), DuckDB's read_parquet('DIR/TABLE/*.parquet')
and Polars' read_parquet(DIR/TABLE) and scan_parquet(DIR/TABLE) each see every
row and every column of every table (messages, entries, each payload
table), in the types Spark reads, with the values Spark reads, nulls as
nulls, over every kind of input: broken ones, a real Liftbridge cluster's
capture and data directories. A row without a MsgType has msg_type_name
null in all of them, never a sentinel string.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T
from support.readers import reader

duckdb = reader("duckdb")
pl = reader("polars")
pd = reader("pandas")

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
        return (
            [_plain(x, as_float) for x in v]
            if not (isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str))
            else (_plain(v[0], as_float), _plain(v[1], as_float))
        )
    if isinstance(v, dt.datetime):
        return round(v.timestamp() * 1e6)
    if isinstance(v, float) and math.isnan(v):
        return None
    if as_float and isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return v


def _same_rows(got: pa.Table, want: pa.Table, reader: str, nested_as_float: bool = False) -> None:
    assert sorted(got.column_names) == sorted(want.column_names), reader
    assert got.num_rows == want.num_rows, reader
    got = _sorted(got.select(want.column_names))
    for name in want.column_names:
        lossy = nested_as_float and pa.types.is_nested(want.schema.field(name).type)
        g = [_plain(v, lossy) for v in got.column(name).to_pylist()]
        w = [_plain(v, lossy) for v in want.column(name).to_pylist()]
        if g != w:
            i = next(i for i, (a, b) in enumerate(zip(g, w)) if a != b)
            raise AssertionError(
                f"{reader}: column {name} differs from Spark's at row {i} "
                f"({got.column('source')[i]}#{got.column('position')[i]}): "
                f"{g[i]!r} != {w[i]!r}"
            )


def _arrow_type(t: T.DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(t, timezone="UTC")


def _same_arrow_type(got: pa.DataType, want: pa.DataType) -> bool:
    """Equal but for the names of list elements (Spark's `element`, Arrow's `item`)."""
    if pa.types.is_list(want):
        return pa.types.is_list(got) and _same_arrow_type(got.value_type, want.value_type)
    if pa.types.is_map(want):
        return (
            pa.types.is_map(got)
            and _same_arrow_type(got.key_type, want.key_type)
            and _same_arrow_type(got.item_type, want.item_type)
        )
    if pa.types.is_struct(want):
        return (
            pa.types.is_struct(got)
            and [f.name for f in got] == [f.name for f in want]
            and all(_same_arrow_type(g.type, w.type) for g, w in zip(got, want))
        )
    if pa.types.is_timestamp(want):
        return pa.types.is_timestamp(got) and got.unit == want.unit and got.tz in ("UTC", "Etc/UTC")
    return got == want


def _duckdb_type(t: T.DataType) -> Any:
    S = duckdb.sqltypes
    flat: dict[type, Any] = {
        T.StringType: S.VARCHAR,
        T.LongType: S.BIGINT,
        T.IntegerType: S.INTEGER,
        T.BooleanType: S.BOOLEAN,
        T.BinaryType: S.BLOB,
        T.DoubleType: S.DOUBLE,
        T.FloatType: S.FLOAT,
        T.TimestampType: S.TIMESTAMP_TZ,
    }
    if isinstance(t, T.ArrayType):
        return duckdb.list_type(_duckdb_type(t.elementType))
    if isinstance(t, T.MapType):
        return duckdb.map_type(_duckdb_type(t.keyType), _duckdb_type(t.valueType))
    if isinstance(t, T.StructType):
        return duckdb.struct_type({f.name: _duckdb_type(f.dataType) for f in t.fields})
    return flat[type(t)]


def _polars_type(t: T.DataType) -> Any:
    flat: dict[type, Any] = {
        T.StringType: pl.String,
        T.LongType: pl.Int64,
        T.IntegerType: pl.Int32,
        T.BooleanType: pl.Boolean,
        T.BinaryType: pl.Binary,
        T.DoubleType: pl.Float64,
        T.FloatType: pl.Float32,
        T.TimestampType: pl.Datetime("us", "UTC"),
    }
    if isinstance(t, T.ArrayType):
        return pl.List(_polars_type(t.elementType))
    if isinstance(t, T.MapType):
        return pl.Map(_polars_type(t.keyType), _polars_type(t.valueType))
    if isinstance(t, T.StructType):
        return pl.Struct({f.name: _polars_type(f.dataType) for f in t.fields})
    return flat[type(t)]


def _tables(datasets: dict[str, Any]) -> list[str]:
    """Every table the run wrote: messages, entries and the payload tables present."""
    names = datasets["tables"]
    assert {
        "messages",
        "entries",
        "proto_Message",
        "proto_Ack",
        "commitlog_ReplicationResponse",
        "protocol_PropagatedRequest",
    } <= set(names)
    return list(names)


def test_spark_reads_every_table_whole(spark: Any, datasets: dict[str, Any]) -> None:
    """Spark is the reference of the other readers: here it is held to the files."""
    for name in _tables(datasets):
        d = datasets[name]
        files = list(Path(d["path"]).glob("*.parquet"))
        assert d["table"].num_rows == sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        assert d["schema"].names == pq.read_schema(files[0]).names, name
        for f in d["schema"].fields:  # Spark's types are the files' (as Spark reads Arrow)
            want = pq.read_schema(files[0]).field(f.name).type
            assert _same_arrow_type(_arrow_type(f.dataType), want), (name, f.name)


def test_pyarrow_dataset_reads_every_table_whole(datasets: dict[str, Any]) -> None:
    import pyarrow.dataset as ds

    for name in _tables(datasets):
        d = datasets[name]
        table = ds.dataset(d["path"]).to_table()
        for f in d["schema"].fields:
            got = table.schema.field(f.name).type
            assert _same_arrow_type(got, _arrow_type(f.dataType)), (name, f.name, got)
        _same_rows(table, d["table"], f"pyarrow.dataset {name}")


def _pandas_dtype(f: T.StructField, nullable: bool) -> str:
    if isinstance(f.dataType, (T.IntegerType, T.LongType)):
        bits = 32 if isinstance(f.dataType, T.IntegerType) else 64
        return f"Int{bits}" if nullable else f"int{bits}"
    if isinstance(f.dataType, T.BooleanType):
        return "boolean"
    if isinstance(f.dataType, T.TimestampType):
        return "datetime64[us, UTC]"
    if isinstance(f.dataType, (T.FloatType, T.DoubleType)):
        return "float32" if isinstance(f.dataType, T.FloatType) else "float64"
    return "object"


def test_pandas_reads_every_table_whole(datasets: dict[str, Any]) -> None:
    for name in _tables(datasets):
        d = datasets[name]
        want = d["table"]
        df = pd.read_parquet(d["path"])
        assert sorted(df.columns) == sorted(want.column_names), name
        files = pq.read_schema(next(Path(d["path"]).glob("*.parquet")))
        for f in d["schema"].fields:  # integers stay integers (the files' pandas metadata)
            expected = _pandas_dtype(f, files.field(f.name).nullable)
            assert str(df[f.name].dtype) == expected, (name, f.name, df[f.name].dtype)
        # Every value is Spark's (pandas makes integers nested beside a null float64, as
        # numpy has no null integer: those are compared as float64).
        table = pa.Table.from_pandas(
            df[want.column_names], schema=want.schema, preserve_index=False
        )
        _same_rows(table, want, f"pandas {name}", nested_as_float=True)
        # and exactly Spark's, types included, with pandas' Arrow dtypes
        exact = pd.read_parquet(d["path"], dtype_backend="pyarrow")
        _same_rows(
            pa.Table.from_pandas(exact[want.column_names], preserve_index=False).cast(want.schema),
            want,
            f"pandas (dtype_backend='pyarrow') {name}",
        )


def test_duckdb_reads_every_table_whole(datasets: dict[str, Any]) -> None:
    for name in _tables(datasets):
        d = datasets[name]
        rel = duckdb.sql(f"SELECT * FROM read_parquet('{d['path']}/*.parquet')")
        types = dict(zip(rel.columns, rel.types))
        for f in d["schema"].fields:
            assert types[f.name] == _duckdb_type(f.dataType), (name, f.name, types[f.name])
        _same_rows(rel.to_arrow_table(), d["table"], f"duckdb {name}")


def test_polars_reads_every_table_whole(datasets: dict[str, Any]) -> None:
    for name in _tables(datasets):
        d = datasets[name]
        for how, frame in (
            ("read_parquet", pl.read_parquet(d["path"])),
            ("scan_parquet", pl.scan_parquet(d["path"]).collect()),
        ):
            for f in d["schema"].fields:
                assert frame.schema[f.name] == _polars_type(f.dataType), (
                    name,
                    how,
                    f.name,
                    frame.schema[f.name],
                )
            _same_rows(frame.to_arrow(), d["table"], f"polars {how} {name}")


def test_a_row_without_a_msg_type_reads_null_in_every_reader(
    spark: Any, datasets: dict[str, Any]
) -> None:
    """No sentinel: msg_type_name is null (errors, plain NATS, Raft traffic, input
    problems), and as many rows have it null in each of the five readers."""
    import pyarrow.dataset as ds

    path = datasets["messages"]["path"]
    want = sum(
        f.per_msg_type.get("(none)", 0) for f in datasets["summary"].files if f.format != "segment"
    )  # (the summary counts entries as "(none)" too)
    assert want > 2000  # the real capture's Raft traffic among them
    counts = {
        "spark": spark.read.parquet(path).where("msg_type_name IS NULL").count(),
        "pandas": int(
            pd.read_parquet(path, columns=["msg_type_name"])["msg_type_name"].isna().sum()
        ),
        "pyarrow": ds.dataset(path)
        .to_table(columns=["msg_type_name"])
        .column("msg_type_name")
        .null_count,
        "duckdb": duckdb.sql(
            f"SELECT count(*) FROM read_parquet('{path}/*.parquet') WHERE msg_type_name IS NULL"
        ).fetchall()[0][0],
        "polars": pl.read_parquet(path).get_column("msg_type_name").null_count(),
    }
    assert counts == dict.fromkeys(counts, want)
    sentinel = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{path}/*.parquet') WHERE msg_type_name = '(none)'"
    ).fetchall()[0][0]
    assert sentinel == 0
    assert not [p for p in Path(path).iterdir() if p.is_dir()]  # no partition directories


def test_messages_join_their_payload_table_in_duckdb(datasets: dict[str, Any]) -> None:
    """The README's join: Publish rows of messages with their Message's stream and
    offset, by (source, position); each Publish has its Message, and nothing else does."""
    out = datasets["out"]
    joined = duckdb.sql(f"""
        SELECT m.source, m.position, m.subject, p.stream, p.offset
        FROM read_parquet('{out}/messages/*.parquet') m
        JOIN read_parquet('{out}/proto_Message/*.parquet') p USING (source, position)
        WHERE m.msg_type_name = 'Publish'
        ORDER BY m.source, m.position""").fetchall()
    wide = datasets["wide"]["table"]
    want = [
        (
            r["source"],
            r["position"],
            r["subject"],
            r["proto_Message"]["stream"],
            r["proto_Message"]["offset"],
        )
        for r in wide.to_pylist()
        if r["msg_type_name"] == "Publish" and r["proto_Message"] is not None
    ]
    assert joined == want and len(want) > 200
    assert ("orders", 100) in {(s, o) for _, _, _, s, o in joined}  # conftest's first Publish
    publishes = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{out}/messages/*.parquet') "
        "WHERE msg_type_name = 'Publish' AND error_kind IS NULL"
    ).fetchall()
    assert publishes == [(len(joined),)]
