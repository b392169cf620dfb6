"""Protobuf wire data judged without a protobuf library: how gogo-generated
Go code (the upstream server's internal RPCs, the Go client) reads it.

gogo rejects a known field whose wire type does not match the schema, where
protobuf-python and protobuf-go keep it as an unknown field; and it does
not check UTF-8. `lbparse.codec.upstream` uses this to say what upstream does.
No allocation sized by the input, and no object per field (levels are
read by offsets, submessages judged in place); every loop advances by at
least one byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor import FieldDescriptor as F

__all__ = ["gogo_problem", "nesting_depth", "scan", "shared_walks", "well_formed"]

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
_WIRE = {
    F.TYPE_INT32: VARINT,
    F.TYPE_INT64: VARINT,
    F.TYPE_UINT32: VARINT,
    F.TYPE_UINT64: VARINT,
    F.TYPE_SINT32: VARINT,
    F.TYPE_SINT64: VARINT,
    F.TYPE_BOOL: VARINT,
    F.TYPE_ENUM: VARINT,
    F.TYPE_FIXED64: I64,
    F.TYPE_SFIXED64: I64,
    F.TYPE_DOUBLE: I64,
    F.TYPE_FIXED32: I32,
    F.TYPE_SFIXED32: I32,
    F.TYPE_FLOAT: I32,
    F.TYPE_STRING: LEN,
    F.TYPE_BYTES: LEN,
    F.TYPE_MESSAGE: LEN,
}


def _varint(buf: bytes, pos: int) -> tuple[int, int] | None:
    result = shift = 0
    for i in range(pos, min(pos + 10, len(buf))):
        b = buf[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i + 1
        shift += 7
    return None


# Walks of one payload, shared while a `shared_walks()` block runs: `auto`
# and `check` judge the same bytes as several layouts and types, and an
# 8 MB payload the runtime refused at its last byte was walked again, in
# Python, for each (22-28 s). Keys hold the payload only for the block.
_memo: ContextVar[dict[tuple[Any, ...], Any] | None] = ContextVar(
    "lbparse_wirefit_memo", default=None
)


@contextmanager
def shared_walks() -> Iterator[None]:
    """Within the block, each walk of a payload (as a type) is made once.

    Yields:
        None, once; the memo of walks is dropped when the outermost block
        ends.
    """
    token = _memo.set({}) if _memo.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _memo.reset(token)


def _memoized(key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
    memo = _memo.get()
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def _skip_level(buf: bytes, pos: int, end: int) -> bool:
    """Whether buf[pos:end] is a sequence of whole fields (what `scan`
    checks), read without making an object per field."""
    while pos < end:
        b = buf[pos]
        if b < 0x80:  # one-byte tags and values: most of them, inline
            key, pos = b, pos + 1
        else:
            tag = _varint(buf, pos)
            if tag is None:
                return False
            key, pos = tag
        wire = key & 7
        if key >> 3 == 0:
            return False
        if wire == VARINT:
            if pos < end and buf[pos] < 0x80:
                pos += 1
            else:
                v = _varint(buf, pos)
                if v is None:
                    return False
                pos = v[1]
        elif wire == I64:
            pos += 8
        elif wire == I32:
            pos += 4
        elif wire == LEN:
            if pos < end and buf[pos] < 0x80:
                pos += 1 + buf[pos]
            else:
                ln = _varint(buf, pos)
                if ln is None:
                    return False
                pos = ln[1] + ln[0]
        else:
            return False
        if pos > end:
            return False
    return True


def well_formed(buf: bytes) -> bool:
    """`scan(buf) is not None`, without the list.

    Args:
        buf: Protobuf wire bytes.

    Returns:
        Whether the wire data is well-formed at the top level.
    """
    return bool(_memoized(("well_formed", buf), lambda: _skip_level(buf, 0, len(buf))))


def scan(buf: bytes) -> list[tuple[int, int]] | None:
    """(field number, wire type) of each top-level field; None if malformed.

    Args:
        buf: Protobuf wire bytes.

    Returns:
        The fields in order, or None.
    """
    if not well_formed(buf):
        return None
    return [(number, wire) for number, wire, _, _ in _fields(buf, 0, len(buf))]


@cache
def _expected(desc: Descriptor) -> dict[int, frozenset[int]]:
    out = {}
    for f in desc.fields:
        wire = _WIRE[f.type]
        packable = f.is_repeated and wire != LEN
        out[f.number] = frozenset({wire, LEN} if packable else {wire})
    return out


def _fields(buf: bytes, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(number, wire type, body start, body end) of each field of a level
    `_skip_level` found whole; the body is a length-delimited field's."""
    while pos < end:
        key, pos = _varint(buf, pos)  # type: ignore[misc]  # whole: checked
        number, wire = key >> 3, key & 7
        start = stop = pos
        if wire == VARINT:
            pos = _varint(buf, pos)[1]  # type: ignore[index]
        elif wire == I64:
            pos += 8
        elif wire == I32:
            pos += 4
        else:
            ln, start = _varint(buf, pos)  # type: ignore[misc]
            pos = stop = start + ln
        yield number, wire, start, stop


