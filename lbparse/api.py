"""The public functions: decode, decode_header, encode."""

from __future__ import annotations

from typing import Any

from lbparse import layouts as _layouts
from lbparse.dispatch import layout_named
from lbparse.envelope import Buffer, Envelope, as_bytes
from lbparse.header import Header, read_header, resolve_msg_type

__all__ = ["decode", "decode_header", "encode"]


def decode(data: Buffer, layout: str = "v0", *, verify_crc: bool = True, lenient: bool = False,
           payload_type: str | None = None) -> Envelope:
    """Decode one NATS payload as an envelope of `layout`.

    Raises `EnvelopeError` (with `.kind`) for any bytes that are not a
    well-formed envelope; never any other exception for bad bytes.
    """
    return _layouts.decoder(layout)(as_bytes(data), verify_crc, lenient, payload_type)


def decode_header(data: Buffer, layout: str = "v0", *, lenient: bool = False) -> Header:
    """Validate and return the header without touching the payload (no CRC check)."""
    lay = layout_named(layout)
    data = as_bytes(data)
    hl, flags, crc, byte7, warnings = read_header(data, lay, lenient)
    msg_type, name, ptype = resolve_msg_type(lay, byte7, None)
    return Header(lay.name, 0, hl, flags, crc, msg_type, name, ptype, tuple(warnings))


def encode(message: Any, *, layout: str = "v0", msg_type: int | None = None,
           crc: bool = False) -> bytes:
    """Build the envelope of `message` (a protobuf message or a ReplicationResponse)."""
    return _layouts.encoder(layout)(message, msg_type, crc)

