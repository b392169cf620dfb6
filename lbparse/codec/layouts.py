"""Layouts and MsgType tables, as declared in spec/envelope.ksy.

The tables come from the generated module `lbparse_generated.tables`;
nothing here repeats them. This module only gives them types and the
reverse look-ups that encoding needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from lbparse.errors import InputError
from lbparse_generated.tables import FIELD_ERRORS, HEADER_SEQ, PAYLOAD_KINDS, TOP_SEQ
from lbparse_generated.tables import LAYOUTS as _RAW_LAYOUTS

__all__ = [
    "BYTES",
    "FIELD_ERRORS",
    "HEADER_SEQ",
    "TOP_SEQ",
    "LAYOUTS",
    "Layout",
    "MsgType",
    "REPLICATION_RESPONSE",
    "layout_named",
]

# The two payload types that are not protobuf messages (the spec's
# `-payload-kinds`). REPLICATION_RESPONSE is "raw", the name the reference
# vectors and JSON output use for the ReplicationResponse payload (leader
# epoch, high watermark, commit-log entries: spec/commitlog.ksy); BYTES is
# opaque bytes.
REPLICATION_RESPONSE: str = PAYLOAD_KINDS["replication_response"]
BYTES: str = PAYLOAD_KINDS["bytes"]


@dataclass(frozen=True)
class MsgType:
    """One entry of a layout's MsgType table (header byte 7).

    Attributes:
        value: Its byte 7 value.
        name: Its name (Publish, Ack, ...).
        payload_type: The payload type it carries ("proto.Message", ...).
        internal: A server-to-server RPC (the spec's `-internal`).
    """

    value: int
    name: str
    payload_type: str
    internal: bool = False  # a server-to-server RPC (the spec's `-internal`)


@dataclass(frozen=True)
class Layout:
    """One generation of the envelope format.

    Attributes:
        name: Its name ("v0", "legacy", ...), as `decode` takes it.
        id: Its number in the generated tables.
        kaitai_id: Its name in the Kaitai spec.
        byte7: What header byte 7 is: "msg_type", "reserved", or None without
            a header.
        default_payload_type: The payload type when the header does not say.
        payload_alternatives: Other payload types inferred from the payload.
        msg_types: The MsgType table, by byte 7 value.
        doc: The spec's description.
        payload_format: "protobuf" or "flatbuffers".
        recency: Its place in time: 1 is the newest layout (v0).
        bare_payloads: Payload types carried without framing.
        by_payload_type: The MsgType of each payload type.
    """

    name: str
    id: int
    kaitai_id: str
    byte7: str | None
    default_payload_type: str | None
    payload_alternatives: tuple[str, ...]
    msg_types: Mapping[int, MsgType]
    doc: str
    payload_format: str = "protobuf"
    recency: int = 0
    bare_payloads: tuple[str, ...] = ()
    by_payload_type: Mapping[str, MsgType] = field(repr=False, default_factory=dict)

    @property
    def has_msg_type(self) -> bool:
        """Whether header byte 7 is a MsgType."""
        return self.byte7 == "msg_type"

    @property
    def byte7_name(self) -> str | None:
        """What `msg_type_name` says when byte 7 is not a MsgType."""
        b7 = self.byte7
        return None if b7 is None or b7 == "msg_type" else b7.capitalize()

    @property
    def has_header(self) -> bool:
        """Whether the layout starts with the 8-byte envelope header."""
        return self.byte7 is not None

    def codec_key(self, payload_type: str) -> str:
        """Key of the payload codec: the type name, qualified by a non-protobuf format.

        Args:
            payload_type: A payload type of the layout.

        Returns:
            `payload_type`, or "flatbuffers:TYPE" in the FlatBuffers layouts.
        """
        if self.payload_format == "protobuf" or payload_type in (REPLICATION_RESPONSE, BYTES):
            return payload_type
        return f"{self.payload_format}:{payload_type}"

    def msg_type_named(self, name: str) -> MsgType:
        """The MsgType of this layout's table called `name` (any case).

        Args:
            name: A MsgType name.

        Returns:
            The MsgType.

        Raises:
            InputError: The layout has no such MsgType (its MsgTypes are listed).
        """
        for mt in self.msg_types.values():
            if mt.name.lower() == name.lower():
                return mt
        known = ", ".join(mt.name for mt in self.msg_types.values()) or "none: no MsgType"
        raise InputError(
            "bad_option", f"no MsgType {name!r} in the {self.name} layout; its MsgTypes: {known}"
        )

    def payload_type_named(self, name: str) -> str:
        """The payload type `name` stands for in this layout.

        Args:
            name: A MsgType name (Publish, Ack, ...), a payload type
                (proto.Message, raw, ...), or a payload type's last part
                (Message, ServerInfoRequest), any case.

        Returns:
            The payload type.

        Raises:
            InputError: It stands for none of the layout's.
        """
        if name in self.payload_types:
            return name
        for mt in self.msg_types.values():
            if mt.name.lower() == name.lower():
                return mt.payload_type
        matches = [p for p in self.payload_types if p.rsplit(".", 1)[-1].lower() == name.lower()]
        if len(matches) == 1:
            return matches[0]
        names = [mt.name for mt in self.msg_types.values()] or list(self.payload_types)
        raise InputError(
            "bad_option",
            f"unknown type {name!r} for the {self.name} layout; one of: {', '.join(names)}",
        )

    @property
    def payload_types(self) -> tuple[str, ...]:
        """The payload types the layout carries, in table order."""
        if self.msg_types:
            return tuple(dict.fromkeys(mt.payload_type for mt in self.msg_types.values()))
        base = (self.default_payload_type,) if self.default_payload_type else ()
        return base + self.payload_alternatives


def _build(name: str, raw: dict[str, Any]) -> Layout:
    internal = set(raw["internal_msg_types"])
    msg_types = {v: MsgType(v, n, p, v in internal) for v, (n, p) in raw["msg_types"].items()}
    by_payload: dict[str, MsgType] = {}
    for mt in msg_types.values():
        by_payload.setdefault(mt.payload_type, mt)
    return Layout(
        name=name,
        id=raw["id"],
        kaitai_id=raw["kaitai_id"],
        byte7=raw["byte7"],
        default_payload_type=raw["payload"],
        payload_alternatives=tuple(raw["payload_alternatives"]),
        msg_types=MappingProxyType(msg_types),
        doc=raw["doc"],
        by_payload_type=MappingProxyType(by_payload),
        payload_format=raw["payload_format"],
        recency=raw["recency"],
        bare_payloads=tuple(raw["bare_payloads"]),
    )


LAYOUTS: Mapping[str, Layout] = MappingProxyType(
    {name: _build(name, raw) for name, raw in _RAW_LAYOUTS.items()}
)


def layout_named(name: str) -> Layout:
    """The layout called `name`.

    Args:
        name: A layout's name.

    Returns:
        Its Layout.

    Raises:
        InputError: No layout has that name (the known ones are listed).
    """
    try:
        return LAYOUTS[name]
    except KeyError:
        known = ", ".join(LAYOUTS)
        raise InputError("bad_option", f"unknown layout {name!r}; known layouts: {known}") from None
