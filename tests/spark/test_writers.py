"""One layout everywhere (#46): `lbparse capture --tables` and `lbparse pipeline`
write the same tables of the same capture: the same Arrow types and Parquet
metadata, so that each of the five readers (pyarrow, pandas, DuckDB, Polars,
Spark) reads the same types and the same values from either writer's files.

The capture: the shared real cluster's, with its clients' gRPC calls
(api-short.pcapng: NATS, the Raft traffic tables, the gRPC tables).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.cli import run_cli
from support.readers import reader
from support.shared import LIFTBRIDGE

from lbparse.columnar.decode_arrow import DecodeOptions
from lbparse.columnar.sources import SourceOptions
from lbparse.pipeline.job import PipelineOptions, run

duckdb = reader("duckdb")
pl = reader("polars")
pd = reader("pandas")

API_SHORT = LIFTBRIDGE / "samples" / "api-short.pcapng"


@pytest.fixture(scope="module")
def written(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not API_SHORT.is_file():
        pytest.skip(f"shared material missing: {API_SHORT}")
    d = tmp_path_factory.mktemp("writers")
    done = run_cli("capture", str(API_SHORT), "--tables", str(d / "tables"), timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    # as `lbparse pipeline` runs it: layout auto, capture --tables' default too
    run(
        spark,
        PipelineOptions(
            inputs=(str(API_SHORT),),
            out=str(d / "pipeline"),
            decode=DecodeOptions(layout="auto"),
            source=SourceOptions(batch_rows=4096),
        ),
    )
    return {"capture --tables": d / "tables", "pipeline": d / "pipeline"}


def _tables(written: dict[str, Path]) -> list[str]:
    names = [{p.name for p in d.iterdir() if p.is_dir()} for d in written.values()]
    assert names[0] == names[1], names
    assert {"messages", "proto_Message", "raft_rpcs", "grpc_calls", "grpc_messages"} <= names[0]
    return sorted(names[0])


def _key(table: str) -> list[str]:
    return ["source", "position"] + {
        "raft_rpcs": ["rpc_seq"],
        "raft_entries": ["rpc_seq", "entry_seq"],
        "grpc_messages": ["message_seq"],
    }.get(table, [])


@pytest.mark.slow
def test_both_writers_write_one_schema(written: dict[str, Path]) -> None:
    for table in _tables(written):
        a, b = (pq.read_schema(next((d / table).glob("*.parquet"))) for d in written.values())
        assert a.equals(b, check_metadata=True), table
        assert b"pandas" in (a.metadata or {}), table


@pytest.mark.slow
def test_each_reader_reads_one_table_from_both(written: dict[str, Path], spark: Any) -> None:
    compared = 0
    for table in _tables(written):
        key = _key(table)
        dirs = list(written.values())
        arrow = [pq.read_table(d / table).sort_by([(k, "ascending") for k in key]) for d in dirs]
        assert arrow[0].equals(arrow[1]), table
        frames = [pd.read_parquet(d / table).sort_values(key, ignore_index=True) for d in dirs]
        assert frames[0].dtypes.to_dict() == frames[1].dtypes.to_dict(), table
        assert not [
            c
            for c, t in frames[0].dtypes.items()
            if pa.types.is_integer(arrow[0].schema.field(c).type) and t == "float64"
        ]
        pd.testing.assert_frame_equal(frames[0], frames[1], check_like=False)
        ducks = [
            duckdb.sql(
                f"SELECT * FROM read_parquet('{d / table}/*.parquet') ORDER BY {', '.join(key)}"
            )
            for d in dirs
        ]
        assert ducks[0].types == ducks[1].types, table
        assert ducks[0].fetchall() == ducks[1].fetchall(), table
        polars = [pl.read_parquet(d / table).sort(key) for d in dirs]
        assert polars[0].schema == polars[1].schema, table
        assert polars[0].equals(polars[1]), table
        sparks = [spark.read.parquet(str(d / table)) for d in dirs]
        assert sparks[0].schema == sparks[1].schema, table
        if "MapType" in str(sparks[0].schema):  # Spark's set operations refuse maps
            assert sparks[0].count() == sparks[1].count(), table
        else:
            assert sparks[0].exceptAll(sparks[1]).count() == 0, table
            assert sparks[1].exceptAll(sparks[0]).count() == 0, table
        compared += 1
    assert compared >= 15
