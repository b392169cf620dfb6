"""The RaftLog commands of `raft_entries` as typed columns.

A LogCommand entry of the metadata Raft group's log carries Liftbridge's
`protocol.RaftLog` (an op and its operation: CreateStreamOp, ShrinkISROp,
ChangeLeaderOp, ...) as its data. `raft_entries` keeps that data as it was
sent (`command_data`) and, after it, the RaftLog's fields as top-level
columns, decoded as the payload tables' protobuf payloads are: the
vectorized reader (`wirescan.decode_structs`, in C when built) for what
encoders write, upb and the payload tables' builder (`columns.py`) for the
rest. An entry whose data is not a RaftLog (upb refuses it: its `command`
label is null too) or that is no command has nulls there.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pyarrow as pa
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage

from lbparse.codec.payloads import descriptor_of, message_class
from lbparse.columnar.columns import struct_builder
from lbparse.columnar.decode_arrow import binary_buffers
from lbparse.columnar.schema import message_type
from lbparse.columnar.wirescan import decode_structs

__all__ = ["RAFT_LOG", "command_fields", "command_structs"]

RAFT_LOG = "protocol.RaftLog"


@cache
def _raft_log() -> tuple[type[ProtoMessage], Descriptor, pa.StructType]:
    """The RaftLog's class, descriptor and struct type, made once."""
    cls = message_class(RAFT_LOG)
    descriptor = descriptor_of(cls)
    return cls, descriptor, message_type(descriptor)


def command_fields() -> tuple[pa.Field, ...]:
    """The typed command columns of `raft_entries`, in the RaftLog's field order.

    Returns:
        One field per RaftLog field (`op`, `createStreamOp`, ...), each of the
        type the payload tables give a protobuf field.
    """
    return tuple(_raft_log()[2])


def command_structs(
    data: pa.Array, emit_defaults: bool = True, native: bool = True
) -> pa.StructArray:
    """Each entry's command data decoded as a RaftLog.

    Args:
        data: A binary array: the RaftLog bytes of each entry, null for an
            entry that has none (not a LogCommand, or without data).
        emit_defaults: Proto3 scalars and enums at their default are values,
            not nulls, as DecodeOptions.emit_defaults (on by default) makes
            the payload tables' (without it an `op` of CREATE_STREAM, 0, is
            null).
        native: Let the vectorized reader use its C build (False: its numpy
            reference; the tests compare the two).

    Returns:
        A struct column of `command_fields()`, a row per entry: null where the
        data is null or not a RaftLog.
    """
    cls, descriptor, typ = _raft_log()
    n = len(data)
    valid = np.asarray(data.is_valid(), np.bool_)
    if not valid.any():
        return pa.nulls(n, typ)
    starts, ends, buf = binary_buffers(data)
    # Every entry read, a null one as no bytes (an empty message, always
    # read): the column keeps the entries' order, and the nulls are its
    # validity, not a take of a nested column (ten times the reading).
    arr, ok = decode_structs(
        descriptor,
        typ,
        buf,
        starts,
        np.where(valid, ends, starts),
        emit_defaults,
        native=native,
    )
    left = np.flatnonzero(valid & ~ok)
    if not left.size:
        fields = [arr.field(i) for i in range(typ.num_fields)]
        out: pa.StructArray = pa.StructArray.from_arrays(
            fields, fields=list(typ), mask=pa.array(~valid)
        )
        return out
    # What the vectorized reader leaves (unusual encodings, damage): upb's
    # reading, built as the payload tables build upb's objects; data upb
    # refuses is no RaftLog, and its row stays null.
    found, objects = [], []
    for i in left.tolist():
        try:
            objects.append(cls.FromString(data[i].as_py()))
        except (DecodeError, RuntimeError):
            continue
        found.append(i)
    where = np.where(valid & ok, np.arange(n), -1)
    values = arr
    if objects:
        built = struct_builder(descriptor, typ, emit_defaults).build(objects)
        where[np.array(found, np.int64)] = n + np.arange(len(found))
        values = pa.concat_arrays([arr, built])
    taken: pa.StructArray = values.take(pa.array(where, mask=where < 0))
    return taken
