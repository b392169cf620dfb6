"""The generations of Liftbridge's segment and index files, as the spec declares them.

A typed view of `lbparse_generated.storage_layouts` (written by `make
generate` from spec/segment.ksy and spec/segment_index.ksy): every struct
format and condition here comes from the spec.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import crc32c as _crc32c

from lbparse_generated.storage_layouts import INDEX_FORMATS, SEGMENT_FILES, SEGMENT_FORMATS

__all__ = [
    "SegmentFormat",
    "IndexFormat",
    "SEGMENT_FORMATS_BY_NAME",
    "INDEX_FORMATS_BY_NAME",
    "CURRENT",
    "by_recency",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "NAME_DIGITS",
    "REPLACEMENT_SUFFIXES",
]

CRCS: dict[str, Callable[[bytes], int]] = {"crc32c": _crc32c.crc32c, "crc32": zlib.crc32}


@dataclass(frozen=True)
class IndexFormat:
    """One generation of the `.index` entry.

    Attributes:
        name: The generation's name in the spec.
        id: Its number in the spec.
        entry: The struct of one entry.
        fields: The entry's field names, in struct order.
        doc: The spec's description of it.
    """

    name: str
    id: int
    entry: struct.Struct
    fields: tuple[str, ...]
    doc: str

    @property
    def has_timestamp(self) -> bool:
        """Whether its entries hold a timestamp."""
        return "timestamp" in self.fields


@dataclass(frozen=True)
class SegmentFormat:
    """One generation of the `.log` entry: header, body head, optional fields, CRC.

    Attributes:
        name: The generation's name in the spec.
        id: Its number in the spec.
        doc: The spec's description of it.
        since: The Liftbridge version that introduced it.
        recency: Its rank, 0 the newest (detection tries the newest first).
        crc_name: The CRC the body carries ("crc32c" or "crc32").
        crc: The function computing that CRC of bytes.
        header: The struct of the entry header.
        header_fields: The header's field names, in struct order.
        body_head: The struct of the body's fixed start (its CRC first).
        body_timestamp: The struct of the body's timestamp, None without one.
        timestamp_if: Of the magic byte: whether the body has the timestamp;
            None: always (when present).
        headers_if: Of the magic byte: whether the body has headers; None:
            always.
        index: The `.index` format of its generation.
        current_body: The body is commitlog.ksy's, which
            lbparse.codec.commitlog reads.
    """

    name: str
    id: int
    doc: str
    since: str
    recency: int
    crc_name: str
    crc: Callable[[bytes], int]
    header: struct.Struct
    header_fields: tuple[str, ...]
    body_head: struct.Struct
    body_timestamp: struct.Struct | None
    timestamp_if: Callable[[int], bool] | None  # of magic; None: always (when present)
    headers_if: Callable[[int], bool] | None  # of magic; None: always
    index: IndexFormat
    current_body: bool  # the body of commitlog.ksy: lbparse.codec.commitlog reads it

    @property
    def header_len(self) -> int:
        """Bytes of the entry header."""
        return self.header.size

    @property
    def crc_width(self) -> int:
        """Bytes of the body's CRC field (the CRC covers the body after it)."""
        return struct.calcsize(self.body_head.format[:2])

    def field_index(self, name: str) -> int | None:
        """The position of a header field, or None when the header has none so named.

        Args:
            name: A field name.

        Returns:
            Its index in `header_fields`, or None.
        """
        return self.header_fields.index(name) if name in self.header_fields else None

    def field_offset(self, name: str) -> int:
        """Where a field of the entry header starts.

        Args:
            name: A field of `header_fields`.

        Returns:
            Its byte offset in the header.

        Raises:
            ValueError: The header has no field so named.
        """
        i = self.header_fields.index(name)
        return struct.calcsize(self.header.format[: 1 + i])


def _index_format(name: str) -> IndexFormat:
    raw = INDEX_FORMATS[name]
    return IndexFormat(
        name,
        raw["id"],
        struct.Struct(raw["entry"]["format"]),
        tuple(raw["entry"]["fields"]),
        raw["doc"],
    )


INDEX_FORMATS_BY_NAME: dict[str, IndexFormat] = {n: _index_format(n) for n in INDEX_FORMATS}


def _segment_format(name: str) -> SegmentFormat:
    raw = SEGMENT_FORMATS[name]
    ts = raw["body_timestamp"]
    return SegmentFormat(
        name=name,
        id=raw["id"],
        doc=raw["doc"],
        since=raw["since"],
        recency=raw["recency"],
        crc_name=raw["crc"],
        crc=CRCS[raw["crc"]],
        header=struct.Struct(raw["header"]["format"]),
        header_fields=tuple(raw["header"]["fields"]),
        body_head=struct.Struct(raw["body_head"]["format"]),
        body_timestamp=struct.Struct(ts["format"]) if ts else None,
        timestamp_if=ts["if"] if ts else None,
        headers_if=raw["headers_if"],
        index=INDEX_FORMATS_BY_NAME[raw["index_format"]],
        current_body=raw["body_type"] == "liftbridge_commitlog::body",
    )


SEGMENT_FORMATS_BY_NAME: dict[str, SegmentFormat] = {n: _segment_format(n) for n in SEGMENT_FORMATS}


def by_recency() -> list[SegmentFormat]:
    """Every segment format, the newest first (what detection tries first).

    Returns:
        A new list of the SegmentFormats, by recency.
    """
    return sorted(SEGMENT_FORMATS_BY_NAME.values(), key=lambda f: f.recency)


CURRENT: SegmentFormat = by_recency()[0]
LOG_SUFFIX: str = SEGMENT_FILES["log"]
INDEX_SUFFIX: str = SEGMENT_FILES["index"]
NAME_DIGITS: int = SEGMENT_FILES["digits"]
REPLACEMENT_SUFFIXES: tuple[str, ...] = tuple(SEGMENT_FILES["replacement_suffixes"])
