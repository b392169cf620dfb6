"""Which function decodes and which encodes each layout.

Dispatch is by table: `DECODERS[name](data, verify_crc, lenient,
payload_type, limits)` and `ENCODERS[name](message, msg_type, crc)`. Every layout
declared in spec/envelope.ksy must have an entry (a test checks it); `auto`
decodes only (it classifies, then decodes with the layout it picked).
"""

from __future__ import annotations

from typing import Any, Callable

from lbparse.layouts import LAYOUTS
from lbparse.detect import detect
from lbparse.envelope import Envelope, EnvelopedDecoder, encode_enveloped
from lbparse.limits import Limits
from lbparse.headerless import (decode_lift_cookie, decode_plain, encode_lift_cookie,
                                encode_plain)

__all__ = ["DECODERS", "ENCODERS", "decoder", "encoder"]

Decoder = Callable[[bytes, bool, bool, "str | None", "Limits | None"], Envelope]
Encoder = Callable[[Any, "int | None", bool], bytes]


def _enveloped(name: str) -> tuple[Decoder, Encoder]:
    layout = LAYOUTS[name]

    def encode(message: Any, msg_type: int | None, crc: bool) -> bytes:
        return encode_enveloped(message, layout, msg_type, crc)

    return EnvelopedDecoder(layout), encode


DECODERS: dict[str, Decoder] = {}
ENCODERS: dict[str, Encoder] = {}
for _name, _layout in LAYOUTS.items():
    if _layout.has_header:
        DECODERS[_name], ENCODERS[_name] = _enveloped(_name)
DECODERS["lift-cookie"], ENCODERS["lift-cookie"] = decode_lift_cookie, encode_lift_cookie
DECODERS["plain"], ENCODERS["plain"] = decode_plain, encode_plain
DECODERS["auto"] = detect


def _lookup(table: dict, name: str, what: str) -> Callable:
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown layout {name!r} for {what}; known: {', '.join(table)}") from None


def decoder(name: str) -> Decoder:
    return _lookup(DECODERS, name, "decode")


def encoder(name: str) -> Encoder:
    return _lookup(ENCODERS, name, "encode")
