"""The one exception lbparse raises for bad bytes, and its kinds.

Every failure to decode input bytes is an `EnvelopeError` whose `kind` is
one of `KINDS`, listed in the order a strict decoder checks them. The
message says what was found and where; `offset`, `expected` and `actual`
carry the same facts for programs. When a resource limit refused the bytes
(see `lbparse.limits`), `limit` names it (`max_payload`, `max_depth`) and
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


class EnvelopeError(ValueError):
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

    @property
    def message(self) -> str:
        return str(self.args[0])

    def to_json_dict(self) -> dict[str, str]:
        d = {"error": self.kind, "message": self.message}
        if self.limit is not None:
            d["limit"] = self.limit
        return d

    def __repr__(self) -> str:
        return f"EnvelopeError({self.kind!r}, {self.message!r})"
