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
