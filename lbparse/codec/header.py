"""The envelope header: strict and lenient checks, no payload work.

The checks run in the order of `errors.ENVELOPE_KINDS`, the order a strict decoder
(and the reference vectors) use: length, magic, version, header length,
CRC flag, truncation; the CRC value and the MsgType come after, in
`envelope.decode`, because the CRC must be checked before byte 7 is
trusted. `lenient=True` accepts what the upstream server accepts and
records each tolerance as a warning.
"""

from __future__ import annotations

from typing import NamedTuple

from lbparse.codec.layouts import Layout
from lbparse.codec.wire import (
    CRC_FLAG,
    CRC_HEADER_LEN,
    CRC_OFFSET,
    CRC_PAIRING_ERRORS,
    CRC_STRUCT,
    FIELD_ERRORS,
    FLAGS_OFFSET,
    HEADER,
    HEADER_LEN_OFFSET,
    HEADER_LENS,
    HEADER_SIZE,
    MAGIC,
    MSG_TYPE_OFFSET,
    VERSION,
    VERSION_OFFSET,
)
from lbparse.errors import EnvelopeError

__all__ = ["Header", "read_header", "resolve_msg_type"]

_FIXED = HEADER.struct
_CRC = CRC_STRUCT
_LENS = " or ".join(map(str, HEADER_LENS))


class Header(NamedTuple):
    """A validated envelope header (see `lbparse.decode_header`).

    Attributes:
        layout: The layout's name.
        version: The version byte; None: the layout has no envelope header.
        header_len: The header's length byte.
        flags: The flags byte.
        crc32c: The CRC-32C field, None when absent.
        msg_type: The MsgType's number.
        msg_type_name: The MsgType's name.
        payload_type: The payload's type.
        warnings: What `lenient` let by.
        payload_offset: Where the payload starts: header_len, or past the
            LIFT cookie.
    """

    layout: str
    version: int | None  # None: the layout has no envelope header
    header_len: int | None
    flags: int | None
    crc32c: int | None
    msg_type: int | None
    msg_type_name: str | None
    payload_type: str
    warnings: tuple[str, ...] = ()
    payload_offset: int = 0  # header_len, or past the LIFT cookie


def _lenient_header_len(hl: int, flags: int) -> list[str]:
    if flags & CRC_FLAG:
        return []
    if hl == CRC_HEADER_LEN:
        return [
            f"header_len {hl} without the CRC flag: bytes {CRC_OFFSET}..{hl - 1} ignored "
            "(upstream accepts)"
        ]
    if hl != HEADER_SIZE:
        where = "overlaps the header" if hl < HEADER_SIZE else f"skips {hl - HEADER_SIZE} bytes"
        return [f"header_len {hl} is neither {_LENS}: the payload {where} (upstream accepts)"]
    return []


def read_header(
    data: bytes, layout: Layout, lenient: bool = False
) -> tuple[int, int, int | None, int, list[str]]:
    """Check everything up to truncation.

    Args:
        data: The whole envelope.
        layout: A layout with the envelope header.
        lenient: Accept what the upstream server accepts (a header length
            other than 8 or 12, or of 12 without the CRC flag), each said as
            a warning.

    Returns:
        (header_len, flags, crc, byte7, warnings); crc is None when the
        header carries none.

    Raises:
        EnvelopeError: `too_short`, `bad_magic`, `unknown_version`,
            `bad_header_len`, `crc_missing` or `truncated`, with offset,
            expected and actual values.
    """
    n = len(data)
    if n < HEADER_SIZE:
        raise EnvelopeError(
            FIELD_ERRORS["header"],
            f"envelope needs at least {HEADER_SIZE} bytes, got {n}",
            offset=n,
            expected=HEADER_SIZE,
            actual=n,
        )
    magic, version, hl, flags, byte7 = _FIXED.unpack_from(data)
    if magic != MAGIC:
        raise EnvelopeError(
            FIELD_ERRORS["magic"],
            f"bytes 0..{len(MAGIC) - 1} are {magic.hex()}, expected magic {MAGIC.hex()}",
            offset=0,
            expected=MAGIC,
            actual=magic,
        )
    if version != VERSION:
        raise EnvelopeError(
            FIELD_ERRORS["version"],
            f"version byte (offset {VERSION_OFFSET}) is {version}, only {VERSION} is defined",
            offset=VERSION_OFFSET,
            expected=VERSION,
            actual=version,
        )
    warnings: list[str] = []
    if hl not in HEADER_LENS and not lenient:
        raise EnvelopeError(
            FIELD_ERRORS["header_len"],
            f"header_len (offset {HEADER_LEN_OFFSET}) is {hl}, expected {_LENS}",
            offset=HEADER_LEN_OFFSET,
            expected=HEADER_LENS,
            actual=hl,
        )
    if flags & CRC_FLAG:
        if hl != CRC_HEADER_LEN:
            raise EnvelopeError(
                CRC_PAIRING_ERRORS["flag_set"],
                f"CRC flag set (flags "
                f"0x{flags:02x} at offset {FLAGS_OFFSET}) but header_len is "
                f"{hl}, not {CRC_HEADER_LEN}: no room for the CRC-32C",
                offset=FLAGS_OFFSET,
                expected=CRC_HEADER_LEN,
                actual=hl,
            )
    elif hl == CRC_HEADER_LEN and not lenient:
        raise EnvelopeError(
            CRC_PAIRING_ERRORS["flag_clear"],
            f"header_len (offset "
            f"{HEADER_LEN_OFFSET}) is {hl} but the CRC flag (flags "
            f"0x{flags:02x} at offset {FLAGS_OFFSET}) is not set",
            offset=HEADER_LEN_OFFSET,
            expected=HEADER_SIZE,
            actual=hl,
        )
    if lenient:
        warnings = _lenient_header_len(hl, flags)
    if n < hl:
        raise EnvelopeError(
            FIELD_ERRORS["crc32c"],
            f"header_len is {hl} but the data is only {n} bytes",
            offset=n,
            expected=hl,
            actual=n,
        )
    crc = _CRC.unpack_from(data, CRC_OFFSET)[0] if flags & CRC_FLAG else None
    if byte7 and layout.byte7 == "reserved":
        warnings.append(
            f"reserved byte {MSG_TYPE_OFFSET} is 0x{byte7:02x}; {layout.name} writers always put 0"
        )
    return hl, flags, crc, byte7, warnings


def resolve_msg_type(
    layout: Layout, byte7: int, payload_type: str | None
) -> tuple[int | None, str | None, str]:
    """The MsgType of a header's byte 7 under `layout`, and its payload type.

    Args:
        layout: The layout.
        byte7: Byte 7 of the header.
        payload_type: The payload type asked for; None: the MsgType's (or
            the layout's default).

    Returns:
        (msg_type, msg_type_name, payload_type); msg_type is None in a layout
        without MsgTypes.

    Raises:
        EnvelopeError: `unknown_msg_type`: byte 7 is no MsgType of the layout.
    """
    if not layout.has_msg_type:
        return None, layout.byte7_name, payload_type or layout.default_payload_type  # type: ignore[return-value]
    mt = layout.msg_types.get(byte7)
    if mt is None:
        known = f"0..{max(layout.msg_types)}" if layout.msg_types else "none"
        raise EnvelopeError(
            FIELD_ERRORS["msg_type"],
            f"MsgType (offset {MSG_TYPE_OFFSET}) is "
            f"{byte7}, not in the {layout.name} table ({known})",
            offset=MSG_TYPE_OFFSET,
            expected=known,
            actual=byte7,
        )
    return byte7, mt.name, payload_type or mt.payload_type
