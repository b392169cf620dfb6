"""The errors lbparse raises for its input: `LbparseError`, their base, and
the envelope's own, `EnvelopeError`, with its kinds.

`LbparseError` is what "lbparse refused these bytes (or this file)" means
to a program: a `ValueError` with a `kind` (each subclass lists its own
KINDS), a message that says what was found and where, `where` (the byte
offset or position it concerns, when there is one) and one JSON shape,
`{"error": kind, "message": message, ...}` (a subclass may add keys).
`EnvelopeError` (here), `lbparse.capture.CaptureError`,
`lbparse.raft.RaftError` and `lbparse.storage.StorageError` derive from it.

Every failure to decode input bytes is an `EnvelopeError` whose `kind` is
one of `KINDS`, listed in the order a strict decoder checks them. The
message says what was found and where; `offset`, `expected` and `actual`
carry the same facts for programs. When a resource limit refused the bytes
(see `lbparse.codec.limits`), `limit` names it (`max_payload`, `max_depth`) and
`expected` is its value; otherwise `limit` is None.
"""

from __future__ import annotations

from typing import Any

KINDS: tuple[str, ...] = (
    "too_short",
    "bad_magic",
    "unknown_version",
    "bad_header_len",
    "crc_missing",
    "truncated",
    "crc_mismatch",
    "unknown_msg_type",
    "bad_payload",
)


class LbparseError(ValueError):
    """lbparse refused these bytes, or this file: the base of its input errors."""

    kind: str

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    @property
    def where(self) -> int | None:
        """The byte offset (or position) the error concerns, None when it has none."""
        return getattr(self, "offset", None)

    def to_json_dict(self) -> dict[str, Any]:
        return {"error": self.kind, "message": self.message}


class EnvelopeError(LbparseError):
    """Bytes that are not a well-formed envelope of the requested layout."""

    kind: str
    offset: int | None
    expected: Any
    actual: Any
    limit: str | None

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        offset: int | None = None,
        expected: Any = None,
        actual: Any = None,
        limit: str | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown EnvelopeError kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.offset = offset
        self.expected = expected
        self.actual = actual
        self.limit = limit

    def to_json_dict(self) -> dict[str, Any]:
        d = super().to_json_dict()
        if self.limit is not None:
            d["limit"] = self.limit
        return d

    def __repr__(self) -> str:
        return f"EnvelopeError({self.kind!r}, {self.message!r})"
