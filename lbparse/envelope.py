"""The Envelope object, and decoding and encoding of enveloped layouts.

`decode` is the hot path: one `struct` read, one `crc32c` call, one
payload decode and one object; everything that can be resolved once (layouts,
codecs, MsgType tables) is resolved at import.
"""

from __future__ import annotations

from typing import Any, Union

import crc32c as _crc32c

from lbparse.dispatch import Layout
from lbparse.errors import EnvelopeError
from lbparse.header import CRC_HEADER_LEN, FLAG_CRC, MIN_HEADER_LEN, read_header, resolve_msg_type
from lbparse.payloads import RAW, codec_for, payload_type_of
from lbparse_generated.construct_schema import liftbridge_envelope as _envelope_schema

__all__ = ["Buffer", "Envelope", "as_bytes", "decode_enveloped", "encode_enveloped"]

Buffer = Union[bytes, bytearray, memoryview]
_crc = _crc32c.crc32c


class Envelope:
    """A decoded envelope. `message` is the decoded payload object."""

    __slots__ = ("layout", "version", "header_len", "flags", "crc32c", "msg_type",
                 "msg_type_name", "payload_type", "payload", "message", "warnings",
                 "ambiguous", "layout_candidates", "payload_type_candidates", "reasons",
                 "confidence")

    def __init__(self, layout: str, version: int | None, header_len: int | None,
                 flags: int | None, crc32c: int | None, msg_type: int | None,
                 msg_type_name: str | None, payload_type: str, payload: bytes,
                 message: Any, warnings: list[str] | tuple[str, ...] = ()) -> None:
        self.layout = layout
        self.version = version
        self.header_len = header_len
        self.flags = flags
        self.crc32c = crc32c
        self.msg_type = msg_type
        self.msg_type_name = msg_type_name
        self.payload_type = payload_type
        self.payload = payload
        self.message = message
        self.warnings = warnings
        self.ambiguous = False
        self.layout_candidates: list[str] = []
        self.payload_type_candidates: list[str] = []
        self.reasons: list[str] = []
        self.confidence: float | None = None

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON shape of the reference vectors' `expect`, plus `layout`."""
        d: dict[str, Any] = {
            "layout": self.layout,
            "version": self.version,
            "header_len": self.header_len,
            "flags": self.flags,
            "crc32c": self.crc32c,
            "msg_type": self.msg_type,
            "msg_type_name": self.msg_type_name,
            "payload_type": self.payload_type,
        }
        if self.message is not None:
            d["payload_json"] = codec_for(self.payload_type).to_json(self.message)
        if self.payload_type == RAW and self.message is not None:
            d["commitlog_messages"] = [e.to_json_dict() for e in self.message.entries]
        for key in ("ambiguous", "layout_candidates", "payload_type_candidates", "reasons"):
            if getattr(self, key):
                d[key] = getattr(self, key)
        if self.confidence is not None:
            d["confidence"] = self.confidence
        if self.warnings:
            d["warnings"] = list(self.warnings)
        return d

    def __repr__(self) -> str:
        name = self.msg_type_name or self.payload_type
        return (f"<Envelope {self.layout} {name} header_len={self.header_len} "
                f"crc32c={self.crc32c} payload={len(self.payload)}B>")


def as_bytes(data: Buffer) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"decode takes bytes, bytearray or memoryview, not {type(data).__name__}")


def decode_enveloped(data: bytes, layout: Layout, verify_crc: bool, lenient: bool,
                     payload_type: str | None) -> Envelope:
    """Decode a layout with the 8/12-byte envelope header (v0, legacy, ...)."""
    hl, flags, crc, byte7, warnings = read_header(data, layout, lenient)
    payload = data[hl:]
    if verify_crc and crc is not None:
        actual = _crc(payload)
        if actual != crc:
            raise EnvelopeError("crc_mismatch", f"CRC-32C in header (offset 8) is {crc:#010x}, "
                                f"payload bytes {hl}..{len(data)} give {actual:#010x}",
                                offset=8, expected=crc, actual=actual)
    msg_type, name, ptype = resolve_msg_type(layout, byte7, payload_type)
    message = codec_for(ptype).decode(payload)
    return Envelope(layout.name, 0, hl, flags, crc, msg_type, name, ptype, payload, message,
                    warnings)


def encode_enveloped(message: Any, layout: Layout, msg_type: int | None, crc: bool) -> bytes:
    """Build header and payload through the construct schema generated from the spec."""
    ptype = payload_type_of(message)
    if layout.has_msg_type:
        if msg_type is None:
            mt = layout.by_payload_type.get(ptype)
            if mt is None:
                raise ValueError(f"{ptype} has no MsgType in the {layout.name} layout")
            msg_type = mt.value
        elif msg_type not in layout.msg_types or layout.msg_types[msg_type].payload_type != ptype:
            raise ValueError(f"MsgType {msg_type} does not carry a {ptype} in the {layout.name} layout")
    else:
        if ptype not in layout.payload_types:
            raise ValueError(f"the {layout.name} layout carries {', '.join(layout.payload_types)}, "
                             f"not {ptype}")
        msg_type = msg_type or 0  # the reserved byte; upstream always wrote 0
    payload = codec_for(ptype).encode(message)
    header = dict(version=0, header_len=CRC_HEADER_LEN if crc else MIN_HEADER_LEN,
                  flags=FLAG_CRC if crc else 0, msg_type=msg_type)
    return _envelope_schema.build(
        dict(header=header, crc32c=_crc(payload) if crc else None, payload=payload),
        layout=layout.id)
