"""hashicorp/raft's NetworkTransport byte stream, as nats-on-a-log carries it on NATS.

A Raft connection is two byte streams, each published to the other side's
inbox (`<prefix><node>.request._INBOX.<nuid>`) in NATS messages of any
size: requests (an RPC type byte, then the msgpack request struct; an
InstallSnapshot's snapshot bytes after it) one way, responses (a msgpack
error string, then the response struct) the other. `StreamDecoder` reads
one such stream message by message and says, for each message, which RPCs
it completed (`Chunk`). It is fed the messages of one inbox as one
connection carried them, in order (the capture reader keeps one per TCP
direction and subject).

A message may start inside an RPC whose beginning was never seen (the
capture started late, or a message was lost): until a message starts
with a whole RPC's beginning, the decoder is out of step and counts the
bytes it skips. A response struct is named by its keys (no two response
structs of any version have the same set; spec/raft.ksy), so a stream
read from its middle still names its RPCs. An empty message closes the
stream. Malformed bytes are an error of their message, and the decoder
waits for the next message that starts an RPC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lbparse.errors import OperationalError
from lbparse.native_switch import native_enabled
from lbparse.raft.entries import (
    LOG_COMMAND,
    LogEntry,
    command_label,
    decode_configuration,
    entry_from_struct,
)
from lbparse.raft.errors import RaftError
from lbparse.raft.msgpack_structs import (
    LIST_OF,
    MAX_PENDING_ITEMS,
    StructValue,
    all_keys,
    base_keys,
    go_time_ns,
    json_fields,
    key_name,
    read_object,
    read_struct,
    text,
)
from lbparse.raft.tables import RPC_TYPES, STRUCTS, RpcType, log_type_name

_transport: Any
try:
    from lbparse.raft import _transport
except ImportError:  # not built: the Python reader alone
    _transport = None

__all__ = [
    "REQUEST",
    "RESPONSE",
    "Chunk",
    "RPC",
    "StreamDecoder",
    "decode_request",
    "decode_response",
    "native_available",
    "rpc_names_by_code",
    "rpc_row",
    "stream_role",
    "stream_rows",
]

REQUEST, RESPONSE = "request", "response"
DEFAULT_MAX_RPC = 64 << 20  # bytes one RPC may take while it is reassembled
_BY_REQUEST = {t.request: t for t in RPC_TYPES.values()}
_BY_RESPONSE = {t.response: t for t in RPC_TYPES.values()}
# The response structs, smallest declaration first: a map is the first whose
# first version's keys it has and whose every key it declares.
_RESPONSES = sorted(((n, base_keys(n), all_keys(n)) for n in _BY_RESPONSE), key=lambda r: len(r[2]))


_TERM = "Term"  # the raft_rpcs row's term
_NODE = ("Leader", "Candidate", "ID")  # its node: the first of these an RPC has
_ENTRIES = "Entries"  # a request's log entries (raft_entries' rows)
_LOG = ("Index", "Term", "Type", "Data")  # an entry's row's fields: the Log struct's keys


def _term(fields: dict[str, Any]) -> int | None:
    """An RPC's Term field, None when it has none."""
    t = fields.get(_TERM)
    return t if isinstance(t, int) else None


def _node(fields: dict[str, Any]) -> str | None:
    """An RPC's leader, candidate or ID field: from an RPC's fields (ids made
    text) or a struct's raw ones (ids still bytes), the same text."""
    for key in _NODE:
        v = fields.get(key)
        if v:
            return text(v) if isinstance(v, bytes) else str(v)
    return None


