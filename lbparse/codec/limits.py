"""Resource limits: how much of its memory and time hostile bytes may claim.

Every size field lbparse reads is checked against the bytes actually
present before anything is allocated for it; these limits bound what
genuine-looking input may still cost. Each has a default that no
legitimate Liftbridge traffic reaches, and each is reported when hit, never
applied silently:

  max_payload     decode refuses a payload longer than this:
                  EnvelopeError("bad_payload") with `.limit == "max_payload"`.
                  It also caps what a FlatBuffers payload may expand to
                  (vectors that share one table or byte vector).
  max_frame       the NATS parser refuses a PUB/HPUB/MSG/HMSG whose declared
                  size is larger, without buffering it: a Notice("limit"),
                  and parsing resumes at the next control line.
  max_depth       protobuf nesting (messages within messages, groups) deeper
                  than this is EnvelopeError("bad_payload") with
                  `.limit == "max_depth"`. At most 100, the protobuf
                  runtime's own bound.
  max_reassembly  bytes one direction of a TCP connection may hold waiting
                  behind a hole; past it the hole is declared lost (a
                  Notice("limit"), then the usual "gap").
  max_grpc_elements
                  protobuf fields (each element of a repeated field, each
                  field of every submessage) one gRPC message in a capture
                  may decode to, counted by a walk of its wire bytes that
                  stops past the limit; past it the message is not decoded
                  (its record's error; a Notice("limit")).
  max_grpc_inflate
                  bytes gzip may add to the gRPC messages of one capture
                  reading, in all (each message's decompressed size less its
                  compressed one); past it a compressed message that would
                  grow is not decompressed (its record's error; a
                  Notice("limit") the first time). With max_frame, which
                  bounds each message decompressed, it keeps what the
                  messages decode to within the capture's size plus this.
  max_grpc_headers
                  bytes of header values (an unknown :path, grpc-message,
                  :status, grpc-encoding) longer than 256 bytes that the
                  gRPC call records of one reading keep, in all: HPACK lets
                  a value sent once be named again in two bytes by every
                  call. Past it such values are not kept (null; a
                  Notice("limit") once per connection).
  max_open_calls  gRPC calls open at once in a capture reading, all
                  connections together; past it the oldest open call is
                  given up (ended "dropped", a Notice("limit")).
  max_raft_db     bytes of raft.db's keys and values (log entries, the
                  stable store) read out of the file in all; past it the
                  log keys left are counted, not decoded: a Finding("limit")
                  (lbparse.storage.raftdb). Elements that share one value
                  cost it each time.

    >>> Limits(max_payload=parse_size("1MiB")).max_payload
    1048576
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from lbparse.codec.wirefit import nesting_depth
from lbparse.errors import EnvelopeError, InputError

__all__ = [
    "COUNT_LIMITS",
    "DEFAULT",
    "GRPC_LIMITS",
    "LIMIT_NAMES",
    "Limits",
    "PROTOBUF_MAX_DEPTH",
    "check_depth",
    "check_payload_size",
    "depth_error",
    "parse_size",
]

# The protobuf runtime (upb) refuses deeper nesting itself, whatever we say.
PROTOBUF_MAX_DEPTH = 100


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits for `decode` and `CaptureReader` (see the module doc).

    Each is a positive integer; the defaults are above anything legitimate
    Liftbridge traffic reaches.

    Attributes:
        max_payload: The longest envelope payload decode takes, bytes.
        max_frame: The largest NATS message the parser buffers, bytes.
        max_depth: The deepest protobuf nesting, at most 100.
        max_reassembly: Bytes a TCP direction holds behind a hole.
        max_raft_db: Bytes of raft.db's keys and values read, in all.
        max_grpc_elements: Protobuf fields one gRPC message may decode to.
        max_grpc_inflate: Bytes gzip may add to a reading's gRPC messages.
        max_grpc_headers: Bytes of long gRPC header values kept, in all.
        max_open_calls: gRPC calls open at once in a capture reading.
        shortcut_cap: Derived, for decode's shortcut: the longest data it
            may take, -1 when a depth check is due.

    Raises:
        ValueError: A limit is not a positive integer, or max_depth is past
            the protobuf runtime's 100.
    """

    # nats-server warns above an 8 MB max_payload; Liftbridge's default is 1 MB.
    max_payload: int = 8 << 20
    # The largest max_payload nats-server accepts (it must not exceed max_pending, 64 MB).
    max_frame: int = 64 << 20
    max_depth: int = PROTOBUF_MAX_DEPTH
    max_reassembly: int = 16 << 20
    # Liftbridge's metadata log holds a few thousand small entries (raft
    # keeps ~10k after a snapshot): a few MB.
    max_raft_db: int = 256 << 20
    # gRPC in captures (lbparse.capture.h2, grpc). A real FetchMetadataResponse
    # of a large cluster is some 100k fields; Liftbridge's clients send
    # gzip rarely if ever (what gzip may add is one largest message's worth,
    # max_frame); a call's headers are tens of bytes, and a client holds
    # tens of calls open.
    max_grpc_elements: int = 1 << 20
    max_grpc_inflate: int = 64 << 20
    max_grpc_headers: int = 64 << 20
    max_open_calls: int = 16384
    # For decode's shortcut, one attribute read on the hot path: the longest
    # data it may take (any header length leaves the payload within
    # max_payload); -1 when a depth check below the runtime's own is due.
    shortcut_cap: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for f in fields(self):
            if not f.init:
                continue
            value = getattr(self, f.name)
            if type(value) is not int or value < 1:
                raise InputError(
                    "bad_option", f"Limits.{f.name} must be a positive integer, not {value!r}"
                )
        if self.max_depth > PROTOBUF_MAX_DEPTH:
            raise InputError(
                "bad_option",
                f"Limits.max_depth is at most {PROTOBUF_MAX_DEPTH} (the protobuf "
                f"runtime's own bound), not {self.max_depth}",
            )
        object.__setattr__(
            self,
            "shortcut_cap",
            self.max_payload + 8 if self.max_depth >= PROTOBUF_MAX_DEPTH else -1,
        )


