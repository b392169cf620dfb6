// Run the generated JavaScript parser of spec/envelope.ksy over byte strings.
// Usage: node conformance.js GENERATED_JS_DIR ENVELOPE_KSY < cases.jsonl
// Each input line: {"case": ID, "hex": HEX, "layout_id": N} (N: the `layout` enum value).
// Each output line, in input order:
//   {"case", "ok": true, "version", "header_len", "flags", "byte7", "has_crc",
//    "crc32c", "crc_ok", "payload_offset", "payload_len", "msg_type_known"}
//   {"case", "ok": false, "error", "field", "kind"}
// `field` is the spec field whose read or check failed and `kind` its `-error`
// key in the .ksy, so error kinds come from the spec, not from this file.
// `msg_type_known` says whether byte 7 is in the Kaitai enum that the
// layout's `-msg-types` key names (null for layouts without MsgTypes).
"use strict";
const fs = require("fs");
const path = require("path");
const readline = require("readline");
const yaml = require("js-yaml");
const KaitaiStream = require("kaitai-struct/KaitaiStream");

const [genDir, ksyPath] = process.argv.slice(2);
const ksy = yaml.load(fs.readFileSync(ksyPath, "utf8"));
const camel = (id) => id.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
const upperCamel = (id) => camel(id).replace(/^[a-z]/, (c) => c.toUpperCase());
const Root = require(path.resolve(genDir, upperCamel(ksy.meta.id) + ".js"))[upperCamel(ksy.meta.id)];

// Which object was being read when parsing failed: wrap every type's _read.
let failedIn = null;
function watch(cls, typeName) {
  const read = cls.prototype._read;
  cls.prototype._read = function () {
    try {
      return read.call(this);
    } catch (err) {
      if (failedIn === null) failedIn = { obj: this, type: typeName };
      throw err;
    }
  };
}
const seqOf = { [ksy.meta.id]: ksy.seq || [] };
watch(Root, ksy.meta.id);
for (const [name, spec] of Object.entries(ksy.types || {})) {
  seqOf[name] = spec.seq || [];
  if (Root[upperCamel(name)]) watch(Root[upperCamel(name)], name);
}

// Fields declared only for another layout (`if: layout == layout::X`, the
// LIFT cookie) are not part of this case's read order.
function applies(f, layoutId) {
  const m = /^layout\s*==\s*layout::(\w+)$/.exec(String(f.if || "").trim());
  if (!m) return true;
  const entry = ksy.enums.layout[layoutId];
  return (typeof entry === "object" ? entry.id : entry) === m[1];
}

function failedField(err, layoutId) {
  const seq = seqOf[failedIn.type].filter((f) => applies(f, layoutId));
  const set = seq.filter((f) => failedIn.obj[camel(f.id)] !== undefined);
  // A failed check comes right after its field is stored; a read that ran
  // out of bytes never stores it.
  const field = err instanceof KaitaiStream.EOFError ? seq[set.length] : set[set.length - 1];
  return field;
}

// CRC-32C (Castagnoli, reflected 0x82F63B78), table-driven.
const CRC_TABLE = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  CRC_TABLE[n] = c >>> 0;
}
function crc32c(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function run(c) {
  const buf = Buffer.from(c.hex, "hex");
  const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.length);
  failedIn = null;
  let env;
  try {
    env = new Root(new KaitaiStream(bytes), null, null, c.layout_id);
  } catch (err) {
    if (failedIn === null) throw err;
    const field = failedField(err, c.layout_id);
    // The spec's first block (the fixed header) has no `-error` of its own:
    // running out of bytes before it ends is "too short".
    let kind = field ? field["-error"] || null : null;
    const first = seqOf[ksy.meta.id].filter((f) => applies(f, c.layout_id))[0];
    if (kind === null && field === first && err instanceof KaitaiStream.EOFError) {
      kind = "too_short";
    }
    return { case: c.case, ok: false, error: `${err.name}: ${err.message}`,
             field: field ? field.id : null, kind };
  }
  const h = env.header;
  const payloadOffset = bytes.length - env.payload.length;
  const layoutSpec = (ksy.enums.layout || {})[c.layout_id] || {};
  const msgTypes = layoutSpec["-msg-types"];
  const known = msgTypes ? Root[upperCamel(msgTypes)][h.msgType] !== undefined : null;
  return {
    case: c.case, ok: true, version: h.version, header_len: h.headerLen, flags: h.flags,
    byte7: h.msgType, has_crc: h.hasCrc, crc32c: h.hasCrc ? env.crc32c : null,
    crc_ok: h.hasCrc ? crc32c(env.payload) === env.crc32c : null,
    payload_offset: payloadOffset, payload_len: env.payload.length, msg_type_known: known,
  };
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (line.trim()) process.stdout.write(JSON.stringify(run(JSON.parse(line))) + "\n");
});
