"""The public functions: decode, decode_header, encode, encode_envelope, payload_from_json."""

from __future__ import annotations

import inspect
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import crc32c as _crc32c
from google.protobuf import json_format

from lbparse.codec import dispatch as _dispatch
from lbparse.codec.envelope import NO_EXTRA, Buffer, Envelope, Head, as_bytes, make_head
from lbparse.codec.header import Header, read_header, resolve_msg_type
from lbparse.codec.layouts import layout_named
from lbparse.codec.limits import DEFAULT, Limits
from lbparse.codec.payloads import BYTES, codec_in_layout
from lbparse.codec.wire import CRC_FLAG, CRC_HEADER_LEN, CRC_STRUCT, HEADER_SIZE, MAGIC, VERSION
from lbparse.errors import InputError

__all__ = ["decode", "decode_header", "encode", "encode_envelope", "payload_from_json"]

_DECODERS = _dispatch.DECODERS
_crc = _crc32c.crc32c
_new = object.__new__


def _v0_prefixes() -> dict[int, tuple[Head, int, int, Callable[[bytes], Any]]]:
    """For the shortcut in decode: the fixed header of a well-formed strict v0
    envelope, as one big-endian integer, without the CRC flag (the short
    header_len) and with it (the CRC-sized one), for every MsgType ->
    (the envelope's Head, header_len, flags, payload parser). One dict
    lookup checks magic, version, header length, CRC flag and MsgType at
    once; rarer flag bits take the full path."""
    v0 = _dispatch.enveloped_decoder("v0")
    table = {}
    for byte7, (msg_type, name, ptype, parse) in v0.by_byte7.items():
        for hl, flags in ((HEADER_SIZE, 0), (CRC_HEADER_LEN, CRC_FLAG)):
            prefix = int.from_bytes(MAGIC + bytes((VERSION, hl, flags, byte7)), "big")
            table[prefix] = (
                make_head("v0", VERSION, hl, flags, msg_type, name, ptype),
                hl,
                flags,
                parse,
            )
    return table


_V0_PREFIXES = _v0_prefixes()
# The fixed header as one unsigned integer, then the CRC-32C field.
_unpack_prefix = struct.Struct(">" + {8: "Q"}[HEADER_SIZE] + CRC_STRUCT.format[1:]).unpack_from
_CAP = DEFAULT.shortcut_cap


def _fast_decode(data: Buffer, layout: str = "v0", *positional: Any, **options: Any) -> Envelope:
    # What runs as `decode` (type checkers see the declaration further down;
    # `help` and `inspect` see _decode's signature). A call with no options
    # is the hot path, benchmarked against a bare struct+crc32c+FromString:
    # a function with keyword-only defaults pays a dict lookup per default
    # on every call, and `**options` left empty costs less. Every other call
    # goes to _decode, which has the declared signature and raises
    # TypeError as it would.
    if options or positional:
        return _decode(data, layout, *positional, **options)
    # Well-formed strict v0 in one frame; anything else, including every
    # error, falls through to the layout's full decoder, which repeats the
    # checks and names the problem (tests hold both paths equal).
    if layout == "v0" and type(data) is bytes and len(data) <= _CAP:
        try:
            prefix, crc = _unpack_prefix(data)
            head, hl, flags, parse = _V0_PREFIXES[prefix]
        except (struct.error, KeyError):  # too short for a CRC, or not a common strict v0 header
            pass
        else:
            payload = data[hl:]
            if not flags:
                crc = None
            if crc is None or _crc(payload) == crc:
                try:
                    message = parse(payload)
                except Exception:
                    pass
                else:
                    # envelope.build_envelope, inline: a call costs a tenth of the budget.
                    env: Envelope = _new(Envelope)
                    env._head = head
                    env._crc32c = crc
                    env._payload = payload
                    env._message = message
                    env._extra = NO_EXTRA
                    return env
    fn = _DECODERS.get(layout) or _dispatch.decoder(layout)  # the latter raises
    return fn(as_bytes(data), True, False, None, DEFAULT)


