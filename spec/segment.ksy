meta:
  id: liftbridge_segment
  title: Liftbridge commit-log segment file (`<base offset>.log`), every generation
  endian: be
  license: MIT
  ks-version: "0.11"
  imports:
    - commitlog
doc: |
  A Liftbridge stream partition is a commit log cut into segments. Each
  segment is a pair of files named by the offset of its first entry,
  zero-padded to 20 digits: `<base offset>.log` (this file: the entries back
  to back, nothing before, between or after them) and `<base offset>.index`
  (see segment_index.ksy). All integers are big-endian.

  The entry layout changed four times before Liftbridge v1.0, so the
  generation that wrote a file is a parameter (`format`, enum
  `entry_format`); lbparse tells them apart by which one reads the first
  entries cleanly with a matching CRC. The current layout (since Jul 2019,
  28-byte entry header; CRC-32C since Feb 2020) is the one of commitlog.ksy,
  imported here: a ReplicationResponse carries entries exactly as they sit
  in this file.

  Keys starting with `-` are ignored by the Kaitai compiler and read by
  lbparse's generator (tools/ksy_storage.py): on each `entry_format`, `-crc`
  names the body checksum (`crc32` = IEEE, `crc32c` = Castagnoli), `-entry`
  the type of one entry, `-index-format` the layout of the segment's index
  (segment_index.ksy), `-since` the upstream commit that introduced it and
  `-recency` ranks the formats from the newest (1); `-files` how
  segment files are named and `-data-dir` where they sit in a node's
  data directory.

  The CRC is over the body after the CRC field (never over the entry
  header); Kaitai cannot compute it, the code that uses this spec does.
doc-ref: |
  shared/wire/README.md section 3; shared/liftbridge/README.md "What a node
  keeps on disk"; upstream liftbridge-io/liftbridge server/commitlog
  (message_set.go, message.go, segment.go) and server/proto/message.go at
  the commits named in `entry_format`.
-files:
  digits: 20
  log: .log
  index: .index
  replacement-suffixes: [.cleaned, .truncated]
  doc: |
    segment.go: a segment's files are named by its base offset in 20
    decimal digits (fileFormat "%020d%s") with the suffix `.log` or
    `.index`; while compaction or truncation rewrites a segment, its new
    files carry a further suffix (`.cleaned`, `.truncated`) until they
    replace the old ones.
-data-dir:
  streams: streams
  raft-db: raft/raft.db
  state-file: liftbridge
  state-type: protocol.ServerState
  known-streams:
    __activity:
      value: proto.ActivityStreamEvent
      doc: The activity stream (server/activity.go); one event per stream created, deleted, paused ...
    __cursors:
      value: protocol.Cursor
      key: "<cursor id>,<stream>,<partition>"
      doc: Consumer cursors (server/cursors.go getCursorKey, cursor.Marshal).
  doc: |
    A Liftbridge data directory (v1.9.0 server.go stateFile, raft.go,
    partition.go): `liftbridge` (a protobuf protocol.ServerState, the
    server id), `raft/raft.db` (bbolt.ksy), and one directory per stream
    partition, `streams/<stream name>/<partition number>/`, holding its
    segments and checkpoints. The internal streams `__activity` and
    `__cursors` store values of a known protobuf type.
params:
  - id: format
    type: u1
    enum: entry_format
    doc: Which generation of Liftbridge wrote the segment.
seq:
  - id: entries_v2018_04
    type: entry_v2018_04
    repeat: eos
    if: format == entry_format::v2018_04
    doc: The entries of a segment written from Apr to Jun 2018.
  - id: entries_v2018_06
    type: entry_v2018_06
    repeat: eos
    if: format == entry_format::v2018_06
    doc: The entries of a segment written from Jun to Aug 2018.
  - id: entries_v2018_08
    type: entry_v2018_08
    repeat: eos
    if: format == entry_format::v2018_08
    doc: The entries of a segment written from Aug 2018 to Jul 2019.
  - id: entries
    type: liftbridge_commitlog::entry
    repeat: eos
    if: format == entry_format::v2019_07 or format == entry_format::v2020_02
    doc: |
      The entries of a segment written since Jul 2019: the 28-byte entry
      header and body of commitlog.ksy (CRC-32 IEEE until Feb 2020, CRC-32C
      since).
