"""raft_entries' RaftLog commands as typed columns (issue #45 item 2).

A LogCommand entry's data is Liftbridge's protocol.RaftLog: raft_entries
keeps it (`command_data`) and its fields as columns (`op`, `createStreamOp`,
...), decoded as the payload tables' protobuf is (columnar.commands). Held
here: on real clusters' traffic each command has the one operation its
label names; the C reader equals its numpy reference and upb's reading on
real and damaged commands; damage is a null row, never a failed batch.
(tests/support/traffic_tables.traffic_back holds every entry of the tables
it rebuilds to upb's reading; test_raft_rows holds the tables of the C
transport reader equal to those of LBPARSE_NATIVE=0.)
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.reading import concat_tables
from support.shared import LIFTBRIDGE
from support.traffic_tables import COMMAND_COLUMNS, upb_command
from support.wire import APPEND

import lbparse
from lbparse.codec.payloads import message_class
from lbparse.columnar.commands import RAFT_LOG, command_fields, command_structs
from lbparse.columnar.tables import RAFT_ENTRIES, table_schema

CAPTURES = [LIFTBRIDGE / "samples" / n for n in ("short.pcapng", "api-short.pcapng")]


def _entries(path: Path) -> pa.Table:
    if not path.is_file():
        pytest.skip(f"shared material missing: {path}")
    return _read(path)


@cache
def _read(path: Path) -> pa.Table:
    """A capture's raft_entries, read once for the module's tests."""
    return concat_tables(lbparse.read_capture_tables(path))[RAFT_ENTRIES]


def _snake(label: str) -> str:
    """A command's label as its op's enum name: CreateStream -> CREATE_STREAM."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", label).upper()


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_each_command_has_the_operation_its_label_names(path: Path) -> None:
    entries = _entries(path)
    assert entries.schema == table_schema(RAFT_ENTRIES)
    ops = [c for c in COMMAND_COLUMNS if c != "op"]
    seen: Counter[str] = Counter()
    for e in entries.to_pylist():
        label, data = e["command"], e["command_data"]
        if e["type"] != "LogCommand":
            assert data is None and all(e[c] is None for c in COMMAND_COLUMNS), e
            continue
        assert data is not None and label is not None, e
        seen[label] += 1
        assert e["op"] == _snake(label), e
        want = label[0].lower() + label[1:] + "Op"
        assert [c for c in ops if e[c] is not None] == [want], e
    # a real run: streams made, paused, resumed, made read-only, deleted
    assert {"CreateStream", "PublishActivity", "DeleteStream"} <= set(seen), seen
    named = entries.filter(pc.equal(entries["command"], "CreateStream"))
    names = set(pc.struct_field(named["createStreamOp"], [0, 0]).to_pylist())
    assert "__activity" in names and len(names) > 1, names


def test_the_c_reader_its_reference_and_upb_read_each_command_alike() -> None:
    real = [
        d
        for path in CAPTURES
        if path.is_file()
        for d in _entries(path)["command_data"].to_pylist()
        if d is not None
    ]
    if not real:
        pytest.skip("shared captures missing")
    log = message_class(RAFT_LOG)
    made = log(op=3)
    made.changeLeaderOp.stream, made.changeLeaderOp.partition = "orders", 2
    whole = made.SerializeToString()
    odd = [
        b"",  # a RaftLog of defaults
        whole,
        whole + whole,  # a singular field twice: upb merges (the C reader leaves it)
        whole + b"\xf8\x07\x01",  # an unknown field (1023, varint): skipped
        whole[:-1],  # cut inside the operation: not a RaftLog
        b"\x08",  # a tag without its value
        b"\x0a\x00",  # op with the wrong wire type: upb keeps it as an unknown field
        b"\xff" * 12,  # a varint too long
        bytes(range(256)),
    ]
    data = pa.array([*real, None, *odd], pa.binary())
    for emit in (True, False):
        native = command_structs(data, emit, native=True)
        reference = command_structs(data, emit, native=False)
        assert native.equals(reference)
        assert native.type == pa.struct(list(command_fields()))
        for value, d in zip(native.to_pylist(), data.to_pylist()):
            assert (value or dict.fromkeys(COMMAND_COLUMNS)) == upb_command(d, emit), d
    rows = command_structs(data).to_pylist()
    assert rows[len(real)] is None  # no data: no command
    cut, tag, wrong, long = rows[len(real) + 1 + 4 : len(real) + 1 + 8]
    assert cut is None and tag is None and long is None  # damage: a null row
    # a RaftLog of nothing known: its op the default (emit_defaults, on by default)
    assert wrong == {**dict.fromkeys(COMMAND_COLUMNS), "op": "CREATE_STREAM"}


def test_without_emit_defaults_an_op_of_zero_is_null() -> None:
    entries = _entries(CAPTURES[0])
    created = entries.filter(pc.equal(entries["command"], "CreateStream"))["command_data"]
    assert len(created)
    for emit, op in ((True, "CREATE_STREAM"), (False, None)):
        rows = command_structs(created.combine_chunks(), emit).to_pylist()
        assert all(r["op"] == op and r["createStreamOp"]["stream"]["name"] for r in rows)


@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
def test_an_appends_rows_and_objects_keep_the_commands_bytes(native: bool) -> None:
    """An AppendEntries read as rows (`_log_row`) and as objects (`rpc_row`
    of its RPC) gives each entry the same command_data: the LogCommand's
    data, none for the other entry."""
    from lbparse.raft import StreamDecoder, rpc_row

    _, rows = StreamDecoder(native=native).feed_rows(APPEND)
    chunk = StreamDecoder(native=native).feed(APPEND)
    objects = [rpc_row(r) for r in chunk.rpcs]
    assert rows == objects and len(rows) == 1
    data = [e["command_data"] for e in rows[0]["entries"]]
    assert data[0] is not None and data[1] is None
    (value, none) = command_structs(pa.array(data, pa.binary())).to_pylist()
    assert none is None
    assert value["op"] == "CHANGE_LEADER" and value["changeLeaderOp"]["stream"] == "orders"
