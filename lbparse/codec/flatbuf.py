"""FlatBuffers payloads of the `flatbuffers` and `flatbuffers-draft` layouts.

Tables are read and built from `lbparse_generated.fb_schema`, which the
generator derives from spec/flatbuffers/api.fbs; flatc's own classes of the
same schema (lbparse_generated.fb) serve as the reference in the tests.
The reader checks every offset and length against the buffer before it
follows it, so hostile bytes give a `FlatBufferError`, never an
IndexError or an allocation sized by the input. FlatBuffers lets many
offsets point at one string, vector or table; each is read into its own
object, so what the reading makes is capped (`max_bytes`): the bytes of
strings and vectors, and for each table its Python object's share
(`TABLE_COST`, `FIELD_COST` a field). Otherwise a 58 KB buffer whose 2,000
vector entries share one 50 KB vector decodes to 100 MB, and an 8 MB one of
2 million offsets to one table into 2 million objects (620 MB).
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any, ClassVar

from lbparse.codec.jsonform import Int64, int64
from lbparse.digits import ascii_int
from lbparse.errors import InputError
from lbparse.extras import need
from lbparse_generated.fb_schema import ENUMS, TABLES

__all__ = [
    "FlatBufferError",
    "FlatBufferTooLarge",
    "FlatTable",
    "build_table",
    "plausible",
    "read_table",
    "structure_reasons",
]

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_SCALARS = {
    "ubyte": "<B",
    "byte": "<b",
    "bool": "<?",
    "short": "<h",
    "ushort": "<H",
    "int": "<i",
    "uint": "<I",
    "long": "<q",
    "ulong": "<Q",
    "float": "<f",
    "double": "<d",
    "uint8": "<B",
    "int8": "<b",
    "int16": "<h",
    "uint16": "<H",
    "int32": "<i",
    "uint32": "<I",
    "int64": "<q",
    "uint64": "<Q",
}


class FlatBufferError(InputError):
    """Bytes that are not a well-formed FlatBuffers table of the expected type."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"bad_table", "too_large"})