def _decode(
    data: Buffer,
    layout: str = "v0",
    *,
    verify_crc: bool = True,
    lenient: bool = False,
    payload_type: str | None = None,
    limits: Limits | None = DEFAULT,
) -> Envelope:
    """Decode one NATS payload as an envelope of `layout`.

    Raises `EnvelopeError` (with `.kind`) for any bytes that are not a
    well-formed envelope; never any other exception for bad bytes.

    Args:
        data: The NATS message's payload (bytes, bytearray, memoryview: any
            buffer), header and payload together.
        layout: The layout to read: "v0", "legacy", "flatbuffers",
            "flatbuffers-draft", "lift-cookie", "plain" (`LAYOUTS`), or "auto"
            to tell them apart from the bytes (`Envelope.layout` says which).
        verify_crc: Check the payload's CRC-32C when the header carries one
            (a mismatch is `crc_mismatch`).
        lenient: Accept what the upstream server accepts (a header length
            other than 8 or 12, or of 12 without the CRC flag), each
            tolerance said in `Envelope.warnings`.
        payload_type: Decode the payload as this type (a protobuf name such
            as "proto.Ack", or "bytes"), for layouts whose header does not
            say it; None: the MsgType's type, or the layout's default.
        limits: Bounds on the payload size and protobuf nesting
            (`lbparse.Limits`); None for the defaults. A payload over a limit
            is `bad_payload` with `.limit`.

    Returns:
        The decoded envelope, an immutable record: its header fields, the
        payload's bytes and its message (a protobuf message, a FlatTable, a
        ReplicationResponse, or bytes).

    Raises:
        EnvelopeError: The bytes are not a well-formed envelope of that
            layout; `.kind` says which check failed, with `.offset`,
            `.expected` and `.actual`.
        ValueError: `layout` names no layout.
    """
    if limits is None:
        limits = DEFAULT
    # With these options decode's shortcut, and its fall-through to the full
    # decoder with the default limits, give what the full decoder with these
    # limits would: v0 carries no FlatBuffers (whose expansion max_payload
    # caps), a length within both caps keeps the payload within either
    # max_payload, and a cap of -1 (a depth check is due) keeps it out.
    if (
        layout == "v0"
        and verify_crc
        and not lenient
        and payload_type is None
        and type(data) is bytes
        and len(data) <= min(limits.shortcut_cap, _CAP)
    ):
        return _fast_decode(data)
    fn = _DECODERS.get(layout) or _dispatch.decoder(layout)  # the latter raises
    return fn(as_bytes(data), verify_crc, lenient, payload_type, limits)


_decode.__name__ = _decode.__qualname__ = "decode"  # in TypeErrors, the name users called
_fast_decode.__name__ = _fast_decode.__qualname__ = "decode"
_fast_decode.__doc__ = _decode.__doc__
_fast_decode.__signature__ = inspect.signature(_decode)  # type: ignore[attr-defined]

if TYPE_CHECKING:
    # What type checkers see: _decode's keyword-only signature.
    def decode(
        data: Buffer,
        layout: str = "v0",
        *,
        verify_crc: bool = True,
        lenient: bool = False,
        payload_type: str | None = None,
        limits: Limits | None = DEFAULT,
    ) -> Envelope:
        """Decode one NATS payload as an envelope of `layout`.

        Raises `EnvelopeError` (with `.kind`) for any bytes that are not a
        well-formed envelope; never any other exception for bad bytes.

        Args:
            data: The NATS message's payload (bytes, bytearray, memoryview: any
                buffer), header and payload together.
            layout: The layout to read: "v0", "legacy", "flatbuffers",
                "flatbuffers-draft", "lift-cookie", "plain" (`LAYOUTS`), or "auto"
                to tell them apart from the bytes (`Envelope.layout` says which).
            verify_crc: Check the payload's CRC-32C when the header carries one
                (a mismatch is `crc_mismatch`).
            lenient: Accept what the upstream server accepts (a header length
                other than 8 or 12, or of 12 without the CRC flag), each
                tolerance said in `Envelope.warnings`.
            payload_type: Decode the payload as this type (a protobuf name such
                as "proto.Ack", or "bytes"), for layouts whose header does not
                say it; None: the MsgType's type, or the layout's default.
            limits: Bounds on the payload size and protobuf nesting
                (`lbparse.Limits`); None for the defaults. A payload over a limit
                is `bad_payload` with `.limit`.

        Returns:
            The decoded envelope, an immutable record: its header fields, the
            payload's bytes and its message (a protobuf message, a FlatTable, a
            ReplicationResponse, or bytes).

        Raises:
            EnvelopeError: The bytes are not a well-formed envelope of that
                layout; `.kind` says which check failed, with `.offset`,
                `.expected` and `.actual`.
            ValueError: `layout` names no layout.
        """
        ...
else:
    decode = _fast_decode


