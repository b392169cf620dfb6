meta:
  id: liftbridge_envelope
  title: Liftbridge envelope (NATS payload framing), every generation
  endian: be
  license: MIT
  ks-version: "0.11"
doc: |
  Liftbridge puts a small binary header (the "envelope") in front of every
  message and RPC it sends over NATS. The first seven bytes have kept their
  meaning since Liftbridge v1.0.0-alpha; byte 7 and the payload schemas have
  not, so the generation that wrote the bytes is a parameter (`layout`): the
  header alone cannot always tell (a legacy envelope holding a Message is
  byte-for-byte a v0 Publish).

  This file is the single source of truth for lbparse. `make generate` turns
  it into the Kaitai parsers, lbparse's own `construct` schema (which also
  builds envelopes) and the MsgType dispatch table. Keys starting with `-`
  are ignored by the Kaitai compiler and read by lbparse's generator:
  `-name` is the public name of a layout or MsgType, `-payload` the full
  name of the payload type (a protobuf message, `raw` for bytes with a
  layout of their own), `-byte7` what header byte 7 means in a layout,
  `-msg-types` which enum names that layout's MsgTypes, `-internal` marks
  server-to-server RPCs, `-payload-format` says how payloads are encoded
  (protobuf unless it says flatbuffers), `-recency` ranks the layouts from
  the newest (1), which auto-detection prefers when bytes fit several,
  `-bare-payloads` lists payload types that travel without the cookie,
  `-error` names the lbparse error kind (`EnvelopeError.kind`) a failed
  check of the field raises, and `-payload-kinds` (below) names the
  payload types that are not protobuf messages: `raw` is a
  ReplicationResponse (see commitlog.ksy; lbparse's code calls it
  REPLICATION_RESPONSE, `raw` stays its name in JSON and in the reference
  vectors) and `bytes` opaque bytes.

  lbparse's generator also reads the fixed facts its hand-written fast
  paths need from the declarations themselves: the magic and the cookie
  (`contents`), the header size (`size` of `header`, checked against its
  fields), the header lengths (`valid` of `header_len`), the CRC flag bit
  and the header length that goes with it (`has_crc` and the `valid` of
  `flags`), struct formats and offsets (field types).

  The checks declared with `valid` make this a strict parser: it accepts
  exactly what lbparse accepts by default. What it cannot express (the
  CRC-32C value over the payload) is left to the code that uses it.
doc-ref: shared/wire/README.md, section 1 (envelope) and section 2 (bad input)
-payload-kinds:
  replication_response: raw
  bytes: bytes
params:
  - id: layout
    type: u1
    enum: layout
    doc: Which generation of the format wrote the bytes.
seq:
  - id: cookie
    contents: LIFT
    if: layout == layout::lift_cookie
    -error: bad_magic
    doc: |
      The ASCII cookie `LIFT` that Liftbridge clients up to v0.0.1-alpha put
      in front of a protobuf `proto.Message`. (Their acks were a bare
      `proto.Ack` with no prefix at all, that is the `plain` layout.)
  - id: header
    size: 8
    type: header
    if: has_header
    -error: too_short
    doc: |
      The fixed part of the envelope header. Read as one 8-byte block first,
      so that anything shorter is "too short" before any field is judged.
  - id: crc32c
    type: u4
    if: 'has_header ? header.has_crc : false'
    -error: truncated
    doc: |
      CRC-32C (Castagnoli polynomial) of the payload, that is of every
      byte from `header_len` to the end, big-endian. Present when the CRC
      flag is set, which requires `header_len` 12. The condition is a
      conditional, not `has_header and header.has_crc`: Kaitai's Go output
      evaluates both sides of `and` first and read `header` where the layout
      has none (a nil dereference under plain and lift-cookie).
  - id: payload
    size-eos: true
    valid:
      expr: layout != layout::lift_cookie or _.length > 0
    -error: too_short
    doc: |
      The message itself, from `header_len` (or after the cookie) to the
      end. Its type follows from the layout and, where the layout has one,
      the MsgType. A LIFT message is never empty: the old client required
      more than the 4 cookie bytes.
instances:
  has_header:
    value: layout != layout::lift_cookie and layout != layout::plain
    doc: Whether the layout starts with the 8-byte envelope header.
