"""Wire bytes for tests that build messages by hand: protobuf's varints, and
hashicorp/raft's (msgpack as go-msgpack's MsgpackHandle writes it, and the
transport stream's requests and responses).
"""

from __future__ import annotations

from typing import Any

import msgpack

import lbparse
from lbparse.raft import COMMANDS


def varint(n: int, width: int = 0) -> bytes:
    """n as a protobuf varint, padded with continuation bytes to at least
    `width` bytes (what upb reads up to MAX_SIZE_BYTES, and refuses past it)."""
    out = bytearray()
    while True:
        out.append(n & 0x7F | 0x80)
        n >>= 7
        if not n:
            break
    while len(out) < width:
        out.append(0x80)
    out[-1] &= 0x7F
    return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int] | None:
    """(the varint at `pos`, the position after it); None when the bytes end
    inside it. Any length is read: this is for messages tests made."""
    n = shift = 0
    while pos < len(data):
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return n, pos
    return None


# ----------------------------------------------------------------------
# hashicorp/raft's bytes made by hand: msgpack as go-msgpack's MsgpackHandle
# writes it, and the transport stream's requests and responses (the raft
# decoders' tests, and the report's leaders from made-up Raft traffic).


def pack(obj: Any) -> bytes:
    """msgpack as go-msgpack's MsgpackHandle writes it: []byte as raw strings."""
    return msgpack.packb(obj, use_bin_type=False)


def request(rpc_type: int, **fields: Any) -> bytes:
    return bytes([rpc_type]) + pack({"ProtocolVersion": 3, **fields})


def response(error: bytes = b"", **fields: Any) -> bytes:
    return pack(error) + pack({"ProtocolVersion": 3, **fields})


def log_map(
    index: int = 7, term: int = 2, typ: int = 0, data: bytes | None = None, **more: Any
) -> dict:
    return {"Data": data, "Extensions": None, "Index": index, "Term": term, "Type": typ, **more}


def raft_log(op: str, **fields: Any) -> bytes:
    """A protocol.RaftLog of `op` with its operation's fields set."""
    log = lbparse.message_class("protocol.RaftLog")()
    log.op = log.DESCRIPTOR.fields_by_name["op"].enum_type.values_by_name[op].number
    sub = getattr(log, COMMANDS[op].field)
    for k, v in fields.items():
        setattr(sub, k, v)
    sub.SetInParent()
    return log.SerializeToString()


# The transport stream's RPCs of every type, as a real cluster sends them
# (tests/raft, and fuzz/build_corpus.py's seeds of the `raft` target).
APPEND = request(
    0,
    Term=5,
    Leader=b"node2",
    PrevLogEntry=40,
    PrevLogTerm=4,
    LeaderCommitIndex=40,
    Entries=[
        log_map(41, 5, 0, raft_log("CHANGE_LEADER", stream="orders", leader="node2")),
        log_map(42, 5, 1),
    ],
)
VOTE = request(
    1, Term=6, Candidate=b"node3", LastLogIndex=42, LastLogTerm=5, LeadershipTransfer=False
)
SNAPSHOT = (
    request(
        2,
        SnapshotVersion=1,
        Term=6,
        Leader=b"node3",
        LastLogIndex=42,
        LastLogTerm=5,
        Peers=None,
        Configuration=pack({"Servers": [{"Suffrage": 0, "ID": b"node1", "Address": b"node1"}]}),
        ConfigurationIndex=1,
        Size=10,
    )
    + b"0123456789"
)
TIMEOUT = request(3)
REQUESTS = [APPEND, VOTE, SNAPSHOT, TIMEOUT, VOTE]
RESPONSES = [
    response(Term=5, LastLog=42, Success=True, NoRetryBackoff=False),
    response(Term=6, Peers=None, Granted=True),
    response(Term=6, Success=True),
    response(),
    response(b"vote refused", Term=6, Peers=None, Granted=False),
    response(Term=6, Granted=True),
]  # a pre-vote (raft v1.7): no Peers
