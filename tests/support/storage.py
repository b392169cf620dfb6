"""Liftbridge's files on disk, for tests: data directories made per the facts,
crafted raft.db files, and the shared sample data directories.

Segments, indexes and data directories: entries of every generation are
built with the construct declarations generated from spec/segment.ksy
(construct builds as well as parses), with the generation's CRC filled in;
indexes with spec/segment_index.ksy. No byte layout is written here by hand.

Crafted bbolt files (raft.db) for the hardening tests: pages laid out as
spec/bbolt.ksy says (lbparse_generated.storage_layouts), written here by
hand, so that a test can make any shape a damaged or hostile file has:
keys that share one value, sparse files, deep chains, pages reached twice.

    data = raft_db({4: leaf(4, [(0, key(1), log_value(1))])}, logs_root=4, pgid=5)

Fixtures of the on-disk tests: the shared sample data directories (the
`short` run's), extracted once; `bin/lbtruth`, Liftbridge's own reader.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crc32c
import msgpack
import pytest

from lbparse.storage.bbolt import BRANCH, BUCKET, LEAF, META, PAGE_HEADER, PAGE_TYPES, fnv1a64
from lbparse.storage.formats import INDEX_FORMATS_BY_NAME, SEGMENT_FORMATS_BY_NAME
from lbparse_generated import construct_schema as cs
from lbparse_generated.storage_layouts import BBOLT, SEGMENT_FORMATS
from support.shared import LIFTBRIDGE

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


# ----------------------------------------------------------------------
# Crafted bbolt files (raft.db) for the hardening tests: pages laid out as
# spec/bbolt.ksy says (lbparse_generated.storage_layouts), written here by
# hand, so that a test can make any shape a damaged or hostile file has:
# keys that share one value, sparse files, deep chains, pages reached twice.
#
#     data = raft_db({4: leaf(4, [(0, key(1), log_value(1))])}, logs_root=4, pgid=5)

PAGE = 4096
U64_BE = struct.Struct(">Q")


def key(index: int) -> bytes:
    """A `logs` key: the index as a big-endian u64 (raft-boltdb)."""
    return U64_BE.pack(index)


def log_value(index: int, term: int = 1, data: bytes | None = None, typ: int = 0) -> bytes:
    """A stored hashicorp/raft Log, msgpack as go-msgpack writes it."""
    return msgpack.packb(
        {"Data": data, "Extensions": None, "Index": index, "Term": term, "Type": typ},
        use_bin_type=False,
    )


def _meta_page(pgid: int, root: int, high: int, txid: int) -> bytes:
    body = bytearray(
        META.pack(
            BBOLT["meta_magic"],
            BBOLT["meta_version"],
            PAGE,
            0,
            root,
            0,
            BBOLT["constants"]["no_freelist"],
            high,
            txid,
            0,
        )
    )
    checksum = fnv1a64(bytes(body[: BBOLT["meta_checksummed"]]))
    body[-8:] = struct.pack("<Q", checksum)
    page = PAGE_HEADER.pack(pgid, PAGE_TYPES["meta"], 0, 0) + bytes(body)
    return page.ljust(PAGE, b"\0")


def _leaf_body(items: list[tuple[int, bytes, bytes]]) -> bytes:
    head = PAGE_HEADER.size + len(items) * LEAF.size
    elems, data = bytearray(), bytearray()
    for i, (flags, k, v) in enumerate(items):
        at = PAGE_HEADER.size + i * LEAF.size
        elems += LEAF.pack(flags, head + len(data) - at, len(k), len(v))
        data += k + v
    return bytes(elems + data)


def leaf(pgid: int, items: Iterable[tuple[int, bytes, bytes]], *, size: int = 0) -> bytes:
    """A leaf page of (flags, key, value) elements, with as many overflow pages
    as its data needs (or `size` bytes in all, whichever is more)."""
    items = list(items)
    return _page(pgid, PAGE_TYPES["leaf"], len(items), _leaf_body(items), size)


def aliased_leaf(pgid: int, count: int, k: bytes, v: bytes) -> bytes:
    """A leaf page whose `count` elements all point at one key and value."""
    head = PAGE_HEADER.size + count * LEAF.size
    elems = b"".join(
        LEAF.pack(0, head - (PAGE_HEADER.size + i * LEAF.size), len(k), len(v))
        for i in range(count)
    )
    return _page(pgid, PAGE_TYPES["leaf"], count, elems + k + v, 0)


def branch(pgid: int, children: Iterable[tuple[bytes, int]]) -> bytes:
    """A branch page of (first key, child page id) elements."""
    children = list(children)
    head = PAGE_HEADER.size + len(children) * BRANCH.size
    elems, data = bytearray(), bytearray()
    for i, (k, child) in enumerate(children):
        at = PAGE_HEADER.size + i * BRANCH.size
        elems += BRANCH.pack(head + len(data) - at, len(k), child)
        data += k
    return _page(pgid, PAGE_TYPES["branch"], len(children), bytes(elems + data), 0)


def _page(pgid: int, flags: int, count: int, body: bytes, size: int) -> bytes:
    length = max(PAGE_HEADER.size + len(body), size, PAGE)
    pages = -(-length // PAGE)
    return (PAGE_HEADER.pack(pgid, flags, count, pages - 1) + body).ljust(pages * PAGE, b"\0")


def inline_bucket(items: Iterable[tuple[int, bytes, bytes]]) -> bytes:
    """A bucket value holding its (small) leaf page inline."""
    items = list(items)
    return (
        BUCKET.pack(0, 0)
        + PAGE_HEADER.pack(0, PAGE_TYPES["leaf"], len(items), 0)
        + _leaf_body(items)
    )


def stable(term: int = 2, cand: bytes = b"node1") -> bytes:
    """The `conf` bucket's value: raft-boltdb's stable store, inline."""
    return inline_bucket(
        [
            (0, b"CurrentTerm", U64_BE.pack(term)),
            (0, b"LastVoteCand", cand),
            (0, b"LastVoteTerm", U64_BE.pack(term)),
        ]
    )


def raft_db(
    pages: dict[int, bytes], logs_root: int, *, conf: bytes | None = None, pgid: int | None = None
) -> bytes:
    """A raft.db: metas at 0 and 1, the root bucket at page 2 (conf inline,
    logs rooted at `logs_root`), then `pages` by page id (gaps zeros)."""
    root = leaf(
        2,
        [(1, b"conf", stable() if conf is None else conf), (1, b"logs", BUCKET.pack(logs_root, 0))],
    )
    every = {0: _meta_page(0, 2, 0, 1), 1: _meta_page(1, 2, 0, 2), 2: root, **pages}
    end = max(p * PAGE + len(b) for p, b in every.items())
    high = pgid if pgid is not None else -(-end // PAGE)
    every[0], every[1] = _meta_page(0, 2, high, 1), _meta_page(1, 2, high, 2)
    out = bytearray(end)
    for p, b in every.items():
        out[p * PAGE : p * PAGE + len(b)] = b
    return bytes(out)


def write_sparse(path: str, head: bytes, size: int) -> None:
    """`head`, then a hole to `size` bytes (truncate: no blocks written)."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


