"""Which function decodes and which encodes each layout.

Dispatch is by table: `DECODERS[name](data, verify_crc, lenient,
payload_type, limits)` and `ENCODERS[name](message, msg_type, crc, flags)`. Every layout
declared in spec/envelope.ksy must have an entry (a test checks it); `auto`
decodes only (it classifies, then decodes with the layout it picked).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from lbparse.codec.detect import detect
from lbparse.codec.envelope import Envelope
from lbparse.codec.enveloped import EnvelopedDecoder, encode_enveloped
from lbparse.codec.headerless import (
    decode_lift_cookie,
    decode_plain,
    encode_lift_cookie,
    encode_plain,
)
from lbparse.codec.layouts import LAYOUTS
from lbparse.codec.limits import Limits
from lbparse.errors import InputError

__all__ = ["DECODERS", "ENCODERS", "Decoder", "Encoder", "decoder", "encoder", "enveloped_decoder"]

# decoder(data, verify_crc, lenient, payload_type, limits)
Decoder = Callable[[bytes, bool, bool, str | None, Limits | None], Envelope]
# encoder(message, msg_type, crc, flags): flags are the bits besides the CRC flag
Encoder = Callable[[Any, int | None, bool, int], bytes]
_T = TypeVar("_T")


def _enveloped(name: str) -> tuple[EnvelopedDecoder, Encoder]:
    layout = LAYOUTS[name]

    def encode(message: Any, msg_type: int | None, crc: bool, flags: int = 0) -> bytes:
        return encode_enveloped(message, layout, msg_type, crc, flags)

    return EnvelopedDecoder(layout), encode


_ENVELOPED: dict[str, EnvelopedDecoder] = {}
DECODERS: dict[str, Decoder] = {}
ENCODERS: dict[str, Encoder] = {}
for _name, _layout in LAYOUTS.items():
    if _layout.has_header:
        _ENVELOPED[_name], ENCODERS[_name] = _enveloped(_name)
        DECODERS[_name] = _ENVELOPED[_name]
DECODERS["lift-cookie"], ENCODERS["lift-cookie"] = decode_lift_cookie, encode_lift_cookie
DECODERS["plain"], ENCODERS["plain"] = decode_plain, encode_plain
DECODERS["auto"] = detect


def _lookup(table: Mapping[str, _T], name: str, what: str) -> _T:
    try:
        return table[name]
    except KeyError:
        raise InputError(
            "bad_option", f"unknown layout {name!r} for {what}; known: {', '.join(table)}"
        ) from None


def decoder(name: str) -> Decoder:
    """The function that decodes the layout `name` (`auto` included).

    Args:
        name: A layout's name.

    Returns:
        `decoder(data, verify_crc, lenient, payload_type, limits)`.

    Raises:
        ValueError: No layout has that name (the known ones are listed).
    """
    return _lookup(DECODERS, name, "decode")


def encoder(name: str) -> Encoder:
    """The function that encodes the layout `name` (not `auto`).

    Args:
        name: A layout's name.

    Returns:
        `encoder(message, msg_type, crc, flags)`.

    Raises:
        ValueError: No layout has that name (the known ones are listed).
    """
    return _lookup(ENCODERS, name, "encode")


def enveloped_decoder(name: str) -> EnvelopedDecoder:
    """The decoder of a layout with the envelope header, with its tables.

    Args:
        name: A layout with the envelope header ("v0", "legacy", ...).

    Returns:
        Its EnvelopedDecoder.

    Raises:
        ValueError: No layout with the header has that name.
    """
    return _lookup(_ENVELOPED, name, "an enveloped decoder")
