"""`layout="auto"`: which generation wrote a NATS payload, with the evidence.

Every layout that accepts the bytes is a candidate. A candidate is *clean*
when its payload schema confirms the bytes (protobuf: every top-level field
has a number and wire type of the type, and it parses; FlatBuffers: the
table structure checks out; a ReplicationResponse parses); opaque bytes
confirm nothing. Clean candidates beat the others; among equals the most
recent layout wins (the spec's `-recency`), and when several remain the
result says so (`ambiguous`, `layout_candidates`) instead of guessing
silently. Bytes with the envelope magic that no layout accepts raise the
error of the newest layout; anything else is `plain`.
"""

from __future__ import annotations

from lbparse.codec import flatbuf
from lbparse.codec.envelope import Envelope, build_envelope
from lbparse.codec.enveloped import EnvelopedDecoder, check_crc
from lbparse.codec.flatbuf import FlatTable
from lbparse.codec.header import read_header
from lbparse.codec.headerless import decode_lift_cookie, decode_plain
from lbparse.codec.layouts import LAYOUTS, Layout
from lbparse.codec.limits import DEFAULT, Limits, check_payload_size
from lbparse.codec.payloads import BYTES, ProtoCodec, codec_for, fits_cleanly
from lbparse.codec.wire import COOKIE, MAGIC, MSG_TYPE_OFFSET
from lbparse.codec.wirefit import shared_walks
from lbparse.errors import EnvelopeError, InputError

__all__ = ["contested_msg_types", "detect"]

_BY_RECENCY = sorted(LAYOUTS.values(), key=lambda lay: lay.recency)
_ENVELOPED = [(lay, EnvelopedDecoder(lay)) for lay in _BY_RECENCY if lay.has_header]


def contested_msg_types() -> tuple[str, frozenset[int]]:
    """The byte 7 values for which an older layout may also decode a newest-layout envelope.

    For any other byte 7, `detect` gives the newest layout's envelope
    whenever that layout decodes the bytes, clean or not: the older ones
    either refuse the byte 7 value or carry opaque bytes there, which
    confirm nothing. (The cheap refusals in `_candidates`, as a table.)

    Returns:
        The newest enveloped layout's name, and the contested byte 7 values.
    """
    contested: set[int] = set()
    for layout, dec in _ENVELOPED[1:]:
        if dec.reserved:
            contested.add(0)  # a reserved byte 7 other than 0 is refused
        elif layout.has_msg_type:
            contested.update(v for v, mt in layout.msg_types.items() if mt.payload_type != BYTES)
        else:
            contested.update(range(256))
    return _ENVELOPED[0][0].name, frozenset(contested)


def _confirms(layout: Layout, env: Envelope) -> str | None:
    """Why the payload schema confirms the bytes, or None when it does not."""
    if env.payload_type == BYTES:
        return None
    if isinstance(env.message, FlatTable):
        root = int.from_bytes(env.payload[:4], "little")
        return (
            f"payload is a well-formed FlatBuffers {env.payload_type} "
            f"(root table at offset {root}, {len(env.message.fields)} fields in bounds)"
        )
    codec = codec_for(layout.codec_key(env.payload_type))
    if isinstance(codec, ProtoCodec):
        if not fits_cleanly(env.message):
            return None
        return f"every protobuf field of the payload fits {env.payload_type}"
    return f"payload parses as {env.payload_type}"


