"""The public functions: decode, decode_header, encode."""

from __future__ import annotations

import struct
from typing import Any

import crc32c as _crc32c

from lbparse import layouts as _layouts
from lbparse.dispatch import layout_named
from lbparse.envelope import Buffer, Envelope, as_bytes
from lbparse.header import Header, read_header, resolve_msg_type
from lbparse.limits import DEFAULT, Limits
from lbparse.payloads import BYTES

__all__ = ["decode", "decode_header", "encode"]

_DECODERS = _layouts.DECODERS
# For the shortcut in decode: v0's byte 7 -> (msg_type, name, payload type, parser).
_V0_TABLE = _DECODERS["v0"].by_byte7  # type: ignore[attr-defined]
# Magic, version and header length as one 6-byte string: a well-formed
# header is one of two prefixes, and one comparison checks all three.
_unpack12 = struct.Struct(">6sBBI").unpack_from
_HEAD8 = b"\xb9\x0e\x43\xb4\x00\x08"
_HEAD12 = b"\xb9\x0e\x43\xb4\x00\x0c"
_crc = _crc32c.crc32c
_new = tuple.__new__


def decode(data: Buffer, layout: str = "v0", *, verify_crc: bool = True, lenient: bool = False,
           payload_type: str | None = None, limits: Limits | None = DEFAULT) -> Envelope:
    """Decode one NATS payload as an envelope of `layout`.

    Raises `EnvelopeError` (with `.kind`) for any bytes that are not a
    well-formed envelope; never any other exception for bad bytes.
    `limits` (`lbparse.limits.Limits`, None for the defaults) bounds the
    payload size and protobuf nesting; a payload over a limit is `bad_payload` with `.limit`.
    """
    if limits is None:
        limits = DEFAULT
    # Shortcut for well-formed enveloped input in strict mode, in this one
    # frame because decode is the hot path (its cost is benchmarked against
    # a bare struct+crc32c+FromString). Anything unusual, including every
    # error, falls through to the layout's full decoder, which repeats the
    # checks and names the problem; tests hold both paths equal.
    if (layout == "v0" and not lenient and payload_type is None and type(data) is bytes
            and len(data) <= limits.shortcut_cap):
        try:
            head, flags, byte7, crc = _unpack12(data)
        except struct.error:  # shorter than 12 bytes: the full decoder decides
            head = flags = byte7 = 0
        if flags & 1:
            ok = head == _HEAD12
            hl = 12
        else:
            ok = head == _HEAD8
            hl = 8
            crc = None
        entry = _V0_TABLE.get(byte7)
        if ok and entry is not None:
            payload = data[hl:]
            if crc is None or not verify_crc or _crc(payload) == crc:
                msg_type, name, ptype, parse = entry
                try:
                    message = parse(payload)
                except Exception:  # noqa: S110  the full decoder reports it
                    pass
                else:
                    return _new(Envelope, ("v0", 0, hl, flags, crc, msg_type, name, ptype,
                                           payload, message, ()))
    fn = _DECODERS.get(layout) or _layouts.decoder(layout)  # the latter raises
    if type(data) is not bytes:
        data = as_bytes(data)
    return fn(data, verify_crc, lenient, payload_type, limits)


def decode_header(data: Buffer, layout: str = "v0", *, lenient: bool = False) -> Header:
    """Validate and return the header without touching the payload (no CRC check)."""
    lay = layout_named(layout)
    data = as_bytes(data)
    if not lay.has_header:
        env = _layouts.decoder(layout)(data, False, lenient, BYTES)  # framing only
        offset = len(data) - len(env.payload)
        return Header(lay.name, None, None, None, None, None, None,  # type: ignore[arg-type]
                      lay.default_payload_type or BYTES, (), offset)
    hl, flags, crc, byte7, warnings = read_header(data, lay, lenient)
    msg_type, name, ptype = resolve_msg_type(lay, byte7, None)
    return Header(lay.name, 0, hl, flags, crc, msg_type, name, ptype, tuple(warnings), hl)


def encode(message: Any, *, layout: str = "v0", msg_type: int | None = None,
           crc: bool = False) -> bytes:
    """Build the envelope of `message` (a protobuf message or a ReplicationResponse)."""
    return _layouts.encoder(layout)(message, msg_type, crc)

