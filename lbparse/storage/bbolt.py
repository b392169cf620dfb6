"""A read-only bbolt reader: pages, meta, and the key/value pairs of buckets.

Liftbridge's `raft/raft.db` is a bbolt file (spec/bbolt.ksy). Every layout
fact here (page header, meta, element structs, flags, constants) comes from
`lbparse_generated.storage_layouts`. The reader picks the current meta page
(valid magic, version and checksum, highest txid), walks a bucket's B+tree
from its root page through branch pages to its leaves, and yields the
pairs in key order. A page that is not what its parent says (wrong id,
unknown type, past the end of the file, an element pointing outside its
page, a loop, a page reached twice, a tree past the depth limit) becomes a
`Finding` and its subtree is skipped; the rest is read.

Nothing is copied out of the file: `BoltDB.open` maps it (mmap), pages
and elements are `memoryview` slices of it, so a sparse file or keys that
all point at one large value cost only what is read of them. What keeps
a key or a value (lbparse.storage.raftdb) copies it, within its budget.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lbparse.storage.errors import Finding, StorageError
from lbparse_generated.storage_layouts import BBOLT

__all__ = ["BoltDB", "Meta", "Page", "Element", "parse_page", "fnv1a64"]

PAGE_HEADER = struct.Struct(BBOLT["page_header"]["format"])
_OVERFLOW = BBOLT["page_header"]["fields"].index("overflow")
META = struct.Struct(BBOLT["meta"]["format"])
META_FIELDS: tuple[str, ...] = BBOLT["meta"]["fields"]
BRANCH = struct.Struct(BBOLT["branch_element"]["format"])
LEAF = struct.Struct(BBOLT["leaf_element"]["format"])
BUCKET = struct.Struct(BBOLT["bucket_header"]["format"])
PGID = struct.Struct(BBOLT["freelist_id"])
PAGE_TYPES: dict[str, int] = BBOLT["page_types"]
TYPE_NAMES: dict[int, str] = {v: k for k, v in PAGE_TYPES.items()}
BUCKET_FLAG: int = BBOLT["leaf_flags"]["bucket"]
FREELIST_OVERFLOW: int = BBOLT["constants"]["freelist_count_overflow"]
NO_FREELIST: int = BBOLT["constants"]["no_freelist"]
# Where bbolt's first meta page says nothing usable, the page size is
# looked for among those an OS uses.
PAGE_SIZES = (4096, 8192, 16384, 32768, 65536, 1024, 2048)
# A limit, not a fact of bbolt: a tree of 4 KiB pages holding 2^64 keys is
# well under 20 levels; a deeper one is read down to here and said.
MAX_DEPTH = 64

# What a BoltDB reads: bytes, or a file's map (BoltDB.open).
Buffer = bytes | bytearray | memoryview | mmap.mmap


def fnv1a64(data: bytes | memoryview) -> int:
    """FNV-1a 64 (hash/fnv New64a), the checksum of a bbolt meta page.

    Args:
        data: The bytes hashed.

    Returns:
        The 64-bit hash.
    """
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


@dataclass(frozen=True)
class Meta:
    """A meta page: the database's root bucket, freelist and transaction.

    Attributes:
        page: The page it was read from (0 or 1).
        magic: The magic number field.
        version: The file format version.
        page_size: The page size in bytes.
        flags: The meta's flags.
        root: The page id of the root bucket's root page.
        sequence: The root bucket's sequence.
        freelist: The page id of the freelist (NO_FREELIST: none).
        pgid: The high water mark: pages in use are below it.
        txid: The transaction id; the highest valid meta is current.
        checksum: The checksum field.
        checksum_ok: Whether the checksum matches the meta's bytes.
    """

    page: int
    magic: bytes
    version: int
    page_size: int
    flags: int
    root: int
    sequence: int
    freelist: int
    pgid: int
    txid: int
    checksum: int
    checksum_ok: bool

    @property
    def valid(self) -> bool:
        """Whether magic, version and checksum are bbolt's."""
        return (
            self.magic == BBOLT["meta_magic"]
            and self.version == BBOLT["meta_version"]
            and self.checksum_ok
        )


@dataclass(frozen=True)
class Element:
    """One element of a branch page (key, child pgid) or leaf page (flags, key, value).

    Key and value are views of the page (bytes(...) copies them).

    Attributes:
        key: The element's key, a view of the page.
        value: A leaf element's value (a bucket's header for a bucket), a
            view of the page.
        flags: A leaf element's flags (BUCKET_FLAG: a sub-bucket).
        pgid: A branch element's child page id, else None.
    """

    key: memoryview
    value: memoryview = memoryview(b"")
    flags: int = 0
    pgid: int | None = None

    @property
    def is_bucket(self) -> bool:
        """Whether the leaf element is a sub-bucket (its value the bucket's header)."""
        return bool(self.flags & BUCKET_FLAG)


