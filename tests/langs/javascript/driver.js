// Conformance driver: the generated JavaScript parser over hex lines.
// Usage: node driver.js GENERATED_DIR < cases
// Input, one case a line: "LAYOUT_ID HEX"; output one JSON object a line
// (tests/langs/README.md). Parse errors are the runtime's (KaitaiStream.EOFError
// and the Validation errors, whose srcPath lbparse keeps); any other exception
// is a crash and ends the process.
"use strict";
const path = require("path");
const readline = require("readline");
const KaitaiStream = require("kaitai-struct/KaitaiStream");

const genDir = path.resolve(process.argv[2]);
const { LiftbridgeEnvelope } = require(path.join(genDir, "LiftbridgeEnvelope.js"));
const { LiftbridgeCommitlog } = require(path.join(genDir, "LiftbridgeCommitlog.js"));

function isParseError(err) {
  return err instanceof KaitaiStream.EOFError || /^Validation\w+Error$/.test(err.name);
}

function failure(err) {
  if (!isParseError(err)) throw err;
  return { ok: false, error: `${err.name}: ${err.message}` };
}

const hex = (b) => Buffer.from(b).toString("hex");

function commitlog(payload) {
  let cl;
  try {
    cl = new LiftbridgeCommitlog(new KaitaiStream(payload));
  } catch (err) {
    return failure(err);
  }
  // 64-bit values are BigInt: exact; printed as decimal strings.
  return {
    ok: true, leader_epoch: cl.leaderEpoch.toString(), high_watermark: cl.highWatermark.toString(),
    entries: cl.entries.map((e) => ({
      offset: e.offset.toString(), timestamp: e.timestamp.toString(),
      leader_epoch: e.leaderEpoch.toString(), size: e.size, crc32c: e.body.crc32c,
      magic: e.body.magic, attributes: e.body.attributes,
      key: e.body.keyLen >= 0 ? hex(e.body.key) : null,
      value: e.body.valueLen >= 0 ? hex(e.body.value) : null,
      headers: e.body.headers.map((h) => [hex(h.key), hex(h.value)]),
    })),
  };
}

function parse(data, layout) {
  let env;
  try {
    env = new LiftbridgeEnvelope(new KaitaiStream(data), null, null, layout);
  } catch (err) {
    return failure(err);
  }
  const res = { ok: true, version: null, header_len: null, flags: null, msg_type: null, crc32c: null,
                payload_offset: data.length - env.payload.length, payload_len: env.payload.length,
                commitlog: null };
  const h = env.header;
  if (h !== undefined && h !== null) {
    Object.assign(res, { version: h.version, header_len: h.headerLen, flags: h.flags, msg_type: h.msgType,
                         crc32c: h.hasCrc ? env.crc32c : null });
    if (env.layout === LiftbridgeEnvelope.Layout.V0
        && h.v0MsgType === LiftbridgeEnvelope.V0MsgType.REPLICATION_RESPONSE) {
      res.commitlog = commitlog(env.payload);
    }
  }
  return res;
}

const out = [];
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  const [layout, hexs] = line.trim().split(" ");
  if (!layout) return;
  const buf = Buffer.from(hexs || "", "hex");
  out.push(JSON.stringify(parse(new Uint8Array(buf.buffer, buf.byteOffset, buf.length), Number(layout))));
});
rl.on("close", () => process.stdout.write(out.length ? out.join("\n") + "\n" : ""));