types:
  header:
    doc: |
      The fixed 8-byte envelope header; a CRC-32C may follow (see the
      top-level `crc32c`).
    seq:
      - id: magic
        contents: [0xb9, 0x0e, 0x43, 0xb4]
        -error: bad_magic
        doc: |
          Envelope magic number. Chosen by upstream to be invalid UTF-8 so
          that it cannot be mistaken for the start of a text payload.
      - id: version
        type: u1
        valid: 0
        -error: unknown_version
        doc: Envelope protocol version; only 0 has ever been defined.
      - id: header_len
        type: u1
        valid:
          any-of: [8, 12]
        -error: bad_header_len
        doc: |
          Offset of the payload from the start of the envelope: 8, or 12
          when the CRC-32C field is present. Upstream slices the payload at
          whatever this says (and panics when it points past the data);
          lbparse accepts other values only in lenient mode.
      - id: flags
        type: u1
        valid:
          expr: ((_ & 1) != 0) == (header_len == 12)
        -error: crc_missing
        -error-flag-clear: bad_header_len
        doc: |
          Bit 0: a CRC-32C of the payload follows the fixed header. The
          other bits have never been assigned; upstream ignores them. The
          CRC flag and a 12-byte header go together, and the one check
          fails two ways: a flag with an 8-byte header leaves no room for
          the CRC (`-error`: `crc_missing`); a 12-byte header without the
          flag is accepted only by upstream (strictly, `-error-flag-clear`:
          `bad_header_len`).
      - id: msg_type
        type: u1
        -error: unknown_msg_type
        doc: |
          Byte 7. In the `v0` layout the MsgType (see enum `v0_msg_type`),
          which selects the payload schema. In the `legacy` layout
          (Liftbridge v1.0.0-alpha) a reserved byte, always written as 0,
          and the payload schema is not recorded anywhere.
    instances:
      has_crc:
        value: flags & 1 != 0
        doc: Whether the header carries the CRC-32C field.
      v0_msg_type:
        value: msg_type
        enum: v0_msg_type
        if: _root.layout == layout::v0
        doc: Byte 7 read as a v0 MsgType. Values outside the enum are unknown.
      flatbuffers_msg_type:
        value: msg_type
        enum: flatbuffers_msg_type
        if: _root.layout == layout::flatbuffers
        doc: Byte 7 read with the FlatBuffers branch table.
      flatbuffers_draft_msg_type:
        value: msg_type
        enum: flatbuffers_draft_msg_type
        if: _root.layout == layout::flatbuffers_draft
        doc: Byte 7 read with the FlatBuffers draft table.
