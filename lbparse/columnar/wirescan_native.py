"""wirescan.decode_structs in C: protobuf messages straight into Arrow buffers.

`decode_structs(descriptor, arrow_type, data, starts, ends, emit_defaults,
clean)` has wirescan.decode_structs' contract exactly (the struct column of
the messages, null where one is left to upb, and `ok`), and its numpy
reader is the reference: tests/columnar/test_native_decode.py holds the two equal.
The message type is compiled once (per descriptor, Arrow type and options)
into a `_structs.Program` (fields in the Arrow struct's order, their
numbers, kinds, wire types, nullability and enum names, read from the
descriptor as wirescan reads it); one call decodes a whole batch into an
Arrow array built in C (lbparse/_c/lb_arrow.h), which pyarrow takes whole
through the Arrow C data interface: no copy of the values, no Python per
column.

`available()` is False when setup.py did not build `_structs` (no C
compiler, LBPARSE_PURE_PYTHON, a --py-files zip) or LBPARSE_NATIVE=0.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from lbparse.columnar.schema import is_map
from lbparse.errors import InputError
from lbparse.native_switch import native_enabled

try:
    from lbparse.columnar import _structs as _built
except ImportError:  # not built
    _built = None  # type: ignore[assignment]
_structs: Any = _built

__all__ = ["Unsupported", "available", "decode_structs"]


class Unsupported(InputError):
    """A message type the C reader is not compiled for (wirescan's numpy reader reads it)."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"unsupported"})


F = FieldDescriptor
# _structs.c's kinds
_KIND = {
    F.TYPE_INT32: 1,
    F.TYPE_UINT32: 1,
    F.TYPE_SINT32: 2,
    F.TYPE_SINT64: 3,
    F.TYPE_BOOL: 4,
    F.TYPE_INT64: 5,
    F.TYPE_UINT64: 5,
    F.TYPE_ENUM: 6,
    F.TYPE_FLOAT: 7,
    F.TYPE_DOUBLE: 8,
    F.TYPE_FIXED32: 9,
    F.TYPE_SFIXED32: 9,
    F.TYPE_FIXED64: 10,
    F.TYPE_SFIXED64: 10,
    F.TYPE_STRING: 11,
    F.TYPE_BYTES: 12,
    F.TYPE_MESSAGE: 13,
}
_MESSAGE = 13
_WIRE = {
    F.TYPE_DOUBLE: 1,
    F.TYPE_FIXED64: 1,
    F.TYPE_SFIXED64: 1,
    F.TYPE_FLOAT: 5,
    F.TYPE_FIXED32: 5,
    F.TYPE_SFIXED32: 5,
    F.TYPE_STRING: 2,
    F.TYPE_BYTES: 2,
    F.TYPE_MESSAGE: 2,
}


def available() -> bool:
    """Whether the C reader is built and not turned off (LBPARSE_NATIVE=0).

    Returns:
        True when `decode_structs` may be called.
    """
    return _structs is not None and native_enabled()


def _enum(fd: FieldDescriptor) -> tuple[int, list[str | None], int, str]:
    enum = fd.enum_type
    assert enum is not None  # an enum field
    by_number: dict[int, str] = {}
    for v in enum.values:
        by_number.setdefault(v.number, v.name)
    lo, hi = min(by_number), max(by_number)
    if hi - lo > 1 << 16:  # a table of names by number would be too large
        raise Unsupported("unsupported", f"enum {enum.full_name}: numbers from {lo} to {hi}")
    return lo, [by_number.get(i) for i in range(lo, hi + 1)], int(enum.is_closed), enum.name


def _scalar(fd: FieldDescriptor, nullable: bool) -> tuple[Any, ...]:
    en = _enum(fd) if fd.type == F.TYPE_ENUM else None
    return (_KIND[fd.type], int(nullable), (), (), 0, en)


def _entry_type(map_type: pa.MapType) -> pa.StructType:
    return pa.struct([pa.field("key", map_type.key_type), pa.field("value", map_type.item_type)])


def _spec(
    descriptor: Descriptor, arrow_type: pa.StructType, emit: bool, keep_zero: bool, clean: bool
) -> tuple[Any, ...]:
    """The Program spec of a message type (see _structs.c's compile)."""
    by_name = descriptor.fields_by_name
    fields = []
    for i in range(arrow_type.num_fields):
        af = arrow_type.field(i)
        fd = by_name[af.name]
        mt = fd.message_type
        wire = _WIRE.get(fd.type, 0)
        if fd.is_repeated and mt is not None and is_map(fd):
            col, rep = _spec(mt, _entry_type(af.type), emit, True, False), 2
        elif fd.is_repeated:
            col = (
                _spec(mt, af.type.value_type, emit, False, False)
                if mt is not None
                else _scalar(fd, False)
            )
            rep = 1
        elif mt is not None:
            col, rep = _spec(mt, af.type, emit, False, False), 0
        else:
            col, rep = _scalar(fd, not (keep_zero or emit)), 0
        presence = int(rep == 0 and mt is None and fd.has_presence)
        fields.append((fd.number, wire, rep, presence, col))
    if keep_zero:  # a map entry: a field it does not declare keeps it out of the map
        declared = tuple(fd.number for fd in descriptor.fields)
    elif clean:  # only the fields read count as known
        declared = tuple(
            by_name[arrow_type.field(i).name].number for i in range(arrow_type.num_fields)
        )
    else:
        declared = ()
    return (_MESSAGE, 0, tuple(fields), declared, int(keep_zero or clean), None)


# Programs by (descriptor, emit, clean), each beside the Arrow type it was
# compiled for. Not an lru_cache on the type itself: hashing a struct type
# walks all its fields (~12 us for ReplicationResponse's, a dozen types a
# batch), where comparing it with the one held costs under a microsecond.
_PROGRAMS: dict[tuple[Descriptor, bool, bool], tuple[pa.StructType, Any]] = {}


def _program(descriptor: Descriptor, arrow_type: pa.StructType, emit: bool, clean: bool) -> Any:
    key = (descriptor, emit, clean)
    held = _PROGRAMS.get(key)
    if held is not None and held[0] == arrow_type:
        return held[1]
    program = _structs.Program(_spec(descriptor, arrow_type, emit, False, clean))
    if len(_PROGRAMS) >= 256:  # bounded as the lru_cache it replaces
        _PROGRAMS.clear()
    _PROGRAMS[key] = (arrow_type, program)
    return program


def decode_structs(
    descriptor: Descriptor,
    arrow_type: pa.StructType,
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    emit_defaults: bool = False,
    clean: bool = False,
) -> tuple[pa.StructArray, np.ndarray]:
    """wirescan.decode_structs, in C (see the module's doc).

    Args:
        descriptor: The message type.
        arrow_type: Its struct type (`schema.message_type`).
        data: The batch's bytes, a uint8 array.
        starts: Each message's start in `data`.
        ends: Each message's end (excluded).
        emit_defaults: Proto3 scalars and enums at their default are values,
            not nulls.
        clean: Also leave to upb every message with a top-level field the type
            does not declare.

    Returns:
        (a struct column of len(starts) rows; `ok`, a bool array: False for
        the messages left to upb, whose slots hold nulls).

    Raises:
        Unsupported: The C reader is not compiled for the type (the caller,
            wirescan.decode_structs, reads it with numpy).
    """
    # Unsupported (a type the C reader is not compiled for) goes to the caller,
    # wirescan.decode_structs, whose numpy reader reads it.
    program = _program(descriptor, arrow_type, emit_defaults, clean)
    ok, address = program.decode(
        np.ascontiguousarray(data, np.uint8),
        np.ascontiguousarray(starts, np.int64),
        np.ascontiguousarray(ends, np.int64),
    )
    try:  # pyarrow moves the array out; the struct that held it is freed either way
        column = pa.Array._import_from_c(address, arrow_type)
    finally:
        _structs.drop(address)
    return column, np.frombuffer(ok, np.uint8, len(starts)).astype(np.bool_)
