"""The fixed facts of the wire formats, as spec/*.ksy declares them.

Everything here comes from the generated `lbparse_generated.tables`
(tools/ksy_facts.py reads it from the spec's declarations): the magic and
the cookie, the header's size, lengths and CRC flag, and the struct
formats and offsets of the envelope header, the ReplicationResponse prefix
and the commit-log entry. The hand-written fast paths (header checks, the
commit-log loop, the pipeline's numpy scans, the upstream model) read
these names and write no layout fact of their own; this module only types
them and builds the `struct.Struct`s.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from lbparse_generated import tables as _tables

__all__ = [
    "BODY_HEAD",
    "COOKIE",
    "CRC_FLAG",
    "CRC_HEADER_LEN",
    "CRC_OFFSET",
    "CRC_PAIRING_ERRORS",
    "CRC_STRUCT",
    "ENTRY_HEAD",
    "FIELD_ERRORS",
    "FieldAt",
    "FixedPart",
    "HEADER",
    "HEADER_LENS",
    "HEADER_SIZE",
    "HEADER_LEN_OFFSET",
    "FLAGS_OFFSET",
    "MAGIC",
    "MSG_TYPE_OFFSET",
    "NIL_LENGTH",
    "REPLICATION_PREFIX",
    "REPLICATION_RESPONSE_FIELDS",
    "VERSION",
    "VERSION_OFFSET",
    "fixed_part",
    "int_struct",
]


class FieldAt(NamedTuple):
    """Where a fixed-size field sits in its type: offset, size, struct format.

    Attributes:
        offset: Its byte offset from the type's start.
        size: Its size in bytes.
        format: Its struct format character(s), with byte order.
    """

    offset: int
    size: int
    format: str


class FixedPart(NamedTuple):
    """The fixed-size fields a type starts with, read by one struct call.

    Attributes:
        name: The spec type's name.
        struct: The struct of the whole prefix.
        fields: Each field's place, by name.
    """

    name: str  # `root` or `root::type`
    struct: struct.Struct
    fields: Mapping[str, FieldAt]

    @property
    def size(self) -> int:
        """The prefix's size in bytes."""
        return self.struct.size

    def offset(self, field: str) -> int:
        """Where a field of the prefix starts.

        Args:
            field: The field's name.

        Returns:
            Its byte offset.
        """
        return self.fields[field].offset


def fixed_part(name: str) -> FixedPart:
    """The fixed prefix of a spec type (`liftbridge_commitlog::entry`, ...).

    Args:
        name: The type's name in the generated tables.

    Returns:
        Its FixedPart.
    """
    raw = _tables.STRUCTS[name]
    fields = {k: FieldAt(*v) for k, v in raw["fields"].items()}
    return FixedPart(name, struct.Struct(raw["format"]), MappingProxyType(fields))


def int_struct(type_name: str, field: str) -> struct.Struct:
    """The struct of one integer field of a spec type.

    Args:
        type_name: The type's name in the generated tables.
        field: The integer field's name.

    Returns:
        A struct.Struct of that field alone.
    """
    return struct.Struct(_tables.STRUCTS[type_name]["ints"][field])


# -- the envelope header ------------------------------------------------------

MAGIC: Final[bytes] = _tables.MAGIC
COOKIE: Final[bytes] = _tables.COOKIE  # the lift-cookie layout's prefix
VERSION: Final[int] = _tables.VERSION  # the one envelope version defined
HEADER_SIZE: Final[int] = _tables.HEADER_SIZE  # the fixed header, read as one block
HEADER_LENS: Final[tuple[int, ...]] = tuple(_tables.HEADER_LENS)
CRC_FLAG: Final[int] = _tables.CRC_FLAG  # the bit of `flags` that says a CRC follows
CRC_HEADER_LEN: Final[int] = _tables.CRC_HEADER_LEN  # header_len with the CRC
CRC_OFFSET: Final[int] = _tables.CRC_OFFSET
CRC_STRUCT: Final = struct.Struct(_tables.CRC_FORMAT)
HEADER: Final = fixed_part("liftbridge_envelope::header")
VERSION_OFFSET: Final[int] = HEADER.offset("version")
HEADER_LEN_OFFSET: Final[int] = HEADER.offset("header_len")
FLAGS_OFFSET: Final[int] = HEADER.offset("flags")
MSG_TYPE_OFFSET: Final[int] = HEADER.offset("msg_type")  # byte 7

# The error kind of each failed check (`-error` keys), and the two ways the
# CRC flag / header_len check fails: `flag_set` (no room for the CRC) and
# `flag_clear` (a CRC-sized header without the flag).
FIELD_ERRORS: Final[Mapping[str, str]] = MappingProxyType(dict(_tables.FIELD_ERRORS))
CRC_PAIRING_ERRORS: Final[Mapping[str, str]] = MappingProxyType(dict(_tables.CRC_PAIRING_ERRORS))

# -- the ReplicationResponse payload and commit-log entries -------------------

REPLICATION_PREFIX: Final = fixed_part("liftbridge_commitlog")  # leader_epoch, high_watermark
ENTRY_HEAD: Final = fixed_part("liftbridge_commitlog::entry")  # offset, timestamp, epoch, size
BODY_HEAD: Final = fixed_part("liftbridge_commitlog::body")  # crc32c, magic, attributes, key_len
NIL_LENGTH: Final[int] = _tables.NIL_LENGTH  # a key or value length meaning nil
# The payload as named values (spec order): (name, ksy type), or (name,
# fields) for a list (the entries, an entry's headers).
REPLICATION_RESPONSE_FIELDS: Final[tuple[tuple[str, Any], ...]] = tuple(
    _tables.REPLICATION_RESPONSE_FIELDS
)