def decode_header(data: Buffer, layout: str = "v0", *, lenient: bool = False) -> Header:
    """Validate and return the header without touching the payload (no CRC check).

    Args:
        data: The NATS message's payload, header and payload together.
        layout: The layout to read (as `decode` takes it); a headerless
            layout's Header has only its framing (the payload's offset).
        lenient: Accept what upstream's decoders accept, as `decode` does.

    Returns:
        The header: layout, version, header length, flags, CRC field, MsgType
        (number and name), payload type, warnings, and the payload's offset.

    Raises:
        EnvelopeError: The header is not well-formed (as `decode` says it).
        ValueError: `layout` names no layout.
    """
    lay = layout_named(layout)
    data = as_bytes(data)
    if not lay.has_header:
        env = _dispatch.decoder(layout)(data, False, lenient, BYTES, DEFAULT)  # framing only
        offset = len(data) - len(env.payload)
        return Header(
            lay.name,
            None,
            None,
            None,
            None,
            None,
            None,
            lay.default_payload_type or BYTES,
            (),
            offset,
        )
    hl, flags, crc, byte7, warnings = read_header(data, lay, lenient)
    msg_type, name, ptype = resolve_msg_type(lay, byte7, None)
    return Header(lay.name, VERSION, hl, flags, crc, msg_type, name, ptype, tuple(warnings), hl)


def encode(
    message: Any,
    *,
    layout: str = "v0",
    msg_type: int | str | None = None,
    crc: bool = False,
    flags: int = 0,
) -> bytes:
    """Build the envelope of `message`.

    Args:
        message: A protobuf message, a FlatBuffers `FlatTable` in the
            FlatBuffers layouts, a `ReplicationResponse`, or bytes for
            `plain`.
        layout: The layout to write (`LAYOUTS`; not "auto").
        msg_type: A MsgType number or name of the layout; None: the one the
            message's type has.
        crc: Add the payload's CRC-32C (and set the CRC flag).
        flags: Header flag bits besides the CRC flag (unassigned ones, which
            upstream ignores).

    Returns:
        The envelope's bytes, header and payload, as a NATS payload.

    Raises:
        ValueError: `layout` or a MsgType name is unknown, the message's type
            has no MsgType in the layout (or not the one asked), `flags` is
            not one byte or holds the CRC flag, or a headerless layout is
            given a MsgType, flags or a CRC.
        TypeError: The layout carries the payload type in another form (a
            FlatTable, not a protobuf message, in the FlatBuffers layouts;
            bytes in plain).
    """
    lay = layout_named(layout)
    if isinstance(msg_type, str):
        msg_type = lay.msg_type_named(msg_type).value
    return _dispatch.encoder(layout)(message, msg_type, crc, flags)


def encode_envelope(env: Envelope) -> bytes:
    """The bytes of a decoded (or built) Envelope.

    Its layout, MsgType, flag bits, CRC (present or not) and message are
    encoded again. For an envelope decoded from bytes, these are the bytes,
    wherever the payload was in its encoder's canonical form (protobuf's
    deterministic serialization, Go's FlatBuffers builder order).

    Args:
        env: The envelope.

    Returns:
        The envelope's bytes, header and payload.
    """
    lay = layout_named(env.layout)
    crc = env.crc32c is not None
    flags = (env.flags or 0) & ~CRC_FLAG
    return encode(
        env.message,
        layout=env.layout,
        msg_type=env.msg_type if lay.has_msg_type else None,
        crc=crc,
        flags=flags,
    )


def payload_from_json(type_name: str, obj: Any, *, layout: str = "v0") -> Any:
    """The message object of a MsgType (or payload type) of `layout`, from JSON.

    The JSON is what `Envelope.to_json_dict()` gives as its `payload_json`.

    Args:
        type_name: A MsgType name of the layout ("Ack") or a payload type
            ("proto.Ack", "bytes").
        obj: The JSON value (parsed: dicts, lists, strings, numbers).
        layout: The layout whose payload types apply (FlatBuffers tables in
            the FlatBuffers layouts).

    Returns:
        A protobuf message, a FlatBuffers table in the FlatBuffers layouts, a
        ReplicationResponse, or bytes.

    Raises:
        InputError: The JSON does not fit the type, or the type is not one of
            the layout's.
    """
    codec = codec_in_layout(layout_named(layout), type_name)
    try:
        return codec.from_json(obj)
    except json_format.ParseError as exc:
        raise InputError("bad_json", f"JSON does not fit {codec.name}: {exc}") from None
