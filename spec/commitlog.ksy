meta:
  id: liftbridge_commitlog
  title: Liftbridge ReplicationResponse payload and commit-log message set
  endian: be
  license: MIT
  ks-version: "0.11"
doc: |
  The payload of a v0 ReplicationResponse (MsgType 3), the one envelope
  payload that is not protobuf: the leader's epoch and high watermark, then
  the commit-log entries the follower asked for, byte for byte as the leader
  keeps them in its `.log` segment files. All integers are big-endian.

  The entry layout is the one written since Jul 2019 (28-byte entry header)
  with a CRC-32C body checksum (since Feb 2020). Older segment files used a
  12-byte header (offset, size) until mid-2018 and a 20-byte one (offset,
  timestamp, size) until Jul 2019, and CRC-32 (IEEE) until Feb 2020; those
  are not declared here.
doc-ref: shared/wire/README.md, section 3
seq:
  - id: leader_epoch
    type: u8
    doc: Epoch of the partition leader that sent the response.
  - id: high_watermark
    type: s8
    doc: Offset of the last committed message in the partition, -1 if none.
  - id: entries
    type: entry
    repeat: eos
    doc: Zero or more commit-log entries, back to back, to the end of the payload.
types:
  entry:
    doc: One message of the commit log, a 28-byte header then its body.
    seq:
      - id: offset
        type: u8
        doc: Offset of the message in its partition.
      - id: timestamp
        type: s8
        doc: When the leader received the message, Unix nanoseconds.
      - id: leader_epoch
        type: u8
        doc: Leader epoch in which the message was written.
      - id: size
        type: u4
        doc: Length of the body that follows, in bytes.
      - id: body
        size: size
        type: body
        doc: The stored message, exactly `size` bytes.
  body:
    doc: The stored message; `crc32c` covers everything after itself.
    seq:
      - id: crc32c
        type: u4
        doc: CRC-32C (Castagnoli) of the rest of the body, not of the entry header.
      - id: magic
        type: u1
        doc: Message format version; always 1 in this layout.
      - id: attributes
        type: u1
        doc: Reserved for attributes such as compression; always 0 today.
      - id: key_len
        type: s4
        valid:
          expr: _ >= -1
        doc: |
          Length of the key; -1 means nil (no key), 0 an empty key. Liftbridge
          slices the body by any other length, so less than -1 is invalid.
      - id: key
        size: key_len
        if: key_len >= 0
        doc: The message key, absent when nil.
      - id: value_len
        type: s4
        valid:
          expr: _ >= -1
        doc: Length of the value; -1 means nil, 0 an empty value; less than -1 is invalid.
      - id: value
        size: value_len
        if: value_len >= 0
        doc: The message value, absent when nil.
      - id: header_count
        type: s2
        doc: Number of headers; the server adds `subject` and `reply` itself.
      - id: headers
        type: header
        repeat: expr
        repeat-expr: header_count
        doc: The headers, `header_count` of them, in the order they were stored.
  header:
    doc: One message header, a string key and a byte-string value.
    seq:
      - id: key_len
        type: s2
        valid:
          expr: _ >= 0
        doc: |
          Length of the header's key (i16, shared/wire/README.md section 3).
          A negative length cannot be sliced: invalid, as lbparse says
          (and the check keeps every language's runtime from being asked for
          a negative number of bytes).
      - id: key
        size: key_len
        -text: go-utf8
        doc: |
          The header name, as bytes. Liftbridge's Go code keeps headers in a
          map of string keys, and a Go string holds any bytes: a key that is
          not UTF-8 is stored and served as it came. Reading it as `str`
          would refuse the whole message set over one key, so the spec keeps
          the bytes and each reader decides. `-text: go-utf8` (an lbparse key,
          ignored by the Kaitai compiler) says the bytes are shown as text:
          UTF-8, U+FFFD for each bad byte, as Go's JSON encoder writes them
          (lbparse's tables and the Wireshark field are strings; the bytes
          are in `CommitLogEntry.header_keys_raw`).
      - id: value_len
        type: s4
        valid:
          expr: _ >= 0
        doc: Length of the header value in bytes; a negative length is invalid.
      - id: value
        size: value_len
        doc: The header value.
