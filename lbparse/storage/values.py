"""`--deep`: stored values decoded where Liftbridge knows their type.

The internal streams of spec/segment.ksy `-data-dir` (`__activity`:
proto.ActivityStreamEvent, `__cursors`: protocol.Cursor) hold protobuf
values; any other value that is itself a Liftbridge envelope (a client
that published an envelope as a message's value) is decoded as one.
"""

from __future__ import annotations

from typing import Any

from lbparse.codec.api import decode
from lbparse.codec.envelope import Envelope
from lbparse.codec.payloads import ProtoCodec
from lbparse.errors import EnvelopeError
from lbparse_generated.storage_layouts import DATA_DIR

__all__ = ["KNOWN_STREAMS", "decode_value", "stored_envelope"]

KNOWN_STREAMS: dict[str, str] = {
    name: spec["value"] for name, spec in DATA_DIR["known_streams"].items()
}
_CODECS: dict[str, ProtoCodec] = {}


def _codec(type_name: str) -> ProtoCodec:
    codec = _CODECS.get(type_name)
    if codec is None:
        codec = _CODECS[type_name] = ProtoCodec(type_name)
    return codec


def decode_value(stream: str, value: bytes | None) -> dict[str, Any] | None:
    """A stored value decoded, where Liftbridge knows its type.

    Args:
        stream: The stream the value is stored in (`__activity` and
            `__cursors` hold protobuf values; see KNOWN_STREAMS).
        value: The stored value, or None (a message without one).

    Returns:
        {"type": ..., "json": ...} for a value of known type (or that is an
        envelope), {"type", "error"} when it does not decode as its stream's
        type; None when the value has no type Liftbridge knows.
    """
    if value is None:
        return None
    type_name = KNOWN_STREAMS.get(stream)
    if type_name is not None:
        codec = _codec(type_name)
        try:
            return {"type": type_name, "json": codec.to_json(codec.decode(value))}
        except EnvelopeError as exc:
            return {"type": type_name, "error": exc.message}
    return _envelope(value)


def stored_envelope(value: bytes) -> Envelope | None:
    """A stored value that is an envelope, decoded.

    Tried as v0, else legacy: what Liftbridge keeps in its own streams.

    Args:
        value: The stored value.

    Returns:
        The decoded Envelope, or None when it is neither layout.
    """
    for layout in ("v0", "legacy"):
        try:
            return decode(value, layout)
        except EnvelopeError:
            continue
    return None


def _envelope(value: bytes) -> dict[str, Any] | None:
    env = stored_envelope(value)
    return None if env is None else {"type": f"envelope ({env.layout})", "json": env.to_json_dict()}