DEFAULT = Limits()
LIMIT_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Limits) if f.init)
# What gRPC in a capture may cost: options of every command that reads captures.
GRPC_LIMITS = ("max_grpc_elements", "max_grpc_inflate", "max_grpc_headers", "max_open_calls")
# The limits that count things, not bytes.
COUNT_LIMITS = ("max_depth", "max_grpc_elements", "max_open_calls")

_SIZE = re.compile(r"\s*(\d+)\s*([kmg]?)(i?b?)\s*", re.I)


def parse_size(text: str) -> int:
    """A size in bytes from `4096`, `64k`, `8M`, `1MiB`, `2GB` (k, M, G are powers of 1024).

    Args:
        text: The size as written.

    Returns:
        The bytes.

    Raises:
        InputError: It is no size.
    """
    m = _SIZE.fullmatch(text)
    if m is None:
        raise InputError("bad_option", f"not a size: {text!r} (e.g. 4096, 64k, 8M, 1GiB)")
    unit = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    return int(m.group(1)) * unit


def check_payload_size(size: int, offset: int, limits: Limits) -> None:
    """Refuse a payload of `size` bytes (starting at `offset`) over max_payload.

    Args:
        size: The payload's length.
        offset: Where it starts in the envelope.
        limits: The limits.

    Raises:
        EnvelopeError: `bad_payload` with `.limit == "max_payload"`.
    """
    if size > limits.max_payload:
        raise EnvelopeError(
            "bad_payload",
            f"payload (offset {offset}) is {size} bytes, over the "
            f"limit of {limits.max_payload} (max_payload)",
            offset=offset,
            expected=limits.max_payload,
            actual=size,
            limit="max_payload",
        )


def depth_error(payload: bytes, desc: Any, max_depth: int) -> EnvelopeError | None:
    """The max_depth error for a protobuf payload nested too deep, or None.

    Args:
        payload: The protobuf bytes.
        desc: The message type's descriptor.
        max_depth: The deepest nesting allowed.

    Returns:
        An EnvelopeError (`bad_payload`, `.limit == "max_depth"`) to raise,
        or None when the payload is within it.
    """
    depth = nesting_depth(payload, desc, max_depth)
    if depth <= max_depth:
        return None
    return EnvelopeError(
        "bad_payload",
        f"payload ({len(payload)} bytes) nests deeper than "
        f"{max_depth} levels of protobuf messages and groups as "
        f"{desc.full_name}, the limit (max_depth)",
        expected=max_depth,
        actual=depth,
        limit="max_depth",
    )


def check_depth(payload: bytes, desc: Any, limits: Limits) -> None:
    """Refuse a protobuf payload nested deeper than max_depth.

    Only needed below PROTOBUF_MAX_DEPTH: the runtime refuses deeper
    nesting itself.

    Args:
        payload: The protobuf bytes.
        desc: The message type's descriptor.
        limits: The limits.

    Raises:
        EnvelopeError: `bad_payload` with `.limit == "max_depth"`.
    """
    # Each level costs at least two bytes (a tag and a length or an end-group).
    if limits.max_depth < PROTOBUF_MAX_DEPTH and len(payload) > 2 * limits.max_depth:
        err = depth_error(payload, desc, limits.max_depth)
        if err is not None:
            raise err
