"""`format("liftbridge")` with `table`: lbparse.decode_tables' narrow tables on
real local[2] Spark (issue #24). Each table of the real cluster's capture is
`lbparse.read_capture_tables`' table of it, its schema known before reading;
a bad name is refused with the tables listed; rows without a MsgType have a
null msg_type_name, never a sentinel string, in the data source and in
`from_envelope`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.shared import LIFTBRIDGE

import lbparse
import lbparse.spark
from lbparse.columnar.schema import CAPTURE_COLUMNS
from lbparse.columnar.tables import MESSAGES, table_names, table_schema

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"  # a real Liftbridge cluster's capture

pytestmark = pytest.mark.slow


@pytest.fixture
def liftbridge(spark: Any) -> Any:
    """A new reader (a DataFrameReader keeps the options set on it)."""
    lbparse.spark.register(spark)
    return spark.read.format("liftbridge")


@pytest.fixture(scope="module")
def short_tables() -> dict[str, pa.Table]:
    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")
    parts: dict[str, list[pa.Table]] = {}
    for batch in lbparse.read_capture_tables(str(SHORT)):
        for name, table in batch.items():
            parts.setdefault(name, []).append(table)
    return {name: pa.concat_tables(tables) for name, tables in parts.items()}


def _rows(table: pa.Table, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    table = table.sort_by([("source", "ascending"), ("position", "ascending")])
    return table.select([n for n in table.column_names if n not in drop]).to_pylist()


def test_each_table_is_read_capture_tables(
    liftbridge: Any, short_tables: dict[str, pa.Table]
) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    names = table_names()
    assert len(short_tables) > 8  # the capture has many payload types
    for name in names:
        df = liftbridge.option("table", name).load(str(SHORT))
        assert df.schema == from_arrow_schema(table_schema(name)), name
        got = df.toArrow()
        want = short_tables.get(name, table_schema(name).empty_table())
        assert got.num_rows == want.num_rows, name
        # all of it: Liftbridge's own traffic and the layout auto decided by the
        # capture's proof too (both read across the capture's batches, in order)
        assert _rows(got) == _rows(want), name
    msgs = liftbridge.option("table", MESSAGES).load(str(SHORT)).where("traffic IS NOT NULL")
    assert msgs.count() > 0


def test_json_columns_are_an_option(liftbridge: Any, spark: Any) -> None:
    """jsonColumns=true: each traffic table ends with its JSON text column, as
    read_capture_tables(json_columns=True) gives it; the wide rows hold
    traffic_json. Without it, no table has one."""
    from pyspark.sql.pandas.types import from_arrow_schema

    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")
    want: dict[str, list[pa.Table]] = {}
    for batch in lbparse.read_capture_tables(str(SHORT), json_columns=True):
        for name, table in batch.items():
            want.setdefault(name, []).append(table)
    for name, column in (
        ("traffic", "traffic_json"),
        ("raft_rpcs", "fields_json"),
        ("raft_entries", "command_json"),
    ):
        reader = spark.read.format("liftbridge").option("table", name)  # a new reader each
        df = reader.option("jsonColumns", "true").load(str(SHORT))
        assert df.schema == from_arrow_schema(table_schema(name, json_columns=True)), name
        assert df.columns[-1] == column
        assert _rows(df.toArrow()) == _rows(pa.concat_tables(want[name])), name
    for on in (True, False):
        wide = spark.read.format("liftbridge").option("jsonColumns", str(on).lower())
        assert ("traffic_json" in wide.load(str(SHORT)).columns) is on


def test_a_payload_table_joins_messages(liftbridge: Any) -> None:
    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")
    msgs = liftbridge.option("table", MESSAGES).load(str(SHORT))
    reqs = liftbridge.option("table", "protocol_ReplicationRequest").load(str(SHORT))
    joined = reqs.join(msgs, ["source", "position"])
    assert joined.count() == reqs.count() > 100
    assert {r[0] for r in joined.select("msg_type_name").distinct().collect()} == {
        "ReplicationRequest"
    }


@pytest.mark.parametrize("name", ["nope", "entries", "proto.Message"])
def test_an_unknown_table_is_refused_with_the_tables_listed(liftbridge: Any, name: str) -> None:
    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")
    with pytest.raises(
        Exception,
        match=rf"option table: no table '{name}' in captures; "
        r"the tables are messages, proto_Message, proto_Ack",
    ):
        liftbridge.option("table", name).load(str(SHORT)).schema  # noqa: B018  (made, not run)


def test_data_directories_have_entries_alone(liftbridge: Any, tmp_path: Path) -> None:
    import tarfile

    archive = LIFTBRIDGE / "samples" / "data-short.tar.gz"
    if not archive.is_file():
        pytest.skip(f"shared material missing: {archive}")
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    data = [str(p) for p in sorted(tmp_path.iterdir()) if p.is_dir()]
    with pytest.raises(
        Exception, match="no table 'messages' in data directories; the tables are entries"
    ):
        liftbridge.option("table", "messages").load(data).schema  # noqa: B018
    entries = liftbridge.option("table", "entries").load(data)
    assert entries.schema == liftbridge.load(data).schema
    assert entries.count() > 0


def test_rows_without_a_msg_type_have_a_null_name(liftbridge: Any) -> None:
    """format("liftbridge"): the wide rows and the messages table."""
    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")
    for df in (liftbridge.load(str(SHORT)), liftbridge.option("table", MESSAGES).load(str(SHORT))):
        without = df.where("msg_type IS NULL AND error_kind IS NULL")
        assert without.count() > 1000  # plain NATS payloads, Raft traffic
        assert without.where("msg_type_name IS NOT NULL").count() == 0
        names = {r[0] for r in df.select("msg_type_name").distinct().collect()}
        assert None in names and not {n for n in names if n and n.startswith("(")}


def test_from_envelope_gives_null_names_too(spark: Any) -> None:
    plain = b"hello"
    envelope = bytes.fromhex("b90e43b40008000b0a027331")
    df = spark.createDataFrame([(0, plain), (1, envelope), (2, None)], "i int, value binary")
    rows = (
        df.select("i", lbparse.spark.from_envelope("value", layout="auto").alias("e"))
        .orderBy("i")
        .collect()
    )
    assert [(r.e.layout, r.e.msg_type, r.e.msg_type_name) for r in rows] == [
        ("plain", None, None),
        ("v0", 11, "ServerInfoResponse"),
        (None, None, None),
    ]
    # how the layout was decided, as lbparse.decode says
    env = lbparse.decode(plain, "auto")
    assert (rows[0].e.layout_confidence, rows[0].e.layout_ambiguous, rows[0].e.layout_reason) == (
        env.confidence,
        env.ambiguous,
        env.reasons[-1],
    )
    assert not set(CAPTURE_COLUMNS) & set(rows[0].e.asDict())


def test_read_stream_gives_a_table(
    spark: Any, tmp_path: Path, short_tables: dict[str, pa.Table]
) -> None:
    """readStream shares the reading: `table` names the rows it streams."""
    import shutil
    import time

    from pyspark.errors import AnalysisException

    lbparse.spark.register(spark)
    incoming = tmp_path / "in"
    incoming.mkdir()
    shutil.copyfile(SHORT, incoming / ".short.pcapng")  # put in place whole
    (incoming / ".short.pcapng").rename(incoming / "short.pcapng")
    out = tmp_path / "out"
    want = short_tables["proto_Ack"]
    stream = (
        spark.readStream.format("liftbridge")
        .option("table", "proto_Ack")
        .option("minFileAge", "0")
        .load(str(incoming))
    )
    query = (
        stream.writeStream.format("parquet")
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(processingTime="500 milliseconds")
        .start(str(out))
    )
    try:
        deadline = time.monotonic() + 120
        got = None
        while time.monotonic() < deadline and query.exception() is None:
            try:
                got = spark.read.parquet(str(out)).toArrow()
                if got.num_rows >= want.num_rows:
                    break
            except AnalysisException:  # nothing committed yet
                pass
            time.sleep(0.5)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    assert got is not None and got.num_rows == want.num_rows > 0
    assert got.column_names == stream.columns == want.column_names
    assert _rows(got, ("source",)) == _rows(want, ("source",))
