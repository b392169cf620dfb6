"""Protobuf wire bytes for tests that build messages by hand."""

from __future__ import annotations


def varint(n: int, width: int = 0) -> bytes:
    """n as a protobuf varint, padded with continuation bytes to at least
    `width` bytes (what upb reads up to MAX_SIZE_BYTES, and refuses past it)."""
    out = bytearray()
    while True:
        out.append(n & 0x7F | 0x80)
        n >>= 7
        if not n:
            break
    while len(out) < width:
        out.append(0x80)
    out[-1] &= 0x7F
    return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int] | None:
    """(the varint at `pos`, the position after it); None when the bytes end
    inside it. Any length is read: this is for messages tests made."""
    n = shift = 0
    while pos < len(data):
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return n, pos
    return None