class FlatBufferTooLarge(FlatBufferError):
    """A buffer whose strings and vectors add up to more than `max_bytes`."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"too_large"})


class FlatTable:
    """A decoded FlatBuffers table: its type and the fields present in it.

    Args:
        type_name: The table's type in the schema ("Ack", ...).
        fields: The fields present, by name.
        **kw: More fields, by name.

    Raises:
        InputError: The schema has no table `type_name`.
    """

    __slots__ = ("type_name", "fields")

    def __init__(self, type_name: str, fields: dict[str, Any] | None = None, **kw: Any) -> None:
        if type_name not in TABLES:
            raise InputError(
                "bad_option", f"unknown FlatBuffers table {type_name!r}; known: {', '.join(TABLES)}"
            )
        self.type_name = type_name
        self.fields = {**(fields or {}), **kw}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FlatTable):
            return NotImplemented
        return self.type_name == other.type_name and self.fields == other.fields

    def __repr__(self) -> str:
        return f"FlatTable({self.type_name!r}, {self.fields!r})"

    def to_json_dict(self) -> dict[str, Any]:
        """Fields present, byte vectors as base64, enums by name, tables as objects.

        Returns:
            A JSON-ready dict of the fields present.
        """
        types = {name: ftype for _, name, ftype in TABLES[self.type_name]}
        return {name: _json(types[name], value) for name, value in self.fields.items()}

    @classmethod
    def from_json_dict(cls, type_name: str, obj: dict[str, Any]) -> FlatTable:
        """Inverse of `to_json_dict`.

        Args:
            type_name: The table's type in the schema.
            obj: Its JSON object of fields.

        Returns:
            The table.

        Raises:
            InputError: `obj` is not an object, names a field the table lacks, or
                holds a value its field cannot take.
        """
        if not isinstance(obj, dict):
            raise InputError(
                "bad_json", f"a {type_name} table is a JSON object of its fields, not {obj!r}"
            )
        types = {name: ftype for _, name, ftype in TABLES[type_name]}
        unknown = set(obj) - set(types)
        if unknown:
            raise InputError("bad_json", f"{type_name} has no field {', '.join(sorted(unknown))}")
        return cls(type_name, {k: _from_json(types[k], v, k) for k, v in obj.items()})


# 64-bit scalars: decimal strings in JSON (lbparse.codec.jsonform), as protobuf writes int64.
_INT64 = frozenset({"long", "ulong", "int64", "uint64"})


def _json(ftype: str, value: Any) -> Any:
    if ftype in _INT64:
        return Int64(value)
    if ftype == "[ubyte]":
        return base64.b64encode(value).decode("ascii")
    if ftype.startswith("enum "):
        return ENUMS[ftype[5:]]["values"].get(value, value)
    if ftype.startswith("["):
        return [v.to_json_dict() for v in value]
    return value


# The range of each integer type the tables have (api.fbs), for JSON read in.
_RANGES = {
    "byte": (-(2**7), 2**7 - 1),
    "ubyte": (0, 2**8 - 1),
    "short": (-(2**15), 2**15 - 1),
    "ushort": (0, 2**16 - 1),
    "int": (-(2**31), 2**31 - 1),
    "uint": (0, 2**32 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "long": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "ulong": (0, 2**64 - 1),
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
}


def _from_json(ftype: str, value: Any, name: str = "value") -> Any:
    """A field's value from JSON; ValueError (naming the field) for one that
    does not fit its type: the builder would raise a TypeError mid-build."""
    if ftype in _INT64:
        return _in_range(int64(value, name), ftype, name)
    if ftype == "[ubyte]":
        if not isinstance(value, str):
            raise InputError("bad_json", f"{name} is {value!r}, not base64 text")
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error as exc:
            raise InputError("bad_json", f"{name} is {value[:40]!r}, not base64 ({exc})") from None
    if ftype.startswith("enum "):
        enum = ENUMS[ftype[5:]]
        if isinstance(value, str) and ascii_int(value) is None:
            names = {n: v for v, n in enum["values"].items()}
            if value not in names:
                raise InputError("bad_json", f"{name} is {value!r}, not one of {', '.join(names)}")
            return names[value]
        return _in_range(_whole(value, name), enum["base"], name)
    if ftype.startswith("["):
        if not isinstance(value, list):
            raise InputError("bad_json", f"{name} is {value!r}, not a list")
        return [FlatTable.from_json_dict(ftype[1:-1], v) for v in value]
    if ftype == "string":
        if not isinstance(value, str):
            raise InputError("bad_json", f"{name} is {value!r}, not a string")
        return value
    if ftype in _RANGES:
        return _in_range(_whole(value, name), ftype, name)
    return value


def _whole(value: Any, name: str) -> int:
    if isinstance(value, str):
        number = ascii_int(value.removeprefix("-"))
        if number is not None:
            return -number if value.startswith("-") else number
    if isinstance(value, bool) or not isinstance(value, int):
        shown = value[:40] if isinstance(value, str) else value
        raise InputError("bad_json", f"{name} is {shown!r}, not a whole number")
    return int(value)


def _in_range(value: int, ftype: str, name: str) -> int:
    lo, hi = _RANGES.get(ftype, (value, value))
    if not lo <= value <= hi:
        raise InputError("bad_json", f"{name} is {value}, out of {ftype}'s range ({lo} to {hi})")
    return value


# What read_table may copy out of a buffer by default: lbparse.codec.limits'
# default max_payload (not imported: limits would import the codecs).
MAX_BYTES = 8 << 20
# What a table read counts against max_bytes, about what CPython spends on
# it: the FlatTable and its dict (~110 bytes empty), and a field's value.
TABLE_COST = 128
FIELD_COST = 32


class _Reader:
    def __init__(self, buf: bytes, max_bytes: int) -> None:
        self.buf = buf
        self.n = len(buf)
        self.budget = max_bytes
        self.max_bytes = max_bytes

    def spend(self, size: int, what: str) -> None:
        self.budget -= size
        if self.budget < 0:
            raise FlatBufferTooLarge(
                "too_large",
                f"{what}: what the payload decodes into (strings, vectors "
                f"and tables) adds up to more than {self.max_bytes} bytes "
                "(offsets share them), the limit (max_payload)",
            )

    def need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or size < 0 or pos + size > self.n:
            raise FlatBufferError(
                "bad_table",
                f"{what} at offset {pos} ({size} bytes) is outside the {self.n}-byte buffer",
            )

    def u32(self, pos: int, what: str) -> int:
        self.need(pos, 4, what)
        value: int = _U32.unpack_from(self.buf, pos)[0]
        return value

    def table(self, pos: int, type_name: str) -> FlatTable:
        self.need(pos, 4, f"{type_name} table")
        self.spend(TABLE_COST, f"{type_name} table")
        vt = pos - _I32.unpack_from(self.buf, pos)[0]
        self.need(vt, 4, f"{type_name} vtable")
        vt_size, obj_size = _U16.unpack_from(self.buf, vt)[0], _U16.unpack_from(self.buf, vt + 2)[0]
        if vt_size < 4 or vt_size % 2:
            raise FlatBufferError(
                "bad_table", f"{type_name} vtable at offset {vt} has size {vt_size}"
            )
        self.need(vt, vt_size, f"{type_name} vtable")
        self.need(pos, obj_size, f"{type_name} table body")
        fields = {}
        for fid, name, ftype in TABLES[type_name]:
            slot = 4 + 2 * fid
            if slot >= vt_size:
                continue
            off = _U16.unpack_from(self.buf, vt + slot)[0]
            if off:
                if off >= obj_size:
                    raise FlatBufferError(
                        "bad_table",
                        f"{type_name}.{name}: field offset {off} beyond the "
                        f"table's {obj_size} bytes",
                    )
                self.spend(FIELD_COST, f"{type_name}.{name}")
                fields[name] = self.field(pos + off, ftype, f"{type_name}.{name}")
        return FlatTable(type_name, fields)

    def field(self, pos: int, ftype: str, what: str) -> Any:
        if ftype.startswith("enum "):
            ftype = ENUMS[ftype[5:]]["base"]
        fmt = _SCALARS.get(ftype)
        if fmt is not None:
            size = struct.calcsize(fmt)
            self.need(pos, size, what)
            return struct.unpack_from(fmt, self.buf, pos)[0]
        target = pos + self.u32(pos, what)
        length = self.u32(target, f"{what} length")
        start = target + 4
        if ftype == "string":
            self.need(start, length, what)
            self.spend(length, what)
            try:
                return self.buf[start : start + length].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FlatBufferError("bad_table", f"{what} is not UTF-8: {exc}") from None
        if ftype == "[ubyte]":
            self.need(start, length, what)
            self.spend(length, what)
            return self.buf[start : start + length]
        if ftype.startswith("["):
            self.need(start, 4 * length, what)  # before any allocation
            self.spend(4 * length, what)
            elem = ftype[1:-1]
            return [
                self.table(p + _U32.unpack_from(self.buf, p)[0], elem)
                for p in range(start, start + 4 * length, 4)
            ]
        raise FlatBufferError("bad_table", f"{what}: type {ftype} is not supported")


def read_table(buf: bytes, type_name: str, max_bytes: int = MAX_BYTES) -> FlatTable:
    """Read the root table of a finished FlatBuffer as `type_name`.

    Args:
        buf: The FlatBuffer.
        type_name: The root table's type in the schema.
        max_bytes: The most bytes of strings, byte vectors and table vectors
            copied out.

    Returns:
        The table, with nested tables read likewise.

    Raises:
        FlatBufferError: The bytes are not a well-formed table of that type
            (an offset or vtable outside the buffer...); FlatBufferTooLarge
            past `max_bytes`.
    """
    r = _Reader(buf, max_bytes)
    return r.table(r.u32(0, "root offset"), type_name)


def plausible(buf: bytes) -> bool:
    """Whether the root offset and its vtable lie in the buffer: a cheap first look.

    Args:
        buf: The bytes.

    Returns:
        False when they cannot be a FlatBuffer; True says only that they may.
    """
    n = len(buf)
    if n < 8:
        return False
    root: int = _U32.unpack_from(buf, 0)[0]
    if root + 4 > n:
        return False
    vt: int = root - _I32.unpack_from(buf, root)[0]
    return 0 <= vt and vt + 4 <= n


def structure_reasons(buf: bytes, type_name: str) -> list[str]:
    """Evidence that `buf` is a `type_name` FlatBuffer.

    Args:
        buf: The bytes.
        type_name: The root table's type.

    Returns:
        The reasons, one sentence each, for `auto`'s `reasons`.

    Raises:
        FlatBufferError: It is not one (as `read_table`).
    """
    table = read_table(buf, type_name)
    root = _U32.unpack_from(buf, 0)[0]
    return [
        f"FlatBuffers: root table at offset {root}, vtable and "
        f"{len(table.fields)} field(s) of {type_name} within the buffer"
    ]


def _build(b: Any, table: FlatTable) -> int:  # b: flatbuffers.Builder
    # Schema order, whatever the dict's order: the same table, the same bytes.
    present = [
        (fid, name, ftype, table.fields[name])
        for fid, name, ftype in TABLES[table.type_name]
        if name in table.fields
    ]
    unknown = set(table.fields) - {name for _, name, _, _ in present}
    if unknown:
        raise InputError("bad_json", f"{table.type_name} has no field {', '.join(sorted(unknown))}")
    offsets: dict[str, int] = {}
    # Children before the table itself: vectors of tables first, then
    # strings and byte vectors, each in schema order. That is the order the
    # flatc-generated Go builders of Liftbridge's FlatBuffers branch were
    # called in, so that the same table gives the same bytes as theirs (the
    # reference vectors hold it).
    for _, name, ftype, value in present:
        if ftype.startswith("[") and ftype != "[ubyte]":
            elems = [_build(b, t) for t in value]
            b.StartVector(4, len(elems), 4)
            for off in reversed(elems):
                b.PrependUOffsetTRelative(off)
            offsets[name] = b.EndVector()
    for _, name, ftype, value in present:
        if ftype == "string":
            offsets[name] = b.CreateString(value)
        elif ftype == "[ubyte]":
            offsets[name] = b.CreateByteVector(bytes(value))
    b.StartObject(len(TABLES[table.type_name]))
    for fid, name, ftype, value in present:
        if name in offsets:
            b.PrependUOffsetTRelativeSlot(fid, offsets[name], 0)
            continue
        if ftype.startswith("enum "):
            ftype = ENUMS[ftype[5:]]["base"]
        b.PrependSlot(_FLAGS[_SCALARS[ftype]], fid, value, None)  # no default: always written
    end: int = b.EndObject()
    return end


_SCALAR_FLAGS = {
    "<B": "Uint8Flags",
    "<b": "Int8Flags",
    "<?": "BoolFlags",
    "<h": "Int16Flags",
    "<H": "Uint16Flags",
    "<i": "Int32Flags",
    "<I": "Uint32Flags",
    "<q": "Int64Flags",
    "<Q": "Uint64Flags",
    "<f": "Float32Flags",
    "<d": "Float64Flags",
}
_FLAGS: dict[str, Any] = {}


def build_table(table: FlatTable) -> bytes:
    """Serialize a table as a finished FlatBuffer; every field in `fields` is written.

    Args:
        table: The table (nested tables in its fields are built too).

    Returns:
        The FlatBuffer's bytes, as Go's builder orders them.

    Raises:
        MissingExtra: The flatbuffers package is not installed.
    """
    # Late (lbparse.extras.LATE): the flatbuffers package imports numpy
    # (~85 ms and a BLAS thread pool) that decoding never needs.
    flatbuffers = need("flatbuffers")
    if not _FLAGS:
        _FLAGS.update(
            (fmt, getattr(flatbuffers.number_types, name)) for fmt, name in _SCALAR_FLAGS.items()
        )
    b = flatbuffers.Builder(64)
    b.Finish(_build(b, table))
    return bytes(b.Output())