@dataclass(frozen=True, slots=True)
class RPC:
    """One request or response of the Raft transport.

    Attributes:
        role: REQUEST or RESPONSE.
        rpc: The RPC's name (AppendEntries, RequestVote, ...).
        rpc_type: Its type byte.
        struct: The struct it was read as (AppendEntriesRequest, ...).
        fields: The struct's fields by key (ids and addresses as text).
        entries: The log entries of an AppendEntries request.
        error: The error text a response carries (None for a request, "" for
            none).
        size: Bytes on the stream (snapshot bytes included).
        warnings: What did not fit the struct's declaration.
    """

    role: str  # REQUEST or RESPONSE
    rpc: str  # AppendEntries, RequestVote, ...
    rpc_type: int
    struct: str  # AppendEntriesRequest, ...
    fields: dict[str, Any]
    entries: tuple[LogEntry, ...] = ()
    error: str | None = None
    size: int = 0  # bytes on the stream (snapshot bytes included)
    warnings: tuple[str, ...] = ()

    @property
    def term(self) -> int | None:
        """The RPC's Term field, None when it has none."""
        return _term(self.fields)

    @property
    def node(self) -> str | None:
        """The leader (AppendEntries, InstallSnapshot) or candidate (RequestVote)."""
        return _node(self.fields)

    def to_json_dict(self) -> dict[str, Any]:
        """The RPC as a JSON-ready dict.

        Returns:
            A new dict: role, rpc, rpc_type, struct, fields (64-bit integers as
            Int64); entries for an AppendEntries request, error and warnings when
            there are any.
        """
        d: dict[str, Any] = {
            "role": self.role,
            "rpc": self.rpc,
            "rpc_type": self.rpc_type,
            "struct": self.struct,
            "fields": json_fields(self.struct, self.fields),
        }
        if self.role == REQUEST and self.rpc_type == 0:
            d["entries"] = [e.to_json_dict() for e in self.entries]
        if self.error is not None:
            d["error"] = self.error
        if self.warnings:
            d["warnings"] = list(self.warnings)
        return d


@dataclass(slots=True)
class Chunk:
    """What one NATS message of a stream held.

    Attributes:
        role: REQUEST or RESPONSE, None while the stream's direction is
            unknown.
        rpcs: The RPCs this message completed (an RPC belongs to the message
            that carries its last byte).
        continued: Bytes at its start that finish an RPC begun in earlier
            messages.
        pending: Bytes of an RPC it leaves unfinished.
        skipped: Bytes read out of step (the start of their RPC never seen).
        closed: An empty message, the end of the stream.
        error: Malformed bytes (the rest of the message is skipped).
    """

    role: str | None
    rpcs: list[RPC] = field(default_factory=list)
    continued: int = 0
    pending: int = 0
    skipped: int = 0
    closed: bool = False
    error: RaftError | None = None

    def to_json_dict(self) -> dict[str, Any]:
        """The chunk as a JSON-ready dict.

        Returns:
            A new dict: role and rpcs; continued, pending, skipped, closed and
            error only when set.
        """
        d: dict[str, Any] = {"role": self.role, "rpcs": [r.to_json_dict() for r in self.rpcs]}
        for key in ("continued", "pending", "skipped"):
            if getattr(self, key):
                d[key] = getattr(self, key)
        if self.closed:
            d["closed"] = True
        if self.error is not None:
            d["error"] = self.error.to_json_dict()
        return d


def _fields(s: StructValue) -> dict[str, Any]:
    """A struct's fields for people: byte ids as text, entries left out."""
    out: dict[str, Any] = {}
    for k, v in s.fields.items():
        if k == "Entries":
            continue
        out[k] = text(v) if isinstance(v, bytes) else v
    return out


def _warnings(s: StructValue) -> list[str]:
    w = [f"key {k} missing (read as its zero value)" for k in s.missing]
    w += [f"key {k} is not a field of {s.name} in any hashicorp/raft version" for k in s.extra]
    return w


def _request(t: RpcType, s: StructValue, size: int) -> RPC:
    entries = tuple(entry_from_struct(e) for e in s.fields.get("Entries", ()))
    fields = _fields(s)
    warnings = _warnings(s)
    conf = s.fields.get("Configuration")
    if t.trailer and conf:  # InstallSnapshot: the membership, readable
        try:
            fields["Configuration"] = decode_configuration(conf).to_json_dict()
        except RaftError as exc:
            warnings.append(f"Configuration kept as bytes: {exc.message}")
    return RPC(REQUEST, t.name, t.value, t.request, fields, entries, None, size, tuple(warnings))


