"""Crafted bbolt files (raft.db) for the hardening tests: pages laid out as
spec/bbolt.ksy says (lbparse_generated.storage_layouts), written here by
hand, so that a test can make any shape a damaged or hostile file has:
keys that share one value, sparse files, deep chains, pages reached twice.

    data = raft_db({4: leaf(4, [(0, key(1), log_value(1))])}, logs_root=4, pgid=5)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import msgpack

from lbparse.storage.bbolt import BRANCH, BUCKET, LEAF, META, PAGE_HEADER, PAGE_TYPES, fnv1a64
from lbparse_generated.storage_layouts import BBOLT

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
