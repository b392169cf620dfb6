"""hashicorp/raft log entries: as raft-boltdb stores them and as AppendEntries carries them.

`decode_log_entry(value)` reads one stored entry (the msgpack `Log` that
raft-boltdb keeps as a bbolt value in raft.db's "logs" bucket) into a
`LogEntry`: index, term, type, data and extensions, AppendedAt when the
raft version wrote it, and what the data means: for LogCommand,
Liftbridge's protocol.RaftLog (`RaftCommand`: op, name and fields); for
LogConfiguration, the cluster membership (`Configuration`); for the
deprecated peer changes, the peer list. The facts are in spec/raft.ksy.

Bad msgpack is a `RaftError`; data that does not read as what its type
says (a LogCommand that is not a RaftLog) is kept as bytes with a warning,
so an entry is never lost for its payload.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage

from lbparse.codec.jsonform import Int64
from lbparse.codec.payloads import message_class
from lbparse.raft.errors import RaftError
from lbparse.raft.msgpack_structs import StructValue, read_object, read_struct, text
from lbparse.raft.tables import COMMANDS, log_type_name, suffrage_name

__all__ = [
    "Configuration",
    "LogEntry",
    "RaftCommand",
    "Server",
    "command_label",
    "decode_command",
    "decode_configuration",
    "decode_log_entry",
    "entry_from_struct",
]

LOG_COMMAND, LOG_ADD_PEER, LOG_REMOVE_PEER, LOG_CONFIGURATION = 0, 2, 3, 5
_RAFT_LOG = "protocol.RaftLog"


@dataclass(frozen=True, slots=True)
class Server:
    """A member of the Raft cluster (configuration.go Server).

    Attributes:
        suffrage: Its ServerSuffrage number (see `suffrage_name`).
        id: Its server id.
        address: Its address.
    """

    suffrage: int
    id: str
    address: str

    @property
    def suffrage_name(self) -> str:
        """The suffrage's name (Voter, Nonvoter, Staging)."""
        return suffrage_name(self.suffrage)

    def to_json_dict(self) -> dict[str, Any]:
        """The server as a JSON-ready dict.

        Returns:
            A new dict: suffrage (its name), id, address.
        """
        return {"suffrage": self.suffrage_name, "id": self.id, "address": self.address}


@dataclass(frozen=True, slots=True)
class Configuration:
    """Cluster membership (configuration.go Configuration).

    Attributes:
        servers: The members, in the entry's order.
    """

    servers: tuple[Server, ...]

    def to_json_dict(self) -> dict[str, Any]:
        """The configuration as a JSON-ready dict.

        Returns:
            A new dict: servers, a list of each server's dict.
        """
        return {"servers": [s.to_json_dict() for s in self.servers]}


@dataclass(frozen=True, slots=True)
class RaftCommand:
    """A Liftbridge metadata operation: protocol.RaftLog's `op` and its fields.

    Attributes:
        op: The protocol.Op name (CHANGE_LEADER).
        name: The command's name from spec/raft.ksy (ChangeLeader; None for
            an op Raft logs never carry).
        fields: The operation's message as JSON (protobuf's JSON mapping).
        message: The operation's protobuf message itself.
    """

    op: str
    name: str | None
    fields: dict[str, Any]
    message: ProtoMessage = field(repr=False, compare=False)

    def to_json_dict(self) -> dict[str, Any]:
        """The command as a JSON-ready dict.

        Returns:
            A new dict: op, name, fields.
        """
        return {"op": self.op, "name": self.name, "fields": self.fields}


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One Raft log entry (log.go Log) and what its data means.

    Attributes:
        index: The entry's log index.
        term: The term it was written in.
        type: Its LogType number (see `type_name`).
        data: Its data, None when absent.
        extensions: Its extensions, None when absent.
        appended_at: Unix ns; None when not written (v1.1.2) or zero.
        command: LogCommand: Liftbridge's RaftLog, decoded.
        configuration: LogConfiguration, or the deprecated peer changes,
            decoded.
        warnings: What did not fit (keys missing, data kept as bytes).
        extra: Keys no hashicorp/raft version writes, with their values.
    """

    index: int
    term: int
    type: int
    data: bytes | None
    extensions: bytes | None
    appended_at: int | None = None  # Unix ns; None when not written (v1.1.2) or zero
    command: RaftCommand | None = None  # LogCommand: Liftbridge's RaftLog
    configuration: Configuration | None = None  # LogConfiguration, deprecated peer changes
    warnings: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # keys no hashicorp/raft version writes

    @property
    def type_name(self) -> str:
        """The LogType's name (LogCommand, LogNoop, ...)."""
        return log_type_name(self.type)

    def to_json_dict(self) -> dict[str, Any]:
        """The entry as a JSON-ready dict.

        Index, term (uint64) and appended_at (Unix ns) are `Int64`: decimal
        strings in JSON (lbparse.codec.jsonform).

        Returns:
            A new dict: index, term, type, type_name, data and extensions
            (base64), appended_at; command, configuration and warnings when
            there are any.
        """
        d: dict[str, Any] = {
            "index": Int64(self.index),
            "term": Int64(self.term),
            "type": self.type,
            "type_name": self.type_name,
            "data": _b64(self.data),
            "extensions": _b64(self.extensions),
            "appended_at": None if self.appended_at is None else Int64(self.appended_at),
        }
        if self.command is not None:
            d["command"] = self.command.to_json_dict()
        if self.configuration is not None:
            d["configuration"] = self.configuration.to_json_dict()
        if self.warnings:
            d["warnings"] = list(self.warnings)
        return d


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode("ascii")


