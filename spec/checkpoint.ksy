meta:
  id: liftbridge_checkpoint
  title: Liftbridge partition checkpoint files (text)
  license: MIT
  ks-version: "0.11"
  encoding: ASCII
doc: |
  Beside its segments, every partition directory holds two small text
  files that Liftbridge rewrites atomically (natefinch/atomic WriteFile):

  - `replication-offset-checkpoint`: the high watermark, the offset of the
    last committed message, as a decimal integer with no newline (-1 when
    nothing is committed); written every 5 s and on close
    (commitlog.go `checkpointHW`, read back with strconv.ParseInt).
  - `leader-epoch-checkpoint`: the version (0), the number of entries,
    then one line "<leader epoch> <start offset>" per epoch, each line
    ending in a newline (leader_epoch_cache.go `flush`, since Jul 2019).
    A start offset of -1 is an epoch whose leader had not written yet.

  `kind` selects the file. Numbers stay text here, as Kaitai reads them;
  the code that uses this spec turns them into integers.
doc-ref: |
  shared/liftbridge/README.md "What a node keeps on disk"; upstream
  liftbridge-io/liftbridge v1.9.0 (22034a8) server/commitlog/commitlog.go
  (hwFileName, checkpointHW) and leader_epoch_cache.go (leaderEpochFileName,
  flush, readLeaderEpochOffsets).
params:
  - id: kind
    type: u1
    enum: checkpoint_kind
    doc: Which of the two checkpoint files this is.
seq:
  - id: high_watermark
    type: str
    size-eos: true
    if: kind == checkpoint_kind::replication_offset
    doc: The high watermark, a signed decimal integer, no newline.
  - id: version
    type: str
    terminator: 0x0a
    valid: '"0"'
    if: kind == checkpoint_kind::leader_epoch
    doc: The file format version; only 0 (leaderEpochFileV0) exists.
  - id: count
    type: str
    terminator: 0x0a
    if: kind == checkpoint_kind::leader_epoch
    doc: The number of epoch lines that follow, decimal.
  - id: epochs
    type: epoch_line
    repeat: eos
    if: kind == checkpoint_kind::leader_epoch
    doc: One line per leader epoch, oldest first.
types:
  epoch_line:
    doc: One "<leader epoch> <start offset>" line of `leader-epoch-checkpoint`.
    seq:
      - id: leader_epoch
        type: str
        terminator: 0x20
        doc: The leader epoch, decimal (a uint64 in Liftbridge).
      - id: start_offset
        type: str
        terminator: 0x0a
        doc: The first offset written in that epoch, decimal; -1 if none yet.
enums:
  checkpoint_kind:
    1:
      id: replication_offset
      -file: replication-offset-checkpoint
      doc: The high-watermark file.
    2:
      id: leader_epoch
      -file: leader-epoch-checkpoint
      doc: The leader-epoch file.
