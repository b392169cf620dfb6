"""The Envelope: one decoded envelope, an immutable record.

    >>> env = lbparse.decode(data)                       # doctest: +SKIP
    >>> env.layout, env.msg_type_name, env.message       # doctest: +SKIP

Its fields are read-only; `replace(**changes)` gives a new one, `==` compares
every field, and `to_json_dict()` is the JSON shape of the reference vectors'
`expect`. Building one is on `lbparse.decode`'s hot path, so it is made of
shared immutable parts: a `Head` (what the header says: layout, version,
header length, flags, MsgType and payload type; one per distinct header,
precomputed for every common v0 header) and `Extra` (warnings and the
classification of `layout="auto"`; one shared empty one for the common case),
plus the CRC, the payload and the message. Its fields are properties that
read those parts in C (`operator.attrgetter`).
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from lbparse.codec.layouts import LAYOUTS
from lbparse.codec.payloads import REPLICATION_RESPONSE, codec_for

__all__ = [
    "Buffer",
    "Envelope",
    "Extra",
    "Head",
    "NO_EXTRA",
    "as_bytes",
    "build_envelope",
    "make_extra",
    "make_head",
]

Buffer = bytes | bytearray | memoryview


class Head(NamedTuple):
    """What an envelope's header says (None where the layout has no such field).

    Attributes:
        layout: The layout's name.
        version: The header's version byte.
        header_len: The header's length byte.
        flags: The flags byte.
        msg_type: The MsgType's number (byte 7 in v0).
        msg_type_name: The MsgType's name.
        payload_type: The payload's type ("proto.Ack", "bytes", ...).
    """

    layout: str
    version: int | None
    header_len: int | None
    flags: int | None
    msg_type: int | None
    msg_type_name: str | None
    payload_type: str


class Extra(NamedTuple):
    """What decoding found besides the header.

    Lenient tolerances and the classification of `layout="auto"` and of
    legacy payload inference.

    Attributes:
        warnings: What `lenient` let by, one sentence each.
        ambiguous: More than one layout (or payload type) read the bytes cleanly.
        layout_candidates: The layouts that read them.
        payload_type_candidates: The payload types that fit (legacy inference).
        reasons: Why the layout was chosen, one sentence each.
        confidence: How sure `auto` is, 0 to 1; None without `auto`.
    """

    warnings: tuple[str, ...] = ()
    ambiguous: bool = False
    layout_candidates: tuple[str, ...] = ()
    payload_type_candidates: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    confidence: float | None = None


NO_EXTRA = Extra()
_new_tuple = tuple.__new__


def make_head(
    layout: str,
    version: int | None,
    header_len: int | None,
    flags: int | None,
    msg_type: int | None,
    msg_type_name: str | None,
    payload_type: str,
) -> Head:
    # tuple's own constructor: a NamedTuple's __new__ is a Python function.
    """A Head from its fields, without the NamedTuple constructor's cost.

    Args:
        layout: The layout's name.
        version: The version byte (None: no header).
        header_len: The header's length.
        flags: The flags byte.
        msg_type: The MsgType's number.
        msg_type_name: The MsgType's name.
        payload_type: The payload's type.

    Returns:
        The Head.
    """
    return _new_tuple(
        Head, (layout, version, header_len, flags, msg_type, msg_type_name, payload_type)
    )


def make_extra(
    warnings: tuple[str, ...] = (),
    *,
    ambiguous: bool = False,
    layout_candidates: tuple[str, ...] = (),
    payload_type_candidates: tuple[str, ...] = (),
    reasons: tuple[str, ...] = (),
    confidence: float | None = None,
) -> Extra:
    """An Extra from its fields, each sequence made a tuple.

    Args:
        warnings: What `lenient` let by.
        ambiguous: More than one reading was clean.
        layout_candidates: The layouts that read the bytes.
        payload_type_candidates: The payload types that fit.
        reasons: Why the layout was chosen.
        confidence: How sure `auto` is, 0 to 1.

    Returns:
        The Extra.
    """
    return Extra(
        tuple(warnings),
        ambiguous,
        tuple(layout_candidates),
        tuple(payload_type_candidates),
        tuple(reasons),
        confidence,
    )


_HEAD_FIELDS = Head._fields
_EXTRA_FIELDS = Extra._fields
FIELDS = (*_HEAD_FIELDS[:4], "crc32c", *_HEAD_FIELDS[4:], "payload", "message", *_EXTRA_FIELDS)


class Envelope:
    """A decoded envelope; `message` is the decoded payload object.

    An immutable record: read-only fields, `==` over every field,
    `replace(**changes)` for a changed copy, `as_dict()`.

    Args:
        layout: The layout's name.
        version: The header's version (None: a headerless layout).
        header_len: The header's length in bytes.
        flags: The flags byte.
        crc32c: The header's CRC-32C field, None when absent.
        msg_type: The MsgType's number.
        msg_type_name: The MsgType's name.
        payload_type: The payload's type ("proto.Ack", "bytes", ...).
        payload: The payload's bytes.
        message: The decoded payload: a protobuf message, a FlatTable, a
            ReplicationResponse, or bytes.
        warnings: What `lenient` let by.
        ambiguous: More than one layout (or payload type) read the bytes
            cleanly.
        layout_candidates: The layouts that read them (`auto`).
        payload_type_candidates: The payload types that fit.
        reasons: Why the layout was chosen.
        confidence: How sure `auto` is, 0 to 1.
    """

    __slots__ = ("_head", "_crc32c", "_payload", "_message", "_extra")
    _head: Head
    _crc32c: int | None
    _payload: bytes
    _message: Any
    _extra: Extra
    FIELDS = FIELDS

    def __init__(
        self,
        layout: str,
        version: int | None,
        header_len: int | None,
        flags: int | None,
        crc32c: int | None,
        msg_type: int | None,
        msg_type_name: str | None,
        payload_type: str,
        payload: bytes,
        message: Any,
        warnings: tuple[str, ...] = (),
        *,
        ambiguous: bool = False,
        layout_candidates: tuple[str, ...] = (),
        payload_type_candidates: tuple[str, ...] = (),
        reasons: tuple[str, ...] = (),
        confidence: float | None = None,
    ) -> None:
        self._head = make_head(
            layout, version, header_len, flags, msg_type, msg_type_name, payload_type
        )
        self._crc32c = crc32c
        self._payload = payload
        self._message = message
        extra = make_extra(
            warnings,
            ambiguous=ambiguous,
            layout_candidates=layout_candidates,
            payload_type_candidates=payload_type_candidates,
            reasons=reasons,
            confidence=confidence,
        )
        self._extra = NO_EXTRA if extra == NO_EXTRA else extra

    if TYPE_CHECKING:  # what type checkers see; at run time, the properties below the class

        @property
        def layout(self) -> str: ...
        @property
        def version(self) -> int | None: ...
        @property
        def header_len(self) -> int | None: ...
        @property
        def flags(self) -> int | None: ...
        @property
        def crc32c(self) -> int | None: ...
        @property
        def msg_type(self) -> int | None: ...
        @property
        def msg_type_name(self) -> str | None: ...
        @property
        def payload_type(self) -> str: ...
        @property
        def payload(self) -> bytes: ...
        @property
        def message(self) -> Any: ...
        @property
        def warnings(self) -> tuple[str, ...]: ...
        @property
        def ambiguous(self) -> bool: ...
        @property
        def layout_candidates(self) -> tuple[str, ...]: ...
        @property
        def payload_type_candidates(self) -> tuple[str, ...]: ...
        @property
        def reasons(self) -> tuple[str, ...]: ...
        @property
        def confidence(self) -> float | None: ...

    def as_dict(self) -> dict[str, Any]:
        """Every field by name, in FIELDS order.

        Returns:
            A new dict of the fields (the message object itself, not a copy).
        """
        return {name: getattr(self, name) for name in FIELDS}

    def replace(self, **changes: Any) -> Envelope:
        """A copy with some fields changed (as `dataclasses.replace`).

        Args:
            **changes: New values by field name.

        Returns:
            A new Envelope; this one is unchanged.

        Raises:
            TypeError: A name is not a field.
        """
        unknown = set(changes) - set(FIELDS)
        if unknown:
            raise TypeError(f"Envelope has no field {', '.join(sorted(unknown))}")
        fields = self.as_dict()
        fields.update(changes)
        return Envelope(**fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Envelope):
            return NotImplemented
        return (
            self._head == other._head
            and self._crc32c == other._crc32c
            and self._payload == other._payload
            and self._message == other._message
            and self._extra == other._extra
        )

    __hash__ = None  # type: ignore[assignment]  # the message may be unhashable

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON shape of the reference vectors' `expect`, plus `layout`.

        Returns:
            The header fields, `payload_json` (the payload's JSON convention:
            64-bit integers as decimal strings), `commitlog_messages` for a
            ReplicationResponse, and the classification and warnings when there
            are any.
        """
        d: dict[str, Any] = {
            "layout": self.layout,
            "version": self.version,
            "header_len": self.header_len,
            "flags": self.flags,
            "crc32c": self.crc32c,
            "msg_type": self.msg_type,
            "msg_type_name": self.msg_type_name,
            "payload_type": self.payload_type,
        }
        if self.message is not None:
            codec = codec_for(LAYOUTS[self.layout].codec_key(self.payload_type))
            d["payload_json"] = codec.to_json(self.message)
        if self.payload_type == REPLICATION_RESPONSE and self.message is not None:
            d["commitlog_messages"] = [e.to_json_dict() for e in self.message.entries]
        extra = self._extra
        if extra.ambiguous:
            d["ambiguous"] = True
        for key in ("layout_candidates", "payload_type_candidates", "reasons"):
            if getattr(extra, key):
                d[key] = list(getattr(extra, key))
        if extra.confidence is not None:
            d["confidence"] = extra.confidence
        if extra.warnings:
            d["warnings"] = list(extra.warnings)
        return d

    def __repr__(self) -> str:
        name = self.msg_type_name or self.payload_type
        return (
            f"<Envelope {self.layout} {name} header_len={self.header_len} "
            f"crc32c={self.crc32c} payload={len(self.payload)}B>"
        )


