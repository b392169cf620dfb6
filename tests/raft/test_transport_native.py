"""The Raft transport's C reader (lbparse/raft/_transport.c) equals the Python one.

issue #45: `StreamDecoder` reads RPCs in C when the module is built (and
LBPARSE_NATIVE is not 0); the Python reader of lbparse.raft.transport is the
reference. Fed the same messages, the two give the same chunks (JSON, RPC
objects with their entries and warnings, sizes, errors with their kind,
message and offset) and keep the same state: on the real captures' streams,
on hypothesis-made streams of every RPC (cut anywhere, started mid-RPC,
with keys missing, extra or of another type) and on hostile bytes. The C
reader takes the plain RPCs itself (checked below, so that the equality is
not the Python reader against itself) and leaves every other to the
reference.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.hostile import check_raft_native, check_raft_native_bytes
from support.shared import shared_path
from support.wire import pack

from lbparse.raft import transport
from lbparse.raft.tables import RPC_TYPES, STRUCTS

pytestmark = pytest.mark.skipif(
    transport._NATIVE_READER is None, reason="lbparse.raft._transport is not built"
)

READER: Any = transport._NATIVE_READER
LIMIT = transport.DEFAULT_MAX_RPC
GO_EPOCH = 62_135_596_800


def _go_time(sec: int, nsec: int, version: int = 1) -> bytes:
    t = bytes([version]) + (sec + GO_EPOCH).to_bytes(8, "big") + nsec.to_bytes(4, "big")
    return t + b"\xff\xff" + (b"\x00" if version == 2 else b"")


def _log(index: int = 7, term: int = 2, typ: int = 1, data: bytes | None = None) -> dict:
    return {"Index": index, "Term": term, "Type": typ, "Data": data, "Extensions": None}


HEARTBEAT = bytes([0]) + pack(
    {
        "ProtocolVersion": 3,
        "Term": 5,
        "Leader": b"node2",
        "PrevLogEntry": 40,
        "PrevLogTerm": 4,
        "Entries": None,
        "LeaderCommitIndex": 40,
    }
)
APPEND = bytes([0]) + pack(
    {
        "ProtocolVersion": 3,
        "ID": b"node2",
        "Addr": b"node2:9000",
        "Term": 2**64 - 1,
        "Leader": b"node2",
        "PrevLogEntry": 40,
        "PrevLogTerm": 4,
        "Entries": [
            _log(41, 5, 1),
            {**_log(42, 5, 5, pack({"Servers": []})), "AppendedAt": _go_time(1_763_700_000, 9)},
        ],
        "LeaderCommitIndex": 40,
    }
)
SNAPSHOT = (
    bytes([2])
    + pack(
        {
            "ProtocolVersion": 3,
            "SnapshotVersion": 1,
            "Term": 6,
            "Leader": b"node3",
            "LastLogIndex": 42,
            "LastLogTerm": 5,
            "Peers": None,
            "Configuration": pack({"Servers": [{"Suffrage": 0, "ID": b"n1", "Address": b"a"}]}),
            "ConfigurationIndex": 1,
            "Size": 10,
        }
    )
    + b"0123456789"
)
VOTE_RESPONSE = pack(b"") + pack({"ProtocolVersion": 3, "Term": 6, "Peers": None, "Granted": True})


def test_the_c_reader_reads_plain_rpcs_itself() -> None:
    """Not the reference against itself: plain RPCs come back from C, odd ones
    (an extra key, a key of another type, an unknown RPC type) are left to
    the reference (False), and bytes that end inside an RPC wait (None)."""
    t, fields, end = READER.read_request(APPEND, 0, LIMIT)
    assert (t, end, fields["Term"], len(fields["Entries"])) == (0, len(APPEND), 2**64 - 1, 2)
    assert fields["Entries"][1]["AppendedAt"] == _go_time(1_763_700_000, 9)
    assert READER.read_request(SNAPSHOT, 0, LIMIT)[2] == len(SNAPSHOT) - 10
    number, err, fields, end = READER.read_response(VOTE_RESPONSE, 0, LIMIT)
    assert transport._RESPONSES[number][0] == "RequestVoteResponse" and err == b""
    assert READER.read_request(HEARTBEAT[:-1], 0, LIMIT) is None
    assert READER.read_response(VOTE_RESPONSE[:3], 0, LIMIT) is None
    odd = msgpack.unpackb(HEARTBEAT[1:], raw=False)
    assert READER.read_request(bytes([0]) + pack({**odd, "Other": 1}), 0, LIMIT) is False
    assert READER.read_request(bytes([0]) + pack({**odd, "Term": -1}), 0, LIMIT) is False
    assert READER.read_request(bytes([9]) + HEARTBEAT[1:], 0, LIMIT) is False


def test_the_rows_of_a_plain_message_come_from_c_in_one_call() -> None:
    """Reader.rows, feed_rows' fast path: a message's whole RPCs as `rpc_row`
    gives them (a term above 2**63 wrapped as Spark's bigint holds it), where
    the first and the last end, the rest an RPC to finish; False for a message
    with an RPC it leaves to transport.py (log entries, snapshot bytes, an odd
    key), which then reads it as it reads any other."""
    big = bytes([0]) + pack(
        {**msgpack.unpackb(HEARTBEAT[1:], raw=False), "Term": 2**64 - 1, "Leader": b"\xffn"}
    )
    want = [transport.rpc_row(transport.decode_request(r)) for r in (HEARTBEAT, big)]
    assert want[1]["term"] == -1 and want[1]["node"] == "\ufffdn"
    assert READER.rows(HEARTBEAT + big + HEARTBEAT[:5], True, LIMIT) == (
        want,
        len(HEARTBEAT),
        len(HEARTBEAT) + len(big),
    )
    assert READER.rows(HEARTBEAT[:-1], True, LIMIT) == ([], None, 0)
    vote = transport.rpc_row(transport.decode_response(VOTE_RESPONSE))
    assert vote["error"] == "" and vote["rpc"] == "RequestVote"
    assert READER.rows(VOTE_RESPONSE * 2, False, LIMIT) == (
        [vote, vote],
        len(VOTE_RESPONSE),
        2 * len(VOTE_RESPONSE),
    )
    odd = bytes([0]) + pack({**msgpack.unpackb(HEARTBEAT[1:], raw=False), "Other": 1})
    for message in (HEARTBEAT + APPEND, SNAPSHOT, HEARTBEAT + odd, VOTE_RESPONSE + HEARTBEAT):
        request = message[0] in RPC_TYPES
        assert READER.rows(message, request, LIMIT) is False
        check_raft_native([message], "request" if request else "response")


@pytest.mark.slow  # the real captures' Raft messages, each read twice
@pytest.mark.parametrize("name", ["short.pcapng", "api-short.pcapng"])
def test_the_real_captures_messages_take_the_rows_fast_path(name: str) -> None:
    """Not feed_rows' slow path against itself: each real Raft message that
    starts an RPC of a stream in step, its RPCs without log entries, has its
    rows from Reader.rows (equal to `rpc_row` of `feed`'s RPCs), and those
    are most of the messages; the report's `feed_plain` takes them as rows."""
    from lbparse.capture import CaptureReader

    path = shared_path("liftbridge", "samples", name)
    if not path.exists():
        pytest.skip(f"{path} is not here")
    decoders: dict[tuple[str, str, str], transport.StreamDecoder] = {}
    plain: dict[tuple[str, str, str], transport.StreamDecoder] = {}
    fast = total = as_rows = 0
    for rec in CaptureReader(str(path)):
        if ".raft.metadata." not in rec.subject or not rec.payload:
            continue
        dec = decoders.setdefault(
            (rec.src, rec.dst, rec.subject), transport.StreamDecoder(native=True)
        )
        ready = dec.role is not None and dec.in_step and not dec.buf and not dec.trailer
        chunk = dec.feed(rec.payload)
        total += 1
        # the report's reading (feed_plain): these same messages as rows
        as_rows += bool(
            plain.setdefault((rec.src, rec.dst, rec.subject), transport.StreamDecoder()).feed_plain(
                rec.payload
            )[1]
        )
        if not ready or chunk.error is not None or any(r.entries for r in chunk.rpcs):
            continue
        got = READER.rows(rec.payload, dec.role == "request", LIMIT)
        assert got is not False, rec.payload[:64]
        assert got[0] == [transport.rpc_row(r) for r in chunk.rpcs]
        assert got[2] == len(rec.payload) - chunk.pending
        fast += 1
    assert total > 2000 and fast > 0.8 * total, (fast, total)  # short.pcapng: 2,220 of 2,516
    assert as_rows >= fast, (as_rows, fast)


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_the_selection_follows_lbparse_native() -> None:
    """One selection (StreamDecoder without `native`): LBPARSE_NATIVE=0 is the
    Python reader."""
    code = (
        "from lbparse.raft import StreamDecoder, transport;"
        "d = StreamDecoder();"
        "print(transport.native_available(), d._read_request is transport._read_request)"
    )
    for env, want in (("0", "False True"), ("1", "True False")):
        out = subprocess.run(
            # -P: lbparse from where this run imports it (the wheel, the
            # sanitizers' build), never the checkout in the working directory
            [sys.executable, "-P", "-c", code],
            env={**os.environ, "LBPARSE_NATIVE": env},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert " ".join(out) == want


@pytest.mark.slow  # each real capture's Raft streams read both ways: a second each
@pytest.mark.parametrize("name", ["short.pcapng", "api-short.pcapng"])
def test_the_real_captures_streams(name: str) -> None:
    """Every Raft stream of the real 3-node captures: whole, and its messages
    from the second on (the capture started mid-stream)."""
    from lbparse.capture import CaptureReader

    path = shared_path("liftbridge", "samples", name)
    if not path.exists():
        pytest.skip(f"{path} is not here")
    streams: dict[tuple[str, str, str], list[bytes]] = {}
    for rec in CaptureReader(str(path)):
        if ".raft.metadata." in rec.subject and ".request._INBOX." in rec.subject:
            streams.setdefault((rec.src, rec.dst, rec.subject), []).append(rec.payload)
    assert sum(map(len, streams.values())) > 2000
    for messages in streams.values():
        check_raft_native(messages)
        check_raft_native(messages[1:], max_rpc=LIMIT)
        # messages glued and cut anew, from inside the first RPC
        stream = b"".join(messages[:40])
        check_raft_native([stream[i : i + 97] for i in range(5, len(stream), 97)])


# -- log entries into the columns (stream_rows) -----------------------------------

_AT = 1_763_700_000
# (an AppendEntries' entries, whether stream_rows reads the message in C)
ENTRIES = {
    "a command": ([_log(41, 5, 0, b"\x08\x05")], True),
    "a command without data": ([_log(41, 5, 0, None)], True),
    "a command of no RaftLog": ([_log(41, 5, 0, b"\xff")], True),
    "an op no version names": ([_log(41, 5, 0, b"\x08\x63")], True),
    "an empty RaftLog": ([_log(41, 5, 0, b"")], True),
    "a no-op with data": ([_log(41, 5, 1, b"\x08\x05")], True),
    "a type no version names": ([_log(41, 5, 99, b"\x08\x05")], True),
    "indexes past 2**63": ([_log(2**64 - 1, 2**63, 4)], True),
    "the same command twice": ([_log(1, 1, 0, b"\x08\x02"), _log(2, 1, 0, b"\x08\x02")], True),
    "time, version 1": ([{**_log(), "AppendedAt": _go_time(_AT, 9)}], True),
    "time, version 2": ([{**_log(), "AppendedAt": _go_time(_AT, 9, 2)}], True),
    "zero time": ([{**_log(), "AppendedAt": _go_time(-GO_EPOCH, 0)}], True),
    "no time": ([{**_log(), "AppendedAt": None}], True),
    "time of 14 bytes": ([{**_log(), "AppendedAt": _go_time(_AT, 9)[:14]}], False),
    "time of 15 bytes, version 2": ([{**_log(), "AppendedAt": _go_time(_AT, 9, 2)[:15]}], False),
    "time of 16 bytes, version 1": ([{**_log(), "AppendedAt": _go_time(_AT, 9) + b"\0"}], False),
    "empty time": ([{**_log(), "AppendedAt": b""}], False),
    "a msgpack timestamp": ([{**_log(), "AppendedAt": msgpack.Timestamp(_AT, 9)}], False),
    "a negative index": ([_log(-1, 5, 0)], False),
    "a bool for a type": ([_log(1, 5, True)], False),
    "extensions of a list": ([{**_log(), "Extensions": [1]}], False),
    "a key too many": ([{**_log(), "Other": 1}], False),
    "a key missing": ([{k: v for k, v in _log().items() if k != "Term"}], False),
    "the second entry odd": ([_log(1, 1, 1), {**_log(), "AppendedAt": b"x"}], False),
    "an entry that is no map": ([_log(1, 1, 1), [1, 2]], False),
}


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_stream_rows_reads_log_entries_as_the_reference(name: str) -> None:
    """An AppendEntries with log entries: stream_rows reads it in C when every
    entry is plainly a Log (the rows the reference gives, command labels and
    wrapped indexes included), else hands it to the reference, which words
    it. Each case is held equal (check_raft_native: the C and Python readers,
    the rows and the batch columns), and the case says which way it went."""
    from support.hostile import batch_rows

    entries, plain = ENTRIES[name]
    fields = {"ProtocolVersion": 3, "Term": 5, "Leader": b"node2", "PrevLogEntry": 40}
    fields |= {"PrevLogTerm": 4, "Entries": entries, "LeaderCommitIndex": 40}
    message = APPEND[:1] + pack(fields)
    check_raft_native([message], "request")
    dec = transport.StreamDecoder("request", LIMIT, native=True)
    dec.feed_rows(HEARTBEAT)  # in step: the stream's first message is the reference's
    handed: list[int] = []
    key = ("a", "b", "s")
    got = transport.stream_rows({key: dec}, ["a"], ["b"], ["s"], [message], handed.append)
    assert got is not None
    assert (got[0], handed) == ((b"\x01", []) if plain else (b"\x03", [0]))
    if plain:  # the reference's rows, read by a decoder in the same step
        ref = transport.StreamDecoder("request", LIMIT, native=False)
        ref.feed_rows(HEARTBEAT)
        want = ref.feed_rows(message)[1]
        assert batch_rows(got) == [want]
        assert len(want[0]["entries"]) == len(entries)


def test_stream_rows_asks_again_after_the_fallback_moved_a_decoder() -> None:
    """stream_rows keeps a decoder's readiness from one message to the next,
    until the fallback runs: here the fallback leaves the decoder owing a
    snapshot's bytes, which are a heartbeat's. Read again, they are
    snapshot bytes (no row), as the reference says; kept, they were a row."""
    from support.hostile import check_raft_native

    head = SNAPSHOT[: -len(b"0123456789")]
    size = msgpack.packb(10)
    assert head.count(b"Size" + size) == 1
    head = head.replace(b"Size" + size, b"Size" + msgpack.packb(len(HEARTBEAT)))
    messages = [HEARTBEAT, HEARTBEAT, head, HEARTBEAT, HEARTBEAT]
    check_raft_native(messages, "request")
    dec = transport.StreamDecoder("request", LIMIT, native=True)
    handed: list[int] = []
    key = ("a", "b", "s")

    def fallback(j: int) -> None:
        handed.append(j)
        dec.feed_rows(messages[j])

    got = transport.stream_rows({key: dec}, ["a"] * 5, ["b"] * 5, ["s"] * 5, messages, fallback)
    assert got is not None
    assert (got[0], handed) == (b"\x03\x01\x03\x03\x01", [0, 2, 3])
    assert dec.rpcs == 4  # two heartbeats in C, one and the snapshot by the fallback


# -- hypothesis-made streams ----------------------------------------------------

ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.binary(max_size=8),
    st.text(max_size=4),
    st.lists(st.integers(0, 3), max_size=2),
    st.builds(msgpack.Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 999_999_999)),
)
TIME = st.one_of(
    st.none(),
    st.builds(
        _go_time,
        st.integers(-(10**9), 10**10),
        st.integers(0, 999_999_999),
        st.sampled_from([1, 2]),
    ),
    st.binary(max_size=17),
    st.builds(msgpack.Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 999_999_999)),
)


