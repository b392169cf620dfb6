meta:
  id: bbolt_page
  title: One page of a bbolt database file (Liftbridge's raft/raft.db)
  endian: le
  license: MIT
  ks-version: "0.11"
doc: |
  Liftbridge keeps its metadata Raft log and Raft's stable store in
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
doc-ref: |
  upstream etcd-io/bbolt (v1.3.5 page.go, db.go `meta`, bucket.go `bucket`;
  internal/common/page.go, meta.go, bucket.go today), hashicorp/raft-boltdb
  v2 bolt_store.go and util.go, hashicorp/raft api.go (stable-store keys).
-constants:
  no_freelist:
    value: 0xffffffffffffffff
    doc: |
      The meta `freelist` of a database that does not persist its freelist
      (db.go `pgidNoFreelist`). A constant beside the instances rather
      than one of them: kaitai-struct-compiler 0.11 writes this unsigned
      64-bit literal as a too-large int in Java and C#, which do not compile.
-raft-boltdb:
  logs-bucket: logs
  conf-bucket: conf
  stable-uint64-keys: [CurrentTerm, LastVoteTerm]
  stable-bytes-keys: [LastVoteCand]
  doc: |
    raft-boltdb v2 keeps two buckets in the root bucket: `logs` (key: the
    log index as a big-endian u64, value: hashicorp/raft's `Log` encoded
    with msgpack) and `conf` (the stable store: `CurrentTerm` and
    `LastVoteTerm` as big-endian u64 values, `LastVoteCand` the bytes of
    the voted-for server address).
seq:
  - id: id
    type: u8
    doc: Page id (pgid); the page's own number, checked against where it was found.
  - id: flags
    type: u2
    enum: page_type
    doc: What the page holds; exactly one of the page_type flags (page.go).
  - id: count
    type: u2
    doc: |
      Number of elements (branch, leaf), or of freelist ids; 0xFFFF on a
      freelist page means the real count is the first u64 of the data.
  - id: overflow
    type: u4
    doc: How many further pages this page spans (for values larger than a page).
  - id: meta
    type: meta
    if: flags == page_type::meta
    doc: The database's root and transaction state (meta pages 0 and 1).
  - id: branch_elements
    type: branch_element(_index)
    repeat: expr
    repeat-expr: count
    if: flags == page_type::branch
    doc: The separator keys and child page ids of a branch page.
  - id: leaf_elements
    type: leaf_element(_index)
    repeat: expr
    repeat-expr: count
    if: flags == page_type::leaf
    doc: The key/value pairs (or nested buckets) of a leaf page.
  - id: freelist_count_ext
    type: u8
    if: flags == page_type::freelist and count == freelist_count_overflow
    doc: The freelist's real length when it does not fit the u16 count.
  - id: freelist_ids
    type: u8
    repeat: expr
    repeat-expr: count
    if: flags == page_type::freelist and count != freelist_count_overflow
    doc: Ids of the free pages (and of the pages pending release).
  - id: freelist_ids_ext
    type: u8
    repeat: expr
    repeat-expr: freelist_count_ext
    if: flags == page_type::freelist and count == freelist_count_overflow
    doc: Ids of the free pages, when there are 0xFFFF or more.
instances:
  freelist_count_overflow:
    value: 0xffff
    doc: |
      A freelist page's `count` that means "the real count is the first
      u64" (page.go `FreelistPageCount`).
types:
  meta:
    doc: The meta page body (db.go `meta`), right after the 16-byte page header.
    seq:
      - id: magic
        contents: [0xed, 0xda, 0x0c, 0xed]
        doc: bbolt's magic number 0xED0CDAED (a u32, little-endian on disk).
      - id: version
        type: u4
        valid: 2
        doc: The data file format version; bbolt has written 2 since its start.
      - id: page_size
        type: u4
        doc: The size of every page of this file, in bytes.
      - id: flags
        type: u4
        doc: Meta flags; unused (0).
      - id: root
        type: bucket_header
        doc: The root bucket, whose keys are the top-level bucket names.
      - id: freelist
        type: u8
        doc: Page id of the freelist, 0xFFFFFFFFFFFFFFFF when it is not persisted.
      - id: pgid
        type: u8
        doc: The high water mark; the file has (at least) this many pages in use.
      - id: txid
        type: u8
        doc: The id of the transaction that wrote this meta page; the higher valid one is current.
      - id: checksum
        type: u8
        doc: FNV-1a 64 of the 56 meta bytes before this field (meta.sum64); checked by the code.
  bucket_header:
    doc: A bucket as stored in its parent's leaf (bucket.go `bucket`, 16 bytes).
    seq:
      - id: root
        type: u8
        doc: Page id of the bucket's root page; 0 when the bucket is inline.
      - id: sequence
        type: u8
        doc: The bucket's NextSequence counter.
  branch_element:
    doc: One element of a branch page (branchPageElement, 16 bytes).
    params:
      - id: index
        type: u4
        doc: Index of this element in its page, to find where it starts.
    seq:
      - id: pos
        type: u4
        doc: Distance from the start of this element to its key.
      - id: ksize
        type: u4
        doc: Length of the key.
      - id: pgid
        type: u8
        doc: The child page holding keys from this one up to the next element's.
    instances:
      key:
        pos: 16 + 16 * index + pos
        size: ksize
        doc: The smallest key of the child page (page header 16 bytes, elements 16 bytes each).
  leaf_element:
    doc: One element of a leaf page (leafPageElement, 16 bytes).
    params:
      - id: index
        type: u4
        doc: Index of this element in its page, to find where it starts.
    seq:
      - id: flags
        type: u4
        doc: Bit flags (enum `leaf_flag`); bucketLeafFlag when the value is a nested bucket.
      - id: pos
        type: u4
        doc: Distance from the start of this element to its key; the value follows the key.
      - id: ksize
        type: u4
        doc: Length of the key.
      - id: vsize
        type: u4
        doc: Length of the value.
    instances:
      is_bucket:
        value: flags & leaf_flag::bucket.to_i != 0
        doc: Whether the value is a nested bucket (bucketLeafFlag).
      key:
        pos: 16 + 16 * index + pos
        size: ksize
        doc: The element's key (page header 16 bytes, elements 16 bytes each).
      value:
        pos: 16 + 16 * index + pos + ksize
        size: vsize
        doc: The element's value, right after its key.
      bucket:
        pos: 16 + 16 * index + pos + ksize
        size: vsize
        type: bucket
        if: is_bucket
        doc: The value read as a nested bucket.
  bucket:
    doc: |
      A nested bucket value: its header, then, when `root` is 0, the
      bucket's only page inline (bucket.go `openBucket`, `inlinePage`).
    seq:
      - id: header
        type: bucket_header
        doc: The bucket's root page id and sequence.
      - id: inline_page
        type: bbolt_page
        size-eos: true
        if: header.root == 0
        doc: The inline leaf page (its header id is 0 and unused).
  u64_be:
    doc: A raft-boltdb key or stable-store value (util.go uint64ToBytes, big-endian).
    seq:
      - id: value
        type: u8be
        doc: A log index, a term.
enums:
  page_type:
    0x01:
      id: branch
      doc: branchPageFlag
    0x02:
      id: leaf
      doc: leafPageFlag
    0x04:
      id: meta
      doc: metaPageFlag
    0x10:
      id: freelist
      doc: freelistPageFlag
  leaf_flag:
    0x01:
      id: bucket
      doc: bucketLeafFlag, the value is a nested bucket (page.go)
