"""The generated reference parsers, wrapped to answer in lbparse's terms.

The Kaitai parser and the construct schema are both generated from
spec/*.ksy; lbparse's fast path is written by hand. Differential tests and
benchmarks run all three on the same bytes through these wrappers, which
turn each parser's own exceptions into lbparse's error kinds (using the
`-error` keys of the spec) so that results compare field by field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from io import BytesIO
from typing import Any

import construct
import kaitaistruct
from kaitaistruct import KaitaiStream

from lbparse.codec.layouts import FIELD_ERRORS, HEADER_SEQ, LAYOUTS, TOP_SEQ
from lbparse.codec.wire import CRC_FLAG, CRC_PAIRING_ERRORS, FLAGS_OFFSET, HEADER_SIZE
from lbparse.errors import EnvelopeError
from lbparse_generated import construct_schema as cs
from lbparse_generated.kaitai.liftbridge_commitlog import LiftbridgeCommitlog
from lbparse_generated.kaitai.liftbridge_envelope import LiftbridgeEnvelope

__all__ = [
    "HeaderResult",
    "PARSERS",
    "construct_header",
    "fast_header",
    "kaitai_header",
    "commitlog_entries",
    "commitlog_result",
]

HEADER_FIELDS = ("version", "header_len", "flags", "crc32c", "msg_type")


@dataclass
class HeaderResult:
    """What one parser made of the header: an error kind, or fields and payload."""

    kind: str | None
    fields: dict[str, Any] | None = None
    payload_offset: int | None = None


def _field_kind(field: str, data: bytes) -> str:
    # One validation covers both directions of the CRC-flag/length pairing.
    if field == "flags":
        flag_set = bool(data[FLAGS_OFFSET] & CRC_FLAG)
        return CRC_PAIRING_ERRORS["flag_set" if flag_set else "flag_clear"]
    return FIELD_ERRORS[field]


def _eof_kind(data: bytes, layout: str) -> str:
    """The kind of a read past the end: of the header, of the CRC field, or
    of the payload a headerless layout needs."""
    if not LAYOUTS[layout].has_header:
        return FIELD_ERRORS["payload"]
    return FIELD_ERRORS["header"] if len(data) < HEADER_SIZE else FIELD_ERRORS["crc32c"]


def _msg_type_ok(layout: str, byte7: int) -> bool:
    lay = LAYOUTS[layout]
    return not lay.has_msg_type or byte7 in lay.msg_types


def _result(
    layout: str,
    version: int,
    header_len: int,
    flags: int,
    crc: int | None,
    byte7: int,
    payload_offset: int,
) -> HeaderResult:
    if not LAYOUTS[layout].has_header:
        return HeaderResult(None, dict.fromkeys(HEADER_FIELDS), payload_offset)
    if not _msg_type_ok(layout, byte7):
        return HeaderResult("unknown_msg_type")
    msg_type = byte7 if LAYOUTS[layout].has_msg_type else None
    fields = dict(
        version=version, header_len=header_len, flags=flags, crc32c=crc, msg_type=msg_type
    )
    return HeaderResult(None, fields, header_len)


def kaitai_header(data: bytes, layout: str = "v0") -> HeaderResult:
    lay_enum = LiftbridgeEnvelope.Layout(LAYOUTS[layout].id)
    try:
        env = LiftbridgeEnvelope(lay_enum, KaitaiStream(BytesIO(data)))
    except EOFError:
        return HeaderResult(_eof_kind(data, layout))
    except kaitaistruct.ValidationFailedError as exc:
        seq = HEADER_SEQ if exc.src_path.startswith("/types/header/") else TOP_SEQ
        field = seq[int(exc.src_path.rsplit("/", 1)[1])]
        return HeaderResult(_field_kind(field, data))
    h = getattr(env, "header", None)  # Kaitai leaves absent fields unset
    if h is None:
        return _result(layout, 0, 0, 0, None, 0, len(data) - len(env.payload))
    return _result(
        layout,
        h.version,
        h.header_len,
        h.flags,
        env.crc32c if h.has_crc else None,
        h.msg_type,
        h.header_len,
    )


def construct_header(data: bytes, layout: str = "v0") -> HeaderResult:
    try:
        env = cs.liftbridge_envelope.parse(data, layout=LAYOUTS[layout].id)
    except construct.ConstError:
        return HeaderResult("bad_magic")
    except construct.CheckError as exc:
        field = str(exc.path).rsplit("_valid_", 1)[1].strip()
        return HeaderResult(_field_kind(field, data))
    except construct.StreamError:
        return HeaderResult(_eof_kind(data, layout))
    h = env.header
    if h is None:
        return _result(layout, 0, 0, 0, None, 0, len(data) - len(env.payload))
    return _result(layout, h.version, h.header_len, h.flags, env.crc32c, h.msg_type, h.header_len)


def fast_header(data: bytes, layout: str = "v0") -> HeaderResult:
    from lbparse.codec.api import decode_header

    try:
        h = decode_header(data, layout)
    except EnvelopeError as exc:
        return HeaderResult(exc.kind)
    fields = {k: getattr(h, k) for k in HEADER_FIELDS}
    return HeaderResult(None, fields, h.payload_offset)


PARSERS: dict[str, Callable[[bytes, str], HeaderResult]] = {
    "kaitai": kaitai_header,
    "construct": construct_header,
    "lbparse": fast_header,
}


def _plain(value: Any) -> Any:
    return bytes(value) if isinstance(value, (bytes, bytearray)) else value


def commitlog_entries(payload: bytes, parser: str) -> list[dict[str, Any]]:
    """The commit-log entries of a ReplicationResponse payload, as plain dicts."""
    if parser == "kaitai":
        rr = LiftbridgeCommitlog.from_bytes(payload)
        items = [(e.offset, e.timestamp, e.leader_epoch, e.size, e.body) for e in rr.entries]
        headers = lambda b: [(h.key, h.value) for h in b.headers]  # noqa: E731
        key = lambda b: b.key if b.key_len >= 0 else None  # noqa: E731
        value = lambda b: b.value if b.value_len >= 0 else None  # noqa: E731
    elif parser == "construct":
        rr = cs.liftbridge_commitlog.parse(payload)
        items = [(e.offset, e.timestamp, e.leader_epoch, e.size, e.body) for e in rr.entries]
        headers = lambda b: [(h.key, h.value) for h in b.headers]  # noqa: E731
        key = lambda b: b.key  # noqa: E731
        value = lambda b: b.value  # noqa: E731
    else:
        from lbparse.codec.commitlog import header_items, parse_replication_response

        return [
            dict(
                offset=e.offset,
                timestamp=e.timestamp,
                leader_epoch=e.leader_epoch,
                size=e.size,
                crc32c=e.crc32c,
                magic=e.magic,
                attributes=e.attributes,
                key=e.key,
                value=e.value,
                headers=header_items(e),
            )
            for e in parse_replication_response(payload).entries
        ]
    return [
        dict(
            offset=o,
            timestamp=t,
            leader_epoch=le,
            size=s,
            crc32c=b.crc32c,
            magic=b.magic,
            attributes=b.attributes,
            key=_plain(key(b)),
            value=_plain(value(b)),
            headers=[(_plain(k), _plain(v)) for k, v in headers(b)],
        )
        for o, t, le, s, b in items
    ]


# What each parser raises for bytes that are not a commit-log message set;
# anything else it raises is a bug in that parser, not an answer.
_COMMITLOG_ERRORS: dict[str, tuple[type[BaseException], ...]] = {
    "kaitai": (EOFError, kaitaistruct.KaitaiStructError, UnicodeDecodeError),
    "construct": (construct.ConstructError, UnicodeDecodeError),
    "lbparse": (EnvelopeError,),
}


def commitlog_result(payload: bytes, parser: str) -> list[dict[str, Any]] | str:
    """`commitlog_entries`, or "bad_payload" when the parser rejects the bytes."""
    try:
        return commitlog_entries(payload, parser)
    except _COMMITLOG_ERRORS[parser]:
        return "bad_payload"
