"""Protobuf wire data judged without a protobuf library: how gogo-generated
Go code (the upstream server's internal RPCs, the Go client) reads it.

gogo rejects a known field whose wire type does not match the schema, where
protobuf-python and protobuf-go keep it as an unknown field; and it does
not check UTF-8. `lbparse.upstream` uses this to say what upstream does.
No allocation sized by the input; every loop advances by at least one byte.
"""

from __future__ import annotations

from functools import lru_cache

from google.protobuf.descriptor import Descriptor, FieldDescriptor as F

__all__ = ["gogo_problem", "scan"]

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
_WIRE = {
    F.TYPE_INT32: VARINT, F.TYPE_INT64: VARINT, F.TYPE_UINT32: VARINT, F.TYPE_UINT64: VARINT,
    F.TYPE_SINT32: VARINT, F.TYPE_SINT64: VARINT, F.TYPE_BOOL: VARINT, F.TYPE_ENUM: VARINT,
    F.TYPE_FIXED64: I64, F.TYPE_SFIXED64: I64, F.TYPE_DOUBLE: I64,
    F.TYPE_FIXED32: I32, F.TYPE_SFIXED32: I32, F.TYPE_FLOAT: I32,
    F.TYPE_STRING: LEN, F.TYPE_BYTES: LEN, F.TYPE_MESSAGE: LEN,
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


def scan(buf: bytes) -> list[tuple[int, int]] | None:
    """(field number, wire type) of each top-level field; None if malformed."""
    fields = _fields_with_bytes(buf)
    return None if fields is None else [(number, wire) for number, wire, _ in fields]


@lru_cache(maxsize=None)
def _expected(desc: Descriptor) -> dict[int, frozenset[int]]:
    out = {}
    for f in desc.fields:
        wire = _WIRE[f.type]
        packable = f.is_repeated and wire != LEN
        out[f.number] = frozenset({wire, LEN} if packable else {wire})
    return out


def _fields_with_bytes(buf: bytes) -> list[tuple[int, int, bytes]] | None:
    """Like scan, with each length-delimited field's bytes."""
    out = []
    pos, n = 0, len(buf)
    while pos < n:
        tag = _varint(buf, pos)
        if tag is None:
            return None
        key, pos = tag
        number, wire = key >> 3, key & 7
        body = b""
        if number == 0:
            return None
        if wire == VARINT:
            v = _varint(buf, pos)
            if v is None:
                return None
            pos = v[1]
        elif wire in (I64, I32):
            pos += 8 if wire == I64 else 4
        elif wire == LEN:
            ln = _varint(buf, pos)
            if ln is None or ln[1] + ln[0] > n:
                return None
            body, pos = buf[ln[1]:ln[1] + ln[0]], ln[1] + ln[0]
        else:
            return None
        if pos > n:
            return None
        out.append((number, wire, body))
    return out


def gogo_problem(buf: bytes, desc: Descriptor, depth: int = 0) -> str | None:
    """Why gogo-generated Go code rejects `buf` as `desc`, or None: malformed
    wire data at any depth, or a known field with the wrong wire type.
    (Unlike protobuf-python and protobuf-go, it does not check UTF-8.)"""
    if depth > 100:
        return "proto: exceeded maximum recursion depth"
    fields = _fields_with_bytes(buf)
    if fields is None:
        return "unexpected EOF" if depth else "proto: cannot parse invalid wire-format data"
    expected = _expected(desc)
    by_number = {f.number: f for f in desc.fields}
    for number, wire, body in fields:
        if number not in expected:
            continue
        if wire not in expected[number]:
            return f"proto: wrong wireType = {wire} for field {by_number[number].name}"
        f = by_number[number]
        if f.type == F.TYPE_MESSAGE and wire == LEN and f.message_type is not None:
            problem = gogo_problem(body, f.message_type, depth + 1)
            if problem:
                return problem
    return None


@lru_cache(maxsize=None)
def _submessages(desc: Descriptor) -> dict[int, Descriptor]:
    return {f.number: f.message_type for f in desc.fields
            if f.type == F.TYPE_MESSAGE and f.message_type is not None}


def nesting_depth(buf: bytes, desc: Descriptor, limit: int) -> int:
    """How deep `buf` nests as `desc`, counting what the protobuf runtime
    counts: each known submessage and each group (known or not) is a level;
    unknown length-delimited fields are not parsed, so they are not. Stops
    as soon as the depth passes `limit` (returning limit + 1), and at the
    first malformed byte (the parser rejects those anyway)."""
    return _walk(buf, 0, len(buf), desc, 0, limit, 0)[0]


def _walk(buf: bytes, pos: int, end: int, desc: Descriptor | None, depth: int, limit: int,
          group: int) -> tuple[int, int]:
    """(deepest level seen, where the walk stopped). `group`: the field
    number whose end-group tag closes this level, 0 for a length-delimited one."""
    if depth > limit:
        return depth, end
    deepest = depth
    subs = _submessages(desc) if desc is not None else {}
    while pos < end:
        tag = _varint(buf, pos)
        if tag is None or tag[1] > end:
            break
        key, pos = tag
        number, wire = key >> 3, key & 7
        if wire == VARINT:
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
