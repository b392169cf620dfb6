"""The Envelope object, and decoding and encoding of enveloped layouts.

`decode` is the hot path: one `struct` read, one `crc32c` call, one
payload decode and one object; everything that can be resolved once (layouts,
codecs, MsgType tables) is resolved at import.
"""

from __future__ import annotations

import struct
from operator import itemgetter
from typing import Any, Union

import crc32c as _crc32c

from lbparse.layouts import LAYOUTS, Layout
from lbparse.errors import EnvelopeError
from lbparse.header import read_header, resolve_msg_type
from lbparse.limits import DEFAULT, PROTOBUF_MAX_DEPTH, Limits, check_depth, check_payload_size
from lbparse.payloads import (REPLICATION_RESPONSE, FlatBuffersCodec, ProtoCodec, codec_for,
                              infer_payload_type, payload_type_of, protobuf_error)
from lbparse.wire import CRC_FLAG, CRC_HEADER_LEN, CRC_OFFSET, FIELD_ERRORS, HEADER_SIZE, VERSION
from lbparse_generated.construct_schema import liftbridge_envelope as _envelope_schema

__all__ = ["Buffer", "Envelope", "EnvelopedDecoder", "as_bytes", "check_crc", "encode_enveloped"]

Buffer = Union[bytes, bytearray, memoryview]
_crc = _crc32c.crc32c


FIELDS = ("layout", "version", "header_len", "flags", "crc32c", "msg_type", "msg_type_name",
           "payload_type", "payload", "message", "warnings")


class Envelope(tuple):
    """A decoded envelope; `message` is the decoded payload object.

    A tuple underneath, built from one tuple of its fields in `FIELDS` order
    (`Envelope(("v0", 0, 8, 0, None, 1, ...))`): with no `__new__` of its
    own, building one on the hot path stays inside C. The classification extras (`ambiguous`, `layout_candidates`,
    `payload_type_candidates`, `reasons`, `confidence`) are class-level
    defaults that `layout="auto"` and legacy inference set per instance.
    """

    layout: str = property(itemgetter(0), doc="layout name: v0, legacy, ...")  # type: ignore[assignment]
    version: int | None = property(itemgetter(1))  # type: ignore[assignment]
    header_len: int | None = property(itemgetter(2))  # type: ignore[assignment]
    flags: int | None = property(itemgetter(3))  # type: ignore[assignment]
    crc32c: int | None = property(itemgetter(4))  # type: ignore[assignment]
    msg_type: int | None = property(itemgetter(5))  # type: ignore[assignment]
    msg_type_name: str | None = property(itemgetter(6))  # type: ignore[assignment]
    payload_type: str = property(itemgetter(7))  # type: ignore[assignment]
    payload: bytes = property(itemgetter(8))  # type: ignore[assignment]
    message: Any = property(itemgetter(9))  # type: ignore[assignment]
    warnings: tuple[str, ...] = property(itemgetter(10))  # type: ignore[assignment]
    ambiguous: bool = False
    layout_candidates: list[str] = []
    payload_type_candidates: list[str] = []
    reasons: list[str] = []
    confidence: float | None = None
    FIELDS = FIELDS

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
            codec = codec_for(LAYOUTS[self.layout].codec_key(self.payload_type))
            d["payload_json"] = codec.to_json(self.message)
        if self.payload_type == REPLICATION_RESPONSE and self.message is not None:
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


def _raw_parser(layout: Layout, ptype: str) -> Any:
    """The fastest callable that parses a payload type (may raise anything)."""
    codec = codec_for(layout.codec_key(ptype))
    return codec.python_type.FromString if isinstance(codec, ProtoCodec) else codec.decode


def _bad_payload(ptype: str, payload: bytes, exc: Exception, codec: Any,
                 limits: Limits) -> EnvelopeError:
    if isinstance(codec, ProtoCodec):
        return protobuf_error(ptype, codec.python_type, payload, exc, limits.max_depth)
    return EnvelopeError("bad_payload",
                         f"payload ({len(payload)} bytes) is not a valid {ptype}: {exc}")


def check_crc(data: bytes, hl: int, crc: int | None) -> None:
    """Raise crc_mismatch unless the CRC-32C (if any) matches the payload."""
    if crc is not None:
        actual = _crc(data[hl:])
        if actual != crc:
            raise EnvelopeError("crc_mismatch", f"CRC-32C in header (offset {CRC_OFFSET}) is "
                                f"{crc:#010x}, payload bytes {hl}..{len(data)} give {actual:#010x}",
                                offset=CRC_OFFSET, expected=crc, actual=actual)


class EnvelopedDecoder:
    """Decoder of one layout with the 8/12-byte envelope header (v0, legacy...).

    Everything that depends only on the layout (MsgType table, payload
    parsers) is resolved here once. This is the complete decoder, with every
    check and error message; `lbparse.decode` has a shortcut for the common
    case in front of it (see api.py).
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
                self.by_byte7[v] = (v, mt.name, mt.payload_type, _raw_parser(layout, mt.payload_type))
        elif layout.default_payload_type:
            ptype = layout.default_payload_type
            self.by_byte7[0] = (None, layout.byte7_name, ptype, _raw_parser(layout, ptype))

    def __call__(self, data: bytes, verify_crc: bool = True, lenient: bool = False,
                 payload_type: str | None = None, limits: Limits | None = None) -> Envelope:
        hl, flags, crc, byte7, found = read_header(data, self.layout, lenient)
        # Before the CRC: a refused payload costs nothing more.
        check_payload_size(len(data) - hl, hl, limits or DEFAULT)
        if verify_crc:
            check_crc(data, hl, crc)
        return self.finish(data, hl, flags, crc, byte7, tuple(found), payload_type, limits)

    def finish(self, data: bytes, hl: int, flags: int, crc: int | None, byte7: int,
               warnings: tuple[str, ...], payload_type: str | None = None,
               limits: Limits | None = None) -> Envelope:
        """The payload half of decoding, once the header is read, its payload
        size allowed and the CRC checked (layout="auto" reads the header once
        and finishes it with each layout)."""
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
                check_depth(payload, codec.python_type.DESCRIPTOR, lim)
            elif isinstance(codec, FlatBuffersCodec):
                parse = lambda p: codec.decode(p, lim.max_payload)  # noqa: E731
        try:
            message = parse(payload)
        except EnvelopeError:
            raise
        except Exception as exc:  # DecodeError, RecursionError...: all mean bad bytes
            raise _bad_payload(ptype, payload, exc, codec_for(self.layout.codec_key(ptype)),
                               lim) from None
        env = Envelope((self.name, VERSION, hl, flags, crc, msg_type, name, ptype, payload,
                        message, warnings))
        if len(candidates) > 1:
            env.ambiguous = True
            env.payload_type_candidates = candidates
        return env


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
    payload = codec_for(layout.codec_key(ptype)).encode(message)
    header = dict(version=VERSION, header_len=CRC_HEADER_LEN if crc else HEADER_SIZE,
                  flags=CRC_FLAG if crc else 0, msg_type=msg_type)
    return _envelope_schema.build(
        dict(header=header, crc32c=_crc(payload) if crc else None, payload=payload),
        layout=layout.id)