enums:
  layout:
    0:
      id: v0
      doc: |
        Liftbridge v1.0.0-beta and later (Feb 2020 to today): byte 7 is the
        MsgType, which names the payload schema.
      -name: v0
      -byte7: msg_type
      -msg-types: v0_msg_type
      -recency: 1
    1:
      id: legacy
      doc: |
        Liftbridge v1.0.0-alpha (Feb 2020): byte 7 is reserved and written
        as 0. Publishes carry a `proto.Message`, acks a `proto.Ack`; the
        header does not say which.
      -name: legacy
      -byte7: reserved
      -payload: proto.Message
      -payload-alternatives: [proto.Ack]
      -recency: 2
    2:
      id: flatbuffers
      doc: |
        The FlatBuffers experiment as the `flatbuffers` branch README of
        Liftbridge's API repository documents it (Feb 2020): byte 7 is a
        MsgType from its own table, payloads are FlatBuffers tables of
        `spec/flatbuffers/api.fbs`.
      -name: flatbuffers
      -byte7: msg_type
      -msg-types: flatbuffers_msg_type
      -payload-format: flatbuffers
      -recency: 3
    3:
      id: flatbuffers_draft
      doc: |
        The first FlatBuffers draft (Nov 2019, seed document 004): a MsgType
        table without Ack, where 1 means Replication.
      -name: flatbuffers-draft
      -byte7: msg_type
      -msg-types: flatbuffers_draft_msg_type
      -payload-format: flatbuffers
      -recency: 4
    4:
      id: lift_cookie
      doc: |
        Liftbridge clients up to v0.0.1-alpha (2018 to Feb 2020): no envelope
        header, the 4 ASCII bytes `LIFT` then a protobuf `proto.Message`.
        Acks of that era were a bare `proto.Ack` without the cookie.
      -name: lift-cookie
      -payload: proto.Message
      -payload-alternatives: [proto.Ack]
      -bare-payloads: [proto.Ack]
      -recency: 5
    5:
      id: plain
      doc: |
        A NATS payload that is not an envelope of any generation: plain bytes
        published by a non-Liftbridge client. Upstream stores such bytes as
        the value of a plain message.
      -name: plain
      -payload: bytes
      -recency: 6
  v0_msg_type:
    0:
      id: publish
      doc: A message published to a stream, from a client.
      -name: Publish
      -payload: proto.Message
    1:
      id: ack
      doc: The acknowledgement of a published message, to the ack inbox.
      -name: Ack
      -payload: proto.Ack
    2:
      id: replication_request
      doc: A follower asks the partition leader for messages after an offset.
      -name: ReplicationRequest
      -payload: protocol.ReplicationRequest
      -internal: true
    3:
      id: replication_response
      doc: |
        The leader's answer to a ReplicationRequest. Not protobuf: leader
        epoch and high watermark, then commit-log entries (see
        `commitlog.ksy`).
      -name: ReplicationResponse
      -payload: raw
      -internal: true
    4:
      id: raft_join_request
      doc: A server asks the metadata leader to add it to the Raft group.
      -name: RaftJoinRequest
      -payload: protocol.RaftJoinRequest
      -internal: true
    5:
      id: raft_join_response
      doc: The metadata leader's answer to a RaftJoinRequest.
      -name: RaftJoinResponse
      -payload: protocol.RaftJoinResponse
      -internal: true
    6:
      id: leader_epoch_offset_request
      doc: A follower asks for the last offset of a leader epoch (log truncation).
      -name: LeaderEpochOffsetRequest
      -payload: protocol.LeaderEpochOffsetRequest
      -internal: true
    7:
      id: leader_epoch_offset_response
      doc: The answer to a LeaderEpochOffsetRequest.
      -name: LeaderEpochOffsetResponse
      -payload: protocol.LeaderEpochOffsetResponse
      -internal: true
    8:
      id: propagated_request
      doc: A metadata operation forwarded to the metadata leader.
      -name: PropagatedRequest
      -payload: protocol.PropagatedRequest
      -internal: true
    9:
      id: propagated_response
      doc: The metadata leader's answer to a PropagatedRequest.
      -name: PropagatedResponse
      -payload: protocol.PropagatedResponse
      -internal: true
    10:
      id: server_info_request
      doc: A request for a server's identity and address.
      -name: ServerInfoRequest
      -payload: protocol.ServerInfoRequest
      -internal: true
    11:
      id: server_info_response
      doc: A server's identity and address.
      -name: ServerInfoResponse
      -payload: protocol.ServerInfoResponse
      -internal: true
    12:
      id: partition_status_request
      doc: A request for the status of a partition.
      -name: PartitionStatusRequest
      -payload: protocol.PartitionStatusRequest
      -internal: true
    13:
      id: partition_status_response
      doc: The status of a partition.
      -name: PartitionStatusResponse
      -payload: protocol.PartitionStatusResponse
      -internal: true
    14:
      id: partition_notification
      doc: Tells a partition leader that new data may be available to replicate.
      -name: PartitionNotification
      -payload: protocol.PartitionNotification
      -internal: true
  flatbuffers_msg_type:
    0:
      id: publish
      doc: A message to publish.
      -name: Publish
      -payload: proto.PublishRequest
    1:
      id: ack
      doc: The acknowledgement of a published message.
      -name: Ack
      -payload: proto.Ack
    2:
      id: replication
      doc: Replication traffic; the experiment never defined its payload.
      -name: Replication
      -payload: bytes
  flatbuffers_draft_msg_type:
    0:
      id: publish
      doc: A message to publish.
      -name: Publish
      -payload: proto.PublishRequest
    1:
      id: replication
      doc: Replication traffic; the draft never defined its payload.
      -name: Replication
      -payload: bytes
