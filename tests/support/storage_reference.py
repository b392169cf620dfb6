"""The generated parsers of the on-disk specs, wrapped to answer in lbparse's terms.

spec/segment.ksy, segment_index.ksy, checkpoint.ksy and bbolt.ksy give a
Kaitai parser and a construct declaration each; lbparse.storage reads the
same files with its own fast code. The differential tests run all three on
the same bytes through these wrappers, which give plain values (or "bad"
when a parser rejects the bytes) so that results compare field by field.
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

import construct
import kaitaistruct
from kaitaistruct import KaitaiStream

from lbparse.codec.commitlog import header_items
from lbparse.storage import bbolt
from lbparse.storage.errors import StorageError
from lbparse.storage.formats import INDEX_FORMATS_BY_NAME, SEGMENT_FORMATS_BY_NAME
from lbparse.storage.index import read_index_bytes
from lbparse.storage.segment import read_segment_bytes
from lbparse_generated import construct_schema as cs
from lbparse_generated.kaitai.bbolt_page import BboltPage
from lbparse_generated.kaitai.liftbridge_checkpoint import LiftbridgeCheckpoint
from lbparse_generated.kaitai.liftbridge_segment import LiftbridgeSegment
from lbparse_generated.kaitai.liftbridge_segment_index import LiftbridgeSegmentIndex

PARSERS = ("kaitai", "construct", "lbparse")
BAD = "bad"
# What each generated parser raises for bytes that are not what it parses;
# anything else it raises is a bug in that parser, not an answer.
ERRORS: dict[str, tuple[type[BaseException], ...]] = {
    "kaitai": (EOFError, kaitaistruct.KaitaiStructError, UnicodeDecodeError, ValueError),
    "construct": (construct.ConstructError, UnicodeDecodeError),
}
NS_PER_MS = 1_000_000


def _ks(data: bytes) -> KaitaiStream:
    return KaitaiStream(BytesIO(data))


def _get(obj: Any, name: str) -> Any:
    """A field of a Kaitai object or construct container; None where it is absent."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _plain(v: Any) -> Any:
    return bytes(v) if isinstance(v, (bytes, bytearray)) else v


# --- segments ----------------------------------------------------------------


def _entry_dict(e: Any) -> dict[str, Any]:
    b = _get(e, "body")
    ts = _get(e, "timestamp")
    if ts is None:
        ms = _get(b, "timestamp_ms")
        ts = None if ms is None else ms * NS_PER_MS
    crc = _get(b, "crc32c") if _get(b, "crc32c") is not None else _get(b, "crc32")
    headers = _get(b, "headers")
    # The spec's offset is a u8; Liftbridge (and lbparse) read those 8 bytes as an int64.
    offset = _get(e, "offset")
    offset = offset - (1 << 64) if offset >= 1 << 63 else offset
    return dict(
        offset=offset,
        timestamp=ts,
        leader_epoch=_get(e, "leader_epoch"),
        size=_get(e, "size"),
        crc=crc,
        magic=_get(b, "magic"),
        attributes=_get(b, "attributes"),
        key=_plain(_get(b, "key")) if _get(b, "key_len") != -1 else None,
        value=_plain(_get(b, "value")) if _get(b, "value_len") != -1 else None,
        headers=[(_plain(_get(h, "key")), _plain(_get(h, "value"))) for h in headers or []],
    )


def _entries_field(fmt_name: str) -> str:
    return {
        "v2018_04": "entries_v2018_04",
        "v2018_06": "entries_v2018_06",
        "v2018_08": "entries_v2018_08",
    }.get(fmt_name, "entries")


def segment_entries(data: bytes, fmt_name: str, parser: str) -> list[dict[str, Any]] | str:
    """The entries of a segment's bytes in generation `fmt_name`, or BAD."""
    fmt = SEGMENT_FORMATS_BY_NAME[fmt_name]
    if parser == "lbparse":
        reading = read_segment_bytes(data, fmt=fmt)
        if reading.damage:
            return BAD
        has_ts = fmt.field_index("timestamp") is not None
        out = []
        for e in reading.entries:
            ts: int | None = e.timestamp
            if not has_ts and (
                fmt.body_timestamp is None
                or (fmt.timestamp_if is not None and not fmt.timestamp_if(e.magic))
            ):
                ts = None
            out.append(
                dict(
                    offset=e.offset,
                    timestamp=ts,
                    leader_epoch=e.leader_epoch
                    if fmt.field_index("leader_epoch") is not None
                    else None,
                    size=e.size,
                    crc=e.crc32c,
                    magic=e.magic,
                    attributes=e.attributes,
                    key=e.key,
                    value=e.value,
                    headers=header_items(e),
                )
            )
        return out
    try:
        if parser == "kaitai":
            seg = LiftbridgeSegment(LiftbridgeSegment.EntryFormat(fmt.id), _ks(data))
        else:
            seg = cs.liftbridge_segment.parse(data, format=fmt.id)
        return [_entry_dict(e) for e in _get(seg, _entries_field(fmt_name))]
    except ERRORS[parser]:
        return BAD


# --- indexes -----------------------------------------------------------------