@dataclass
class Page:
    """One page as its header and elements say.

    Attributes:
        id: The page id its header gives.
        flags: Its type flags (see PAGE_TYPES, and `type`).
        count: The element (or freelist id) count its header gives.
        overflow: The pages that follow it as its overflow.
        elements: A branch or leaf page's elements.
        meta: A meta page's Meta, else None.
        freelist: A freelist page's page ids, else None.
        problems: What is wrong with the page that does not stop it being read.
    """

    id: int
    flags: int
    count: int
    overflow: int
    elements: list[Element] = field(default_factory=list)
    meta: Meta | None = None
    freelist: list[int] | None = None
    # What is wrong with the page that does not stop it being read.
    problems: list[str] = field(default_factory=list)

    @property
    def type(self) -> str:
        """The page type's name (meta, branch, leaf, freelist), or `unknown 0x..`."""
        return TYPE_NAMES.get(self.flags, f"unknown 0x{self.flags:x}")


def _meta(buf: memoryview, at: int, page: int) -> Meta:
    values = dict(zip(META_FIELDS, META.unpack_from(buf, at)))
    checked = buf[at : at + BBOLT["meta_checksummed"]]
    return Meta(
        page,
        values["magic"],
        values["version"],
        values["page_size"],
        values["flags"],
        values["root.root"],
        values["root.sequence"],
        values["freelist"],
        values["pgid"],
        values["txid"],
        values["checksum"],
        fnv1a64(checked) == values["checksum"],
    )


def parse_page(source: Buffer, start: int = 0, end: int | None = None) -> Page:
    """The page at source[start:end] (a page and its overflow, or an inline page).

    Its elements are views of `source`.

    Args:
        source: The bytes (or map) holding the page.
        start: The page's first byte in `source`.
        end: Just past the page's last byte (default: the end of `source`).

    Returns:
        The Page, with its elements, meta or freelist as its type says.

    Raises:
        StorageError: An element or the page's data would lie outside
            [start, end) (position in `source`; kind bad_page).
    """
    buf = source if isinstance(source, memoryview) else memoryview(source)
    end = len(buf) if end is None else end
    if end - start < PAGE_HEADER.size:
        raise StorageError(
            "bad_page",
            f"{end - start} bytes, a page header needs {PAGE_HEADER.size}",
            position=start,
        )
    pid, flags, count, overflow = PAGE_HEADER.unpack_from(buf, start)
    page = Page(pid, flags, count, overflow)
    data = start + PAGE_HEADER.size
    if flags == PAGE_TYPES["meta"]:
        _need(data + META.size, end, start, "the meta page body")
        page.meta = _meta(buf, data, pid)
    elif flags == PAGE_TYPES["branch"]:
        page.elements = _branch_elements(buf, data, end, count)
    elif flags == PAGE_TYPES["leaf"]:
        page.elements = _leaf_elements(buf, data, end, count)
        _overlap(
            page,
            sum(len(e.key) + len(e.value) for e in page.elements),
            end - data - count * LEAF.size,
        )
    elif flags == PAGE_TYPES["freelist"]:
        page.freelist = _freelist(buf, data, end, count)
    return page


def _need(stop: int, end: int, at: int, what: str) -> None:
    if stop > end:
        raise StorageError(
            "bad_page", f"{what} runs past the end of its page ({stop} > {end})", position=at
        )


def _overlap(page: Page, claimed: int, room: int) -> None:
    """bbolt writes each element's key and value once, one after another
    (node.write): elements claiming more bytes than the page holds share them."""
    if claimed > room:
        page.problems.append(
            f"its {page.count} elements claim {claimed} bytes of keys and "
            f"values, the page holds {room}: they overlap (bbolt writes "
            "each once)"
        )


def _branch_elements(buf: memoryview, data: int, end: int, count: int) -> list[Element]:
    _need(data + count * BRANCH.size, end, data, f"{count} branch elements")
    out = []
    for i in range(count):
        at = data + i * BRANCH.size
        pos, ksize, pgid = BRANCH.unpack_from(buf, at)
        _need(at + pos + ksize, end, at, f"branch element {i}'s key")
        out.append(Element(buf[at + pos : at + pos + ksize], pgid=pgid))
    return out


