"""The metadata Raft group's decoders (lbparse.raft) against what hashicorp/raft writes.

Stored log entries are taken from the raft.db files of a real Liftbridge
run (`samples/data-short.tar.gz`) and transport streams from its capture;
crafted ones are made with the `msgpack` package the way go-msgpack's
MsgpackHandle writes them (byte strings as msgpack raw strings).
"""

from __future__ import annotations

import re
import tarfile
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.reading import sample_records
from support.shared import shared_path
from support.wire import (
    APPEND,
    REQUESTS,
    RESPONSES,
    SNAPSHOT,
    TIMEOUT,
    VOTE,
    log_map,
    pack,
    raft_log,
    request,
)

import lbparse
from lbparse.raft import (
    COMMANDS,
    LOG_TYPES,
    RPC_TYPES,
    RaftError,
    StreamDecoder,
    decode_log_entry,
    decode_request,
    decode_response,
    stream_role,
)
from lbparse.raft.msgpack_structs import read_object
from lbparse.raft.tables import STRUCTS

GO_EPOCH = 62_135_596_800  # seconds from year 1 to 1970 (time.MarshalBinary's origin)


# -- the spec's tables -----------------------------------------------------------


def test_commands_name_real_ops_and_raftlog_fields() -> None:
    """Every command of spec/raft.ksy is a protocol.Op of internal.proto whose
    RaftLog field exists and holds a message."""
    desc = lbparse.message_class("protocol.RaftLog").DESCRIPTOR
    ops = desc.fields_by_name["op"].enum_type.values_by_name
    assert len(COMMANDS) == 13
    for op, command in COMMANDS.items():
        assert op in ops
        assert desc.fields_by_name[command.field].message_type is not None


def test_tables_hold_hashicorp_raft_numbers() -> None:
    assert {v: t.name for v, t in RPC_TYPES.items()} == {
        0: "AppendEntries",
        1: "RequestVote",
        2: "InstallSnapshot",
        3: "TimeoutNow",
        4: "RequestPreVote",
    }
    assert LOG_TYPES[0] == "LogCommand" and LOG_TYPES[5] == "LogConfiguration"
    assert [f.key for f in STRUCTS["AppendEntriesRequest"]][:3] == ["ProtocolVersion", "ID", "Addr"]


def test_no_two_response_structs_have_the_same_keys() -> None:
    """Responses are named by their keys: the declarations must allow it."""
    from lbparse.raft.msgpack_structs import base_keys

    names = [t.response for t in RPC_TYPES.values()]
    assert len({base_keys(n) for n in names}) == len(names)


