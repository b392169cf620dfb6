"""Payload codecs, one per payload type named in the spec.

A payload type is a full protobuf message name (`proto.Message`,
`protocol.PropagatedRequest`, ...) or `raw` (the ReplicationResponse
layout). `CODECS` maps each name to a codec with `decode` (bytes to object,
raising `EnvelopeError("bad_payload")`), `to_json` and `encode`. The table
is built once at import from the generated protobuf modules.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage

from lbparse import commitlog
from lbparse.dispatch import LAYOUTS
from lbparse.errors import EnvelopeError
from lbparse_generated.proto import api_pb2, internal_pb2

__all__ = ["CODECS", "PayloadCodec", "RAW", "codec_for", "message_class", "payload_type_of"]

RAW = "raw"
_MODULES = (api_pb2, internal_pb2)


def _all_message_classes() -> dict[str, type[ProtoMessage]]:
    found: dict[str, type[ProtoMessage]] = {}

    def walk(cls: type[ProtoMessage]) -> None:
        found[cls.DESCRIPTOR.full_name] = cls
        for nested in cls.DESCRIPTOR.nested_types:
            walk(getattr(cls, nested.name))

    for mod in _MODULES:
        for name in mod.DESCRIPTOR.message_types_by_name:
            walk(getattr(mod, name))
    return found


MESSAGE_CLASSES: Mapping[str, type[ProtoMessage]] = _all_message_classes()


def message_class(full_name: str) -> type[ProtoMessage]:
    try:
        return MESSAGE_CLASSES[full_name]
    except KeyError:
        raise ValueError(f"unknown protobuf message type {full_name!r}") from None


class PayloadCodec:
    """Decode, encode and render one payload type."""

    name: str
    python_type: type
    decode: Callable[[bytes], Any]

    def to_json(self, message: Any) -> dict[str, Any]:
        raise NotImplementedError

    def encode(self, message: Any) -> bytes:
        raise NotImplementedError

    def from_json(self, obj: dict[str, Any]) -> Any:
        raise NotImplementedError


class ProtoCodec(PayloadCodec):
    def __init__(self, full_name: str) -> None:
        self.name = full_name
        self.python_type = cls = message_class(full_name)
        from_string = cls.FromString

        def decode(payload: bytes) -> ProtoMessage:
            try:
                return from_string(payload)
            except Exception as exc:  # DecodeError, RecursionError, ...: all bad bytes
                raise EnvelopeError(
                    "bad_payload",
                    f"payload ({len(payload)} bytes) is not a valid {full_name}: {exc}",
                ) from None

        self.decode = decode

    def to_json(self, message: ProtoMessage) -> dict[str, Any]:
        return json_format.MessageToDict(message)

    def encode(self, message: ProtoMessage) -> bytes:
        return message.SerializeToString(deterministic=True)

    def from_json(self, obj: dict[str, Any]) -> ProtoMessage:
        return json_format.ParseDict(obj, self.python_type())


class ReplicationResponseCodec(PayloadCodec):
    name = RAW
    python_type = commitlog.ReplicationResponse
    decode = staticmethod(commitlog.parse_replication_response)

    def to_json(self, message: commitlog.ReplicationResponse) -> dict[str, Any]:
        return message.to_json_dict()

    def encode(self, message: commitlog.ReplicationResponse) -> bytes:
        return commitlog.encode_replication_response(message)

    def from_json(self, obj: dict[str, Any]) -> commitlog.ReplicationResponse:
        return commitlog.ReplicationResponse.from_json_dict(obj)


def _codecs() -> dict[str, PayloadCodec]:
    names = {p for layout in LAYOUTS.values() for p in layout.payload_types}
    return {n: ReplicationResponseCodec() if n == RAW else ProtoCodec(n) for n in sorted(names)}


CODECS: Mapping[str, PayloadCodec] = _codecs()


def codec_for(payload_type: str) -> PayloadCodec:
    try:
        return CODECS[payload_type]
    except KeyError:
        known = ", ".join(CODECS)
        raise ValueError(f"unknown payload type {payload_type!r}; known: {known}") from None


def payload_type_of(message: Any) -> str:
    """The payload type name of a message object."""
    if isinstance(message, commitlog.ReplicationResponse):
        return RAW
    if isinstance(message, ProtoMessage):
        return message.DESCRIPTOR.full_name
    raise TypeError(f"cannot encode a {type(message).__name__}: not a protobuf message "
                    "or a ReplicationResponse")