def _response_struct(obj: Any) -> str | None:
    """The response struct whose keys these are (the smallest declaration that
    holds them and every key its first version wrote)."""
    if not isinstance(obj, dict) or not all(isinstance(k, bytes) for k in obj):
        return None
    keys = {key_name(k) for k in obj}
    for name, base, every in _RESPONSES:  # smallest declaration first
        if base <= keys <= every:
            return name
    return None


def _request_fits(t: RpcType, obj: Any) -> bool:
    if not isinstance(obj, dict) or not all(isinstance(k, bytes) for k in obj):
        return False
    return base_keys(t.request) <= {key_name(k) for k in obj}


def _read_request(
    buf: bytes | bytearray, pos: int, limit: int | None
) -> tuple[RpcType, StructValue, int, int] | None:
    """(type, struct, end of struct, trailer length) of the request at pos; None: incomplete."""
    t = RPC_TYPES.get(buf[pos])
    if t is None:
        raise RaftError(
            "unknown_rpc_type",
            f"RPC type byte {buf[pos]} at offset {pos}; "
            f"hashicorp/raft's are {', '.join(map(str, RPC_TYPES))}",
            offset=pos,
        )
    got = read_object(buf, pos + 1, limit)
    if got is None:
        return None
    obj, end = got
    if not _request_fits(t, obj):
        raise RaftError(
            "bad_struct",
            f"offset {pos + 1}: not an {t.request} (keys {_key_list(obj)})",
            offset=pos + 1,
        )
    s = read_struct(t.request, obj)
    return t, s, end, _trailer(t, s, pos)


def _trailer(t: RpcType, s: StructValue, pos: int) -> int:
    """The snapshot bytes that follow the request (its trailer field)."""
    trailer = int(s.fields.get(t.trailer, 0)) if t.trailer else 0
    if trailer < 0:
        raise RaftError("bad_struct", f"{t.request}.Size is {trailer}", offset=pos + 1)
    return trailer


def _read_response(buf: bytes | bytearray, pos: int, limit: int | None) -> tuple[RPC, int] | None:
    got = _read_response_parts(buf, pos, limit)
    if got is None:
        return None
    s, err, end = got
    return _response(s, err, end - pos), end


def _read_response_parts(
    buf: bytes | bytearray, pos: int, limit: int | None
) -> tuple[StructValue, bytes, int] | None:
    """(struct, error bytes, end) of the response at pos; None: incomplete."""
    got = read_object(buf, pos, limit)
    if got is None:
        return None
    err, mid = got
    if not isinstance(err, bytes):
        raise RaftError(
            "bad_struct",
            f"offset {pos}: a response starts with its error string, not {type(err).__name__}",
            offset=pos,
        )
    got = read_object(buf, mid, limit)
    if got is None:
        return None
    obj, end = got
    name = _response_struct(obj)
    if name is None:
        raise RaftError(
            "bad_struct",
            f"offset {mid}: not a response struct of any RPC (keys {_key_list(obj)})",
            offset=mid,
        )
    return read_struct(name, obj), err, end


def _response(s: StructValue, err: bytes, size: int) -> RPC:
    t = _BY_RESPONSE[s.name]
    return RPC(
        RESPONSE,
        t.name,
        t.value,
        s.name,
        _fields(s),
        (),
        err.decode("utf-8", "replace"),
        size,
        tuple(_warnings(s)),
    )


# -- rows: an RPC as the narrow tables hold it --------------------------------
#
# The pipeline's raft_rpcs column wants a few fields of each RPC, not the RPC:
# StreamDecoder.feed_rows makes these rows straight from the struct read (no
# RPC, no fields dict, no warnings), ~4x less Python per message. `rpc_row`
# is their reference, from the RPC (tests/raft/test_transport_native.py holds
# the two equal on every stream the C and Python readers are compared on).