def _leaf_elements(buf: memoryview, data: int, end: int, count: int) -> list[Element]:
    _need(data + count * LEAF.size, end, data, f"{count} leaf elements")
    out = []
    for i in range(count):
        at = data + i * LEAF.size
        flags, pos, ksize, vsize = LEAF.unpack_from(buf, at)
        k = at + pos
        _need(k + ksize + vsize, end, at, f"leaf element {i}'s key and value")
        out.append(Element(buf[k : k + ksize], buf[k + ksize : k + ksize + vsize], flags))
    return out


def _freelist(buf: memoryview, data: int, end: int, count: int) -> list[int]:
    if count == FREELIST_OVERFLOW:
        _need(data + PGID.size, end, data, "the freelist count")
        count = PGID.unpack_from(buf, data)[0]
        data += PGID.size
    _need(data + count * PGID.size, end, data, f"{count} freelist ids")
    return [PGID.unpack_from(buf, data + i * PGID.size)[0] for i in range(count)]


class BoltDB:
    """A bbolt file, read where its pages say; `findings` lists what could not be read.

    Args:
        data: The file's bytes (or its map: `BoltDB.open`).
        path: How findings and errors name the file.

    Raises:
        StorageError: Neither meta page is valid (magic, version and
            checksum; kind bad_page).
    """

    def __init__(self, data: Buffer, path: str = "<bytes>") -> None:
        self.data = data if isinstance(data, memoryview) else memoryview(data)
        self.path = path
        self.findings: list[Finding] = []
        self.metas = self._read_metas()
        valid = [m for m in self.metas if m.valid]
        if not valid:
            raise StorageError(
                "bad_page",
                "no valid bbolt meta page (magic, version and checksum of pages 0 and 1)",
                path=path,
                position=0,
            )
        self.meta = max(valid, key=lambda m: m.txid)
        self.page_size = self.meta.page_size

    @classmethod
    def open(cls, path: str | Path) -> BoltDB:
        """Open a bbolt file, mapped, not read.

        Only the pages walked are paged in (a sparse file's holes never are).

        Args:
            path: The bbolt file.

        Returns:
            The BoltDB of the file.

        Raises:
            StorageError: As the class does.
            OSError: The file cannot be opened.
        """
        return cls(map_file(path), str(path))

    def _read_metas(self) -> list[Meta]:
        """Pages 0 and 1; page 1 sits one page size in, which page 0 says (or a guess)."""
        metas = []
        first = self._meta_at(0)
        if first is not None:
            metas.append(first)
        if first is None or not first.valid:
            self._finding(0, "meta page 0 is not valid (magic, version or checksum)")
        sizes = [first.page_size] if first is not None and first.valid else list(PAGE_SIZES)
        for size in sizes:
            second = self._meta_at(size)
            if second is not None and second.valid and second.page_size == size:
                metas.append(second)
                break
        else:
            self._finding(sizes[0], "meta page 1 is not valid (magic, version or checksum)")
        return metas

    def _meta_at(self, at: int) -> Meta | None:
        if at + PAGE_HEADER.size + META.size > len(self.data):
            return None
        try:
            page = parse_page(self.data, at, at + PAGE_HEADER.size + META.size)
        except StorageError:
            return None
        return page.meta

    def _finding(self, position: int | None, message: str) -> None:
        self.findings.append(Finding(self.path, position, "bad_page", message))

    def page(self, pgid: int) -> Page:
        """Page `pgid` with its overflow pages.

        Args:
            pgid: The page id.

        Returns:
            The Page, its elements views of the file.

        Raises:
            StorageError: The page is past the end of the file, does not parse,
                or says it is another page (kind bad_page).
        """
        start = pgid * self.page_size
        if start + PAGE_HEADER.size > len(self.data):
            raise StorageError(
                "bad_page",
                f"page {pgid} is past the end of the file",
                path=self.path,
                position=start,
            )
        overflow = PAGE_HEADER.unpack_from(self.data, start)[_OVERFLOW]
        end = min(len(self.data), start + (overflow + 1) * self.page_size)
        try:
            page = parse_page(self.data, start, end)
        except StorageError as exc:
            raise StorageError(
                "bad_page", f"page {pgid}: {exc.detail}", path=self.path, position=exc.position
            ) from None
        if page.id != pgid:
            raise StorageError(
                "bad_page",
                f"page {pgid} says it is page {page.id}",
                path=self.path,
                position=start,
            )
        return page

    def pages(self) -> Iterator[tuple[int, Page | StorageError]]:
        """Every page in use, in order.

        Up to the meta's high water mark; overflow pages are folded in their page.

        Yields:
            (pgid, the Page), or (pgid, the StorageError) for a page that is not
            readable (the next page is tried then).
        """
        n = min(len(self.data) // self.page_size, self.meta.pgid)
        pgid = 0
        while pgid < n:
            try:
                page = self.page(pgid)
            except StorageError as exc:
                yield pgid, exc
                pgid += 1
                continue
            yield pgid, page
            pgid += page.overflow + 1

    def items(self, root: int, inline: memoryview | None = None) -> Iterator[Element]:
        """The leaf elements of the bucket rooted at page `root` (or inline), in key order.

        A page that cannot be read becomes a finding and its subtree is skipped.

        Args:
            root: The bucket's root page id.
            inline: The bucket's inline page (when its root is 0), else None.

        Yields:
            The leaf Elements, in key order.
        """
        if inline is not None:
            try:
                yield from parse_page(inline).elements
            except StorageError as exc:
                self._finding(None, f"inline bucket page: {exc.detail}")
            return
        yield from self._walk(root, set(), [], None)

    def _walk(
        self, pgid: int, seen: set[int], above: list[int], parent: int | None
    ) -> Iterator[Element]:
        """The leaves under page `pgid`; `above` is the path of branch pages
        from the bucket's root to it, `seen` every page read under this root."""
        if not self._enter(pgid, seen, above, parent):
            return
        seen.add(pgid)
        try:
            page = self.page(pgid)
        except StorageError as exc:
            self.findings.append(Finding(self.path, exc.position, "bad_page", exc.detail))
            return
        for problem in page.problems:
            self._finding(pgid * self.page_size, f"page {pgid}: {problem}")
        if page.flags == PAGE_TYPES["leaf"]:
            yield from page.elements
        elif page.flags == PAGE_TYPES["branch"]:
            above.append(pgid)
            for e in page.elements:
                assert e.pgid is not None
                yield from self._walk(e.pgid, seen, above, pgid)
            above.pop()
        else:
            self._finding(
                pgid * self.page_size, f"page {pgid} is a {page.type} page inside a bucket's tree"
            )

    def _enter(self, pgid: int, seen: set[int], above: list[int], parent: int | None) -> bool:
        """Whether to read page `pgid` under `parent`; if not, why, said as a finding:
        a loop (the page is one of its own ancestors), a page reached a second
        time (a page of a B+tree has one parent), or the depth limit."""
        at = pgid * self.page_size
        if pgid in seen and pgid in above:
            path = " -> ".join(map(str, above[above.index(pgid) :] + [pgid]))
            self._finding(at, f"page {pgid} is its own ancestor, a loop ({path}): not read again")
        elif pgid in seen:
            self._finding(
                at,
                f"page {pgid} is reached a second time (from branch page "
                f"{parent}): a page has one parent; its subtree was read once",
            )
        elif len(above) >= MAX_DEPTH:
            self._finding(
                at,
                f"page {pgid} is {len(above) + 1} levels below its bucket's "
                f"root (branch page {above[0]}), past the depth limit of "
                f"{MAX_DEPTH}: its subtree is not read",
            )
        else:
            return True
        return False

    def bucket(self, *names: bytes) -> Iterator[Element]:
        """The pairs of a bucket, by its path of names from the root bucket.

        Args:
            *names: The bucket names, from the root bucket down.

        Yields:
            The bucket's leaf Elements, in key order.

        Raises:
            StorageError: No bucket of that path, or its header is too short
                (kind bad_page).
        """
        root, inline = self.meta.root, None
        for name in names:
            for e in self.items(root, inline):
                if e.key == name and e.is_bucket:
                    root, inline = self._open_bucket(e.value)
                    break
            else:
                raise StorageError(
                    "bad_page",
                    f"no bucket {b'/'.join(names).decode(errors='replace')!r}",
                    path=self.path,
                )
        yield from self.items(root, inline)

    def _open_bucket(self, value: memoryview) -> tuple[int, memoryview | None]:
        if len(value) < BUCKET.size:
            raise StorageError(
                "bad_page",
                f"bucket value of {len(value)} bytes, needs {BUCKET.size}",
                path=self.path,
            )
        root, _sequence = BUCKET.unpack_from(value)
        return root, (value[BUCKET.size :] if root == 0 else None)

    def buckets(self) -> list[bytes]:
        """The names of the top-level buckets.

        Returns:
            The names, copied, in key order.
        """
        return [bytes(e.key) for e in self.items(self.meta.root) if e.is_bucket]


def map_file(path: str | Path) -> Buffer:
    """The file's bytes as a read-only map (b"" when it is empty: mmap refuses
    a length of 0). The map stays while a view of it does."""
    with open(path, "rb") as f:
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file
            return b""
