"""Payload codecs, one per payload type named in the spec.

A payload type is a full protobuf message name (`proto.Message`,
`protocol.PropagatedRequest`, ...), `raw` (REPLICATION_RESPONSE: the
ReplicationResponse payload of spec/commitlog.ksy) or `bytes`. `CODECS`
maps each name to a codec with `decode` (bytes to object, raising
`EnvelopeError("bad_payload")`), `to_json` and `encode`. The table is built
once at import from the generated protobuf modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message as ProtoMessage
from google.protobuf.unknown_fields import UnknownFieldSet

from lbparse.codec import commitlog, flatbuf
from lbparse.codec.layouts import BYTES, LAYOUTS, REPLICATION_RESPONSE, Layout
from lbparse.codec.limits import PROTOBUF_MAX_DEPTH, depth_error
from lbparse.errors import EnvelopeError, InputError
from lbparse_generated.proto import api_pb2, internal_pb2

__all__ = [
    "BYTES",
    "CODECS",
    "REPLICATION_RESPONSE",
    "PayloadCodec",
    "codec_for",
    "codec_in_layout",
    "descriptor_of",
    "message_class",
    "payload_type_of",
]

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


def descriptor_of(cls: type[ProtoMessage]) -> Descriptor:
    """The descriptor of a protobuf class.

    The runtime's are upb's; the stubs type them apart from
    google.protobuf.descriptor's.

    Args:
        cls: A generated protobuf message class.

    Returns:
        Its Descriptor.
    """
    return cast(Descriptor, cls.DESCRIPTOR)


def message_class(full_name: str) -> type[ProtoMessage]:
    """The generated protobuf class of a message type.

    Args:
        full_name: The type's full name ("proto.Ack", "protocol.RaftJoinRequest").

    Returns:
        The class, to build a message with (`Ack(stream="orders", offset=42)`).

    Raises:
        InputError: No generated message has that name.
    """
    try:
        return MESSAGE_CLASSES[full_name]
    except KeyError:
        raise InputError("bad_option", f"unknown protobuf message type {full_name!r}") from None


class PayloadCodec:
    """Decode, encode and render one payload type."""

    name: str
    python_type: type
    decode: Callable[[bytes], Any]

    def to_json(self, message: Any) -> dict[str, Any]:
        """The message as JSON by lbparse's convention (64-bit integers as strings).

        Args:
            message: A decoded payload of this type.

        Returns:
            Its JSON object.

        Raises:
            NotImplementedError: On the base class; each codec has its own.
        """
        raise NotImplementedError

    def encode(self, message: Any) -> bytes:
        """The payload's bytes.

        Args:
            message: A payload object of this type (`accepts`).

        Returns:
            Its bytes in the layout's format.

        Raises:
            NotImplementedError: On the base class; each codec has its own.
        """
        raise NotImplementedError

    def from_json(self, obj: dict[str, Any]) -> Any:
        """Inverse of `to_json`.

        Args:
            obj: The payload's JSON object.

        Returns:
            The payload object.

        Raises:
            NotImplementedError: On the base class; each codec has its own.
        """
        raise NotImplementedError

    def accepts(self, message: Any) -> bool:
        """Whether `encode` takes this object.

        Args:
            message: Any object.

        Returns:
            True when it is of the codec's Python type.
        """
        return isinstance(message, self.python_type)


def protobuf_error(
    ptype: str, cls: type[ProtoMessage], payload: bytes, exc: Exception, max_depth: int
) -> EnvelopeError:
    """The EnvelopeError for a payload the protobuf runtime refused."""
    # The runtime says only "corrupt"; say so when nesting was the reason.
    too_deep = depth_error(payload, cls.DESCRIPTOR, max_depth)
    if too_deep is not None:
        return too_deep
    return EnvelopeError(
        "bad_payload", f"payload ({len(payload)} bytes) is not a valid {ptype}: {exc}"
    )


class ProtoCodec(PayloadCodec):
    python_type: type[ProtoMessage]

    def __init__(self, full_name: str) -> None:
        self.name = full_name
        self.python_type = cls = message_class(full_name)
        from_string = cls.FromString

        def decode(payload: bytes) -> ProtoMessage:
            try:
                return from_string(payload)
            except Exception as exc:  # DecodeError, RecursionError, ...: all bad bytes
                raise protobuf_error(full_name, cls, payload, exc, PROTOBUF_MAX_DEPTH) from None

        self.decode = decode

    def to_json(self, message: ProtoMessage) -> dict[str, Any]:
        return json_format.MessageToDict(message)

    def encode(self, message: ProtoMessage) -> bytes:
        return message.SerializeToString(deterministic=True)

    def from_json(self, obj: dict[str, Any]) -> ProtoMessage:
        message: ProtoMessage = json_format.ParseDict(obj, self.python_type())
        return message


class ReplicationResponseCodec(PayloadCodec):
    name = REPLICATION_RESPONSE
    python_type = commitlog.ReplicationResponse
    decode = staticmethod(commitlog.parse_replication_response)

    def to_json(self, message: commitlog.ReplicationResponse) -> dict[str, Any]:
        return message.to_json_dict()

    def encode(self, message: commitlog.ReplicationResponse) -> bytes:
        return commitlog.encode_replication_response(message)

    def from_json(self, obj: dict[str, Any]) -> commitlog.ReplicationResponse:
        return commitlog.ReplicationResponse.from_json_dict(obj)


class BytesCodec(PayloadCodec):
    """Opaque bytes: plain NATS payloads and payloads no schema was ever given."""

    name = BYTES
    python_type = bytes

    @staticmethod
    def decode(payload: bytes) -> bytes:
        return payload

    def to_json(self, message: bytes) -> dict[str, Any]:
        return {"hex": message.hex()}

    def encode(self, message: bytes) -> bytes:
        return bytes(message)

    def from_json(self, obj: dict[str, Any]) -> bytes:
        if not isinstance(obj, dict) or set(obj) != {"hex"} or not isinstance(obj["hex"], str):
            raise InputError(
                "bad_json", f'opaque bytes are written {{"hex": "..."}} in JSON, not {obj!r}'
            )
        return bytes.fromhex(obj["hex"])

    def accepts(self, message: Any) -> bool:
        return isinstance(message, (bytes, bytearray, memoryview))


class FlatBuffersCodec(PayloadCodec):
    python_type: type[flatbuf.FlatTable]

    def __init__(self, table: str) -> None:
        self.name = table
        self.python_type = flatbuf.FlatTable
        self.decode = self.decode_bounded

    def decode_bounded(
        self, payload: bytes, max_bytes: int = flatbuf.MAX_BYTES
    ) -> flatbuf.FlatTable:
        """`decode`, with a bound on what the table may expand to (max_payload)."""
        try:
            return flatbuf.read_table(payload, self.name, max_bytes)
        except flatbuf.FlatBufferError as exc:
            over = isinstance(exc, flatbuf.FlatBufferTooLarge)
            raise EnvelopeError(
                "bad_payload",
                f"payload ({len(payload)} bytes) is not a FlatBuffers {self.name}: {exc}",
                limit="max_payload" if over else None,
                expected=max_bytes if over else None,
            ) from None

    def to_json(self, message: flatbuf.FlatTable) -> dict[str, Any]:
        return message.to_json_dict()

    def encode(self, message: flatbuf.FlatTable) -> bytes:
        return flatbuf.build_table(message)

    def from_json(self, obj: dict[str, Any]) -> flatbuf.FlatTable:
        return flatbuf.FlatTable.from_json_dict(self.name, obj)


def _codec(layout_format: str, name: str) -> PayloadCodec:
    if name == REPLICATION_RESPONSE:
        return ReplicationResponseCodec()
    if name == BYTES:
        return BytesCodec()
    if layout_format == "flatbuffers":
        return FlatBuffersCodec(name)
    return ProtoCodec(name)


def _codecs() -> dict[str, PayloadCodec]:
    codecs: dict[str, PayloadCodec] = {}
    for layout in LAYOUTS.values():
        for name in layout.payload_types:
            key = layout.codec_key(name)
            if key not in codecs:
                codecs[key] = _codec(layout.payload_format, name)
    return dict(sorted(codecs.items()))


CODECS: Mapping[str, PayloadCodec] = _codecs()


def codec_for(payload_type: str) -> PayloadCodec:
    """The codec of a payload type (a codec key: `Layout.codec_key`).

    Args:
        payload_type: "proto.Ack", "flatbuffers:Ack", "bytes", ...

    Returns:
        Its PayloadCodec.

    Raises:
        InputError: No codec has that key (the known ones are listed).
    """
    try:
        return CODECS[payload_type]
    except KeyError:
        known = ", ".join(CODECS)
        raise InputError(
            "bad_option", f"unknown payload type {payload_type!r}; known: {known}"
        ) from None


def codec_in_layout(layout: Layout, name: str) -> PayloadCodec:
    """The codec of a MsgType or payload type named in `layout`.

    FlatBuffers tables in the FlatBuffers layouts, protobuf messages
    elsewhere.

    Args:
        layout: The layout.
        name: A MsgType or payload type name (see `Layout.payload_type_named`).

    Returns:
        Its PayloadCodec.
    """
    return codec_for(layout.codec_key(layout.payload_type_named(name)))


def payload_type_of(message: Any) -> str:
    """The payload type name of a message object.

    Args:
        message: A protobuf message, FlatTable, ReplicationResponse or bytes.

    Returns:
        Its payload type ("proto.Ack", the table's type, "bytes", ...).

    Raises:
        TypeError: It is none of those.
    """
    if isinstance(message, commitlog.ReplicationResponse):
        return REPLICATION_RESPONSE
    if isinstance(message, (bytes, bytearray, memoryview)):
        return BYTES
    if isinstance(message, flatbuf.FlatTable):
        return message.type_name
    if isinstance(message, ProtoMessage):
        return message.DESCRIPTOR.full_name
    raise TypeError(
        f"cannot encode a {type(message).__name__}: not a protobuf message, "
        "FlatTable, ReplicationResponse or bytes"
    )


def fits_cleanly(message: ProtoMessage) -> bool:
    """Whether every field of the parsed bytes was one of the type's own, with
    its own wire type. Protobuf keeps anything else as unknown fields, so a
    parse that succeeds says little by itself; this is the evidence that
    legacy inference and layout="auto" rest on (checked by upb, in C)."""
    return len(UnknownFieldSet(message)) == 0


def infer_payload_type(
    layout_payload_types: tuple[str, ...], payload: bytes
) -> tuple[str, list[str]]:
    """The protobuf type of a payload whose header does not name it.

    Candidates are the types that parse the payload cleanly (`fits_cleanly`).
    The first candidate in the layout's order wins (the layout's default
    first); with none, the default.
    """
    candidates = []
    for name in layout_payload_types:
        codec = CODECS.get(name)
        if not isinstance(codec, ProtoCodec):
            continue
        # The runtime's parse, not codec.decode: a type that does not parse
        # is only passed over here, and decode's error (a walk of the bytes
        # for its nesting depth) was most of a garbled payload's inference.
        try:
            message = codec.python_type.FromString(payload)
        except Exception:  # DecodeError, RecursionError...: all mean bad bytes
            continue
        if fits_cleanly(message):
            candidates.append(name)
    return (candidates[0] if candidates else layout_payload_types[0]), candidates