types:
  entry_v2018_04:
    doc: |
      One entry of the first layout (upstream e277570, Apr 2018, to 85e6356,
      Jun 2018): a 12-byte header (offset, size) and a body whose timestamp
      and headers depend on the body's magic byte.
    seq:
      - id: offset
        type: u8
        doc: Offset of the message in its partition (message_set.go offsetPos 0).
      - id: size
        type: u4
        doc: Length of the body that follows (message_set.go sizePos 8).
      - id: body
        size: size
        type: body_v2018_04
        doc: The stored message.
  body_v2018_04:
    doc: |
      The message as server/proto/message.go encoded it until Jun 2018: the
      timestamp only when magic > 0, headers only when magic > 1. The server
      wrote magic 0 (e277570), 1 (2173cd6) and 2 (42c3e0e, headers added).
    seq:
      - id: crc32
        type: u4
        doc: CRC-32 (IEEE) of the rest of the body (proto/crc_field.go, ChecksumIEEE).
      - id: magic
        type: u1
        doc: Message format version; selects the optional fields below.
      - id: attributes
        type: u1
        doc: Reserved for attributes such as compression; always 0.
      - id: timestamp_ms
        type: s8
        if: magic > 0
        doc: When the message was received, Unix milliseconds (only when magic > 0).
      - id: key_len
        type: s4
        valid:
          expr: _ >= -1
        doc: Length of the key; -1 means nil, 0 an empty key.
      - id: key
        size: key_len
        if: key_len >= 0
        doc: The message key.
      - id: value_len
        type: s4
        valid:
          expr: _ >= -1
        doc: Length of the value; -1 means nil, 0 an empty value.
      - id: value
        size: value_len
        if: value_len >= 0
        doc: The message value.
      - id: header_count
        type: s2
        if: magic > 1
        doc: Number of headers (only when magic > 1).
      - id: headers
        type: liftbridge_commitlog::header
        repeat: expr
        repeat-expr: header_count
        if: magic > 1
        doc: The message headers, in the current header layout.
  entry_v2018_06:
    doc: |
      One entry of the second layout (upstream 85e6356, Jun 2018, to 76ec118,
      Aug 2018): the 12-byte header, and a body that always carries the
      timestamp and the headers, whatever its magic byte (the server wrote
      2, then 1 from d33870d).
    seq:
      - id: offset
        type: u8
        doc: Offset of the message in its partition (message_set.go offsetPos 0).
      - id: size
        type: u4
        doc: Length of the body that follows (message_set.go sizePos 8).
      - id: body
        size: size
        type: body_v2018_06
        doc: The stored message.
  body_v2018_06:
    doc: The message as server/proto/message.go encoded it from Jun to Aug 2018.
    seq:
      - id: crc32
        type: u4
        doc: CRC-32 (IEEE) of the rest of the body (proto/crc_field.go, ChecksumIEEE).
      - id: magic
        type: u1
        doc: Message format version; does not change the layout here.
      - id: attributes
        type: u1
        doc: Reserved for attributes such as compression; always 0.
      - id: timestamp_ms
        type: s8
        doc: When the message was received, Unix milliseconds.
      - id: key_len
        type: s4
        valid:
          expr: _ >= -1
        doc: Length of the key; -1 means nil, 0 an empty key.
      - id: key
        size: key_len
        if: key_len >= 0
        doc: The message key.
      - id: value_len
        type: s4
        valid:
          expr: _ >= -1
        doc: Length of the value; -1 means nil, 0 an empty value.
      - id: value
        size: value_len
        if: value_len >= 0
        doc: The message value.
      - id: header_count
        type: s2
        doc: Number of headers.
      - id: headers
        type: liftbridge_commitlog::header
        repeat: expr
        repeat-expr: header_count
        doc: The message headers, in the current header layout.
  entry_v2018_08:
    doc: |
      One entry of the third layout (upstream 76ec118, Aug 2018, to 250f40b,
      Jul 2019): the timestamp moved from the body into a 20-byte entry
      header; the body is today's (commitlog.ksy) with a CRC-32 (IEEE).
    seq:
      - id: offset
        type: u8
        doc: Offset of the message in its partition (message_set.go offsetPos 0).
      - id: timestamp
        type: s8
        doc: |
          When the leader received the message (message_set.go timestampPos
          8): Unix nanoseconds, except from 76ec118 to 535f4b2 (three days in
          Aug 2018) when the server wrote Unix seconds.
      - id: size
        type: u4
        doc: Length of the body that follows (message_set.go sizePos 16).
      - id: body
        size: size
        type: liftbridge_commitlog::body
        doc: The stored message; its first field is a CRC-32 (IEEE) in this generation.
enums:
  entry_format:
    1:
      id: v2018_04
      -crc: crc32
      -entry: entry_v2018_04
      -index-format: v2018_04
      -since: "2018-04-27 e277570"
      -recency: 5
      doc: 12-byte entry header; body timestamp (ms) when magic > 0, headers when magic > 1.
    2:
      id: v2018_06
      -crc: crc32
      -entry: entry_v2018_06
      -index-format: v2018_04
      -since: "2018-06-05 85e6356"
      -recency: 4
      doc: 12-byte entry header; body timestamp (ms) and headers always.
    3:
      id: v2018_08
      -crc: crc32
      -entry: entry_v2018_08
      -index-format: v2018_08
      -since: "2018-08-27 76ec118"
      -recency: 3
      doc: 20-byte entry header (offset, timestamp, size); CRC-32 (IEEE).
    4:
      id: v2019_07
      -crc: crc32
      -entry: liftbridge_commitlog::entry
      -index-format: v2018_08
      -since: "2019-07-17 250f40b"
      -recency: 2
      doc: 28-byte entry header (offset, timestamp, leader epoch, size); CRC-32 (IEEE).
    5:
      id: v2020_02
      -crc: crc32c
      -entry: liftbridge_commitlog::entry
      -index-format: v2018_08
      -since: "2020-02-12 6855052"
      -recency: 1
      doc: 28-byte entry header; CRC-32C (Castagnoli). What Liftbridge writes today (v1.9.0).