def _candidates(
    data: bytes, verify_crc: bool, limits: Limits | None
) -> tuple[list[tuple[Envelope, str | None]], list[str], EnvelopeError | None]:
    found: list[tuple[Envelope, str | None]] = []
    reasons: list[str] = []
    first_error: EnvelopeError | None = None
    if data[: len(MAGIC)] == MAGIC:
        reasons.append(f"envelope magic {MAGIC.hex()} at offset 0")
        # The enveloped layouts share bytes 0..6 and the CRC: read them once.
        try:
            hl, flags, crc, byte7, _ = read_header(data, _ENVELOPED[0][0])
            check_payload_size(len(data) - hl, hl, limits or DEFAULT)
            if verify_crc:
                check_crc(data, hl, crc)
        except EnvelopeError as exc:
            return found, reasons + [f"no enveloped layout: {exc.kind}"], exc
        newest = _ENVELOPED[0][0]
        for layout, dec in _ENVELOPED:
            # Cheap refusals first (the newest layout always decodes fully:
            # its error is the one to raise when nothing else fits).
            if dec.reserved and byte7:  # no legacy writer ever set it
                reasons.append(
                    f"not {layout.name}: reserved byte {MSG_TYPE_OFFSET} is {byte7}, not 0"
                )
                continue
            if layout is not newest and layout.has_msg_type and byte7 not in layout.msg_types:
                reasons.append(f"not {layout.name}: MsgType {byte7} not in its table")
                continue
            if (
                layout.payload_format == "flatbuffers"
                and byte7 in layout.msg_types
                and layout.msg_types[byte7].payload_type != BYTES
                and not flatbuf.plausible(data[hl:])
            ):
                reasons.append(f"not {layout.name}: payload is not a FlatBuffer")
                continue
            try:
                env = dec.finish(data, hl, flags, crc, byte7, (), None, limits)
            except EnvelopeError as exc:
                first_error = first_error or exc
                reasons.append(f"not {layout.name}: {exc.kind}")
                continue
            found.append((env, _confirms(layout, env)))
    elif data[: len(COOKIE)] == COOKIE and len(data) > len(COOKIE):
        reasons.append("starts with the LIFT cookie")
        try:
            env = decode_lift_cookie(data, limits=limits)
            found.append((env, _confirms(LAYOUTS["lift-cookie"], env)))
        except EnvelopeError as exc:
            reasons.append(f"not lift-cookie: {exc.kind}")
    return found, reasons, first_error


def _describe(env: Envelope) -> str:
    if env.msg_type is not None:
        return f"{env.layout}: MsgType {env.msg_type} {env.msg_type_name} in its table"
    return f"{env.layout}: {env.payload_type}"


def detect(
    data: bytes,
    verify_crc: bool = True,
    lenient: bool = False,
    payload_type: str | None = None,
    limits: Limits | None = None,
) -> Envelope:
    """Classify and decode any NATS payload (the `auto` layout).

    Every layout that decodes the bytes is a candidate; the one whose
    payload is confirmed (its schema fits) wins, the newest first, else the
    newest layout's reading; bytes no enveloped layout reads are `plain`.

    Args:
        data: The NATS payload.
        verify_crc: Check a CRC-32C the header carries.
        lenient: Must be False: `auto` does not tolerate.
        payload_type: Must be None: `auto` infers it.
        limits: Bounds on the payload (None for the defaults).

    Returns:
        The envelope, with the classification: `ambiguous`,
        `layout_candidates`, `reasons` and `confidence`.

    Raises:
        InputError: `lenient` or `payload_type` was given.
        EnvelopeError: The newest layout's error, when no layout decodes the
            bytes cleanly and the newest one fails.
    """
    if lenient or payload_type is not None:
        raise InputError(
            "bad_option",
            "layout='auto' takes neither lenient nor payload_type: name the layout to use them",
        )
    with shared_walks():  # candidate layouts read one payload: walk it once per type
        found, reasons, error = _candidates(data, verify_crc, limits)
    clean = [(env, why) for env, why in found if why]
    # Without confirming evidence the newest layout decides, even if what
    # it says is an error: an older layout that merely fails to object
    # (opaque bytes) is no better a guess.
    newest_failed = not found or found[0][0].layout != _ENVELOPED[0][0].name
    if not clean and error is not None and newest_failed:
        raise error
    chosen = clean or found
    if not chosen:
        env = decode_plain(data, limits=limits)
        reasons.append("no envelope magic and no LIFT message: plain NATS payload")
        return _finish(env, reasons, [], 0.9 if data[: len(COOKIE)] != COOKIE else 0.6)
    best, why = chosen[0]  # _ENVELOPED is in recency order
    for env, w in found:
        reasons.append(_describe(env) + (f"; {w}" if w else "; payload schema not confirmed"))
    if best.crc32c is not None and verify_crc:
        reasons.append("CRC-32C verified")
    names = [env.layout for env, _ in chosen]
    if len(names) > 1:
        confidence = round(1 / len(names), 2)
    else:
        confidence = 0.99 if why and best.crc32c is not None else (0.95 if why else 0.6)
    return _finish(best, reasons, names, confidence)


def _finish(env: Envelope, reasons: list[str], names: list[str], confidence: float) -> Envelope:
    """`env` with auto's classification (a new Envelope: they are immutable)."""
    extra = env._extra._replace(reasons=tuple(reasons), confidence=confidence)
    if len(names) > 1:
        extra = extra._replace(ambiguous=True, layout_candidates=tuple(names))
    return build_envelope(env._head, env.crc32c, env.payload, env.message, extra)
