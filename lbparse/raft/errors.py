"""The exception the Raft decoders raise for bad bytes, and its kinds."""

from __future__ import annotations

from typing import Any

from lbparse.errors import LbparseError

__all__ = ["KINDS", "RaftError"]

KINDS: tuple[str, ...] = (
    "truncated",  # the bytes end inside a msgpack object
    "bad_msgpack",  # not msgpack at all, or trailing bytes after the object
    "bad_struct",  # msgpack, but not the struct spec/raft.ksy declares (a key's type)
    "unknown_rpc_type",  # a request whose type byte no hashicorp/raft version declares
    "too_large",  # an RPC longer than the stream decoder's limit
)


class RaftError(LbparseError):
    """Bytes that are not what hashicorp/raft writes; `offset` where it went wrong."""

    kind: str
    offset: int | None

    def __init__(self, kind: str, message: str, *, offset: int | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown RaftError kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.offset = offset

    def to_json_dict(self) -> dict[str, Any]:
        return {**super().to_json_dict(), "offset": self.offset}

    def __repr__(self) -> str:
        return f"RaftError({self.kind!r}, {self.message!r})"
