"""What each generation of the upstream Go decoders does with a byte string.

A model of the checks the Liftbridge server and Go clients run
(shared/wire/README.md section 2), in their order, with their quirks: a
header length past the data panics (slice out of range), odd header
lengths are accepted, bad magic on a publish makes the server store the
bytes as a plain message. Payloads are judged the way each decoder's
protobuf library judges them: gogo-generated code rejects a known field
with the wrong wire type but not invalid UTF-8; protobuf-go (API v2, the
current server's Publish and Ack) does the opposite. The reference
vectors' `upstream_go` outcomes are the test of this model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import crc32c as _crc32c

from lbparse.codec.layouts import LAYOUTS
from lbparse.codec.payloads import (
    REPLICATION_RESPONSE,
    codec_for,
    descriptor_of,
    infer_payload_type,
    message_class,
)
from lbparse.codec.wire import (
    COOKIE,
    CRC_FLAG,
    CRC_HEADER_LEN,
    CRC_OFFSET,
    CRC_STRUCT,
    FLAGS_OFFSET,
    HEADER_LEN_OFFSET,
    HEADER_SIZE,
    MAGIC,
    MSG_TYPE_OFFSET,
    REPLICATION_PREFIX,
    VERSION,
    VERSION_OFFSET,
)
from lbparse.codec.wirefit import gogo_problem, shared_walks, well_formed
from lbparse.errors import EnvelopeError

__all__ = [
    "UPSTREAM_DECODERS",
    "DecoderVerdict",
    "UpstreamDecoder",
    "UpstreamVerdict",
    "simulate",
    "upstream_verdict",
]

ACCEPTED, PLAIN, REJECTED, CRASH = "accepted", "plain", "rejected", "crash"
_V0 = LAYOUTS["v0"]
_BY_NAME = {mt.name: mt for mt in _V0.msg_types.values()}
# What clients send and read (the spec's MsgTypes without `-internal`): the
# current server decodes these with protobuf-go (API v2), and the Go client
# reads nothing else.
_CLIENT_FACING = frozenset(mt.name for mt in _V0.msg_types.values() if not mt.internal)


@dataclass(frozen=True)
class UpstreamDecoder:
    """One upstream decoder: its generation and how it reads envelopes.

    Attributes:
        key: How the reference vectors name it.
        generation: What a user calls it.
        envelope: "v0" (MsgType checked), "alpha" (reserved byte), "lift".
        min_len: The shortest data it reads.
        protobuf: Its protobuf runtime: "gogo" or "go-v2".
        plain_on_bad_header: Whether it keeps data without a good header as a
            plain message (the server) rather than rejecting it.
    """

    key: str  # how the reference vectors name it
    generation: str  # what a user calls it
    envelope: str  # "v0" (MsgType checked), "alpha" (reserved byte), "lift"
    min_len: int  # shortest data it reads (the v2 client wants more than the header)
    protobuf: str  # "gogo" or "go-v2"
    plain_on_bad_header: bool  # the server keeps such publishes as plain messages


UPSTREAM_DECODERS: dict[str, UpstreamDecoder] = {
    d.generation: d
    for d in (
        UpstreamDecoder(
            "server", "server (v1.0.0-beta and later)", "v0", HEADER_SIZE, "go-v2", True
        ),
        UpstreamDecoder(
            "legacy_27b155c", "server v1.0.0-alpha", "alpha", HEADER_SIZE, "gogo", True
        ),
        UpstreamDecoder("client_v2", "Go client v2", "v0", HEADER_SIZE + 1, "gogo", False),
        UpstreamDecoder(
            "client_0a5bc38^",
            "Go client v0.0.1-alpha (LIFT)",
            "lift",
            len(COOKIE) + 1,
            "gogo",
            False,
        ),
    )
}


@dataclass(frozen=True)
class DecoderVerdict:
    """What one upstream decoder does with some bytes.

    Attributes:
        generation: The decoder's generation, as a user calls it.
        outcome: "accepted", "plain", "rejected" or "crash".
        detail: Its words (the Go error, or what it took the bytes for).
    """

    generation: str
    outcome: str  # accepted | plain | rejected | crash
    detail: str

    def to_json_dict(self) -> dict[str, str]:
        """The verdict as JSON.

        Returns:
            {"generation", "outcome", "detail"}.
        """
        return {"generation": self.generation, "outcome": self.outcome, "detail": self.detail}


@dataclass(frozen=True)
class UpstreamVerdict:
    """What each upstream generation does with some bytes (`lbparse check`).

    Attributes:
        verdicts: One per upstream decoder, in UPSTREAM_DECODERS' order.
    """

    verdicts: tuple[DecoderVerdict, ...]

    @property
    def crashes(self) -> bool:
        """Whether any upstream server would crash on these bytes."""
        return any(v.outcome == CRASH and "server" in v.generation for v in self.verdicts)

    def to_json_dict(self) -> dict[str, Any]:
        """The verdicts as JSON.

        Returns:
            {"crashes_a_server", "verdicts": [each verdict's JSON]}.
        """
        return {
            "crashes_a_server": self.crashes,
            "verdicts": [v.to_json_dict() for v in self.verdicts],
        }


def _payload_problem(payload: bytes, ptype: str, style: str) -> str | None:
    """Why a Go decoder of `style` rejects the payload, or None."""
    if ptype == REPLICATION_RESPONSE:
        return "not enough data" if len(payload) < REPLICATION_PREFIX.size else None
    if not well_formed(payload):
        return "proto: cannot parse invalid wire-format data"
    if style == "gogo":
        return gogo_problem(payload, descriptor_of(message_class(ptype)))
    try:
        codec_for(ptype).decode(payload)
    except EnvelopeError as exc:
        return exc.message
    return None


def simulate(data: bytes, decoder: UpstreamDecoder, expected: str) -> DecoderVerdict:
    """`decoder` reading `data` as the payload type `expected`.

    Args:
        data: The NATS payload.
        decoder: The upstream decoder.
        expected: The payload type it expects: a MsgType name for v0
            decoders, a protobuf type for the others.

    Returns:
        Its verdict.
    """
    gen = decoder.generation
    if decoder.envelope == "lift":
        if len(data) < decoder.min_len or data[: len(COOKIE)] != COOKIE:
            return DecoderVerdict(gen, PLAIN, "not a LIFT message: kept as plain bytes")
        problem = _payload_problem(data[len(COOKIE) :], "proto.Message", decoder.protobuf)
        if problem:
            return DecoderVerdict(gen, PLAIN, f"not a LIFT message ({problem})")
        return DecoderVerdict(gen, ACCEPTED, "LIFT message (proto.Message)")
    bad_header = PLAIN if decoder.plain_on_bad_header else REJECTED
    if len(data) < decoder.min_len:
        return DecoderVerdict(gen, bad_header, "error: data missing envelope header")
    if data[: len(MAGIC)] != MAGIC:
        return DecoderVerdict(gen, bad_header, "error: unexpected envelope magic number")
    if data[VERSION_OFFSET] != VERSION:
        return DecoderVerdict(
            gen, REJECTED, f"error: unknown envelope protocol: {data[VERSION_OFFSET]}"
        )
    hl, flags, byte7 = data[HEADER_LEN_OFFSET], data[FLAGS_OFFSET], data[MSG_TYPE_OFFSET]
    if hl > len(data):
        return DecoderVerdict(
            gen, CRASH, f"panic: runtime error: slice bounds out of range [{hl}:{len(data)}]"
        )
    payload = data[hl:]
    if decoder.envelope == "v0":
        want = _BY_NAME[expected]
        if byte7 != want.value:
            return DecoderVerdict(
                gen, REJECTED, f"error: MsgType mismatch: expected {want.value}, got {byte7}"
            )
        ptype, what = want.payload_type, f"MsgType {want.value} {want.name}"
    else:
        ptype, what = expected, expected
    if flags & CRC_FLAG:
        if hl != CRC_HEADER_LEN:
            return DecoderVerdict(gen, REJECTED, "error: incorrect envelope header size")
        stored, actual = CRC_STRUCT.unpack_from(data, CRC_OFFSET)[0], _crc32c.crc32c(payload)
        if stored != actual:
            return DecoderVerdict(
                gen, REJECTED, f"error: crc mismatch: expected {stored}, got {actual}"
            )
    style = decoder.protobuf if expected in _CLIENT_FACING else "gogo"
    problem = _payload_problem(payload, ptype, style)
    if problem:
        return DecoderVerdict(gen, REJECTED, f"error: {problem}")
    return DecoderVerdict(gen, ACCEPTED, f"accepted as {what}")


def _natural_expectation(data: bytes, decoder: UpstreamDecoder) -> str:
    """What a decoder of that generation would be expecting for these bytes."""
    if decoder.envelope == "v0":
        mt = _V0.msg_types.get(data[MSG_TYPE_OFFSET]) if len(data) > MSG_TYPE_OFFSET else None
        if decoder.key == "client_v2":  # a client reads messages and acks only
            return mt.name if mt is not None and mt.name in _CLIENT_FACING else "Publish"
        return mt.name if mt is not None else "Publish"
    if decoder.envelope == "alpha":
        hl = data[HEADER_LEN_OFFSET] if len(data) > MSG_TYPE_OFFSET else len(data)
        payload = data[hl:] if hl <= len(data) else b""
        return infer_payload_type(LAYOUTS["legacy"].payload_types, payload)[0]
    return "proto.Message"


def upstream_verdict(data: bytes | bytearray | memoryview) -> UpstreamVerdict:
    """What each upstream generation does with `data`, one verdict each.

    Args:
        data: The NATS payload.

    Returns:
        The verdicts, and whether any server would crash.
    """
    raw = bytes(data)
    with shared_walks():  # the decoders judge the same payload: walk it once per type
        return UpstreamVerdict(
            tuple(
                simulate(raw, d, _natural_expectation(raw, d)) for d in UPSTREAM_DECODERS.values()
            )
        )