# -- stored entries ----------------------------------------------------------------


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The Log values of node1's raft.db in the shared run, found by their first
    key (the msgpack map of a Log starts `85 a4 "Data"`)."""
    tar = shared_path("liftbridge", "samples", "data-short.tar.gz")
    out = tmp_path_factory.mktemp("data")
    with tarfile.open(tar) as t:
        t.extract("data-short/node1/raft/raft.db", out, filter="data")
    db = (out / "data-short/node1/raft/raft.db").read_bytes()
    values = []
    for m in re.finditer(rb"\x85\xa4Data", db):
        got = read_object(db, m.start(), 1 << 20)
        if got is not None:
            values.append(db[m.start() : got[1]])
    return values


def test_stored_entries_of_a_real_run(stored: list[bytes]) -> None:
    entries = [decode_log_entry(v) for v in stored]
    # bbolt copies pages on write, so an index can occur in old pages too.
    indexes = {e.index for e in entries}
    assert indexes == set(range(1, max(indexes) + 1))
    kinds = {(e.type_name, e.command.name if e.command else None) for e in entries}
    assert {
        ("LogConfiguration", None),
        ("LogNoop", None),
        ("LogBarrier", None),
        ("LogCommand", "CreateStream"),
        ("LogCommand", "DeleteStream"),
        ("LogCommand", "PauseStream"),
        ("LogCommand", "ResumeStream"),
        ("LogCommand", "SetStreamReadonly"),
        ("LogCommand", "PublishActivity"),
    } <= kinds
    conf = next(e for e in entries if e.type_name == "LogConfiguration").configuration
    assert conf is not None
    assert [(s.suffrage_name, s.id) for s in conf.servers] == [
        ("Voter", "node1"),
        ("Voter", "node2"),
        ("Voter", "node3"),
    ]
    created = [
        e.command.fields["stream"]["name"]
        for e in entries
        if e.command and e.command.name == "CreateStream"
    ]
    assert {"__activity", "__cursors", "orders", "events", "scratch"} <= set(created)
    assert all(not e.warnings and e.appended_at is None for e in entries)  # raft v1.1.2


def test_stored_entries_equal_the_replicated_ones(stored: list[bytes]) -> None:
    """The entries a follower received in AppendEntries (the capture) are those
    the leader stored (raft.db), index by index."""
    sent: dict[int, Any] = {}
    decoders: dict[tuple, StreamDecoder] = {}
    for rec in sample_records("short.pcapng"):
        if ".request._INBOX." in rec.subject and rec.verb == "MSG":
            dec = decoders.setdefault((rec.dst, rec.subject), StreamDecoder())
            for rpc in dec.feed(rec.payload).rpcs:
                for e in rpc.entries:
                    sent[e.index] = e.to_json_dict()
    kept = {e.index: e.to_json_dict() for e in map(decode_log_entry, stored)}
    # Index 1 (the bootstrap configuration) every node wrote itself.
    assert set(kept) - set(sent) == {1} and set(sent) <= set(kept)
    assert all(sent[i] == kept[i] for i in sent)


GO_TIME_V1 = (
    bytes([1])
    + (GO_EPOCH + 1_763_700_000).to_bytes(8, "big")
    + (123_456_789).to_bytes(4, "big")
    + (0xFFFF).to_bytes(2, "big")
)


@pytest.mark.parametrize(
    "appended,want",
    [
        (GO_TIME_V1, 1_763_700_000_123_456_789),
        (b"\x02" + GO_TIME_V1[1:] + b"\x00", 1_763_700_000_123_456_789),  # version 2
        (msgpack.Timestamp(1_763_700_000, 5), 1_763_700_000_000_000_005),
        (bytes([1]) + bytes(14), None),  # Go's zero time
        (None, None),
    ],
)
def test_appended_at_in_both_of_go_msgpacks_time_formats(appended: Any, want: int | None) -> None:
    e = decode_log_entry(pack(log_map(typ=1, AppendedAt=appended)))
    assert e.appended_at == want and not e.warnings


@pytest.mark.parametrize(
    "op,fields,want",
    [
        (
            "CHANGE_LEADER",
            {"stream": "orders", "partition": 1, "leader": "node3"},
            {"stream": "orders", "partition": 1, "leader": "node3"},
        ),
        (
            "SHRINK_ISR",
            {"stream": "orders", "replicaToRemove": "node2"},
            {"stream": "orders", "replicaToRemove": "node2"},
        ),
        (
            "EXPAND_ISR",
            {"stream": "orders", "partition": 2, "replicaToAdd": "node2", "leaderEpoch": 9},
            {"stream": "orders", "partition": 2, "replicaToAdd": "node2", "leaderEpoch": "9"},
        ),
    ],
)
def test_a_command_entry_gives_its_op_and_fields(op: str, fields: dict, want: dict) -> None:
    e = decode_log_entry(pack(log_map(data=raft_log(op, **fields))))
    assert e.command is not None
    assert (e.command.op, e.command.name) == (op, COMMANDS[op].name)
    assert {k: v for k, v in e.command.fields.items() if k in want} == want


def test_deprecated_peer_entries_give_their_peers() -> None:
    e = decode_log_entry(pack(log_map(typ=2, data=pack([b"node1", b"node2"]))))
    assert e.configuration is not None
    assert [s.id for s in e.configuration.servers] == ["node1", "node2"]


def test_data_that_is_not_what_the_type_says_stays_bytes_with_a_warning() -> None:
    e = decode_log_entry(pack(log_map(data=b"\xff\xff\xff")))
    assert e.command is None and e.data == b"\xff\xff\xff"
    assert "not a protocol.RaftLog" in e.warnings[0]
    e = decode_log_entry(pack(log_map(typ=5, data=b"\x93")))
    assert e.configuration is None and "LogConfiguration data kept as bytes" in e.warnings[0]


def test_missing_and_unknown_keys_are_read_as_go_reads_them_and_said() -> None:
    e = decode_log_entry(pack({"Index": 3, "Type": 1, "Shiny": 1}))
    assert (e.index, e.term, e.data) == (3, 0, None)
    assert e.extra == {"Shiny": 1}
    assert any("Term missing" in w for w in e.warnings)
    assert any("Shiny is not a field of Log" in w for w in e.warnings)


@pytest.mark.parametrize(
    "data,kind,offset",
    [
        (b"", "truncated", 0),
        (b"\x85\xa4Data\xc0", "truncated", 7),
        (b"\xc1", "bad_msgpack", 0),
        (pack(log_map()) + b"\x00", "bad_msgpack", len(pack(log_map()))),
        (pack([1, 2]), "bad_struct", None),
        (pack(log_map(index=-1)), "bad_struct", None),
        (pack(log_map(data=7)), "bad_struct", None),
        (pack(log_map(typ=1, AppendedAt=b"\x05")), "bad_struct", None),
    ],
)
def test_bad_entries_raise_raft_error_saying_where(
    data: bytes, kind: str, offset: int | None
) -> None:
    with pytest.raises(RaftError) as info:
        decode_log_entry(data)
    assert (info.value.kind, info.value.offset) == (kind, offset)


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_give_an_entry_or_a_raft_error(data: bytes) -> None:
    try:
        decode_log_entry(data)
    except RaftError:
        pass


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_damaged_entries_give_an_entry_or_a_raft_error(data: st.DataObject) -> None:
    good = bytearray(pack(log_map(data=raft_log("CHANGE_LEADER", stream="s", leader="n"))))
    for _ in range(data.draw(st.integers(1, 4))):
        good[data.draw(st.integers(0, len(good) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_log_entry(bytes(good[: data.draw(st.integers(0, len(good)))]))
    except RaftError:
        pass


# -- the transport stream ------------------------------------------------------


def test_whole_rpcs_decode_with_their_fields() -> None:
    rpc = decode_request(APPEND)
    assert (rpc.rpc, rpc.term, rpc.node, rpc.fields["PrevLogEntry"]) == (
        "AppendEntries",
        5,
        "node2",
        40,
    )
    assert [(e.index, e.command.name if e.command else e.type_name) for e in rpc.entries] == [
        (41, "ChangeLeader"),
        (42, "LogNoop"),
    ]
    snap = decode_request(SNAPSHOT)
    assert snap.fields["Configuration"]["servers"][0]["id"] == "node1"
    assert snap.size == len(SNAPSHOT)
    names = [decode_response(r).struct for r in RESPONSES]
    assert names == [
        "AppendEntriesResponse",
        "RequestVoteResponse",
        "InstallSnapshotResponse",
        "TimeoutNowResponse",
        "RequestVoteResponse",
        "RequestPreVoteResponse",
    ]
    assert decode_response(RESPONSES[4]).error == "vote refused"
    assert stream_role(APPEND[0]) == "request" and stream_role(RESPONSES[0][0]) == "response"


def feed_all(messages: list[bytes], role: str | None = None) -> list[Any]:
    dec = StreamDecoder(role)
    return [dec.feed(m) for m in messages]


def cut(stream: bytes, points: list[int]) -> list[bytes]:
    points = sorted({p for p in points if 0 < p < len(stream)})
    return [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)])]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 2000), max_size=12), st.booleans())
def test_a_stream_cut_anywhere_gives_the_same_rpcs(points: list[int], responses: bool) -> None:
    whole = RESPONSES if responses else REQUESTS
    chunks = feed_all(cut(b"".join(whole), points))
    got = [r.to_json_dict() for c in chunks for r in c.rpcs]
    decode = decode_response if responses else decode_request
    assert got == [decode(m).to_json_dict() for m in whole]
    assert not any(c.error or c.skipped for c in chunks)
    assert chunks[-1].pending == 0


def test_a_stream_read_from_its_middle_skips_then_falls_in_step() -> None:
    stream = b"".join(REQUESTS)
    messages = [APPEND[10:], VOTE, SNAPSHOT[:30], SNAPSHOT[30:], TIMEOUT]
    chunks = feed_all(messages)
    assert chunks[0].skipped == len(APPEND) - 10 and not chunks[0].rpcs
    assert [r.rpc for c in chunks for r in c.rpcs] == [
        "RequestVote",
        "InstallSnapshot",
        "TimeoutNow",
    ]
    assert chunks[2].pending == 30 and chunks[3].continued == len(SNAPSHOT) - 30
    assert stream  # the same bytes, read whole, are in test above


def test_snapshot_bytes_are_skipped_across_messages() -> None:
    head = SNAPSHOT[:-10]
    chunks = feed_all([head + b"0123", b"4567", b"89" + TIMEOUT])
    assert [len(c.rpcs) for c in chunks] == [1, 0, 1]
    assert chunks[1].continued == 4 and chunks[2].continued == 2


def test_an_empty_message_closes_the_stream() -> None:
    chunks = feed_all([APPEND[:20], b"", VOTE])
    assert chunks[1].closed and chunks[1].error is not None
    assert chunks[1].error.kind == "truncated"
    assert [r.rpc for r in chunks[2].rpcs] == ["RequestVote"]


def test_bad_bytes_are_an_error_of_their_message_and_reading_goes_on() -> None:
    chunks = feed_all(
        [
            VOTE,
            b"\x09\x80",
            VOTE,
            bytes([0]) + pack({"Nope": 1}),
            VOTE,
            bytes([0]) + pack({"Nope": 1}),
            VOTE,
        ]
    )
    assert chunks[1].error is not None and chunks[1].error.kind == "unknown_rpc_type"
    assert chunks[3].error is not None and chunks[3].error.kind == "bad_struct"
    assert [len(c.rpcs) for c in chunks] == [1, 0, 1, 0, 1, 0, 1]
    # Out of step after an error, a message that starts no RPC is skipped.
    chunks = feed_all([VOTE, b"\x09\x80", bytes([0]) + pack({"Nope": 1}), VOTE])
    assert chunks[2].skipped == 8 and chunks[2].error is None and chunks[3].rpcs


def test_an_rpc_larger_than_the_limit_is_dropped() -> None:
    dec = StreamDecoder(max_rpc=100)
    big = request(
        0,
        Term=1,
        Leader=b"n",
        PrevLogEntry=0,
        PrevLogTerm=0,
        LeaderCommitIndex=0,
        Entries=[log_map(1, 1, 0, b"x" * 500)],
    )
    first = dec.feed(big[:60])
    second = dec.feed(big[60:120])
    assert first.pending == 60 and second.error is not None
    assert second.error.kind == "too_large" and second.skipped == 120
    assert dec.feed(big[120:]).skipped  # the rest of the dropped RPC
    assert dec.feed(VOTE).rpcs


def test_the_role_from_the_handshake_refuses_the_other_direction() -> None:
    chunks = feed_all([RESPONSES[1], VOTE], role="request")
    assert chunks[0].skipped and [r.rpc for r in chunks[1].rpcs] == ["RequestVote"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=60), max_size=8))
def test_any_messages_give_chunks_never_another_exception(messages: list[bytes]) -> None:
    for c in feed_all(messages):
        assert c.error is None or isinstance(c.error, RaftError)


def test_a_real_capture_decodes_every_raft_message() -> None:
    """short.pcapng: 2,416 stream messages, one RPC each, none skipped or in error."""
    decoders: dict[tuple, StreamDecoder] = {}
    rpcs: dict[tuple[str, str], int] = {}
    messages = 0
    for rec in sample_records("short.pcapng"):
        if ".request._INBOX." not in rec.subject:
            continue
        messages += 1
        chunk = decoders.setdefault((rec.src, rec.dst, rec.subject), StreamDecoder()).feed(
            rec.payload
        )
        assert chunk.error is None and not chunk.skipped and len(chunk.rpcs) == 1
        for r in chunk.rpcs:
            rpcs[(r.role, r.rpc)] = rpcs.get((r.role, r.rpc), 0) + 1
    assert messages == 2416
    assert rpcs == {
        ("request", "AppendEntries"): 1204,
        ("response", "AppendEntries"): 1204,
        ("request", "RequestVote"): 4,
        ("response", "RequestVote"): 4,
    }


def test_the_kaitai_parser_of_the_spec_reads_the_same_rpc_type() -> None:
    """spec/raft.ksy's own parser (Kaitai, generated) agrees on the type byte."""
    import io

    from kaitaistruct import KaitaiStream

    from lbparse_generated import raft_tables
    from lbparse_generated.kaitai.raft_transport import RaftTransport

    for req in REQUESTS:
        k = RaftTransport(KaitaiStream(io.BytesIO(req)))
        assert k.rpc_type.name == raft_tables.RPC_TYPES[req[0]]["id"]
        assert decode_request(req).rpc_type == k.rpc_type.value
