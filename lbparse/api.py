"""The public functions: decode, decode_header, encode."""

from __future__ import annotations

import inspect
import struct
from typing import Any

import crc32c as _crc32c

from lbparse import dispatch as _dispatch
from lbparse.layouts import layout_named
from lbparse.envelope import Buffer, Envelope, as_bytes
from lbparse.header import Header, read_header, resolve_msg_type
from lbparse.limits import DEFAULT, Limits
from lbparse.payloads import BYTES
from lbparse.wire import CRC_FLAG, CRC_HEADER_LEN, CRC_STRUCT, HEADER_SIZE, MAGIC, VERSION

__all__ = ["decode", "decode_header", "encode"]

_DECODERS = _dispatch.DECODERS
_crc = _crc32c.crc32c
# For the shortcut in decode: the fixed header of a well-formed strict v0
# envelope, as one big-endian integer, without the CRC flag (the short
# header_len) and with it (the CRC-sized one), for every MsgType ->
# (header_len, flags, msg_type, name, payload type, parser). One dict lookup
# checks magic, version, header length, CRC flag and MsgType at once; rarer
# flag bits take the full path.
_V0_PREFIXES: dict[int, tuple[int, int, int, str, str, Any]] = {
    int.from_bytes(MAGIC + bytes((VERSION, hl, flags, byte7)), "big"): (hl, flags, *entry)
    for byte7, entry in _DECODERS["v0"].by_byte7.items()  # type: ignore[attr-defined]
    for hl, flags in ((HEADER_SIZE, 0), (CRC_HEADER_LEN, CRC_FLAG))
}
# The fixed header as one unsigned integer, then the CRC-32C field.
_unpack_prefix = struct.Struct(">" + {8: "Q"}[HEADER_SIZE] + CRC_STRUCT.format[1:]).unpack_from
_CAP = DEFAULT.shortcut_cap


def decode(data: Buffer, layout: str = "v0", *positional: Any, **options: Any) -> Envelope:
    # The signature users see (and `help`, `inspect`) is _decode's below;
    # this one exists for speed. A call with no options is the hot path,
    # benchmarked against a bare struct+crc32c+FromString: a function with
    # keyword-only defaults pays a dict lookup per default on every call,
    # and `**options` left empty costs less. Every other call goes to
    # _decode, which has the declared signature and raises TypeError as it would.
    if options or positional:
        return _decode(data, layout, *positional, **options)
    # Well-formed strict v0 in one frame; anything else, including every
    # error, falls through to the layout's full decoder, which repeats the
    # checks and names the problem (tests hold both paths equal).
    if layout == "v0" and type(data) is bytes and len(data) <= _CAP:
        try:
            prefix, crc = _unpack_prefix(data)
            hl, flags, msg_type, name, ptype, parse = _V0_PREFIXES[prefix]
        except (struct.error, KeyError):  # too short for a CRC, or not a common strict v0 header
            pass
        else:
            payload = data[hl:]
            if not flags:
                crc = None
            if crc is None or _crc(payload) == crc:
                try:
                    message = parse(payload)
                except Exception:  # noqa: S110  the full decoder reports it
                    pass
                else:
                    return Envelope(("v0", VERSION, hl, flags, crc, msg_type, name, ptype, payload,
                                     message, ()))
    fn = _DECODERS.get(layout) or _dispatch.decoder(layout)  # the latter raises
    return fn(as_bytes(data), True, False, None, DEFAULT)


def _decode(data: Buffer, layout: str = "v0", *, verify_crc: bool = True, lenient: bool = False,
            payload_type: str | None = None, limits: Limits | None = DEFAULT) -> Envelope:
    """Decode one NATS payload as an envelope of `layout`.

    Raises `EnvelopeError` (with `.kind`) for any bytes that are not a
    well-formed envelope; never any other exception for bad bytes.
    `limits` (`lbparse.limits.Limits`, None for the defaults) bounds the
    payload size and protobuf nesting; a payload over a limit is `bad_payload` with `.limit`.
    """
    if limits is None:
        limits = DEFAULT
    # With these options decode's shortcut, and its fall-through to the full
    # decoder with the default limits, give what the full decoder with these
    # limits would: v0 carries no FlatBuffers (whose expansion max_payload
    # caps), a length within both caps keeps the payload within either
    # max_payload, and a cap of -1 (a depth check is due) keeps it out.
    if (layout == "v0" and verify_crc and not lenient and payload_type is None
            and type(data) is bytes and len(data) <= min(limits.shortcut_cap, _CAP)):
        return decode(data)
    fn = _DECODERS.get(layout) or _dispatch.decoder(layout)  # the latter raises
    return fn(as_bytes(data), verify_crc, lenient, payload_type, limits)


_decode.__name__ = _decode.__qualname__ = "decode"  # in TypeErrors, the name users called
decode.__doc__ = _decode.__doc__
decode.__signature__ = inspect.signature(_decode)  # type: ignore[attr-defined]


def decode_header(data: Buffer, layout: str = "v0", *, lenient: bool = False) -> Header:
    """Validate and return the header without touching the payload (no CRC check)."""
    lay = layout_named(layout)
    data = as_bytes(data)
    if not lay.has_header:
        env = _dispatch.decoder(layout)(data, False, lenient, BYTES)  # framing only
        offset = len(data) - len(env.payload)
        return Header(lay.name, None, None, None, None, None, None,  # type: ignore[arg-type]
                      lay.default_payload_type or BYTES, (), offset)
    hl, flags, crc, byte7, warnings = read_header(data, lay, lenient)
    msg_type, name, ptype = resolve_msg_type(lay, byte7, None)
    return Header(lay.name, VERSION, hl, flags, crc, msg_type, name, ptype, tuple(warnings), hl)


def encode(message: Any, *, layout: str = "v0", msg_type: int | None = None,
           crc: bool = False) -> bytes:
    """Build the envelope of `message` (a protobuf message or a ReplicationResponse)."""
    return _dispatch.encoder(layout)(message, msg_type, crc)