def _bigint(n: int | None) -> int | None:
    """A uint64 (term, index) as Spark's bigint holds it: above 2**63, wrapped
    (as Spark's uint64 and the commit-log struct's are), never a failed batch."""
    return n if n is None or n < 2**63 else n - 2**64


def _entry_row(e: LogEntry) -> dict[str, Any]:
    return {
        "index": _bigint(e.index),
        "term": _bigint(e.term),
        "type": e.type_name,
        "command": (e.command.name or e.command.op) if e.command else None,
        "command_data": e.data if e.type == LOG_COMMAND else None,
    }


def rpc_row(r: RPC) -> dict[str, Any]:
    """The RPC as a row of the narrow tables' raft_rpcs column.

    Args:
        r: The RPC.

    Returns:
        A new dict: role, rpc, term, node, error, and entries (index, term,
        type, command and, for a LogCommand, its data); terms and indexes as
        Spark's bigint holds them.
    """
    return {
        "role": r.role,
        "rpc": r.rpc,
        "term": _bigint(r.term),
        "node": r.node,
        "error": r.error,
        "entries": [_entry_row(e) for e in r.entries],
    }


def _row(role: str, t: RpcType, s: StructValue, error: str | None) -> dict[str, Any]:
    """rpc_row of the RPC _request or _response would make of the struct."""
    f = s.fields
    return {
        "role": role,
        "rpc": t.name,
        "term": _bigint(_term(f)),
        "node": _node(f),
        "error": error,
        "entries": [_log_row(e) for e in f.get(_ENTRIES, ())] if role == REQUEST else [],
    }


def _log_row(log: StructValue) -> dict[str, Any]:
    """_entry_row of the entry entry_from_struct would make of the struct, with
    no LogEntry: a command's name or op only (its JSON, its configuration and
    the warnings are not in the row)."""
    f = log.fields
    index, term, typ, data = (f[key] for key in _LOG)
    command = typ == LOG_COMMAND and data is not None
    return {
        "index": _bigint(index),
        "term": _bigint(term),
        "type": log_type_name(typ),
        "command": command_label(data) if command else None,
        "command_data": data if command else None,
    }


# -- the C reader (lbparse/raft/_transport.c) ---------------------------------
#
# It reads an RPC only when it is plainly what a hashicorp/raft version
# writes, and answers False for anything else: the Python reader above then
# reads it (and words its error or warnings), so the two give one answer
# (tests/raft/test_transport_native.py). Its tables are spec/raft.ksy's, from
# lbparse.raft.tables: it holds no layout of its own.

_NATIVE_TYPES = {"uint": 0, "int": 1, "bool": 2, "bytes": 3, "time": 4}
_NATIVE_LIST, _NATIVE_OTHER = 5, 6
_STRUCT_NAMES = tuple(STRUCTS)


def _native_tables() -> tuple[Any, ...]:
    index = {name: i for i, name in enumerate(_STRUCT_NAMES)}
    structs = tuple(
        tuple(
            (
                f.key,
                _NATIVE_LIST if f.type in LIST_OF else _NATIVE_TYPES.get(f.type, _NATIVE_OTHER),
                f.since is None,
                index.get(LIST_OF.get(f.type, ""), -1),
            )
            for f in STRUCTS[name]
        )
        for name in _STRUCT_NAMES
    )
    requests = {t.value: index[t.request] for t in RPC_TYPES.values()}
    responses = tuple(index[name] for name, _, _ in _RESPONSES)
    # Reader.rows: the names of `_row`'s rows, and the requests it leaves to
    # _drain (a snapshot's bytes follow them).
    rows = (
        REQUEST,
        RESPONSE,
        {t.value: t.name for t in RPC_TYPES.values()},
        tuple(t.value for t in RPC_TYPES.values() if t.trailer),
        tuple(_BY_RESPONSE[name].name for name, _, _ in _RESPONSES),
        ("role", "rpc", "term", "node", "error", "entries"),
        _TERM,
        _NODE,
        # stream_rows' log entries (_log_row's, but the command: its data)
        _ENTRIES,
        _LOG,
        LOG_COMMAND,
    )
    return structs, requests, responses, MAX_PENDING_ITEMS, rows


