"""Layouts without the envelope header: `lift-cookie` and `plain`.

lift-cookie (Liftbridge clients up to v0.0.1-alpha): `LIFT` then a protobuf
`proto.Message`; the acks of that era (`proto.Ack`) had no cookie at all.
plain: any NATS payload that is not an envelope; the bytes are the message.
"""

from __future__ import annotations

from typing import Any

from lbparse.codec.envelope import NO_EXTRA, Envelope, build_envelope, make_head
from lbparse.codec.layouts import LAYOUTS
from lbparse.codec.limits import DEFAULT, Limits, check_depth, check_payload_size
from lbparse.codec.payloads import BYTES, ProtoCodec, codec_for, descriptor_of, payload_type_of
from lbparse.codec.wire import COOKIE, FIELD_ERRORS
from lbparse.errors import EnvelopeError, InputError
from lbparse_generated.construct_schema import liftbridge_envelope as _schema

__all__ = ["decode_lift_cookie", "decode_plain", "encode_lift_cookie", "encode_plain"]

_LIFT = LAYOUTS["lift-cookie"]
_PLAIN = LAYOUTS["plain"]


def _headerless(layout: str, ptype: str, payload: bytes, message: Any) -> Envelope:
    return build_envelope(
        make_head(layout, None, None, None, None, None, ptype), None, payload, message, NO_EXTRA
    )


def decode_lift_cookie(
    data: bytes,
    verify_crc: bool = True,
    lenient: bool = False,
    payload_type: str | None = None,
    limits: Limits | None = None,
) -> Envelope:
    """Decode a LIFT-era (the 'LIFT' cookie, then a protobuf) payload (a `dispatch.Decoder`).

    Args:
        data: The NATS payload.
        verify_crc: Ignored: the layout has no CRC.
        lenient: Ignored: the layout has no header to be lenient about.
        payload_type: The payload's type; None: the layout's default; "bytes" checks the
            framing only (decode_header).
        limits: Bounds on the payload (None for the defaults).

    Returns:
        The Envelope: no header fields, the payload and its message.

    Raises:
        InputError: The layout does not carry `payload_type`.
        EnvelopeError: The cookie is wrong or alone, or the payload is not its
            type or passes a limit.
    """
    del verify_crc, lenient  # the layout has no CRC and no header to be lenient about
    ptype = payload_type or _LIFT.default_payload_type
    framing_only = ptype == BYTES  # decode_header: check the cookie, leave the payload
    if framing_only:
        ptype = _LIFT.default_payload_type
    if ptype not in _LIFT.payload_types:
        raise InputError(
            "bad_option",
            f"the lift-cookie layout carries {', '.join(_LIFT.payload_types)}, not {ptype}",
        )
    if ptype in _LIFT.bare_payloads:
        payload = data
    else:
        # As the spec reads it: the cookie, then a payload of at least one
        # byte (the old client's own check was len(data) > 4).
        n = len(COOKIE)
        if len(data) >= n and data[:n] != COOKIE:
            raise EnvelopeError(
                FIELD_ERRORS["cookie"],
                f"bytes 0..{n - 1} are "
                f"{data[:n].hex()}, expected the cookie {COOKIE.hex()} "
                f"({COOKIE.decode('ascii')!r})",
                offset=0,
                expected=COOKIE,
                actual=data[:n],
            )
        if len(data) <= n:
            raise EnvelopeError(
                FIELD_ERRORS["payload"],
                f"a LIFT message needs the {n}-byte cookie and a payload, got {len(data)} bytes",
                offset=len(data),
                expected=n + 1,
                actual=len(data),
            )
        payload = data[n:]
    lim = limits or DEFAULT
    check_payload_size(len(payload), len(data) - len(payload), lim)
    if framing_only:
        return _headerless("lift-cookie", ptype, payload, None)
    codec = codec_for(ptype)
    if isinstance(codec, ProtoCodec):
        check_depth(payload, descriptor_of(codec.python_type), lim)
    message = codec.decode(payload)
    return _headerless("lift-cookie", ptype, payload, message)


def decode_plain(
    data: bytes,
    verify_crc: bool = True,
    lenient: bool = False,
    payload_type: str | None = None,
    limits: Limits | None = None,
) -> Envelope:
    """Decode a plain NATS payload (a `dispatch.Decoder`).

    Args:
        data: The NATS payload.
        verify_crc: Ignored: the layout has no CRC.
        lenient: Ignored: the layout has no header to be lenient about.
        payload_type: None or "bytes": the payload is bytes.
        limits: Bounds on the payload (None for the defaults).

    Returns:
        The Envelope: no header fields, the payload and its message.

    Raises:
        InputError: Another payload type was asked for.
        EnvelopeError: `bad_payload`: the payload passes `limits.max_payload`.
    """
    del verify_crc, lenient
    if payload_type not in (None, BYTES):
        raise InputError("bad_option", f"the plain layout carries bytes, not {payload_type}")
    check_payload_size(len(data), 0, limits or DEFAULT)
    return _headerless("plain", BYTES, data, data)


def encode_lift_cookie(message: Any, msg_type: int | None, crc: bool, flags: int = 0) -> bytes:
    """Encode `message` in the LIFT-era layout (a `dispatch.Encoder`).

    Args:
        message: A payload type the layout carries (a proto.Message).
        msg_type: Must be None: the layout has no MsgType.
        crc: Must be False: the layout has no CRC.
        flags: Must be 0: the layout has no flags.

    Returns:
        The cookie and the payload (a bare payload for the types carried
        without it).

    Raises:
        InputError: A MsgType, CRC or flags were given, the layout does not carry
            the message's type, or an empty proto.Message (the cookie alone,
            which LIFT-era readers reject).
    """
    if msg_type is not None or crc or flags:
        raise InputError("bad_option", "the lift-cookie layout has no MsgType, no flags and no CRC")
    ptype = payload_type_of(message)
    if ptype not in _LIFT.payload_types:
        raise InputError(
            "bad_option",
            f"the lift-cookie layout carries {', '.join(_LIFT.payload_types)}, not {ptype}",
        )
    payload = codec_for(ptype).encode(message)
    if ptype in _LIFT.bare_payloads:
        return payload
    if not payload:
        # The old client wrote exactly this for NewMessage(nil) and then
        # refused to read it back; lbparse does not write what nobody reads.
        raise InputError(
            "bad_option",
            "an empty proto.Message would be the cookie 'LIFT' alone, "
            "which LIFT-era readers reject",
        )
    wire: bytes = _schema.build(dict(header=None, crc32c=None, payload=payload), layout=_LIFT.id)
    return wire


def encode_plain(message: Any, msg_type: int | None, crc: bool, flags: int = 0) -> bytes:
    """Encode `message` in the plain layout (a `dispatch.Encoder`).

    Args:
        message: The payload's bytes (bytes, bytearray, memoryview).
        msg_type: Must be None: the layout has no MsgType.
        crc: Must be False: the layout has no CRC.
        flags: Must be 0: the layout has no flags.

    Returns:
        The bytes themselves.

    Raises:
        InputError: A MsgType, CRC or flags were given.
        TypeError: `message` is not bytes.
    """
    if msg_type is not None or crc or flags:
        raise InputError("bad_option", "the plain layout has no MsgType, no flags and no CRC")
    if not isinstance(message, (bytes, bytearray, memoryview)):
        raise TypeError(f"the plain layout carries bytes, not {type(message).__name__}")
    return bytes(message)
