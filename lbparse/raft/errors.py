"""The exception the Raft decoders raise for bad bytes, and its kinds."""

from __future__ import annotations

from typing import Any, ClassVar

from lbparse.errors import InputError

__all__ = ["KINDS", "RAFT_ERROR_KINDS", "RaftError"]

RAFT_ERROR_KINDS: tuple[str, ...] = (
    "truncated",  # the bytes end inside a msgpack object
    "bad_msgpack",  # not msgpack at all, or trailing bytes after the object
    "bad_struct",  # msgpack, but not the struct spec/raft.ksy declares (a key's type)
    "unknown_rpc_type",  # a request whose type byte no hashicorp/raft version declares
    "too_large",  # an RPC longer than the stream decoder's limit
)
KINDS = RAFT_ERROR_KINDS  # the older name, kept for callers (lbparse.raft.KINDS)


class RaftError(InputError):
    """Bytes that are not what hashicorp/raft writes; `offset` where it went wrong."""

    KINDS: ClassVar[frozenset[str]] = frozenset(RAFT_ERROR_KINDS)

    def _json_extra(self) -> dict[str, Any]:
        # "offset" at the top level is the older place (kept for readers of
        # it); "where" carries it as every LbparseError's does.
        return {"offset": self.offset}
