"""Decoding and encoding of the layouts with the envelope header (v0, legacy,
the FlatBuffers layouts).

`EnvelopedDecoder(layout)` is the complete decoder of one layout, with every
check and error message; `lbparse.decode` has a shortcut for the common
case in front of it (api.py). Everything that can be resolved once
(MsgType tables, payload parsers) is resolved when the decoder is made.
`encode_enveloped` builds an envelope by one `struct` call over the header
the spec declares (`build_wire`); `schema_wire`, the construct schema
generated from the spec, builds the same bytes and is the reference
(tests/codec/test_differential.py holds the two equal).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import crc32c as _crc32c

from lbparse.codec.envelope import NO_EXTRA, Envelope, build_envelope, make_extra, make_head
from lbparse.codec.header import read_header, resolve_msg_type
from lbparse.codec.layouts import Layout
from lbparse.codec.limits import (
    DEFAULT,
    PROTOBUF_MAX_DEPTH,
    Limits,
    check_depth,
    check_payload_size,
)
from lbparse.codec.payloads import (
    FlatBuffersCodec,
    ProtoCodec,
    codec_for,
    descriptor_of,
    infer_payload_type,
    payload_type_of,
    protobuf_error,
)
from lbparse.codec.wire import (
    CRC_FLAG,
    CRC_HEADER_LEN,
    CRC_OFFSET,
    CRC_STRUCT,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    VERSION,
)
from lbparse.errors import EnvelopeError, InputError
from lbparse_generated.construct_schema import liftbridge_envelope as _envelope_schema

__all__ = ["EnvelopedDecoder", "build_wire", "check_crc", "encode_enveloped", "schema_wire"]

_crc = _crc32c.crc32c


def _raw_parser(layout: Layout, ptype: str) -> Callable[[bytes], Any]:
    """The fastest callable that parses a payload type (may raise anything)."""
    codec = codec_for(layout.codec_key(ptype))
    return codec.python_type.FromString if isinstance(codec, ProtoCodec) else codec.decode


def _bad_payload(
    ptype: str, payload: bytes, exc: Exception, codec: Any, limits: Limits
) -> EnvelopeError:
    if isinstance(codec, ProtoCodec):
        return protobuf_error(ptype, codec.python_type, payload, exc, limits.max_depth)
    return EnvelopeError(
        "bad_payload", f"payload ({len(payload)} bytes) is not a valid {ptype}: {exc}"
    )


def check_crc(data: bytes, hl: int, crc: int | None) -> None:
    """Raise crc_mismatch unless the CRC-32C (if any) matches the payload.

    Args:
        data: The whole envelope.
        hl: The header's length: the payload starts there.
        crc: The header's CRC-32C field; None: no CRC, nothing to check.

    Raises:
        EnvelopeError: `crc_mismatch`, with the expected and actual CRCs.
    """
    if crc is not None:
        actual = _crc(data[hl:])
        if actual != crc:
            raise EnvelopeError(
                "crc_mismatch",
                f"CRC-32C in header (offset {CRC_OFFSET}) is "
                f"{crc:#010x}, payload bytes {hl}..{len(data)} give {actual:#010x}",
                offset=CRC_OFFSET,
                expected=crc,
                actual=actual,
            )


class EnvelopedDecoder:
    """Decoder of one layout with the 8/12-byte envelope header (v0, legacy...).

    Everything that depends only on the layout (MsgType table, payload
    parsers) is resolved here once. This is the complete decoder, with every
    check and error message; `lbparse.decode` has a shortcut for the common
    case in front of it (see api.py). Called as a `dispatch.Decoder`.

    Args:
        layout: A layout with the envelope header.
    """

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.name = layout.name
        self.reserved = layout.byte7 == "reserved"  # nonzero byte 7 earns a warning
        # The header does not name the payload type: infer it from wire types.
        self.infer = bool(layout.payload_alternatives) and not layout.has_msg_type
        self.by_byte7: dict[int, tuple[int | None, str | None, str, Any]] = {}
        if layout.has_msg_type:
            for v, mt in layout.msg_types.items():
                self.by_byte7[v] = (
                    v,
                    mt.name,
                    mt.payload_type,
                    _raw_parser(layout, mt.payload_type),
                )
        elif layout.default_payload_type:
            ptype = layout.default_payload_type
            self.by_byte7[0] = (None, layout.byte7_name, ptype, _raw_parser(layout, ptype))

    def __call__(
        self,
        data: bytes,
        verify_crc: bool = True,
        lenient: bool = False,
        payload_type: str | None = None,
        limits: Limits | None = None,
    ) -> Envelope:
        hl, flags, crc, byte7, found = read_header(data, self.layout, lenient)
        # Before the CRC: a refused payload costs nothing more.
        check_payload_size(len(data) - hl, hl, limits or DEFAULT)
        if verify_crc:
            check_crc(data, hl, crc)
        return self.finish(data, hl, flags, crc, byte7, tuple(found), payload_type, limits)

    def finish(
        self,
        data: bytes,
        hl: int,
        flags: int,
        crc: int | None,
        byte7: int,
        warnings: tuple[str, ...],
        payload_type: str | None = None,
        limits: Limits | None = None,
    ) -> Envelope:
        """The payload half of decoding, once the header is read.

        Its payload size allowed and the CRC checked (layout="auto" reads the
        header once and finishes it with each layout).

        Args:
            data: The whole envelope.
            hl: The header's length: the payload starts there.
            flags: The flags byte.
            crc: The header's CRC-32C field, None when absent.
            byte7: Byte 7 of the header (the MsgType, or reserved).
            warnings: What reading the header let by (lenient).
            payload_type: The payload's type to use; None: the MsgType's, or
                inferred from the payload's wire types (legacy).
            limits: Bounds on the payload (None for the defaults).

        Returns:
            The Envelope.

        Raises:
            EnvelopeError: `unknown_msg_type`, or `bad_payload` when the payload
                is not its type or passes a limit.
        """
        lim = limits or DEFAULT
        payload = data[hl:]
        candidates: list[str] = []
        if self.infer and payload_type is None:
            payload_type, candidates = infer_payload_type(self.layout.payload_types, payload)
        entry = self.by_byte7.get(byte7) if payload_type is None else None
        if entry is None:
            msg_type, name, ptype = resolve_msg_type(self.layout, byte7, payload_type)
            parse = _raw_parser(self.layout, ptype)
        else:
            msg_type, name, ptype, parse = entry
        if lim is not DEFAULT:
            codec = codec_for(self.layout.codec_key(ptype))
            if isinstance(codec, ProtoCodec) and lim.max_depth < PROTOBUF_MAX_DEPTH:
                check_depth(payload, descriptor_of(codec.python_type), lim)
            elif isinstance(codec, FlatBuffersCodec):
                parse = partial(codec.decode_bounded, max_bytes=lim.max_payload)
        try:
            message = parse(payload)
        except EnvelopeError:
            raise
        except Exception as exc:  # DecodeError, RecursionError...: all mean bad bytes
            raise _bad_payload(
                ptype, payload, exc, codec_for(self.layout.codec_key(ptype)), lim
            ) from None
        head = make_head(self.name, VERSION, hl, flags, msg_type, name, ptype)
        if len(candidates) > 1:
            return build_envelope(
                head,
                crc,
                payload,
                message,
                make_extra(warnings, ambiguous=True, payload_type_candidates=tuple(candidates)),
            )
        return build_envelope(
            head, crc, payload, message, make_extra(warnings) if warnings else NO_EXTRA
        )


def encode_enveloped(
    message: Any, layout: Layout, msg_type: int | None, crc: bool, flags: int = 0
) -> bytes:
    """The envelope of `message` in `layout` (one with the header): `build_wire`.

    Args:
        message: The payload object (protobuf message, FlatTable,
            ReplicationResponse, bytes).
        layout: A layout with the envelope header.
        msg_type: The MsgType's number; None: the one the message's type has.
        crc: Add the payload's CRC-32C.
        flags: The header's flag bits besides the CRC flag (unassigned;
            upstream ignores them, and they are kept so that a decoded
            envelope encodes back to its bytes).

    Returns:
        The envelope's bytes.

    Raises:
        InputError: The message's type has no MsgType in the layout, or not
            `msg_type`, or the layout does not carry it; `flags` is not one
            byte besides the CRC flag.
        TypeError: The layout carries that payload type in another Python
            form (a FlatTable in the FlatBuffers layouts).
    """
    _check_flags(flags)  # before any work on the message
    ptype = payload_type_of(message)
    if layout.has_msg_type:
        if msg_type is None:
            mt = layout.by_payload_type.get(ptype)
            if mt is None:
                raise InputError(
                    "bad_option", f"{ptype} has no MsgType in the {layout.name} layout"
                )
            msg_type = mt.value
        elif msg_type not in layout.msg_types or layout.msg_types[msg_type].payload_type != ptype:
            raise InputError(
                "bad_option",
                f"MsgType {msg_type} does not carry a {ptype} in the {layout.name} layout",
            )
    else:
        if ptype not in layout.payload_types:
            raise InputError(
                "bad_option",
                f"the {layout.name} layout carries {', '.join(layout.payload_types)}, not {ptype}",
            )
        msg_type = msg_type or 0  # the reserved byte; upstream always wrote 0
    codec = codec_for(layout.codec_key(ptype))
    if not codec.accepts(message):
        raise TypeError(
            f"the {layout.name} layout carries its {ptype} as "
            f"{codec.python_type.__name__} ({layout.payload_format}), not as "
            f"{type(message).__name__}; lbparse.payload_from_json({ptype!r}, ..., "
            f"layout={layout.name!r}) builds one"
        )
    return build_wire(layout, msg_type, crc, flags, codec.encode(message))


def _check_flags(flags: int) -> None:
    if not 0 <= flags <= 0xFF or flags & CRC_FLAG:
        raise InputError(
            "bad_option",
            f"flags {flags:#x}: the bits of one byte besides the CRC flag "
            f"({CRC_FLAG:#x}; say crc=True for it)",
        )


# The header's fields in the spec's order (wire.HEADER: magic, version, ...).
_HEADER_FIELDS = tuple(HEADER.fields)


def build_wire(layout: Layout, msg_type: int, crc: bool, flags: int, payload: bytes) -> bytes:
    """Header, CRC-32C (if `crc`) and payload, by one struct call.

    The same bytes as `schema_wire` (the construct schema took 100 us an
    envelope, most of `encode`'s time).

    Args:
        layout: A layout with the envelope header.
        msg_type: Byte 7 of the header.
        crc: Add the payload's CRC-32C (and the CRC flag).
        flags: The flag bits besides the CRC flag.
        payload: The encoded payload.

    Returns:
        The envelope's bytes.

    Raises:
        InputError: `msg_type` or `flags` is not one byte (or `flags` holds
            the CRC flag).
    """
    if not 0 <= msg_type <= 0xFF:
        raise InputError(
            "bad_option", f"byte 7 of the {layout.name} header is one byte, not {msg_type}"
        )
    _check_flags(flags)  # the spec's flags/header_len check, as schema_wire makes it
    values = dict(
        magic=MAGIC,
        version=VERSION,
        header_len=CRC_HEADER_LEN if crc else HEADER_SIZE,
        flags=(CRC_FLAG if crc else 0) | flags,
        msg_type=msg_type,
    )
    head = HEADER.struct.pack(*[values[name] for name in _HEADER_FIELDS])
    return head + CRC_STRUCT.pack(_crc(payload)) + payload if crc else head + payload


def schema_wire(layout: Layout, msg_type: int, crc: bool, flags: int, payload: bytes) -> bytes:
    """`build_wire` through the construct schema generated from the spec.

    The reference: it builds what it parses, every declared check included.

    Args:
        layout: A layout with the envelope header.
        msg_type: Byte 7 of the header.
        crc: Add the payload's CRC-32C (and the CRC flag).
        flags: The flag bits besides the CRC flag.
        payload: The encoded payload.

    Returns:
        The envelope's bytes.
    """
    header = dict(
        version=VERSION,
        header_len=CRC_HEADER_LEN if crc else HEADER_SIZE,
        flags=(CRC_FLAG if crc else 0) | flags,
        msg_type=msg_type,
    )
    wire: bytes = _envelope_schema.build(
        dict(header=header, crc32c=_crc(payload) if crc else None, payload=payload),
        layout=layout.id,
    )
    return wire