# ----------------------------------------------------------------------
# Fixtures of the on-disk tests: the shared sample data directories, extracted once.

SAMPLE = LIFTBRIDGE / "samples" / "data-short.tar.gz"
LISTING = LIFTBRIDGE / "samples" / "data-short.listing.txt"
LBTRUTH = LIFTBRIDGE / "bin" / "lbtruth"


@pytest.fixture(scope="session")
def short_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The three data directories of the shared `short` run (node1..node3)."""
    out = tmp_path_factory.mktemp("data-short")
    yield extract_short_data(out)
    shutil.rmtree(out, ignore_errors=True)


def extract_short_data(into: Path) -> Path:
    """INTO/data-short: the `short` run's data directories, from the shared sample."""
    if not SAMPLE.is_file():
        pytest.skip(f"shared material missing: {SAMPLE} (set LBPARSE_SHARED)")
    with tarfile.open(SAMPLE) as tar:
        tar.extractall(into, filter="data")
    return into / "data-short"


def lbtruth(*args: str, panics: bool = False) -> list[str]:
    """Liftbridge's own reading (bin/lbtruth), line by line; skip where it is missing.

    lbtruth panics where upstream code panics (damaged data); with
    `panics`, the lines it wrote before are the answer."""
    if not LBTRUTH.is_file():
        pytest.skip(f"shared material missing: {LBTRUTH}")
    res = subprocess.run([str(LBTRUTH), *args], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 or (panics and "panic" in res.stderr), res.stderr
    return res.stdout.splitlines()
