"""lbparse.decode_tables and read_capture_tables: the narrow tables hold exactly
what decode_arrow's wide batch holds, split by payload type and joined back by
position (the reference vectors, a real cluster capture)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from support.reading import concat_tables
from support.shared import LIFTBRIDGE
from support.traffic_tables import traffic_back
from vectors import VECTORS, data

import lbparse
from lbparse.columnar.schema import CAPTURE_COLUMNS, column_for
from lbparse.columnar.tables import (
    BARE_KEYS,
    MESSAGES,
    RAFT_ENTRIES,
    TRAFFIC_TABLES,
    payload_tables,
    table_names,
    table_schema,
)

SHORT = os.path.join(LIFTBRIDGE, "samples", "short.pcapng")


def _payloads() -> list[bytes]:
    return [data(v) for v in VECTORS]


def _wide_rows(wide: pa.RecordBatch, column: str) -> list[tuple[int, dict]]:
    vals = wide.column(column).to_pylist()
    return [(i, v) for i, v in enumerate(vals) if v is not None]


@pytest.mark.parametrize("layout", ["v0", "auto", "legacy"])
def test_tables_hold_what_the_wide_batch_holds(layout: str) -> None:
    payloads = _payloads()
    wide = lbparse.decode_arrow(payloads, layout)
    tables = lbparse.decode_tables(payloads, layout)
    msgs = tables[MESSAGES]
    assert msgs.column("position").to_pylist() == list(range(len(payloads)))
    for name in msgs.column_names:
        if name != "position":
            assert msgs.column(name).to_pylist() == wide.column(name).to_pylist(), name
    seen = set()
    for table, ptype in payload_tables().items():
        expected = _wide_rows(wide, column_for(ptype))
        if not expected:
            assert table not in tables
            continue
        seen.add(table)
        got = tables[table]
        assert got.schema == table_schema(table, ("position",))
        rows = got.to_pylist()
        assert [(r.pop("position"), r) for r in rows] == expected, table
    assert set(tables) == seen | {MESSAGES}
    assert seen, "the vectors hold typed payloads"


def test_payload_columns_are_flat_and_typed() -> None:
    t = lbparse.decode_tables([bytes.fromhex("b90e43b40008000b0a027331")])
    info = t["protocol_ServerInfoResponse"]
    assert info.column_names == ["position", "id", "host", "port"]
    assert info.schema.field("port").type == pa.int32()
    assert info.column("id").to_pylist() == ["s1"]
    assert t[MESSAGES].column("msg_type_name").to_pylist() == ["ServerInfoResponse"]


def test_bare_messages_have_no_capture_column_in_data_or_pandas_metadata() -> None:
    """Payloads from no file: `messages` has `position` and the decoded
    columns, and its schema (pandas metadata included, which to_pandas
    reads) names no column of a capture's (once, it listed the 11 dropped
    after the table was made)."""
    msgs = lbparse.decode_tables([bytes.fromhex("b90e43b40008000b0a027331")])[MESSAGES]
    assert msgs.schema == table_schema(MESSAGES, BARE_KEYS)
    assert set(msgs.column_names) & set(CAPTURE_COLUMNS) == {"position"}
    meta = json.loads(msgs.schema.metadata[b"pandas"])
    assert [c["name"] for c in meta["columns"]] == msgs.column_names
    assert list(msgs.to_pandas().columns) == msgs.column_names
    wide = table_schema(MESSAGES)
    assert [n for n in wide.names if n not in CAPTURE_COLUMNS] == msgs.column_names[1:]


def test_no_sentinel_for_a_row_without_a_msg_type() -> None:
    t = lbparse.decode_tables([b"xx", None])
    msgs = t[MESSAGES]
    assert msgs.column("msg_type_name").to_pylist() == [None, None]
    assert msgs.column("error_kind").to_pylist() == ["too_short", "input:null_payload"]
    assert set(t) == {MESSAGES}


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(SHORT), reason="../shared/liftbridge/samples missing")
def test_capture_tables_join_back_to_the_wide_rows() -> None:
    wide = pa.Table.from_batches(list(lbparse.read_capture_arrow(SHORT, batch_rows=4096)))
    tables = concat_tables(lbparse.read_capture_tables(SHORT, batch_rows=4096))
    assert tables[MESSAGES].num_rows == wide.num_rows
    assert tables[MESSAGES].column("position").to_pylist() == wide.column("position").to_pylist()
    for table, ptype in payload_tables().items():
        expected = _wide_rows(wide.combine_chunks().to_batches()[0], column_for(ptype))
        got = tables.get(table)
        assert (got.num_rows if got is not None else 0) == len(expected), table
        if got is None:
            continue
        positions = wide.column("position").to_pylist()
        rows = got.to_pylist()
        assert [(r.pop("source"), r.pop("position")) for r in rows] == [
            (wide.column("source")[i].as_py(), positions[i]) for i, _ in expected
        ]
        assert rows == [v for _, v in expected], table
    assert len(tables) > 5


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(SHORT), reason="../shared/liftbridge/samples missing")
def test_the_traffic_tables_join_back_to_the_wide_rows() -> None:
    """Liftbridge's Raft transport and handshakes in three narrow tables: rebuilt,
    they are exactly the wide rows' traffic columns, across batch boundaries
    (with the JSON text columns: they split as the typed ones do)."""
    wide = pa.Table.from_batches(
        list(lbparse.read_capture_arrow(SHORT, batch_rows=300, json_columns=True))
    )
    tables = concat_tables(lbparse.read_capture_tables(SHORT, batch_rows=300, json_columns=True))
    assert set(TRAFFIC_TABLES) <= set(tables) <= set(table_names())
    cols = ("traffic", "traffic_node", "raft_rpcs", "traffic_json")
    want = {
        (r["source"], r["position"]): {c: r[c] for c in cols}
        for r in wide.select(["source", "position", *cols]).to_pylist()
        if r["traffic"]
    }
    got = traffic_back(tables)
    for v in want.values():
        v["raft_rpcs"] = v["raft_rpcs"] or []
    assert got == want
    assert sum(len(v["raft_rpcs"]) for v in got.values()) > 1000  # the capture's Raft RPCs
    assert tables[RAFT_ENTRIES].num_rows > 50
    msgs = tables[MESSAGES]
    assert "traffic" in msgs.column_names  # the kind stays, to filter without a join
    assert not {"traffic_node", "raft_rpcs", "traffic_json"} & set(msgs.column_names)


def test_traffic_tables_have_schemas_and_names() -> None:
    for name in TRAFFIC_TABLES:
        schema = table_schema(name)
        assert schema.names[:2] == ["source", "position"], name
    assert table_schema(RAFT_ENTRIES).names[2:4] == ["rpc_seq", "entry_seq"]
    with pytest.raises(ValueError, match="'raft_entries'"):
        table_schema("nosuch")


@pytest.mark.slow
def test_the_columnar_core_imports_nothing_of_spark() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pkgutil, importlib, lbparse, lbparse.columnar as c\n"
        "for m in pkgutil.iter_modules(c.__path__):\n"
        "    importlib.import_module('lbparse.columnar.' + m.name)\n"
        "lbparse.decode_tables([bytes.fromhex('b90e43b40008000b0a027331')])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_capture_readers_refuse_a_batch_size_that_is_not_a_count(bad: object) -> None:
    for reader in (lbparse.read_capture_arrow, lbparse.read_capture_tables):
        with pytest.raises(ValueError, match=f"batch_rows must be .*got {bad!r}"):
            next(iter(reader(SHORT, batch_rows=bad)))  # type: ignore[arg-type]


def test_capture_readers_refuse_limits_of_another_type() -> None:
    with pytest.raises(TypeError, match="limits must be an lbparse.Limits; got dict"):
        next(iter(lbparse.read_capture_tables(SHORT, limits={"max_flows": 1})))  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(SHORT), reason="../shared/liftbridge/samples missing")
@pytest.mark.parametrize("layout", ["auto", "v0"])
def test_capture_tables_are_the_pipeline_tasks_rows(layout: str) -> None:
    """read_capture_tables decodes a capture as the pipeline's tasks decode a unit:
    Liftbridge's own traffic read across batches, auto's context applied (batches
    of 500 rows, so both cross batch boundaries)."""
    from lbparse.columnar.decode_arrow import DecodeOptions
    from lbparse.columnar.sources import SourceOptions
    from lbparse.columnar.tables import tables_of
    from lbparse.pipeline.input_plan import plan
    from lbparse.pipeline.tasks import TaskOptions, decode_unit, new_counts

    options = TaskOptions(DecodeOptions(layout=layout), SourceOptions(batch_rows=500))
    (unit,) = plan([SHORT], options.source)
    tasks = [tables_of(d) for d in decode_unit(unit, options, new_counts())]
    ours = list(lbparse.read_capture_tables(SHORT, layout, batch_rows=500))
    assert len(ours) == len(tasks) > 10
    for a, b in zip(ours, tasks):
        assert a.keys() == b.keys()
        for name in a:
            assert a[name].equals(b[name]), name
    traffic = pa.concat_tables(t[MESSAGES] for t in ours).column("traffic")
    assert traffic.null_count < len(traffic)  # the capture's Raft traffic is named