# What the C reader leaves to Python in a struct's fields, by key: a time's
# bytes (go_time_ns; sub None) and a list's structs (sub: their struct).
_POST: dict[str, tuple[tuple[str, str | None], ...]] = {
    name: tuple(
        (f.key, LIST_OF.get(f.type)) for f in STRUCTS[name] if f.type == "time" or f.type in LIST_OF
    )
    for name in _STRUCT_NAMES
}
_NATIVE_READER: Any = _transport.Reader(*_native_tables()) if _transport is not None else None


def _native_struct(name: str, fields: dict[str, Any]) -> StructValue:
    for key, sub in _POST[name]:
        if key in fields:
            v = fields[key]
            fields[key] = go_time_ns(v, key) if sub is None else [_native_struct(sub, d) for d in v]
    return StructValue(name, fields)


def _native_read_request(
    buf: bytes | bytearray, pos: int, limit: int | None
) -> tuple[RpcType, StructValue, int, int] | None:
    """_read_request, in C when the request is plain."""
    got: Any = _NATIVE_READER.read_request(buf, pos, limit) if limit is not None else False
    if got is None:
        return None
    if got is not False:
        value, fields, end = got
        t = RPC_TYPES[value]
        try:
            s = _native_struct(t.request, fields)
            return t, s, end, _trailer(t, s, pos)
        except RaftError:  # the reference words it
            pass
    return _read_request(buf, pos, limit)


def _native_read_response_parts(
    buf: bytes | bytearray, pos: int, limit: int | None
) -> tuple[StructValue, bytes, int] | None:
    """_read_response_parts, in C when the response is plain."""
    got: Any = _NATIVE_READER.read_response(buf, pos, limit) if limit is not None else False
    if got is None:
        return None
    if got is not False:
        number, err, fields, end = got
        try:
            return _native_struct(_RESPONSES[number][0], fields), err, end
        except RaftError:  # the reference words it
            pass
    return _read_response_parts(buf, pos, limit)


def rpc_names_by_code() -> tuple[str | None, ...]:
    """The RPC names of `stream_rows`' row codes.

    Returns:
        A name for each code: a request's type byte (0-255), then 256 plus a
        response's number; None where no RPC has the code.
    """
    names: list[str | None] = [None] * (256 + len(_RESPONSES))
    for t in RPC_TYPES.values():
        names[t.value] = t.name
    for k, (name, _, _) in enumerate(_RESPONSES):
        names[256 + k] = _BY_RESPONSE[name].name
    return tuple(names)


def stream_rows(
    streams: dict[Any, StreamDecoder],
    src: list[str],
    dst: list[str],
    subject: list[str],
    payload: list[bytes | None],
    fallback: Any,
) -> tuple[bytes, ...] | None:
    """A batch of stream messages read in C, their RPCs' rows as columns.

    Each message in order, on the decoder `streams[(src, dst, subject)]`: one
    that `StreamDecoder.feed_whole` would read (and whose node and error
    strings are ASCII) is read in C, its rows into the columns, the decoder
    moved on as feed_whole moves it; any other is `fallback(j)`'s, called in
    its turn (it reads message j as the reference does). A None payload is
    skipped (no row, no call).

    Args:
        streams: The decoders by (src, dst, subject) (TrafficReader.streams).
        src: Each message's sender.
        dst: Each message's receiver.
        subject: Each message's subject.
        payload: Each message's bytes, None to skip it.
        fallback: Called with j for each message not read here.

    Returns:
        None when the C reader is not in use; else bytes: a code per message
        (0 skipped, 1 read here as requests, 2 as responses, 3 fallback's),
        then the rows' columns: offsets (int32, a message's rows), the RPC
        (uint16, rpc_names_by_code), term (int64) and its validity (uint8),
        node offsets, bytes and validity, error offsets, bytes and validity;
        then the rows' log entries (a request's `Entries`, as `_log_row`
        makes them): offsets (int32, a row's entries), index and term
        (int64, as `_bigint`), type (uint64: `log_type_name`'s number), and
        the data whose `command_label` is the entry's command (a LogCommand's
        with data): offsets (int32), bytes and validity.
    """
    if not native_available():
        return None
    got: tuple[bytes, ...] = _NATIVE_READER.stream_rows(
        streams, src, dst, subject, payload, fallback
    )
    return got


