# This is a generated file! Please edit source .ksy file and use kaitai-struct-compiler to rebuild
# type: ignore

import kaitaistruct
from kaitaistruct import KaitaiStruct, KaitaiStream, BytesIO
from enum import IntEnum


if getattr(kaitaistruct, 'API_VERSION', (0, 9)) < (0, 11):
    raise Exception("Incompatible Kaitai Struct Python API: 0.11 or later is required, but you have %s" % (kaitaistruct.__version__))

class BboltPage(KaitaiStruct):
    """Liftbridge keeps its metadata Raft log and Raft's stable store in
    `DATA/raft/raft.db`, a bbolt database (go.etcd.io/bbolt v1.3.5 through
    hashicorp/raft-boltdb v2.2.0). A bbolt file is an array of pages of
    `page_size` bytes (the OS page size when the file was created, 4096 on
    Linux/amd64; recorded in the meta pages). Page `n` starts at byte
    `n * page_size` and spans `1 + overflow` pages. Pages 0 and 1 are the two
    meta pages (the valid one with the higher txid is current); the others
    are B+tree branch and leaf pages, freelist pages, or free.
    
    This spec parses one page, from the bytes of that page and its overflow
    pages (or, for an inline bucket, from the bytes after the bucket header).
    bbolt writes its structs in the machine's byte order: little-endian on
    every platform Liftbridge ships for (amd64, arm64). The keys of
    raft-boltdb's buckets are big-endian integers (type `u64_be`).
    
    Element keys and values are found by `pos`, a distance from the start of
    the element itself, so an element needs its index (`params`) to locate
    them. What Kaitai cannot express (the meta page's FNV-1a checksum, the
    walk from the root bucket through branch pages to leaves) is left to the
    code that uses this spec (lbparse/storage/bbolt.py).
    
    Keys starting with `-` are read by lbparse's generator: `-raft-boltdb`
    names raft-boltdb's buckets and stable-store keys.
    
    .. seealso::
       upstream etcd-io/bbolt (v1.3.5 page.go, db.go `meta`, bucket.go `bucket`;
       internal/common/page.go, meta.go, bucket.go today), hashicorp/raft-boltdb
       v2 bolt_store.go and util.go, hashicorp/raft api.go (stable-store keys).
    """

    class LeafFlag(IntEnum):
        bucket = 1

    class PageType(IntEnum):
        branch = 1
        leaf = 2
        meta = 4
        freelist = 16
    def __init__(self, _io, _parent=None, _root=None):
        super(BboltPage, self).__init__(_io)
        self._parent = _parent
        self._root = _root or self
        self._read()

    def _read(self):
        self.id = self._io.read_u8le()
        self.flags = KaitaiStream.resolve_enum(BboltPage.PageType, self._io.read_u2le())
        self.count = self._io.read_u2le()
        self.overflow = self._io.read_u4le()
        if self.flags == BboltPage.PageType.meta:
            pass
            self.meta = BboltPage.Meta(self._io, self, self._root)

        if self.flags == BboltPage.PageType.branch:
            pass
            self.branch_elements = []
            for i in range(self.count):
                self.branch_elements.append(BboltPage.BranchElement(i, self._io, self, self._root))


        if self.flags == BboltPage.PageType.leaf:
            pass
            self.leaf_elements = []
            for i in range(self.count):
                self.leaf_elements.append(BboltPage.LeafElement(i, self._io, self, self._root))


        if  ((self.flags == BboltPage.PageType.freelist) and (self.count == self.freelist_count_overflow)) :
            pass
            self.freelist_count_ext = self._io.read_u8le()

        if  ((self.flags == BboltPage.PageType.freelist) and (self.count != self.freelist_count_overflow)) :
            pass
            self.freelist_ids = []
            for i in range(self.count):
                self.freelist_ids.append(self._io.read_u8le())


        if  ((self.flags == BboltPage.PageType.freelist) and (self.count == self.freelist_count_overflow)) :
            pass
            self.freelist_ids_ext = []
            for i in range(self.freelist_count_ext):
                self.freelist_ids_ext.append(self._io.read_u8le())




    def _fetch_instances(self):
        pass
        if self.flags == BboltPage.PageType.meta:
            pass
            self.meta._fetch_instances()

        if self.flags == BboltPage.PageType.branch:
            pass
            for i in range(len(self.branch_elements)):
                pass
                self.branch_elements[i]._fetch_instances()


        if self.flags == BboltPage.PageType.leaf:
            pass
            for i in range(len(self.leaf_elements)):
                pass
                self.leaf_elements[i]._fetch_instances()


        if  ((self.flags == BboltPage.PageType.freelist) and (self.count == self.freelist_count_overflow)) :
            pass

        if  ((self.flags == BboltPage.PageType.freelist) and (self.count != self.freelist_count_overflow)) :
            pass
            for i in range(len(self.freelist_ids)):
                pass


        if  ((self.flags == BboltPage.PageType.freelist) and (self.count == self.freelist_count_overflow)) :
            pass
            for i in range(len(self.freelist_ids_ext)):
                pass



    class BranchElement(KaitaiStruct):
        """One element of a branch page (branchPageElement, 16 bytes)."""
        def __init__(self, index, _io, _parent=None, _root=None):
            super(BboltPage.BranchElement, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self.index = index
            self._read()

        def _read(self):
            self.pos = self._io.read_u4le()
            self.ksize = self._io.read_u4le()
            self.pgid = self._io.read_u8le()


        def _fetch_instances(self):
            pass
            _ = self.key
            if hasattr(self, '_m_key'):
                pass


        @property
        def key(self):
            """The smallest key of the child page (page header 16 bytes, elements 16 bytes each)."""
            if hasattr(self, '_m_key'):
                return self._m_key

            _pos = self._io.pos()
            self._io.seek((16 + 16 * self.index) + self.pos)
            self._m_key = self._io.read_bytes(self.ksize)
            self._io.seek(_pos)
            return getattr(self, '_m_key', None)


    class Bucket(KaitaiStruct):
        """A nested bucket value: its header, then, when `root` is 0, the
        bucket's only page inline (bucket.go `openBucket`, `inlinePage`).
        """
        def __init__(self, _io, _parent=None, _root=None):
            super(BboltPage.Bucket, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.header = BboltPage.BucketHeader(self._io, self, self._root)
            if self.header.root == 0:
                pass
                self._raw_inline_page = self._io.read_bytes_full()
                _io__raw_inline_page = KaitaiStream(BytesIO(self._raw_inline_page))
                self.inline_page = BboltPage(_io__raw_inline_page, self, self._root)



        def _fetch_instances(self):
            pass
            self.header._fetch_instances()
            if self.header.root == 0:
                pass
                self.inline_page._fetch_instances()



    class BucketHeader(KaitaiStruct):
        """A bucket as stored in its parent's leaf (bucket.go `bucket`, 16 bytes)."""
        def __init__(self, _io, _parent=None, _root=None):
            super(BboltPage.BucketHeader, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.root = self._io.read_u8le()
            self.sequence = self._io.read_u8le()


        def _fetch_instances(self):
            pass


    class LeafElement(KaitaiStruct):
        """One element of a leaf page (leafPageElement, 16 bytes)."""
        def __init__(self, index, _io, _parent=None, _root=None):
            super(BboltPage.LeafElement, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self.index = index
            self._read()

        def _read(self):
            self.flags = self._io.read_u4le()
            self.pos = self._io.read_u4le()
            self.ksize = self._io.read_u4le()
            self.vsize = self._io.read_u4le()


        def _fetch_instances(self):
            pass
            _ = self.bucket
            if hasattr(self, '_m_bucket'):
                pass
                self._m_bucket._fetch_instances()

            _ = self.key
            if hasattr(self, '_m_key'):
                pass

            _ = self.value
            if hasattr(self, '_m_value'):
                pass


        @property
        def bucket(self):
            """The value read as a nested bucket."""
            if hasattr(self, '_m_bucket'):
                return self._m_bucket

            if self.is_bucket:
                pass
                _pos = self._io.pos()
                self._io.seek(((16 + 16 * self.index) + self.pos) + self.ksize)
                self._raw__m_bucket = self._io.read_bytes(self.vsize)
                _io__raw__m_bucket = KaitaiStream(BytesIO(self._raw__m_bucket))
                self._m_bucket = BboltPage.Bucket(_io__raw__m_bucket, self, self._root)
                self._io.seek(_pos)

            return getattr(self, '_m_bucket', None)

        @property
        def is_bucket(self):
            """Whether the value is a nested bucket (bucketLeafFlag)."""
            if hasattr(self, '_m_is_bucket'):
                return self._m_is_bucket

            self._m_is_bucket = self.flags & int(BboltPage.LeafFlag.bucket) != 0
            return getattr(self, '_m_is_bucket', None)

        @property
        def key(self):
            """The element's key (page header 16 bytes, elements 16 bytes each)."""
            if hasattr(self, '_m_key'):
                return self._m_key

            _pos = self._io.pos()
            self._io.seek((16 + 16 * self.index) + self.pos)
            self._m_key = self._io.read_bytes(self.ksize)
            self._io.seek(_pos)
            return getattr(self, '_m_key', None)

        @property
        def value(self):
            """The element's value, right after its key."""
            if hasattr(self, '_m_value'):
                return self._m_value

            _pos = self._io.pos()
            self._io.seek(((16 + 16 * self.index) + self.pos) + self.ksize)
            self._m_value = self._io.read_bytes(self.vsize)
            self._io.seek(_pos)
            return getattr(self, '_m_value', None)


    class Meta(KaitaiStruct):
        """The meta page body (db.go `meta`), right after the 16-byte page header."""
        def __init__(self, _io, _parent=None, _root=None):
            super(BboltPage.Meta, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.magic = self._io.read_bytes(4)
            if not self.magic == b"\xED\xDA\x0C\xED":
                raise kaitaistruct.ValidationNotEqualError(b"\xED\xDA\x0C\xED", self.magic, self._io, u"/types/meta/seq/0")
            self.version = self._io.read_u4le()
            if not self.version == 2:
                raise kaitaistruct.ValidationNotEqualError(2, self.version, self._io, u"/types/meta/seq/1")
            self.page_size = self._io.read_u4le()
            self.flags = self._io.read_u4le()
            self.root = BboltPage.BucketHeader(self._io, self, self._root)
            self.freelist = self._io.read_u8le()
            self.pgid = self._io.read_u8le()
            self.txid = self._io.read_u8le()
            self.checksum = self._io.read_u8le()


        def _fetch_instances(self):
            pass
            self.root._fetch_instances()


    class U64Be(KaitaiStruct):
        """A raft-boltdb key or stable-store value (util.go uint64ToBytes, big-endian)."""
        def __init__(self, _io, _parent=None, _root=None):
            super(BboltPage.U64Be, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.value = self._io.read_u8be()


        def _fetch_instances(self):
            pass


    @property
    def freelist_count_overflow(self):
        """A freelist page's `count` that means "the real count is the first
        u64" (page.go `FreelistPageCount`).
        """
        if hasattr(self, '_m_freelist_count_overflow'):
            return self._m_freelist_count_overflow

        self._m_freelist_count_overflow = 65535
        return getattr(self, '_m_freelist_count_overflow', None)


