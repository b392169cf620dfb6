"""The envelope header: strict and lenient checks, no payload work.

The checks run in the order of `errors.KINDS`, the order a strict decoder
(and the reference vectors) use: length, magic, version, header length,
CRC flag, truncation; the CRC value and the MsgType come after, in
`envelope.decode`, because the CRC must be checked before byte 7 is
trusted. `lenient=True` accepts what the upstream server accepts and
records each tolerance as a warning.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from lbparse.layouts import Layout
from lbparse.errors import EnvelopeError

__all__ = ["Header", "MAGIC", "MIN_HEADER_LEN", "CRC_HEADER_LEN", "read_header", "resolve_msg_type"]

MAGIC = b"\xb9\x0e\x43\xb4"
MIN_HEADER_LEN = 8
CRC_HEADER_LEN = 12
FLAG_CRC = 0x01
_FIXED = struct.Struct(">4sBBBB")
_CRC = struct.Struct(">I")


class Header(NamedTuple):
    """A validated envelope header (see `lbparse.decode_header`)."""

    layout: str
    version: int
    header_len: int
    flags: int
    crc32c: int | None
    msg_type: int | None
    msg_type_name: str | None
    payload_type: str
    warnings: tuple[str, ...] = ()
    payload_offset: int = 0  # header_len, or past the LIFT cookie


def _lenient_header_len(hl: int, flags: int) -> list[str]:
    if flags & FLAG_CRC:
        return []
    if hl == CRC_HEADER_LEN:
        return ["header_len 12 without the CRC flag: bytes 8..11 ignored (upstream accepts)"]
    if hl != MIN_HEADER_LEN:
        where = "overlaps the header" if hl < MIN_HEADER_LEN else f"skips {hl - 8} bytes"
        return [f"header_len {hl} is neither 8 nor 12: the payload {where} (upstream accepts)"]
    return []


def read_header(data: bytes, layout: Layout, lenient: bool = False
                ) -> tuple[int, int, int | None, int, list[str]]:
    """Check everything up to truncation; return (header_len, flags, crc, byte7, warnings)."""
    n = len(data)
    if n < MIN_HEADER_LEN:
        raise EnvelopeError("too_short", f"envelope needs at least 8 bytes, got {n}",
                            offset=n, expected=8, actual=n)
    magic, version, hl, flags, byte7 = _FIXED.unpack_from(data)
    if magic != MAGIC:
        raise EnvelopeError("bad_magic", f"bytes 0..3 are {magic.hex()}, expected magic b90e43b4",
                            offset=0, expected=MAGIC, actual=magic)
    if version != 0:
        raise EnvelopeError("unknown_version", f"version byte (offset 4) is {version}, only 0 is defined",
                            offset=4, expected=0, actual=version)
    warnings: list[str] = []
    if hl != MIN_HEADER_LEN and hl != CRC_HEADER_LEN and not lenient:
        raise EnvelopeError("bad_header_len", f"header_len (offset 5) is {hl}, expected 8 or 12",
                            offset=5, expected=(8, 12), actual=hl)
    if flags & FLAG_CRC:
        if hl != CRC_HEADER_LEN:
            raise EnvelopeError("crc_missing", f"CRC flag set (flags 0x{flags:02x} at offset 6) but "
                                f"header_len is {hl}, not 12: no room for the CRC-32C",
                                offset=6, expected=12, actual=hl)
    elif hl == CRC_HEADER_LEN and not lenient:
        raise EnvelopeError("bad_header_len", "header_len (offset 5) is 12 but the CRC flag "
                            f"(flags 0x{flags:02x} at offset 6) is not set",
                            offset=5, expected=8, actual=hl)
    if lenient:
        warnings = _lenient_header_len(hl, flags)
    if n < hl:
        raise EnvelopeError("truncated", f"header_len is {hl} but the data is only {n} bytes",
                            offset=n, expected=hl, actual=n)
    crc = _CRC.unpack_from(data, 8)[0] if flags & FLAG_CRC else None
    if byte7 and layout.byte7 == "reserved":
        warnings.append(f"reserved byte 7 is 0x{byte7:02x}; {layout.name} writers always put 0")
    return hl, flags, crc, byte7, warnings


def resolve_msg_type(layout: Layout, byte7: int, payload_type: str | None
                     ) -> tuple[int | None, str | None, str]:
    """(msg_type, msg_type_name, payload_type) of a header under `layout`."""
    if not layout.has_msg_type:
        return None, layout.byte7_name, payload_type or layout.default_payload_type  # type: ignore[return-value]
    mt = layout.msg_types.get(byte7)
    if mt is None:
        known = f"0..{max(layout.msg_types)}" if layout.msg_types else "none"
        raise EnvelopeError("unknown_msg_type", f"MsgType (offset 7) is {byte7}, not in the "
                            f"{layout.name} table ({known})", offset=7, expected=known, actual=byte7)
    return byte7, mt.name, payload_type or mt.payload_type