def native_available() -> bool:
    """Whether the C reader is built and not turned off (LBPARSE_NATIVE=0).

    Returns:
        True when a StreamDecoder made without `native` reads in C.
    """
    return _NATIVE_READER is not None and native_enabled()


def _key_list(obj: Any) -> str:
    if not isinstance(obj, dict):
        return f"none: a {type(obj).__name__}"
    return (
        ", ".join(
            k.decode("utf-8", "replace") if isinstance(k, bytes) else repr(k) for k in list(obj)[:8]
        )
        or "none"
    )


def decode_request(data: bytes) -> RPC:
    """One whole request (type byte, struct, snapshot bytes if any).

    Args:
        data: The request's bytes, exactly.

    Returns:
        The request RPC.

    Raises:
        RaftError: The bytes are empty (truncated), not a request (unknown
            RPC type, bad_struct, bad_msgpack), or longer or shorter than the
            request (bad_msgpack, truncated).
    """
    got = _read_request(data, 0, None) if data else None
    if got is None:
        raise RaftError("truncated", "no request: the bytes are empty", offset=0)
    t, s, end, trailer = got
    if end + trailer != len(data):
        raise RaftError(
            "bad_msgpack",
            f"{t.request} ends at offset {end + trailer}, the bytes at {len(data)}",
            offset=end + trailer,
        )
    return _request(t, s, len(data))


def decode_response(data: bytes) -> RPC:
    """One whole response (error string, struct).

    Args:
        data: The response's bytes, exactly.

    Returns:
        The response RPC.

    Raises:
        RaftError: The bytes are not a response (bad_struct, bad_msgpack),
            end inside it (truncated), or go on after it (bad_msgpack).
    """
    got = _read_response(data, 0, None)
    assert got is not None  # without a limit: complete or an error
    rpc, end = got
    if end != len(data):
        raise RaftError(
            "bad_msgpack", f"{len(data) - end} bytes after the {rpc.struct}", offset=end
        )
    return rpc


def stream_role(first: int) -> str | None:
    """Which way a stream flows, from the first byte of an RPC in it.

    A request starts with its type byte, a response with a msgpack string
    (fixstr, str8/16/32).

    Args:
        first: The first byte of an RPC.

    Returns:
        REQUEST, RESPONSE, or None when the byte starts neither.
    """
    if first in RPC_TYPES:
        return REQUEST
    if 0xA0 <= first <= 0xBF or first in (0xD9, 0xDA, 0xDB):
        return RESPONSE
    return None


