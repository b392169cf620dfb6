"""Liftbridge's metadata Raft group: log entries and the NATS transport stream.

    >>> from lbparse.raft import decode_log_entry, StreamDecoder
    >>> entry = decode_log_entry(value)       # doctest: +SKIP  (a raft.db "logs" value)
    >>> entry.type_name, entry.command.name   # doctest: +SKIP
    ('LogCommand', 'ChangeLeader')

`decode_log_entry` reads one stored entry; `StreamDecoder` one direction of
a transport stream, NATS message by NATS message; `decode_request` and
`decode_response` one whole RPC. Every fact comes from spec/raft.ksy
(`lbparse.raft.tables`); msgpack is read with the `msgpack` package. Bad
bytes raise `RaftError` (kinds in `lbparse.raft.errors.RAFT_ERROR_KINDS`).
"""

from lbparse.raft.entries import (
    Configuration,
    LogEntry,
    RaftCommand,
    Server,
    decode_command,
    decode_configuration,
    decode_log_entry,
)
from lbparse.raft.errors import KINDS, RAFT_ERROR_KINDS, RaftError
from lbparse.raft.tables import COMMANDS, LOG_TYPES, RPC_TYPES, SUBJECTS, SUFFRAGES
from lbparse.raft.transport import (
    REQUEST,
    RESPONSE,
    RPC,
    Chunk,
    StreamDecoder,
    decode_request,
    decode_response,
    rpc_row,
    stream_role,
)

__all__ = [
    "COMMANDS",
    "RAFT_ERROR_KINDS",
    "KINDS",
    "LOG_TYPES",
    "REQUEST",
    "RESPONSE",
    "RPC",
    "RPC_TYPES",
    "SUBJECTS",
    "SUFFRAGES",
    "Chunk",
    "Configuration",
    "LogEntry",
    "RaftCommand",
    "RaftError",
    "Server",
    "StreamDecoder",
    "decode_command",
    "decode_configuration",
    "decode_log_entry",
    "decode_request",
    "decode_response",
    "rpc_row",
    "stream_role",
]