def decode_command(data: bytes) -> RaftCommand:
    """The data of a LogCommand entry as Liftbridge's protocol.RaftLog.

    Args:
        data: The entry's data.

    Returns:
        The RaftCommand: the op's own message when spec/raft.ksy names the
        op, else the whole RaftLog.

    Raises:
        RaftError: The data is not a protocol.RaftLog (kind bad_struct).
    """
    log, op, command = _raft_log(data)
    if command is None:
        return RaftCommand(op, None, json_format.MessageToDict(log), log)
    sub = getattr(log, command.field)
    return RaftCommand(op, command.name, json_format.MessageToDict(sub), sub)


def command_label(data: bytes) -> str | None:
    """The raft_entries row's command of a LogCommand entry's data.

    `decode_command`'s name, else its op, without making the command's JSON.

    Args:
        data: The entry's data.

    Returns:
        The command's name (ChangeLeader) or op (Op(42)), or None when the
        data is not a protocol.RaftLog.
    """
    try:
        _, op, command = _raft_log(data)
    except RaftError:
        return None
    return (command.name if command is not None else None) or op


def _raft_log(data: bytes) -> tuple[Any, str, Any]:
    """The RaftLog, its op's name and spec/raft.ksy's command for it (None).

    Raises:
        RaftError: The data is not a protocol.RaftLog (kind bad_struct).
    """
    cls = message_class(_RAFT_LOG)
    try:
        log = cls.FromString(data)
    except (DecodeError, RuntimeError) as exc:
        raise RaftError(
            "bad_struct", f"data ({len(data)} bytes) is not a protocol.RaftLog: {exc}"
        ) from None
    enum = log.DESCRIPTOR.fields_by_name["op"].enum_type
    number = getattr(log, "op")  # noqa: B009 (the generated stub has no `op`)
    value = enum.values_by_number.get(number) if enum is not None else None
    op = value.name if value is not None else f"Op({number})"
    return log, op, COMMANDS.get(op)


def decode_configuration(data: bytes) -> Configuration:
    """The data of a LogConfiguration entry (a msgpack Configuration).

    Args:
        data: The entry's data.

    Returns:
        The Configuration.

    Raises:
        RaftError: The data is not one msgpack Configuration (bytes after
            it, not msgpack, or not the struct).
    """
    obj, end = _whole(data, "Configuration")
    return _configuration(read_struct("Configuration", obj))


def _configuration(conf: StructValue) -> Configuration:
    return Configuration(
        tuple(
            Server(s["Suffrage"], text(s["ID"]) or "", text(s["Address"]) or "")
            for s in conf["Servers"]
        )
    )


def _peers(data: bytes) -> Configuration:
    """Protocol version 0's peer list (configuration.go encodePeers): a msgpack
    list of addresses, every one a voter."""
    obj, _ = _whole(data, "peer list")
    if not isinstance(obj, list) or not all(isinstance(p, bytes) for p in obj):
        raise RaftError("bad_struct", "a peer list is a msgpack list of byte strings")
    return Configuration(tuple(Server(0, text(p) or "", text(p) or "") for p in obj))


def _whole(data: bytes, what: str) -> tuple[Any, int]:
    got = read_object(data)
    assert got is not None  # without a limit, read_object raises instead
    obj, end = got
    if end != len(data):
        raise RaftError(
            "bad_msgpack",
            f"{len(data) - end} bytes after the {what} (it ends at offset {end} of {len(data)})",
            offset=end,
        )
    return obj, end


def entry_from_struct(log: StructValue) -> LogEntry:
    """A LogEntry from a checked `Log` struct; its data decoded by its type.

    Data that does not decode is kept as bytes, with a warning.

    Args:
        log: The `Log` struct (read_struct("Log", ...)).

    Returns:
        The LogEntry.
    """
    f = log.fields
    data, typ = f["Data"], f["Type"]
    warnings = [f"key {k} missing (read as its zero value)" for k in log.missing]
    warnings += [f"key {k} is not a field of Log in any hashicorp/raft version" for k in log.extra]
    command = configuration = None
    try:
        if typ == LOG_COMMAND and data is not None:
            command = decode_command(data)
        elif typ == LOG_CONFIGURATION and data is not None:
            configuration = decode_configuration(data)
        elif typ in (LOG_ADD_PEER, LOG_REMOVE_PEER) and data is not None:
            configuration = _peers(data)
    except RaftError as exc:
        warnings.append(f"{log_type_name(typ)} data kept as bytes: {exc.message}")
    return LogEntry(
        f["Index"],
        f["Term"],
        typ,
        data,
        f["Extensions"],
        f.get("AppendedAt"),
        command,
        configuration,
        tuple(warnings),
        log.extra,
    )


def decode_log_entry(value: bytes) -> LogEntry:
    """One stored Raft log entry (a raft-boltdb value: msgpack `Log`).

    The data of a well-formed entry never makes it fail.

    Args:
        value: The stored value.

    Returns:
        The LogEntry.

    Raises:
        RaftError: The bytes are not one msgpack map of a Log (with its
            offset).
    """
    obj, _ = _whole(bytes(value), "Log")
    return entry_from_struct(read_struct("Log", obj))
