"""hashicorp/raft's bytes made by hand: msgpack as go-msgpack's MsgpackHandle
writes it, and the transport stream's requests and responses (the raft
decoders' tests, and the report's leaders from made-up Raft traffic)."""

from __future__ import annotations

from typing import Any

import msgpack


def pack(obj: Any) -> bytes:
    """msgpack as go-msgpack's MsgpackHandle writes it: []byte as raw strings."""
    return msgpack.packb(obj, use_bin_type=False)


def request(rpc_type: int, **fields: Any) -> bytes:
    return bytes([rpc_type]) + pack({"ProtocolVersion": 3, **fields})


def response(error: bytes = b"", **fields: Any) -> bytes:
    return pack(error) + pack({"ProtocolVersion": 3, **fields})