# The public fields, read-only: C getters into the parts.
for _name in _HEAD_FIELDS:
    setattr(Envelope, _name, property(attrgetter(f"_head.{_name}")))
for _name in _EXTRA_FIELDS:
    setattr(Envelope, _name, property(attrgetter(f"_extra.{_name}")))
for _name in ("crc32c", "payload", "message"):
    setattr(Envelope, _name, property(attrgetter(f"_{_name}")))
del _name

_new = object.__new__


def build_envelope(
    head: Head, crc32c: int | None, payload: bytes, message: Any, extra: Extra = NO_EXTRA
) -> Envelope:
    """An Envelope from its parts, without the keyword work of `Envelope(...)`.

    Decoders call this; `lbparse.decode`'s shortcut does the same inline.

    Args:
        head: What the header says.
        crc32c: The header's CRC-32C field, None when absent.
        payload: The payload's bytes.
        message: The decoded payload.
        extra: Warnings and classification.

    Returns:
        The Envelope.
    """
    env: Envelope = _new(Envelope)
    env._head = head
    env._crc32c = crc32c
    env._payload = payload
    env._message = message
    env._extra = extra
    return env


def as_bytes(data: Buffer) -> bytes:
    """`data` as bytes (a copy of a bytearray or memoryview).

    Args:
        data: The input buffer.

    Returns:
        `data` itself when it is bytes, else a bytes copy.

    Raises:
        TypeError: `data` is no bytes, bytearray or memoryview.
    """
    if type(data) is bytes:
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"decode takes bytes, bytearray or memoryview, not {type(data).__name__}")
