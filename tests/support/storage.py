"""Segments, indexes and data directories made per the facts, for tests.

Entries of every generation are built with the construct declarations
generated from spec/segment.ksy (construct builds as well as parses), with
the generation's CRC filled in; indexes with spec/segment_index.ksy. No
byte layout is written here by hand.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crc32c

from lbparse.storage.formats import INDEX_FORMATS_BY_NAME, SEGMENT_FORMATS_BY_NAME
from lbparse_generated import construct_schema as cs
from lbparse_generated.storage_layouts import SEGMENT_FORMATS

CRC = {"crc32c": crc32c.crc32c, "crc32": zlib.crc32}
T0 = 1_700_000_000_000_000_000  # ns


@dataclass
class Msg:
    """What one stored message holds, whatever the generation."""

    offset: int
    timestamp: int = T0  # ns (the first generations keep milliseconds)
    leader_epoch: int = 3
    key: bytes | None = b"k"
    value: bytes | None = b"v"
    headers: list[tuple[str, bytes]] = field(
        default_factory=lambda: [("subject", b"s"), ("reply", b"")]
    )
    magic: int = 1
    attributes: int = 0


def _declaration(name: str) -> Any:
    """The construct Struct of a spec type name (`spec::type` or one of segment.ksy)."""
    if "::" in name:
        spec, _, sub = name.partition("::")
        return getattr(cs, f"{spec}__{sub}")
    return getattr(cs, f"liftbridge_segment__{name}")


def _lenval(b: bytes | None) -> tuple[int, bytes | None]:
    return (-1, None) if b is None else (len(b), b)


def body_fields(m: Msg, fmt_name: str) -> dict[str, Any]:
    raw = SEGMENT_FORMATS[fmt_name]
    klen, key = _lenval(m.key)
    vlen, value = _lenval(m.value)
    crc_field = raw["body_head"]["fields"][0]
    d: dict[str, Any] = {
        crc_field: 0,
        "magic": m.magic,
        "attributes": m.attributes,
        "key_len": klen,
        "key": key,
        "value_len": vlen,
        "value": value,
        "header_count": len(m.headers),
        "headers": [
            dict(key_len=len(k.encode()), key=k.encode(), value_len=len(v), value=v)
            for k, v in m.headers
        ],
    }
    fmt = SEGMENT_FORMATS_BY_NAME[fmt_name]
    if fmt.body_timestamp is not None:
        present = fmt.timestamp_if is None or fmt.timestamp_if(m.magic)
        d["timestamp_ms"] = m.timestamp // 1_000_000 if present else None
    if fmt.headers_if is not None and not fmt.headers_if(m.magic):
        d["header_count"] = None
        d["headers"] = None
    return d


def build_entry(m: Msg, fmt_name: str, *, crc_ok: bool = True) -> bytes:
    """One entry of generation `fmt_name`, its CRC right (or deliberately wrong)."""
    raw = SEGMENT_FORMATS[fmt_name]
    body_decl = _declaration(raw["body_type"])
    fields = body_fields(m, fmt_name)
    body = body_decl.build(fields)
    crc_field = raw["body_head"]["fields"][0]
    fields[crc_field] = CRC[raw["crc"]](body[4:]) ^ (0 if crc_ok else 1)
    entry = {
        "offset": m.offset,
        "timestamp": m.timestamp,
        "leader_epoch": m.leader_epoch,
        "size": len(body),
        "body": fields,
    }
    return _declaration(raw["entry_type"]).build(entry)


def build_segment(msgs: list[Msg], fmt_name: str = "v2020_02") -> bytes:
    return b"".join(build_entry(m, fmt_name) for m in msgs)


def build_index(
    msgs: list[Msg],
    segment: bytes,
    base_offset: int,
    fmt_name: str = "v2020_02",
    preallocate: int = 0,
) -> bytes:
    """The index of a segment built by build_segment, zero-padded to `preallocate` bytes."""
    from lbparse.storage.segment import read_segment_bytes

    fmt = SEGMENT_FORMATS_BY_NAME[fmt_name]
    reading = read_segment_bytes(segment, fmt=fmt)
    decl = getattr(cs, f"liftbridge_segment_index__{_index_type(fmt.index.name)}")
    out = b""
    for pos, e in reading:
        out += decl.build(
            dict(
                rel_offset=e.offset - base_offset,
                timestamp=e.timestamp,
                position=pos,
                size=fmt.header_len + (e.size or 0),
            )
        )
    return out + bytes(max(0, preallocate - len(out)))


def _index_type(index_format: str) -> str:
    from lbparse_generated.storage_layouts import INDEX_FORMATS

    return INDEX_FORMATS[index_format]["entry_type"]


def messages(n: int, first: int = 0, epoch: int = 3) -> list[Msg]:
    return [
        Msg(
            first + i,
            T0 + (first + i) * 1_000_000,
            epoch,
            f"k{first + i}".encode(),
            f'{{"i": {first + i}}}'.encode(),
        )
        for i in range(n)
    ]


def write_partition(
    folder: Path,
    segments: list[list[Msg]],
    *,
    hw: int | None = None,
    epochs: list[tuple[int, int]] | None = None,
    fmt_name: str = "v2020_02",
    preallocate_last: int = 0,
) -> Path:
    """A partition directory: segments (and their indexes) and checkpoints."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, msgs in enumerate(segments):
        base = msgs[0].offset if msgs else 0
        seg = build_segment(msgs, fmt_name)
        (folder / f"{base:020d}.log").write_bytes(seg)
        pre = preallocate_last if i == len(segments) - 1 else 0
        (folder / f"{base:020d}.index").write_bytes(build_index(msgs, seg, base, fmt_name, pre))
    if hw is not None:
        (folder / "replication-offset-checkpoint").write_text(str(hw))
    if epochs is not None:
        lines = "".join(f"{e} {s}\n" for e, s in epochs)
        (folder / "leader-epoch-checkpoint").write_text(f"0\n{len(epochs)}\n{lines}")
    return folder


__all__ = [
    "Msg",
    "build_entry",
    "build_segment",
    "build_index",
    "messages",
    "write_partition",
    "INDEX_FORMATS_BY_NAME",
]