def _value(kind: str) -> st.SearchStrategy[Any]:
    if kind == "uint":
        return st.integers(0, 2**64 - 1)
    if kind == "int":
        return st.integers(-(2**63), 2**64 - 1)
    if kind == "bool":
        return st.booleans()
    if kind == "bytes":
        return st.one_of(st.none(), st.binary(max_size=12))
    if kind == "time":
        return TIME
    if kind == "logs":
        return st.one_of(st.none(), st.lists(struct("Log"), max_size=3))
    return ANY


@st.composite
def struct(draw: st.DrawFn, name: str) -> dict[Any, Any]:
    """A struct as some hashicorp/raft version writes it, or, now and then,
    not quite (a key dropped, added, or of another type)."""
    out: dict[Any, Any] = {}
    for f in STRUCTS[name]:
        if f.since is not None and draw(st.booleans()):
            continue  # an older version
        odd = draw(st.integers(0, 40))
        if odd == 0:
            continue  # a key missing
        out[f.key] = draw(ANY if odd == 1 else _value(f.type))
    if draw(st.integers(0, 40)) == 0:
        out[draw(st.sampled_from(["Other", "term", b"\xffTerm"]))] = draw(ANY)
    if name == "Log" and out.get("Type") == 0 and draw(st.booleans()):
        out["Data"] = draw(st.binary(max_size=20))  # a RaftLog or not
    return out


