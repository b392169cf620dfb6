meta:
  id: liftbridge_segment_index
  title: Liftbridge commit-log segment index (`<base offset>.index`), every generation
  endian: be
  license: MIT
  ks-version: "0.11"
doc: |
  The index of one segment: one fixed-size entry per message of the
  segment's `.log`, in order, locating it by offset. Liftbridge maps the
  file into memory and, for a new segment, first truncates it to 10 MiB
  (server/commitlog/index.go `newIndex`, opts.bytes 10 * 1024 * 1024,
  rounded down to whole entries), so the unused tail of the active
  segment's index reads as zeros; the file is truncated to its entries
  only when the segment is sealed or closed cleanly (`shrink`), and grows
  by another 10 MiB when an entry would not fit (`writeAt`). An entry whose
  position, timestamp and size are all zero is where Liftbridge's own
  `InitializePosition` stops reading (the first entry of a segment has
  position 0 too, but a timestamp). All integers are big-endian
  (protocol.Encoding).

  `format` (enum `index_format`) selects the generation: the timestamp and
  size came with the 20-byte entry in Aug 2018.
doc-ref: |
  shared/liftbridge/README.md "What a node keeps on disk"; shared/wire/README.md
  section 3; upstream liftbridge-io/liftbridge server/commitlog/index.go
  (relEntry) at e277570 and 76ec118, and v1.9.0 (22034a8).
params:
  - id: format
    type: u1
    enum: index_format
    doc: Which generation of Liftbridge wrote the index.
seq:
  - id: entries_v2018_04
    type: index_entry_v2018_04
    repeat: eos
    if: format == index_format::v2018_04
    doc: The 8-byte entries of an index written before Aug 2018.
  - id: entries
    type: index_entry
    repeat: eos
    if: format == index_format::v2018_08
    doc: The 20-byte entries of an index written since Aug 2018 (Liftbridge v1.9.0 too).
types:
  index_entry_v2018_04:
    doc: One entry of the first index layout (relEntry at e277570).
    seq:
      - id: rel_offset
        type: s4
        doc: Offset of the message minus the segment's base offset (relEntry.Offset int32).
      - id: position
        type: s4
        doc: Byte position of the message's entry in the `.log` (relEntry.Position int32).
  index_entry:
    doc: |
      One entry of the index layout written since Aug 2018 (relEntry at
      76ec118 and in v1.9.0: offsetWidth 4, timestampWidth 8,
      positionWidth 4, sizeWidth 4).
    seq:
      - id: rel_offset
        type: s4
        doc: |
          Offset of the message minus the segment's base offset
          (relEntry.Offset int32; lbtruth prints it as a uint32, which is
          the same for every offset Liftbridge writes).
      - id: timestamp
        type: s8
        doc: The message's timestamp, as in its entry header (Unix nanoseconds).
      - id: position
        type: s4
        doc: Byte position of the message's entry in the `.log` (relEntry.Position int32).
      - id: size
        type: s4
        doc: |
          Size of the whole entry in the `.log`, entry header included
          (entriesForMessageSet: size + msgSetHeaderLen).
enums:
  index_format:
    1:
      id: v2018_04
      -since: "2018-04-27 e277570"
      doc: 8-byte entries (relative offset, position).
    2:
      id: v2018_08
      -since: "2018-08-27 76ec118"
      doc: 20-byte entries (relative offset, timestamp, position, size).
