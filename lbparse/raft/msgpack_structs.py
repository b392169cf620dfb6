"""msgpack objects as hashicorp/raft writes them, read into checked dicts.

`read_object(data, pos)` reads one msgpack object (strings as bytes: Go's
[]byte and string both travel as msgpack raw strings); `read_struct(name,
obj)` checks a map against the struct spec/raft.ksy declares and converts
its values (`StructValue`). go-msgpack fills a missing key with its zero
value and ignores an unknown key; so do we, but say so (`missing`,
`extra`); a field of a later version (`since`) that is absent is left
out of `fields`. hashicorp/raft itself always writes every field it has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import msgpack  # type: ignore[import-untyped]  # no type stubs

from lbparse.codec.jsonform import Int64
from lbparse.raft.errors import RaftError
from lbparse.raft.tables import STRUCTS, FieldSpec

__all__ = [
    "StructValue",
    "go_time_ns",
    "json_fields",
    "read_object",
    "read_struct",
    "text",
    "wide_keys",
]

# Go's time.MarshalBinary counts seconds from January 1 of year 1 (UTC).
_GO_TO_UNIX = 62_135_596_800


# Elements a list or map may claim while its bytes are still to come (a
# stream); msgpack allocates the list for the claimed count. hashicorp/raft
# sends at most MaxAppendEntries (64 by default, 1024 at most) a time.
MAX_PENDING_ITEMS = 1 << 16


def read_object(
    data: bytes | bytearray | memoryview, pos: int = 0, limit: int | None = None
) -> tuple[Any, int] | None:
    """The msgpack object at `pos` and the position after it.

    Without `limit` the bytes hold the whole object: one that runs past
    them is RaftError("truncated"). With it (a stream, more to come), the
    object may be up to `limit` bytes long, and None says the bytes end
    inside it.

    Args:
        data: The bytes.
        pos: Where the object starts.
        limit: None: the bytes hold the whole object; else the most bytes
            the object may take (more may still come).

    Returns:
        (the object, the position after it); None when, with `limit`, the
        bytes end inside the object. Strings come as bytes.

    Raises:
        RaftError: "bad_msgpack" if the bytes are not msgpack; "truncated"
            (without `limit`) if the object runs past them.
    """
    view = memoryview(data)[pos:]
    if not len(view):
        if limit is None:
            raise RaftError(
                "truncated", f"no msgpack object at offset {pos}: the bytes end", offset=pos
            )
        return None
    if limit is None:
        # The data's own size bounds every length the object claims.
        unpacker = msgpack.Unpacker(raw=True, strict_map_key=False, max_buffer_size=len(view))
    else:
        items = min(limit, MAX_PENDING_ITEMS)
        unpacker = msgpack.Unpacker(
            raw=True,
            strict_map_key=False,
            max_buffer_size=max(limit, len(view)),
            max_array_len=items,
            max_map_len=items,
        )
    unpacker.feed(view)
    try:
        obj = unpacker.unpack()
    except msgpack.OutOfData:
        if limit is None:
            raise RaftError(
                "truncated",
                f"the bytes end inside the msgpack object at offset "
                f"{pos} ({len(view)} bytes from there)",
                offset=pos + len(view),
            ) from None
        return None
    except (ValueError, TypeError, msgpack.StackError, msgpack.UnpackException) as exc:
        # TypeError: a map key that is a list or map (unhashable).
        if limit is None and "exceeds max_" in str(exc):
            # A count or length past what the bytes could hold.
            raise RaftError(
                "truncated",
                f"the msgpack object at offset {pos} claims more "
                f"than its {len(view)} bytes hold ({exc})",
                offset=pos + len(view),
            ) from None
        why = str(exc) or f"{type(exc).__name__} (byte {view[unpacker.tell()]:#04x})"
        raise RaftError("bad_msgpack", f"not msgpack at offset {pos}: {why}", offset=pos) from None
    return obj, pos + unpacker.tell()


def text(b: bytes | None) -> str | None:
    """A Go []byte id or address as text (hashicorp/raft's are server ids).

    Args:
        b: The bytes, or None.

    Returns:
        The UTF-8 text (errors replaced), or None for None.
    """
    return None if b is None else b.decode("utf-8", "replace")


def go_time_ns(value: Any, where: str) -> int | None:
    """Log.AppendedAt as Unix nanoseconds (None: unset, Go's zero time).

    Written by go-msgpack with TimeNotBuiltin as time.MarshalBinary's bytes
    (version 1: 15 bytes, version 2: 16), or as the msgpack timestamp
    extension (MsgpackUseNewTimeFormat); spec/raft.ksy, Log.AppendedAt.

    Args:
        value: The field's msgpack value.
        where: The field's path, for the error.

    Returns:
        The time in Unix nanoseconds, or None for None or Go's zero time.

    Raises:
        RaftError: The value is neither form (kind bad_struct).
    """
    if value is None:
        return None
    if isinstance(value, msgpack.Timestamp):
        return int(value.to_unix_nano())
    if (
        isinstance(value, bytes)
        and len(value) in (15, 16)
        and value[0] in (1, 2)
        and (value[0] == 2) == (len(value) == 16)
    ):
        sec = int.from_bytes(value[1:9], "big", signed=True)
        nsec = int.from_bytes(value[9:13], "big", signed=True)
        if sec == 0 and nsec == 0:
            return None
        return (sec - _GO_TO_UNIX) * 1_000_000_000 + nsec
    raise RaftError(
        "bad_struct",
        f"{where}: a time is MarshalBinary bytes or a msgpack timestamp, not {_describe(value)}",
    )


@dataclass(slots=True)
class StructValue:
    """A struct's fields by key (converted), and what did not fit its declaration.

    Attributes:
        name: The struct's name in spec/raft.ksy.
        fields: Its declared fields by key, converted (a missing one as its
            zero value).
        missing: The declared keys (of every version) that were absent.
        extra: Keys it does not declare, with their raw values.
    """

    name: str
    fields: dict[str, Any]
    missing: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]


def _describe(v: Any) -> str:
    if isinstance(v, bytes):
        return f"{len(v)} bytes"
    if isinstance(v, bool):
        return f"the bool {v}"
    if isinstance(v, (int, float)):
        return f"the number {v}"
    return "nil" if v is None else f"a {type(v).__name__}"


def _uint(v: Any, where: str) -> int:
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    raise RaftError("bad_struct", f"{where} is an unsigned integer, not {_describe(v)}")


def _int(v: Any, where: str) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise RaftError("bad_struct", f"{where} is an integer, not {_describe(v)}")


def _bool(v: Any, where: str) -> bool:
    if isinstance(v, bool):
        return v
    raise RaftError("bad_struct", f"{where} is a bool, not {_describe(v)}")


def _bytes(v: Any, where: str) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    raise RaftError("bad_struct", f"{where} is a byte string or nil, not {_describe(v)}")


def _list_of(name: str) -> Callable[[Any, str], list[StructValue]]:
    def convert(v: Any, where: str) -> list[StructValue]:
        if v is None:
            return []
        if not isinstance(v, list):
            raise RaftError("bad_struct", f"{where} is a list of {name}, not {_describe(v)}")
        return [read_struct(name, item, f"{where}[{i}]") for i, item in enumerate(v)]

    return convert


# The type classes that are lists of a struct, and its name (the C reader,
# lbparse/raft/_transport.c, is handed the same).
LIST_OF: dict[str, str] = {"logs": "Log", "servers": "Server"}
_CONVERT: dict[str, Callable[[Any, str], Any]] = {
    "uint": _uint,
    "int": _int,
    "bool": _bool,
    "bytes": _bytes,
    "time": go_time_ns,
    **{kind: _list_of(name) for kind, name in LIST_OF.items()},
}
_ZERO: dict[str, Any] = {
    "uint": 0,
    "int": 0,
    "bool": False,
    "bytes": None,
    "time": None,
    "logs": [],
    "servers": [],
}


_NAMES: dict[bytes, str] = {}  # field names seen, decoded once (bounded)


def key_name(k: bytes) -> str:
    name = _NAMES.get(k)
    if name is None:
        name = k.decode("utf-8", "replace")
        if len(_NAMES) < 4096:
            _NAMES[k] = name
    return name


def _keys(obj: Any, name: str, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise RaftError("bad_struct", f"{where}: a {name} is a msgpack map, not {_describe(obj)}")
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if not isinstance(k, bytes):
            raise RaftError(
                "bad_struct", f"{where}: a {name}'s keys are field names, not {_describe(k)}"
            )
        out[key_name(k)] = v
    return out


def read_struct(name: str, obj: Any, where: str | None = None) -> StructValue:
    """`obj` (a msgpack map) as the struct `name` of spec/raft.ksy.

    Args:
        name: The struct's name in spec/raft.ksy.
        obj: The msgpack object (keys as bytes).
        where: The path errors name (default: `name`).

    Returns:
        The StructValue.

    Raises:
        RaftError: `obj` is not a map of field names, or a field's value is
            not of its declared type (kind bad_struct).
    """
    where = where or name
    spec: tuple[FieldSpec, ...] = STRUCTS[name]
    given = _keys(obj, name, where)
    fields: dict[str, Any] = {}
    missing = []
    for f in spec:
        if f.key in given:
            fields[f.key] = _CONVERT[f.type](given.pop(f.key), f"{where}.{f.key}")
        elif f.since is None:  # a later version's field is left out when absent
            fields[f.key] = _ZERO[f.type]
            missing.append(f.key)
    return StructValue(name, fields, tuple(missing), given)


@cache
def base_keys(name: str) -> frozenset[str]:
    """The keys every version of hashicorp/raft writes for `name` (no `since`)."""
    return frozenset(f.key for f in STRUCTS[name] if f.since is None)


@cache
def all_keys(name: str) -> frozenset[str]:
    return frozenset(f.key for f in STRUCTS[name])


@cache
def wide_keys(name: str) -> frozenset[str]:
    """The keys of `name` that hold 64-bit integers.

    spec/raft.ksy's uint and int without an enum (Go uint64, int64, int:
    terms, indexes, sizes).

    Args:
        name: A struct's name in spec/raft.ksy.

    Returns:
        The keys.
    """
    return frozenset(f.key for f in STRUCTS[name] if f.type in ("uint", "int") and f.enum is None)


def json_fields(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A struct's fields for its JSON.

    64-bit integers as `Int64`, which lbparse.codec.jsonform writes as
    decimal strings (lbparse's JSON convention).

    Args:
        name: The struct's name in spec/raft.ksy.
        fields: Its fields (StructValue.fields).

    Returns:
        A new dict of the fields.
    """
    wide = wide_keys(name)
    return {k: Int64(v) if k in wide and type(v) is int else v for k, v in fields.items()}