class StreamDecoder:
    """One direction of one Raft transport stream, fed message by message.

    Args:
        role: REQUEST or RESPONSE when the handshake said which way the
            stream flows; None: it is learnt from the first RPC read.
        max_rpc: The most bytes one RPC may take while it is reassembled;
            a longer one is dropped (error too_large).
        native: Read RPCs with the C reader (True; it must be built) or the
            Python one (False); None: the C one when `native_available()`.
            Both give the same chunks.

    Raises:
        OperationalError: `native` is True and the C reader is not built.
    """

    def __init__(
        self, role: str | None = None, max_rpc: int = DEFAULT_MAX_RPC, native: bool | None = None
    ) -> None:
        if native is None:
            native = native_available()
        elif native and _NATIVE_READER is None:
            raise OperationalError("failed", "lbparse.raft._transport is not built")
        self._read_request = _native_read_request if native else _read_request
        self._read_response = _native_read_response_parts if native else _read_response_parts
        # feed_rows' rows of a message in one C call (Reader.rows), when it can
        self._rows = _NATIVE_READER.rows if native else None
        self.role = role
        self.max_rpc = max_rpc
        self.buf = bytearray()  # the unfinished RPC, from its first byte
        self.trailer = 0  # snapshot bytes still to skip
        self.in_step = False  # whether the next byte starts or continues a known RPC
        self.rpcs = 0
        self.skipped = 0

    def feed(self, payload: bytes) -> Chunk:
        """The next NATS message of the stream.

        Malformed bytes are the chunk's error, never raised: the decoder waits
        for the next message that starts an RPC.

        Args:
            payload: The message's payload (empty: the stream closes).

        Returns:
            The Chunk: the RPCs the message completed, and what it continued,
            left pending or skipped.
        """
        return self._feed(payload, None)

    def feed_rows(self, payload: bytes) -> tuple[Chunk, list[dict[str, Any]]]:
        """`feed`, with the completed RPCs as raft_rpcs rows (`rpc_row`) only.

        The pipeline's columns need these few fields of each RPC; no RPC object
        is made. A stream may be fed by both methods in turn.

        Args:
            payload: The message's payload (empty: the stream closes).

        Returns:
            The Chunk (its `rpcs` empty) and the rows of the RPCs it completed.
        """
        rows: list[dict[str, Any]] = []
        return self._feed(payload, rows), rows

    def feed_plain(self, payload: bytes) -> tuple[Chunk, list[dict[str, Any]]]:
        """`feed`, with the plain RPCs as rows.

        A message the C reader reads whole in one call gives `feed_rows`' rows,
        any other (log entries, snapshot bytes, a struct it leaves to Python,
        no C reader) `feed`'s RPC objects.

        The report wants the RPCs of a heartbeat as few fields, and the log
        entries' commands whole (their messages: which leader, which ISR). A
        message gives one or the other, never both.

        Args:
            payload: The message's payload (empty: the stream closes).

        Returns:
            The Chunk (its `rpcs` the RPC objects) and the rows of the RPCs
            read as rows.
        """
        rows: list[dict[str, Any]] = []
        return self._feed(payload, rows, objects=True), rows

    def _feed(
        self, payload: bytes, rows: list[dict[str, Any]] | None, objects: bool = False
    ) -> Chunk:
        chunk = Chunk(self.role)
        if not payload:
            chunk.closed = True
            if self.buf or self.trailer:
                chunk.error = RaftError(
                    "truncated",
                    f"the stream closed inside an RPC "
                    f"({len(self.buf) + self.trailer} bytes unfinished)",
                )
            self._reset()
            return chunk
        pos = 0
        if self.trailer:  # snapshot bytes owed by an InstallSnapshot
            pos = min(self.trailer, len(payload))
            self.trailer -= pos
            chunk.continued = pos
            if pos == len(payload):
                return chunk
        carry = len(self.buf)
        if not carry and not self.in_step and not self._starts_rpc(payload):
            chunk.skipped = len(payload)
            self.skipped += len(payload)
            return chunk
        self.in_step = True
        # A message that starts with an RPC (the common case: most carry whole
        # ones) is read where it is; only what it leaves unfinished is copied.
        # Appending every message to the buffer and cutting it after cost more
        # than reading its RPCs.
        direct = not carry and not pos
        if direct:
            buf: bytes | bytearray = payload
        else:
            self.buf += memoryview(payload)[pos:]
            buf = self.buf
        try:
            first_end, used = self._drain(chunk, rows, buf, objects)
        except RaftError as exc:
            chunk.error = exc
            chunk.skipped = len(buf)
            self.skipped += len(buf)
            self._reset()
            return chunk
        if not direct:
            del self.buf[:used]
        elif used < len(payload):
            self.buf += memoryview(payload)[used:]
        if carry:
            chunk.continued += (first_end - carry) if first_end is not None else len(payload) - pos
        chunk.pending = len(self.buf)
        if len(self.buf) > self.max_rpc:
            chunk.error = RaftError(
                "too_large",
                f"an RPC longer than {self.max_rpc} bytes: "
                "dropped, reading resumes at the next RPC",
            )
            chunk.skipped = len(self.buf)
            chunk.pending = 0
            self.skipped += len(self.buf)
            self._reset()
        chunk.role = self.role
        return chunk

    def _reset(self) -> None:
        self.buf = bytearray()
        self.trailer = 0
        self.in_step = False

    def _starts_rpc(self, payload: bytes) -> bool:
        """Whether the message begins with the beginning of an RPC of this stream."""
        role = self.role or stream_role(payload[0])
        if role is None or (self.role and stream_role(payload[0]) != self.role):
            return False
        try:
            got = (
                self._read_request(payload, 0, self.max_rpc)
                if role == REQUEST
                else self._read_response(payload, 0, self.max_rpc)
            )
        except RaftError:
            return False
        if got is None:  # longer than this message: its first byte and map header must fit
            return _plausible_start(payload, role)
        self.role = role
        return True

    def _drain(
        self,
        chunk: Chunk,
        rows: list[dict[str, Any]] | None,
        buf: bytes | bytearray,
        objects: bool = False,
    ) -> tuple[int | None, int]:
        """Read every whole RPC in `buf` (into the chunk, or as rows into
        `rows`; `objects`: as rows only when the C reader reads them all):
        where the first RPC ended in it (None: none did), and where the whole
        ones end (the unfinished rest is the caller's to keep)."""
        if rows is not None and self.role is not None and self._rows is not None:
            # The rows of the message's RPCs at once (`_row`'s, read as
            # _native_read_request and _native_read_response_parts read
            # them); False: one of them is not plain, has log entries or
            # snapshot bytes, and the loop below reads them all.
            got = self._rows(buf, self.role == REQUEST, self.max_rpc)
            if got is not False:
                found, first, end = got
                rows += found
                self.rpcs += len(found)
                return first, end
        if objects:
            rows = None
        done = 0
        pos = 0
        first_end = None
        while pos < len(buf):
            if self.role is None:
                self.role = stream_role(buf[pos])
                if self.role is None:
                    raise RaftError(
                        "bad_struct",
                        f"byte {buf[pos]:#04x} at offset {pos} "
                        "starts neither a request nor a response",
                        offset=pos,
                    )
            if self.role == REQUEST:
                got = self._read_request(buf, pos, self.max_rpc)
                if got is None:
                    break
                t, s, end, trailer = got
                take = min(trailer, len(buf) - end)
                if rows is None:
                    chunk.rpcs.append(_request(t, s, end - pos + trailer))
                else:
                    rows.append(_row(REQUEST, t, s, None))
                self.trailer = trailer - take
                pos = end + take
            else:
                resp = self._read_response(buf, pos, self.max_rpc)
                if resp is None:
                    break
                s, err, end = resp
                if rows is None:
                    chunk.rpcs.append(_response(s, err, end - pos))
                else:
                    rows.append(
                        _row(RESPONSE, _BY_RESPONSE[s.name], s, err.decode("utf-8", "replace"))
                    )
                pos = end
            done += 1
            if first_end is None:
                first_end = pos
        self.rpcs += done
        return first_end, pos


def _is_map(byte: int) -> bool:
    return 0x80 <= byte <= 0x8F or byte in (0xDE, 0xDF)


def _plausible_start(payload: bytes, role: str) -> bool:
    """The first bytes of an RPC longer than this message: a type byte, then a
    map header (request); an error string, then a map header (response). The
    message may end anywhere after the first byte."""
    if role == REQUEST:
        return len(payload) == 1 or _is_map(payload[1])
    try:
        got = read_object(payload, 0, DEFAULT_MAX_RPC)
    except RaftError:
        return False
    if got is None:  # it ends inside the error string
        return True
    _, mid = got
    return mid == len(payload) or _is_map(payload[mid])