def gogo_problem(buf: bytes, desc: Descriptor, depth: int = 0) -> str | None:
    """Why gogo-generated Go code rejects `buf` as `desc`, or None.

    Malformed wire data at any depth, or a known field with the wrong wire
    type. (Unlike protobuf-python and protobuf-go, it does not check UTF-8.)
    Submessages are judged in place (offsets, not copies).

    Args:
        buf: Protobuf wire bytes.
        desc: The message type.
        depth: The nesting level `buf` is at.

    Returns:
        The Go error's words, or None when gogo accepts it.
    """
    return _memoized(  # type: ignore[no-any-return]
        ("gogo", buf, desc.full_name, depth),
        lambda: _gogo(buf, 0, len(buf), desc, depth),
    )


def _gogo(buf: bytes, pos: int, end: int, desc: Descriptor, depth: int) -> str | None:
    if depth > 100:
        return "proto: exceeded maximum recursion depth"
    if not _skip_level(buf, pos, end):
        return "unexpected EOF" if depth else "proto: cannot parse invalid wire-format data"
    expected = _expected(desc)
    subs = _submessages(desc)
    for number, wire, start, stop in _fields(buf, pos, end):
        allowed = expected.get(number)
        if allowed is None:
            continue
        if wire not in allowed:
            name = next(f.name for f in desc.fields if f.number == number)
            return f"proto: wrong wireType = {wire} for field {name}"
        sub = subs.get(number)
        if sub is not None and wire == LEN:
            problem = _gogo(buf, start, stop, sub, depth + 1)
            if problem:
                return problem
    return None


@cache
def _submessages(desc: Descriptor) -> dict[int, Descriptor]:
    return {
        f.number: f.message_type
        for f in desc.fields
        if f.type == F.TYPE_MESSAGE and f.message_type is not None
    }


def nesting_depth(buf: bytes, desc: Descriptor, limit: int) -> int:
    """How deep `buf` nests as `desc`, counting what the protobuf runtime counts.

    Each known submessage and each group (known or not) is a level; unknown
    length-delimited fields are not parsed, so they are not. Stops as soon
    as the depth passes `limit`, and at the first malformed byte (the parser
    rejects those anyway).

    Args:
        buf: Protobuf wire bytes.
        desc: The message type.
        limit: The depth past which to stop.

    Returns:
        The depth, at most `limit` + 1.
    """
    return _memoized(  # type: ignore[no-any-return]
        ("depth", buf, desc.full_name, limit),
        lambda: _walk(buf, 0, len(buf), desc, 0, limit, 0)[0],
    )


def _walk(
    buf: bytes, pos: int, end: int, desc: Descriptor | None, depth: int, limit: int, group: int
) -> tuple[int, int]:
    """(deepest level seen, where the walk stopped). `group`: the field
    number whose end-group tag closes this level, 0 for a length-delimited one."""
    if depth > limit:
        return depth, end
    deepest = depth
    subs = _submessages(desc) if desc is not None else {}
    while pos < end:
        b = buf[pos]
        if b < 0x80:  # one-byte tags and values inline: the walk is Python
            key, pos = b, pos + 1
        else:
            tag = _varint(buf, pos)
            if tag is None or tag[1] > end:
                break
            key, pos = tag
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            if pos < end and buf[pos] < 0x80:
                pos += 1
                continue
            v = _varint(buf, pos)
            if v is None:
                break
            pos = v[1]
        elif wire == I64:
            pos += 8
        elif wire == I32:
            pos += 4
        elif wire == LEN:
            ln = _varint(buf, pos)
            if ln is None or ln[1] + ln[0] > end:
                break
            start, pos = ln[1], ln[1] + ln[0]
            sub = subs.get(number)
            if sub is not None:
                d = _walk(buf, start, pos, sub, depth + 1, limit, 0)[0]
                if d > deepest:
                    deepest = d
                    if d > limit:
                        break
        elif wire == SGROUP:
            d, pos = _walk(buf, pos, end, None, depth + 1, limit, number)
            if d > deepest:
                deepest = d
                if d > limit:
                    break
        elif wire == EGROUP:
            if number == group:
                return deepest, pos
            break
        else:
            break
    return deepest, end
