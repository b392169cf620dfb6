"""proto3 zero values are values in the tables, as the data has them: on a real
cluster's capture (shared/liftbridge/samples/short.pcapng), `WHERE ackPolicy =
'LEADER'` and `partition = 0` find their rows, through the Python API and
`lbparse capture --tables` read by pandas (NULL was every LEADER, every
partition 0, every offset 0). Spark's from_protobuf convention, null for a
default, stays an option (DecodeOptions.emit_defaults=False; the pipeline's
--no-emit-default-values and the data sources' emitDefaultValues=false:
tests/spark)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.cli import run_cli
from support.shared import shared_path

import lbparse
from lbparse.columnar.api import payload_records
from lbparse.columnar.decode_arrow import DecodeOptions, decoder_for


def _column(tables: list[dict[str, pa.Table]], table: str, column: str) -> list[Any]:
    return [v for t in tables if table in t for v in t[table].column(column).to_pylist()]


def test_zeros_are_values_in_the_capture_tables() -> None:
    tables = list(lbparse.read_capture_tables(shared_path("liftbridge", "samples", "short.pcapng")))
    policies = Counter(_column(tables, "proto_Ack", "ackPolicy"))
    assert policies["LEADER"] > 0 and None not in policies, policies  # enum value 0
    partitions = _column(tables, "proto_Message", "partition")
    assert partitions and None not in partitions and 0 in partitions
    assert 0 in _column(tables, "proto_Ack", "offset")  # the first message's ack
    assert "OK" in _column(tables, "proto_Ack", "ackError")


@pytest.mark.slow  # capture --tables over a real capture, a command-line run
def test_pandas_reads_zeros_as_integers_and_names_from_capture_tables(tmp_path: Path) -> None:
    import pandas as pd

    out = tmp_path / "t"
    done = run_cli(
        "capture", str(shared_path("liftbridge", "samples", "short.pcapng")), "--tables", str(out)
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    acks = pd.read_parquet(out / "proto_Ack")
    assert (acks["ackPolicy"] == "LEADER").sum() > 0
    msgs = pd.read_parquet(out / "proto_Message")
    assert (msgs["partition"] == 0).all() and pd.api.types.is_integer_dtype(msgs["partition"])


def test_nulls_for_defaults_are_an_option() -> None:
    """from_protobuf's convention, asked for: LEADER, 0 and OK are null again."""
    ack = lbparse.message_class("proto.Ack")(stream="s", offset=0, ackPolicy=0)
    payloads = pa.array([lbparse.encode(ack)], pa.binary())
    for emit, want in ((True, ("LEADER", 0, "OK")), (False, (None, None, None))):
        batch = decoder_for(DecodeOptions(layout="v0", emit_defaults=emit))(
            payload_records(payloads)
        )
        row = batch.column("proto_Ack").to_pylist()[0]
        assert (row["ackPolicy"], row["offset"], row["ackError"]) == want


@pytest.mark.slow  # capture --tables over a real capture, a command-line run
def test_pandas_reads_every_integer_column_as_an_integer(tmp_path: Path) -> None:
    """`capture --tables` writes the pipeline's Parquet layout (pandas metadata):
    every integer column of every table, nulls or not, reads as an integer
    dtype (it read as float64 where a column had a null: messages' version,
    header_len, crc32c; grpc_calls' nanosecond times, changed by the cast)."""
    import pandas as pd
    import pyarrow.parquet as pq

    out = tmp_path / "t"
    done = run_cli(
        "capture",
        str(shared_path("liftbridge", "samples", "api-short.pcapng")),
        "--tables",
        str(out),
    )
    assert done.returncode in (0, 1), done.stderr.decode()[-2000:]
    tables = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert {"messages", "proto_Ack", "grpc_calls"} <= set(tables), tables
    checked = 0
    for name in tables:
        schema = pq.read_schema(next((out / name).glob("*.parquet")))
        frame = pd.read_parquet(out / name)
        for field in schema:
            if pa.types.is_integer(field.type):
                assert pd.api.types.is_integer_dtype(frame[field.name]), (name, field.name)
                checked += 1
    assert checked > 20
    calls = pd.read_parquet(out / "grpc_calls")
    ts = pq.read_table(out / "grpc_calls").column("request_ts_ns").to_pylist()
    assert [None if pd.isna(v) else int(v) for v in calls["request_ts_ns"]] == ts


@pytest.mark.slow  # capture --tables over a real capture, a command-line run
def test_the_tables_in_memory_read_as_their_files_do(tmp_path: Path) -> None:
    """One layout everywhere: `read_capture_tables`' tables carry the schema
    `capture --tables` writes, pandas metadata included, so `to_pandas()` on
    them gives the dtypes `pandas.read_parquet` gives on the files (integers
    with nulls as Int32/Int64, where they were float64)."""
    import pandas as pd
    import pyarrow.parquet as pq

    import lbparse

    capture = shared_path("liftbridge", "samples", "api-short.pcapng")
    out = tmp_path / "t"
    done = run_cli("capture", str(capture), "--tables", str(out))
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    memory: dict[str, list[pa.Table]] = {}
    for batch in lbparse.read_capture_tables(capture):
        for name, table in batch.items():
            memory.setdefault(name, []).append(table)
    compared = 0
    for name, parts in memory.items():
        table = pa.concat_tables(parts)
        if not table.num_rows:
            continue
        written = pq.read_schema(next((out / name).glob("*.parquet")))
        # (field metadata aside: Parquet names a map's value after its column)
        assert table.schema.equals(written) and table.schema.metadata == written.metadata, name
        frame = table.to_pandas()
        assert frame.dtypes.to_dict() == pd.read_parquet(out / name).dtypes.to_dict(), name
        compared += 1
    assert compared >= 10
    frame = pa.concat_tables(memory["messages"]).to_pandas()
    assert str(frame["version"].dtype) == "Int32" and str(frame["crc32c"].dtype) == "Int64"