def index_entries(data: bytes, fmt_name: str, parser: str) -> list[dict[str, Any]] | str:
    """Every whole entry of an index (zero ones too), or BAD."""
    fmt = INDEX_FORMATS_BY_NAME[fmt_name]
    whole = data[: len(data) // fmt.entry.size * fmt.entry.size]
    if parser == "lbparse":
        reading = read_index_bytes(whole, fmt=fmt)
        rows = reading.entries + [e for e in _zero_rows(reading, len(whole))]
        rows = sorted(rows, key=lambda e: e.index_position)
        return [{k: getattr(e, k) for k in fmt.fields} for e in rows]
    try:
        if parser == "kaitai":
            idx = LiftbridgeSegmentIndex(LiftbridgeSegmentIndex.IndexFormat(fmt.id), _ks(whole))
        else:
            idx = cs.liftbridge_segment_index.parse(whole, format=fmt.id)
    except ERRORS[parser]:
        return BAD
    rows = _get(idx, "entries") if fmt_name != "v2018_04" else _get(idx, "entries_v2018_04")
    return [{k: _get(r, k) for k in fmt.fields} for r in rows]


def _zero_rows(reading: Any, length: int) -> list[Any]:
    """The entries lbparse does not list (the zero tail and what follows it)."""
    from lbparse.storage.index import IndexEntry

    width = reading.format.entry.size
    listed = {e.index_position for e in reading.entries}
    after = {e.index_position: e for e in reading.after_tail}
    out = []
    for at in range(0, length, width):
        if at in listed:
            continue
        if at in after:
            out.append(after[at])
        else:  # a zero entry: every field 0 but the relative offset, which is 0 too here
            out.append(
                IndexEntry(
                    at,
                    0,
                    0,
                    0,
                    0 if reading.format.has_timestamp else None,
                    0 if reading.format.has_timestamp else None,
                )
            )
    return out


# --- checkpoints -------------------------------------------------------------


def checkpoint(data: bytes, kind: str, parser: str) -> dict[str, Any] | str:
    """A checkpoint file's fields as text, or BAD."""
    k = LiftbridgeCheckpoint.CheckpointKind[kind]
    try:
        if parser == "kaitai":
            cp: Any = LiftbridgeCheckpoint(k, _ks(data))
        else:
            cp = cs.liftbridge_checkpoint.parse(data, kind=k.value)
    except ERRORS[parser]:
        return BAD
    return {
        "high_watermark": _get(cp, "high_watermark"),
        "version": _get(cp, "version"),
        "count": _get(cp, "count"),
        "epochs": [
            (_get(e, "leader_epoch"), _get(e, "start_offset")) for e in _get(cp, "epochs") or []
        ],
    }


# --- bbolt pages -------------------------------------------------------------


def bbolt_page(data: bytes, parser: str) -> dict[str, Any] | str:
    """One page's header, meta, elements (keys and values), freelist and the
    buckets of its leaf elements (their inline pages read too), or BAD.

    construct reads a leaf's nested bucket eagerly; Kaitai lazily: the
    wrapper reads it for Kaitai and for lbparse as well.
    """
    if parser == "lbparse":
        try:
            return _lb_page(data)
        except StorageError:
            return BAD
    try:
        page: Any = BboltPage(_ks(data)) if parser == "kaitai" else cs.bbolt_page.parse(data)
        return _page_dict(page)
    except ERRORS[parser]:
        return BAD


def _lb_page(data: bytes) -> dict[str, Any]:
    p = bbolt.parse_page(data)
    meta = None
    if p.meta is not None:
        m = p.meta
        if m.magic != bbolt.BBOLT["meta_magic"] or m.version != bbolt.BBOLT["meta_version"]:
            raise StorageError("meta magic or version")
        meta = dict(
            page_size=m.page_size,
            flags=m.flags,
            root=m.root,
            sequence=m.sequence,
            freelist=m.freelist,
            pgid=m.pgid,
            txid=m.txid,
            checksum=m.checksum,
        )
    elements = [
        (e.flags, e.key, e.value) if e.pgid is None else (e.key, e.pgid) for e in p.elements
    ]
    buckets = []
    for e in p.elements:
        if e.pgid is None and e.is_bucket:
            if len(e.value) < bbolt.BUCKET.size:
                raise StorageError("bucket value too short")
            root, seq = bbolt.BUCKET.unpack_from(e.value)
            inline = _lb_page(e.value[bbolt.BUCKET.size :]) if root == 0 else None
            buckets.append((root, seq, inline))
    return dict(
        id=p.id,
        flags=p.flags,
        count=p.count,
        overflow=p.overflow,
        meta=meta,
        elements=elements,
        freelist=p.freelist,
        buckets=buckets,
    )


def _page_dict(page: Any) -> dict[str, Any]:
    flags = int(_get(page, "flags"))
    m = _get(page, "meta")
    meta = (
        None
        if m is None
        else dict(
            page_size=_get(m, "page_size"),
            flags=_get(m, "flags"),
            root=_get(_get(m, "root"), "root"),
            sequence=_get(_get(m, "root"), "sequence"),
            freelist=_get(m, "freelist"),
            pgid=_get(m, "pgid"),
            txid=_get(m, "txid"),
            checksum=_get(m, "checksum"),
        )
    )
    elements: list[Any] = []
    buckets = []
    for e in _get(page, "branch_elements") or []:
        elements.append((_plain(_get(e, "key")), _get(e, "pgid")))
    for e in _get(page, "leaf_elements") or []:
        elements.append((_get(e, "flags"), _plain(_get(e, "key")), _plain(_get(e, "value"))))
        if _get(e, "is_bucket"):
            b = _get(e, "bucket")
            h = _get(b, "header")
            inline = _get(b, "inline_page")
            buckets.append(
                (
                    _get(h, "root"),
                    _get(h, "sequence"),
                    None if inline is None else _page_dict(inline),
                )
            )
    free = _get(page, "freelist_ids")
    if free is None:
        free = _get(page, "freelist_ids_ext")
    return dict(
        id=_get(page, "id"),
        flags=flags,
        count=_get(page, "count"),
        overflow=_get(page, "overflow"),
        meta=meta,
        elements=elements,
        freelist=None if free is None else list(free),
        buckets=buckets,
    )
