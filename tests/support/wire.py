"""Wire bytes for tests that build messages by hand: protobuf's varints, and
hashicorp/raft's (msgpack as go-msgpack's MsgpackHandle writes it, and the
transport stream's requests and responses).
"""

from __future__ import annotations

from typing import Any

import msgpack


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


# ----------------------------------------------------------------------
# hashicorp/raft's bytes made by hand: msgpack as go-msgpack's MsgpackHandle
# writes it, and the transport stream's requests and responses (the raft
# decoders' tests, and the report's leaders from made-up Raft traffic).


def pack(obj: Any) -> bytes:
    """msgpack as go-msgpack's MsgpackHandle writes it: []byte as raw strings."""
    return msgpack.packb(obj, use_bin_type=False)


def request(rpc_type: int, **fields: Any) -> bytes:
    return bytes([rpc_type]) + pack({"ProtocolVersion": 3, **fields})


def response(error: bytes = b"", **fields: Any) -> bytes:
    return pack(error) + pack({"ProtocolVersion": 3, **fields})
