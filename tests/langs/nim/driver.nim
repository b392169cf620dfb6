## Conformance driver: the generated Nim parser over hex lines.
## Input, one case a line: "LAYOUT_ID HEX"; output one JSON object a line
## (tests/langs/README.md). Parse errors are the runtime's: KaitaiError (the
## checks), IOError/EOFError (a number read past the end) and AssertionDefect
## (the runtime's readBytes asserts that the bytes are there); anything else,
## any other Defect included, is a crash and ends the process.
import std/[json, strutils]
import kaitai_struct_nim_runtime
import liftbridge_envelope, liftbridge_commitlog

proc toHex(b: seq[byte]): string =
  for x in b: result.add(toHex(x.int, 2).toLowerAscii)

proc failure(e: ref Exception): JsonNode =
  %*{"ok": false, "error": $e.name & ": " & e.msg}

proc bytesOrNull(b: seq[byte], present: bool): JsonNode =
  if present: %toHex(b) else: newJNull()

proc commitlog(payload: seq[byte]): JsonNode =
  var cl: LiftbridgeCommitlog
  try:
    cl = LiftbridgeCommitlog.read(newKaitaiStream(payload), nil, nil)
  except KaitaiError, IOError, EOFError, AssertionDefect:
    return failure(getCurrentException())
  var entries = newJArray()
  for e in cl.entries:
    let b = e.body
    var headers = newJArray()
    for h in b.headers:
      var pair = newJArray()
      pair.add(newJString(toHex(h.key)))
      pair.add(newJString(toHex(h.value)))
      headers.add(pair)
    # Plain values only: the runtime's converter to Option makes `%` of
    # some expressions recurse without end.
    entries.add(%*{"offset": $e.offset, "timestamp": $e.timestamp, "leader_epoch": $e.leaderEpoch,
                   "size": int(e.size), "crc32c": int(b.crc32c), "magic": int(b.magic),
                   "attributes": int(b.attributes),
                   "key": bytesOrNull(b.key, b.keyLen >= 0),
                   "value": bytesOrNull(b.value, b.valueLen >= 0), "headers": headers})
  %*{"ok": true, "leader_epoch": $cl.leaderEpoch, "high_watermark": $cl.highWatermark,
     "entries": entries}

proc parse(data: seq[byte], layout: int): JsonNode =
  var env: LiftbridgeEnvelope
  try:
    env = LiftbridgeEnvelope.read(newKaitaiStream(data), nil, nil, LiftbridgeEnvelope_Layout(layout))
  except KaitaiError, IOError, EOFError, AssertionDefect:
    return failure(getCurrentException())
  result = %*{"ok": true, "version": nil, "header_len": nil, "flags": nil, "msg_type": nil,
              "crc32c": nil, "payload_offset": data.len - env.payload.len,
              "payload_len": env.payload.len, "commitlog": nil}
  let h = env.header
  if h != nil:
    result["version"] = %int(h.version)
    result["header_len"] = %int(h.headerLen)
    result["flags"] = %int(h.flags)
    result["msg_type"] = %int(h.msgType)
    if h.hasCrc: result["crc32c"] = %int(env.crc32c)
    if env.layout == LiftbridgeEnvelope_Layout.v0:
      # A byte outside the table is a KaitaiError here (lbparse's fixup; the
      # compiler's plain conversion raised a RangeDefect).
      var known = true
      var mt: LiftbridgeEnvelope_V0MsgType
      try:
        mt = h.v0MsgType
      except KaitaiError:
        known = false
      if known and mt == LiftbridgeEnvelope_V0MsgType.replication_response:
        result["commitlog"] = commitlog(env.payload)

for line in stdin.lines:
  let parts = line.strip.split(' ', 1)
  if parts[0].len == 0: continue
  let hex = if parts.len > 1: parts[1].strip else: ""
  var data = newSeq[byte](hex.len div 2)
  for i in 0 ..< data.len: data[i] = byte(parseHexInt(hex[2*i .. 2*i+1]))
  stdout.writeLine($parse(data, parseInt(parts[0])))
