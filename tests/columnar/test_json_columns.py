"""The JSON text columns (traffic_json, fields_json, command_json) are opt-in
(issue #45): by default no table has them and no JSON is made; with
`json_columns` each ends its traffic table, the typed columns are the same
with or without them, and the JSON is what lbparse made before (pinned by its
digest over the shared real-cluster captures)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from support.reading import concat_tables
from support.shared import CAPTURES, LIFTBRIDGE

import lbparse
from lbparse.capture.traffic import TrafficReader
from lbparse.columnar.schema import JSON_COLUMNS, arrow_output_schema
from lbparse.columnar.tables import (
    RAFT_ENTRIES,
    RAFT_RPCS,
    TRAFFIC,
    TRAFFIC_TABLES,
    table_names,
    table_schema,
)
from lbparse.columnar.trafficcols import traffic_columns

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"
API_SHORT = LIFTBRIDGE / "samples" / "api-short.pcapng"
NATS_1000 = CAPTURES / "nats_1000.pcapng"

# Each traffic table's JSON text column, last in it when asked for.
_JSON_OF = {TRAFFIC: "traffic_json", RAFT_RPCS: "fields_json", RAFT_ENTRIES: "command_json"}

# sha256 of json.dumps(the column's values, in reading order), as lbparse
# made them before they became opt-in (rows, nulls, digest).
_DIGESTS = {
    "short.pcapng": {
        "traffic_json": (
            2432,
            0,
            "dca4f8c7eade8758005edad38b0d5a825e67641c06603d7197eb10843d077580",
        ),
        "fields_json": (
            2416,
            0,
            "d11b612e26eeace714fd989f9f4c484e58eba36a9c3a35bf1ce1d92201caac44",
        ),
        "command_json": (
            188,
            84,
            "bb3a24af17dd1ef694a3986b181e5c80e20e1542d124a065a5726cb282cc10bd",
        ),
    },
    "api-short.pcapng": {
        "traffic_json": (
            2544,
            0,
            "1c2fead944a5f8ac32eb261ac6100cf523706665d10105a7e926e6379a59f427",
        ),
        "fields_json": (
            2528,
            0,
            "9db8321f2fa22cda589fea91478b036348d7b0d56d476f9ff44fb314d98af23b",
        ),
        "command_json": (
            188,
            84,
            "884a385c20295fc87fca25d41343206918b6169637c3c89d3b6ee17780d023b4",
        ),
    },
}


def _need(path: Path) -> None:
    if not path.is_file():
        pytest.skip(f"shared material missing: {path}")


def test_by_default_no_table_has_a_json_text_column() -> None:
    for name in table_names():
        assert not set(JSON_COLUMNS) & set(table_schema(name).names), name
    wide = arrow_output_schema()
    assert not set(JSON_COLUMNS) & set(wide.names)
    rpc = wide.field("raft_rpcs").type.value_type
    assert "fields_json" not in [f.name for f in rpc]
    assert "command_json" not in [f.name for f in rpc["entries"].type.value_type]


def test_with_the_option_each_traffic_table_ends_with_its_json_column() -> None:
    for name in table_names():
        plain, with_json = table_schema(name), table_schema(name, json_columns=True)
        if name in _JSON_OF:
            assert with_json.names == [*plain.names, _JSON_OF[name]], name
            assert with_json.field(_JSON_OF[name]).type == pa.string()
        else:
            assert with_json == plain, name
    wide = arrow_output_schema(json_columns=True)
    assert wide.names.index("traffic_json") == wide.names.index("raft_rpcs") + 1


def test_without_the_option_no_json_is_made() -> None:
    """The real capture's Raft traffic gives its typed columns alone; the JSON
    is made only when asked for."""
    _need(SHORT)
    plain = next(t[TRAFFIC] for t in lbparse.read_capture_tables(SHORT) if TRAFFIC in t)
    assert plain.num_rows and plain.column_names == ["source", "position", "kind", "node"]
    rows = pa.RecordBatch.from_pylist(
        [
            {
                "src": "10.0.0.1:40000",
                "dst": "10.0.0.2:4222",
                "subject": "liftbridge-default.raft.metadata.node1",
                "reply": None,
                "payload": b"",
                "headers": None,
                "error_kind": None,
            }
        ]
    )
    assert set(traffic_columns(TrafficReader(), rows)) == {"traffic", "traffic_node", "raft_rpcs"}
    assert "traffic_json" in traffic_columns(TrafficReader(), rows, json_columns=True)


def _both(path: Path) -> tuple[dict[str, pa.Table], dict[str, pa.Table]]:
    plain = concat_tables(lbparse.read_capture_tables(path, batch_rows=1000))
    with_json = concat_tables(lbparse.read_capture_tables(path, batch_rows=1000, json_columns=True))
    return plain, with_json


@pytest.mark.slow
@pytest.mark.parametrize("path", [SHORT, API_SHORT, NATS_1000], ids=lambda p: p.name)
def test_the_typed_columns_are_the_same_with_or_without_the_option(path: Path) -> None:
    _need(path)
    plain, with_json = _both(path)
    assert set(plain) == set(with_json)
    for name, table in plain.items():
        extra = [_JSON_OF[name]] if name in _JSON_OF else []
        assert with_json[name].column_names == table.column_names + extra, name
        assert with_json[name].drop_columns(extra).equals(table), name
        assert table.schema == table_schema(name), name
    if path != NATS_1000:
        assert set(TRAFFIC_TABLES) <= set(plain)


@pytest.mark.slow
@pytest.mark.parametrize("path", [SHORT, API_SHORT], ids=lambda p: p.name)
def test_the_json_columns_are_what_they_were(path: Path) -> None:
    _need(path)
    _, with_json = _both(path)
    for name, column in _JSON_OF.items():
        values = with_json[name].column(column).to_pylist()
        digest = hashlib.sha256(json.dumps(values).encode()).hexdigest()
        nulls = sum(v is None for v in values)
        assert (len(values), nulls, digest) == _DIGESTS[path.name][column], column


@pytest.mark.slow  # over half a second: not in make test-fast
def test_the_option_reaches_read_capture_arrow() -> None:
    _need(NATS_1000)
    (first, *_) = lbparse.read_capture_arrow(str(NATS_1000), json_columns=True)
    assert first.schema == arrow_output_schema(json_columns=True)
    (first, *_) = lbparse.read_capture_arrow(os.fspath(NATS_1000))
    assert first.schema == arrow_output_schema()