@st.composite
def rpc(draw: st.DrawFn, role: str) -> bytes:
    t = RPC_TYPES[draw(st.sampled_from(sorted(RPC_TYPES)))]
    if role == "request":
        fields = draw(struct(t.request))
        if t.trailer and isinstance(fields.get(t.trailer), int):
            fields[t.trailer] = fields[t.trailer] % 50
        size = fields.get(t.trailer) if t.trailer else 0
        body = bytes([t.value]) + msgpack.packb(fields, use_bin_type=False)
        return body + b"s" * (size if type(size) is int and size > 0 else 0)
    err = draw(st.one_of(st.just(b""), st.binary(max_size=10), ANY))
    return msgpack.packb(err, use_bin_type=False) + msgpack.packb(
        draw(struct(t.response)), use_bin_type=False
    )


@st.composite
def stream(draw: st.DrawFn) -> tuple[list[bytes], str | None]:
    role = draw(st.sampled_from(["request", "response"]))
    data = b"".join(draw(st.lists(rpc(role), min_size=1, max_size=5)))
    start = draw(st.integers(0, len(data) - 1)) if draw(st.booleans()) else 0
    cuts = sorted(set(draw(st.lists(st.integers(start + 1, len(data)), max_size=8))))
    bounds = [start, *cuts, len(data)]
    messages = [data[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    if draw(st.integers(0, 10)) == 0:
        messages.insert(draw(st.integers(0, len(messages))), b"")  # the stream closes
    told = draw(st.sampled_from([None, role, "response" if role == "request" else "request"]))
    return messages, told


@pytest.mark.slow  # 400 made streams: seconds
@settings(max_examples=400, deadline=None)
@given(stream(), st.sampled_from([LIMIT, 64, 300]))
def test_made_streams(made: tuple[list[bytes], str | None], max_rpc: int) -> None:
    messages, role = made
    check_raft_native(messages, role, max_rpc)


# -- hostile bytes --------------------------------------------------------------

HEAD = bytes([0]) + b"\x87"  # an AppendEntriesRequest's type byte and map of 7


@pytest.mark.parametrize(
    "messages",
    [
        [HEARTBEAT[:k] for k in (1, 2, 5, 20)],  # truncated maps, each a new start
        [HEARTBEAT[:9], HEARTBEAT[9:30], HEARTBEAT[30:]],
        [bytes([0]) + b"\xdf\xff\xff\xff\xff"],  # a map of 4 billion entries
        [bytes([0]) + b"\xde\x00\x10" + b"\xc0" * 32],  # more entries than any struct has
        [bytes([0]) + b"\x81\xa4Term\xdb\xff\xff\xff\xff"],  # a 4 GiB string, to come
        [bytes([0]) + b"\x81\xa7Entries\xdd\x00\x01\x00\x01"],  # an array past the items
        [bytes([0]) + b"\x91" * 200 + b"\xc0"],  # deep nesting, whole
        [bytes([0]) + b"\x81\xa1a" + b"\x91" * 2000],  # deeper than msgpack's stack
        [bytes([0]) + b"\x81\x91\x01\x02"],  # a list as a key
        [bytes([0]) + b"\x81\xc1\x00"],  # the byte msgpack never uses
        [bytes([0]) + b"\x81\xd4\x01\x02\x03"],  # an ext as a key
        [HEARTBEAT.replace(b"\xa4Term\x05", b"\xa4Term\xcb" + b"\x00" * 8)],  # a float term
        [HEARTBEAT.replace(b"\xa4Term\x05", b"\xa4Term\xd0\x05")],  # an int8 term
        [HEARTBEAT.replace(b"\xa4Term\x05", b"\xa4Term\xff")],  # a negative term
        [HEARTBEAT.replace(b"\xa4Term", b"\xc4\x04Term")],  # a bin key
        [HEARTBEAT.replace(b"\xa4Term", b"\xa4Tern")],  # an unknown key, a base key missing
        [HEARTBEAT + HEARTBEAT[:3], HEARTBEAT[3:] + b"\x09\x80"],  # then an unknown type
        [SNAPSHOT[:-4], b"\x00" * 3, SNAPSHOT],  # snapshot bytes across messages
        [SNAPSHOT.replace(b"\xa4Size\x0a", b"\xa4Size\xff")],  # a negative size
        [APPEND.replace(b"\x01\x00\x00", b"\x07\x00\x00", 1)],  # a bad time
        [b"\xa0" + b"\x80", b"\xc0", VOTE_RESPONSE],  # an empty map, a nil error
        [b"\xa3err\x84" + VOTE_RESPONSE[2:]],  # an error string
        [b"\xd9\x05abc", b"de\x81\xa4Term\x01"],  # str8, across messages
        [b"\xff" * 30, b"\x00\x80"],  # garbage, then a map without keys
        [b""],
    ],
)
def test_hostile_bytes(messages: list[bytes]) -> None:
    for role in (None, "request", "response"):
        check_raft_native(messages, role)
        check_raft_native(messages, role, max_rpc=16)
    # every role of its own: once, not once a role above
    check_raft_native_bytes(bytes([len(messages[0]) % 17]) + b"".join(messages))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes(data: bytes) -> None:
    check_raft_native_bytes(data)
    check_raft_native_bytes(HEAD + data)
