"""The metadata Raft group's facts, as declared in spec/raft.ksy.

The tables come from the generated module `lbparse_generated.raft_tables`;
nothing here repeats them. This module gives them types and look-ups.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from lbparse_generated import raft_tables as _raw

__all__ = [
    "COMMANDS",
    "Command",
    "FieldSpec",
    "LOG_TYPES",
    "RPC_TYPES",
    "RpcType",
    "STRUCTS",
    "SUFFRAGES",
    "SUBJECTS",
    "log_type_name",
    "suffrage_name",
]


@dataclass(frozen=True, slots=True)
class RpcType:
    """One RPC of hashicorp/raft's transport: its type byte and msgpack structs.

    Attributes:
        value: The RPC's type byte on the wire.
        name: Its name (AppendEntries, RequestVote, ...).
        request: The name of its request struct (spec/raft.ksy).
        response: The name of its response struct.
        trailer: The request field giving the length of bytes that follow it,
            None without such bytes.
    """

    value: int
    name: str
    request: str
    response: str
    trailer: str | None  # request field giving the length of bytes that follow it


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One key of a msgpack struct: its Go type class, enum, first version.

    Attributes:
        key: The field's msgpack key (the Go field name).
        type: Its type class in spec/raft.ksy (uint, int, bool, bytes, ...).
        enum: The enum naming its values, None without one.
        since: The first hashicorp/raft version that writes it, None for
            every version.
    """

    key: str
    type: str
    enum: str | None
    since: str | None


@dataclass(frozen=True, slots=True)
class Command:
    """A Liftbridge RaftLog operation: its name and the RaftLog field holding it.

    Attributes:
        op: The protocol.Op name (CHANGE_LEADER).
        name: The command's name from spec/raft.ksy (ChangeLeader).
        field: The protocol.RaftLog field holding the operation's message.
    """

    op: str
    name: str
    field: str


RPC_TYPES: Mapping[int, RpcType] = MappingProxyType(
    {
        v: RpcType(v, r["name"], r["request"], r["response"], r.get("trailer"))
        for v, r in _raw.RPC_TYPES.items()
    }
)
LOG_TYPES: Mapping[int, str] = MappingProxyType({v: r["name"] for v, r in _raw.LOG_TYPES.items()})
SUFFRAGES: Mapping[int, str] = MappingProxyType({v: r["name"] for v, r in _raw.SUFFRAGES.items()})
STRUCTS: Mapping[str, tuple[FieldSpec, ...]] = MappingProxyType(
    {name: tuple(FieldSpec(*f) for f in fields) for name, fields in _raw.STRUCTS.items()}
)
COMMANDS: Mapping[str, Command] = MappingProxyType(
    {op: Command(op, name, field) for op, (name, field) in _raw.COMMANDS.items()}
)
SUBJECTS: tuple[tuple[str, str, str], ...] = tuple(_raw.SUBJECTS)


def log_type_name(value: int) -> str:
    """The name of a Raft log entry type.

    Args:
        value: The entry's LogType number.

    Returns:
        LogCommand, LogNoop, ...; `LogType(N)` for a number no version
        declares.
    """
    return LOG_TYPES.get(value, f"LogType({value})")


def suffrage_name(value: int) -> str:
    """The name of a Raft server suffrage.

    Args:
        value: The ServerSuffrage number.

    Returns:
        Voter, Nonvoter, Staging; `ServerSuffrage(N)` for a number no
        version declares.
    """
    return SUFFRAGES.get(value, f"ServerSuffrage({value})")
