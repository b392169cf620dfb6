"""The fixed part of the Wireshark plugin: NATS framing and the walk over the
spec's tables (which `lbparse.codegen.wireshark` writes above it). No fact about
the Liftbridge bytes is written here: offsets, sizes, checks, error kinds,
layouts, MsgTypes, the commit-log layout and the subject table all come
from those tables. Lua 5.2, as Wireshark 4.0 embeds it (`bit32`, no 64-bit
integers: 64-bit fields are read as UInt64/Int64 by Wireshark).
"""

LUA_BODY = r"""
-- ---- fixed part: NATS framing and the walk over the tables above ----------
local MAX_LINE = 65536  -- longest control line we wait for (INFO/CONNECT JSON)
local band, bxor, rshift = bit32.band, bit32.bxor, bit32.rshift

-- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one table lookup per byte.
local CRC_TABLE = {}
for n = 0, 255 do
  local c = n
  for _ = 1, 8 do
    if band(c, 1) ~= 0 then c = bxor(rshift(c, 1), 0x82F63B78) else c = rshift(c, 1) end
  end
  CRC_TABLE[n] = c
end

local function crc32c(s)
  local c, byte = 0xFFFFFFFF, string.byte
  for i = 1, #s do c = bxor(CRC_TABLE[band(bxor(c, byte(s, i)), 0xFF)], rshift(c, 8)) end
  return bxor(c, 0xFFFFFFFF)
end

local layout_named, layout_names = {}, { "auto" }
for _, lay in ipairs(LAYOUTS) do
  layout_named[lay.name] = lay
  layout_names[#layout_names + 1] = lay.name
end
local LAYOUT_CHOICES = table.concat(layout_names, ", ")

-- ---- protocols and fields -----------------------------------------------
local nats = Proto("nats", "NATS client protocol")
local nf = {
  verb = ProtoField.string("nats.verb", "Verb"),
  subject = ProtoField.string("nats.subject", "Subject"),
  reply = ProtoField.string("nats.reply", "Reply subject"),
  sid = ProtoField.string("nats.sid", "Subscription id"),
  hdr_len = ProtoField.uint32("nats.hdr_len", "Header block length"),
  payload_len = ProtoField.uint32("nats.payload_len", "Payload length"),
  status = ProtoField.uint16("nats.status", "Status"),
  description = ProtoField.string("nats.description", "Status description"),
  header = ProtoField.string("nats.header", "Header"),
  line = ProtoField.string("nats.line", "Control line"),
}
nats.fields = { nf.verb, nf.subject, nf.reply, nf.sid, nf.hdr_len, nf.payload_len, nf.status,
                nf.description, nf.header, nf.line }
nats.prefs.tcp_port = Pref.uint("TCP port", DEFAULT_PORT, "TCP port of the NATS server")

local lb = Proto("liftbridge", "Liftbridge")
local lf = {
  layout = ProtoField.string("liftbridge.layout", "Layout"),
  status = ProtoField.string("liftbridge.status", "Status (ok or the error kind)"),
  version = ProtoField.uint8("liftbridge.version", "Version"),
  header_len = ProtoField.uint8("liftbridge.header_len", "Header length"),
  flags = ProtoField.uint8("liftbridge.flags", "Flags", base.HEX),
  msg_type = ProtoField.uint8("liftbridge.msg_type", "MsgType"),
  msg_type_name = ProtoField.string("liftbridge.msg_type_name", "MsgType name"),
  payload_type = ProtoField.string("liftbridge.payload_type", "Payload type"),
  cookie = ProtoField.bytes("liftbridge.cookie", "Cookie"),
  magic = ProtoField.bytes("liftbridge.magic", "Magic"),
  crc32c = ProtoField.uint32("liftbridge.crc32c", "CRC-32C", base.HEX),
  crc_ok = ProtoField.bool("liftbridge.crc_ok", "CRC-32C correct"),
  payload_len = ProtoField.uint32("liftbridge.payload_len", "Payload length"),
  payload = ProtoField.bytes("liftbridge.payload", "Payload"),
  ambiguous = ProtoField.bool("liftbridge.ambiguous", "Several layouts fit"),
  error = ProtoField.string("liftbridge.error", "Error"),
  traffic = ProtoField.string("liftbridge.traffic", "Traffic"),
  traffic_kind = ProtoField.string("liftbridge.traffic_kind", "Traffic kind"),
  raft_rpc = ProtoField.string("liftbridge.raft_rpc", "Raft RPC"),
  text = ProtoField.string("liftbridge.text", "Text"),
}
-- The commit log's fields, one per field of commitlog.ksy.
local cf = {}
for _, spec in ipairs(COMMITLOG_FIELDS) do
  local abbr, kind, key = spec[1], spec[2], spec[3]
  local label = key:gsub("^[^.]*%.", ""):gsub("_", " ")
  local make = ({ u1 = ProtoField.uint8, u2 = ProtoField.uint16, u4 = ProtoField.uint32,
                  u8 = ProtoField.uint64, s1 = ProtoField.int8, s2 = ProtoField.int16,
                  s4 = ProtoField.int32, s8 = ProtoField.int64, string = ProtoField.string,
                  bytes = ProtoField.bytes, none = ProtoField.none })[kind]
  cf[key] = make(abbr, label)
end
local all = {}
for _, f in pairs(lf) do all[#all + 1] = f end
for _, f in pairs(cf) do all[#all + 1] = f end
lb.fields = all

local bad_envelope = ProtoExpert.new("liftbridge.bad_envelope", "Not a well-formed envelope",
                                     expert.group.MALFORMED, expert.severity.ERROR)
local bad_payload = ProtoExpert.new("liftbridge.bad_payload", "Payload does not parse",
                                    expert.group.MALFORMED, expert.severity.WARN)
local bad_pref = ProtoExpert.new("liftbridge.bad_preference", "Unknown liftbridge.layout",
                                 expert.group.PROTOCOL, expert.severity.ERROR)
lb.experts = { bad_envelope, bad_payload, bad_pref }
lb.prefs.layout = Pref.string("Layout", "auto",
  "Which generation wrote the envelopes: auto (tell them apart as lbparse does) or one of: "
  .. LAYOUT_CHOICES)

-- Wireshark's protobuf dissector decodes the payloads with the .proto files
-- beside this plugin: their folder is added to its search paths (the
-- protobuf_search_paths file of the personal configuration, once), and, for
-- this session only, its fields are filterable (pbf.proto.Message.stream).
local protobuf = Dissector.get("protobuf")
local function plugin_dir()
  local src = debug.getinfo(1, "S").source
  return src:sub(1, 1) == "@" and src:sub(2):match("^(.*)[/\\]") or nil
end
-- Dir.make makes one folder: make each missing one on the way, as a fresh
-- user has no ~/.config either (the search-path file could not be written).
local function make_dirs(path)
  local at = 1
  while true do
    local sep = path:find("[/\\]", at + 1)
    local prefix = sep and path:sub(1, sep - 1) or path
    if prefix ~= "" and not prefix:match(":$") and not Dir.exists(prefix) then
      pcall(Dir.make, prefix)
    end
    if sep == nil then return end
    at = sep
  end
end
local function setup_protobuf()
  local dir = plugin_dir()
  if protobuf == nil or dir == nil then return end
  local protos = dir .. "/" .. PROTO_DIR
  local probe = io.open(protos .. "/api.proto", "r")
  if probe == nil then return end
  probe:close()
  local uat = Dir.personal_config_path("protobuf_search_paths")
  local line = string.format('"%s","TRUE"', protos:gsub('"', '\\"'))
  local f = io.open(uat, "r")
  local text = f and f:read("*a") or ""
  if f then f:close() end
  if not text:find(line, 1, true) then
    -- Keep the user's lines; drop this plugin's folder from elsewhere (a
    -- moved install): the same .proto files twice would clash.
    local keep = {}
    for l in text:gmatch("[^\n]+") do
      if not l:find("/" .. PROTO_DIR .. '","', 1, true) then keep[#keep + 1] = l end
    end
    keep[#keep + 1] = line
    make_dirs(Dir.personal_config_path())
    local w = io.open(uat, "w")
    if w then
      w:write(table.concat(keep, "\n"), "\n")
      w:close()
    end
  end
  -- Fields as filterable pbf.* fields, registered at start (so -e and -Y take them).
  pcall(set_preference, "protobuf.pbf_as_hf", true)
  pcall(set_preference, "protobuf.preload_protos", true)
end
setup_protobuf()

-- ---- protobuf wire types: does a payload fit a type (auto's evidence) -------
local function varint(s, i)
  local v, mul = 0, 1
  for j = i, math.min(i + 9, #s) do
    local b = s:byte(j)
    v = v + (b % 128) * mul
    if b < 128 then return v, j + 1 end
    mul = mul * 128
  end
  return nil
end

-- The top-level fields of a protobuf message: (number, wire type) pairs, or
-- nil when the bytes are not protobuf (a bad key, a length past the end).
local function wire_scan(s)
  local out, i, n = {}, 1, #s
  while i <= n do
    local key, nxt = varint(s, i)
    if key == nil then return nil end
    local number, wire = math.floor(key / 8), key % 8
    if number == 0 then return nil end
    if wire == 0 then
      local _, after = varint(s, nxt)
      if after == nil then return nil end
      i = after
    elseif wire == 1 then i = nxt + 8
    elseif wire == 5 then i = nxt + 4
    elseif wire == 2 then
      local l, after = varint(s, nxt)
      if l == nil then return nil end
      nxt, i = after, after + l
    else return nil end
    if i > n + 1 then return nil end
    out[#out + 1] = { number, wire, nxt, i }  -- the value is s:sub(nxt, i - 1)
  end
  return out
end

-- Whether a byte string is UTF-8 (what protobuf requires of a string field).
local function utf8_ok(s)
  local i, n = 1, #s
  while i <= n do
    local c = s:byte(i)
    local extra = c < 0x80 and 0 or c >= 0xC2 and c <= 0xDF and 1 or c >= 0xE0 and c <= 0xEF and 2
                  or c >= 0xF0 and c <= 0xF4 and 3 or nil
    if extra == nil or i + extra > n then return false end
    for j = i + 1, i + extra do
      local b = s:byte(j)
      if b < 0x80 or b > 0xBF then return false end
    end
    local c2 = s:byte(i + 1)
    if (c == 0xE0 and c2 < 0xA0) or (c == 0xED and c2 > 0x9F) or (c == 0xF0 and c2 < 0x90)
        or (c == 0xF4 and c2 > 0x8F) then
      return false  -- overlong, a surrogate, past U+10FFFF
    end
    i = i + extra + 1
  end
  return true
end

-- Whether every top-level field is one of the type's own, with its wire type
-- (and a string field UTF-8).
local function fits(s, ptype)
  local wire, fields = WIRE[ptype], wire_scan(s)
  if wire == nil or fields == nil then return false end
  for _, f in ipairs(fields) do
    local allowed = wire[f[1]]
    if allowed == nil or not allowed[f[2]] then return false end
    if allowed.utf8 and f[2] == 2 and not utf8_ok(s:sub(f[3], f[4] - 1)) then return false end
  end
  return true
end

-- ---- the envelope: a walk over SEQ ------------------------------------------
local function read_value(tvb, at, row)
  local r = tvb(at, row.size)
  if row.value == "int" then return r:uint(), r end
  return r:raw(), r
end

-- Every field of one layout's reading of `len` bytes at `off`. Returns a
-- result table: err (kind) and why, or the fields read and the payload.
local function analyze(tvb, off, len, lay)
  local res = { lay = lay, items = {}, h = {}, first = true }
  local h, pos = res.h, 0
  local function fail(kind, why) res.err, res.why = kind, why; return res end
  for _, row in ipairs(SEQ) do
    if row.present == nil or row.present(h, lay.id) then
      if row.value == "rest" then
        local v = tvb:raw(off + pos, len - pos)
        if row.check and not row.check(v, h, lay.id) then
          return fail(row.error, row.id .. " fails its check")
        end
        res.payload_off, res.payload_len = pos, len - pos
      else
        if pos + row.size > len then
          -- Nothing read yet: the bytes are too short; else the field's own kind.
          local kind = res.first and KIND.too_short or (row.error or KIND.truncated)
          return fail(kind, row.id .. " needs " .. row.size .. " bytes at " .. pos .. ", " .. len .. " there")
        end
        res.first = false
        if row.value == "block" then
          for _, f in ipairs(row.fields) do
            local v, r = read_value(tvb, off + pos + f.offset, f)
            h[f.id] = v
            res.items[#res.items + 1] = { id = f.id, range = r }
            if f.check and not f.check(v, h, lay.id) then
              local kind = f.error
              -- The CRC flag and the header length are checked together on
              -- the flags byte; which is wrong depends on the flag (lbparse).
              if f.id == FLAG_SPLIT.field then
                kind = HAS_CRC(h, lay.id) and FLAG_SPLIT.set or FLAG_SPLIT.clear
              end
              return fail(kind, f.id .. " fails its check")
            end
          end
        else
          local v, r = read_value(tvb, off + pos, row)
          h[row.id] = v
          res.items[#res.items + 1] = { id = row.id, range = r }
          if row.check and not row.check(v, h, lay.id) then
            return fail(row.error, row.id .. " fails its check")
          end
        end
        pos = pos + row.size
      end
    end
  end
  if res.payload_off == nil then res.payload_off, res.payload_len = pos, len - pos end
  if h.crc32c ~= nil then
    res.crc_ok = crc32c(tvb:raw(off + res.payload_off, res.payload_len)) == h.crc32c
    if not res.crc_ok then return fail(KIND.crc_mismatch, "the payload does not match the CRC-32C") end
  end
  if lay.byte7 == "msg_type" then
    local mt = lay.msg_types[h.msg_type]
    if mt == nil then
      return fail(KIND.unknown_msg_type, "MsgType " .. h.msg_type .. " is not in the " .. lay.name .. " table")
    end
    res.msg_type_name, res.ptype = mt.name, mt.ptype
  else
    res.msg_type_name, res.ptype = lay.byte7_name, lay.payload
    -- The header does not say the payload type: the first that fits, else the default.
    local payload = tvb:raw(off + res.payload_off, res.payload_len)
    for _, t in ipairs(lay.alternatives) do
      if not fits(payload, res.ptype) and fits(payload, t) then res.ptype = t end
    end
  end
  -- A protobuf payload must at least be protobuf at its top level (what
  -- lbparse calls bad_payload; Wireshark's protobuf dissector shows the rest).
  if lay.format == "protobuf" and WIRE[res.ptype] and res.payload_len > 0
      and wire_scan(tvb:raw(off + res.payload_off, res.payload_len)) == nil then
    return fail(KIND.bad_payload, "the payload is not a protobuf " .. res.ptype)
  end
  return res
end

-- ---- the commit log: a walk over COMMITLOG -----------------------------------
local function read_struct(tvb, pos, limit, tname, tree, depth)
  if depth > 8 then error("nesting too deep") end
  local h = {}
  for _, f in ipairs(COMMITLOG[tname]) do
    if f.present == nil or f.present(h) then
      local field = cf[tname .. "." .. f.id]
      if f.value == "int" then
        if pos + f.size > limit then error(f.id .. " runs past the payload (offset " .. pos .. ")") end
        local r = tvb(pos, f.size)
        local v
        if f.size == 8 then v = f.signed and r:int64() or r:uint64()
        else v = f.signed and r:int() or r:uint() end
        h[f.id] = v
        if tree then tree:add(field, r) end
        if f.check and not f.check(v, h) then error(f.id .. " fails its check (offset " .. pos .. ")") end
        pos = pos + f.size
      elseif f.value == "struct" then
        local function one(i)
          local size = f.length and f.length(h) or nil
          local stop = size and pos + size or limit
          if size and (size < 0 or stop > limit) then error(f.id .. " runs past the payload (offset " .. pos .. ")") end
          local sub = nil
          if tree then
            local span = size or (limit - pos)
            sub = span > 0 and tree:add(field, tvb(pos, span)) or tree:add(field)
            if i then sub:append_text(" " .. i) end
          end
          local after = read_struct(tvb, pos, stop, f.type, sub, depth + 1)
          if sub and size == nil and after > pos then sub:set_len(after - pos) end
          pos = size and stop or after
        end
        if f.rep == "eos" then
          local i = 0
          while pos < limit do i = i + 1; one(i) end
        elseif f.rep == "expr" then
          for i = 1, math.max(f.count(h), 0) do one(i) end
        else one(nil) end
      else
        local size = f.length(h)
        if size < 0 or pos + size > limit then error(f.id .. " runs past the payload (offset " .. pos .. ")") end
        if tree then
          if size > 0 then tree:add(field, tvb(pos, size)) else tree:add(field, "") end
        end
        pos = pos + size
      end
    end
  end
  return pos
end

-- ---- other traffic: the subject table -------------------------------------------
local pending_replies = {}  -- reply subject of a handshake request -> its name

local function classify(subject, reply)
  if subject == nil then return nil end
  local named = pending_replies[subject]
  if named then return named end
  for _, s in ipairs(SUBJECTS) do
    if subject:match(s.pattern) then
      if s.kind == "raft_accept" and reply then
        pending_replies[reply] = { kind = s.kind, name = s.name .. " reply" }
      end
      return s
    end
  end
  return nil
end

local function describe_traffic(tvb, off, len, item, cls)
  item:add(lf.traffic_kind, cls.kind)
  if cls.kind == "raft_stream" then
    if len == 0 then
      item:add(lf.raft_rpc, "stream close")
    else
      local first = tvb(off, 1):uint()
      -- A request starts with its RPC type; a response with a msgpack string.
      if RPC_TYPES[first] then item:add(lf.raft_rpc, RPC_TYPES[first] .. " request")
      elseif first >= 0xa0 and first <= 0xbf or first >= 0xd9 and first <= 0xdb then
        item:add(lf.raft_rpc, "response")
      else item:add(lf.raft_rpc, "continuation") end
    end
  elseif len > 0 and len <= 4096 and not tvb:raw(off, len):find("[^\32-\126]") then
    item:add(lf.text, tvb(off, len), tvb:raw(off, len))  -- the JSON handshake, a server id
  end
end

-- ---- one NATS message's payload ---------------------------------------------
local function chosen_layout()
  local name = lb.prefs.layout
  if name == "auto" then return "auto" end
  return layout_named[name]
end

local function starts_with_magic(tvb, off, len)
  for _, row in ipairs(SEQ) do
    for _, f in ipairs(row.fields or {}) do
      if f.value == "bytes" and f.check then
        return len >= f.size and f.check(tvb:raw(off, f.size), {}, 0)
      end
    end
  end
  return false
end

local function is_clean(tvb, off, res)
  local ptype = res.ptype
  if ptype == "raw" then
    local start = off + res.payload_off
    return (pcall(read_struct, tvb, start, start + res.payload_len, COMMITLOG_ROOT, nil, 0))
  end
  return res.lay.format == "protobuf" and WIRE[ptype] ~= nil
         and fits(tvb:raw(off + res.payload_off, res.payload_len), ptype)
end

-- `auto`: every layout that accepts the bytes is a candidate; those whose
-- payload schema confirms them come first, then the newest (LAYOUTS order).
-- Layouts whose payloads this plugin cannot check (FlatBuffers) are left
-- out: without that evidence they would accept any bytes after a header.
local function auto(tvb, off, len)
  local best, clean_count, newest_err = nil, 0, nil
  for _, lay in ipairs(LAYOUTS) do
    local res = lay.format == "protobuf" and analyze(tvb, off, len, lay) or { err = "skipped", lay = lay }
    if res.err == nil and lay.byte7 == "reserved" and res.h.msg_type ~= 0 then
      res.err = KIND.unknown_msg_type  -- a reserved byte other than 0 is not that layout
    end
    if res.err == nil then
      res.clean = is_clean(tvb, off, res)
      if res.clean then clean_count = clean_count + 1 end
      if best == nil or (res.clean and not best.clean) then best = res end
    elseif newest_err == nil and lay.has_header and res.err ~= "skipped" then
      newest_err = res
    end
  end
  if (best == nil or not best.lay.has_header) and newest_err and starts_with_magic(tvb, off, len) then
    return newest_err
  end
  if best then best.ambiguous = clean_count > 1 end
  return best
end

local function dissect_payload(tvb, pinfo, off, len, tree, subject, reply, status)
  local item = tree:add(lb, tvb(off, len))
  local lay = chosen_layout()
  if lay == nil then
    item:add(lf.layout, lb.prefs.layout)
    item:add(lf.status, "bad_preference")
    item:add(lf.error, "liftbridge.layout is " .. lb.prefs.layout .. ", not one of " .. LAYOUT_CHOICES)
    item:add_proto_expert_info(bad_pref, "liftbridge.layout '" .. lb.prefs.layout .. "' is not one of "
                               .. LAYOUT_CHOICES)
    return
  end
  local res = lay == "auto" and auto(tvb, off, len) or analyze(tvb, off, len, lay)
  local cls = classify(subject, reply)
  if cls == nil and status then
    -- A status line without a payload (503: no responders) is the server's own reply.
    cls = { kind = "nats_status", name = "NATS status " .. status }
  end
  local payload_err = nil
  if res.err == nil and res.ptype == "raw" then
    local start = off + res.payload_off
    local ok, err = pcall(read_struct, tvb, start, start + res.payload_len, COMMITLOG_ROOT, nil, 0)
    if not ok then payload_err = tostring(err):gsub("^.-:%d+: ", "") end
  end
  -- Fields every message has, once each: their -T fields lists line up.
  item:add(lf.layout, res.lay.name)
  item:add(lf.status, res.err or (payload_err and KIND.bad_payload) or "ok")
  item:add(lf.msg_type_name, res.msg_type_name or "")
  item:add(lf.payload_type, res.err == nil and res.ptype or "")
  item:add(lf.traffic, cls and cls.name or "")
  item:append_text(", " .. res.lay.name)
  for _, it in ipairs(res.items) do
    local child = nil
    -- Byte 7 is a MsgType only in layouts that say so (legacy: reserved).
    local shown = it.id ~= "msg_type" or res.lay.byte7 == "msg_type"
    if lf[it.id] and shown then child = item:add(lf[it.id], it.range) end
    if it.id == "msg_type" and child and res.msg_type_name then
      child:append_text(" (" .. res.msg_type_name .. ")")
    end
  end
  if res.crc_ok ~= nil then item:add(lf.crc_ok, res.crc_ok) end
  if res.ambiguous then item:add(lf.ambiguous, true) end
  if res.err then
    item:add(lf.error, res.err .. ": " .. res.why)
    item:add_proto_expert_info(bad_envelope, res.err .. ": " .. res.why)
    item:append_text(", " .. res.err)
    return res
  end
  local poff, plen = off + res.payload_off, res.payload_len
  item:add(lf.payload_len, plen)
  if res.msg_type_name then item:append_text(", " .. res.msg_type_name) end
  if res.ptype == "raw" then
    pcall(read_struct, tvb, poff, poff + plen, COMMITLOG_ROOT, item, 0)  -- as far as it goes
    if payload_err then
      item:add(lf.error, KIND.bad_payload .. ": ReplicationResponse: " .. payload_err)
      item:add_proto_expert_info(bad_payload, "ReplicationResponse: " .. payload_err)
    end
  elseif plen > 0 and res.lay.format == "protobuf" and WIRE[res.ptype] and protobuf then
    pinfo.private["pb_msg_type"] = "message," .. res.ptype
    pcall(protobuf.call, protobuf, tvb(poff, plen):tvb(), pinfo, item)
  elseif res.ptype == "bytes" and cls then
    describe_traffic(tvb, poff, plen, item, cls)
  end
  return res
end

-- ---- NATS framing -------------------------------------------------------
local function words(line)
  local out = {}
  for w in line:gmatch("%S+") do out[#out + 1] = w end
  return out
end

-- Frames that carry a payload: verb -> positions of subject, sid, reply and sizes.
local function payload_args(verb, w)
  local n = #w
  if verb == "PUB" then
    return { subject = w[2], reply = n == 4 and w[3] or nil, total = tonumber(w[n]), hdr = 0 }
  elseif verb == "HPUB" then
    return { subject = w[2], reply = n == 5 and w[3] or nil, hdr = tonumber(w[n - 1]),
             total = tonumber(w[n]) }
  elseif verb == "MSG" then
    return { subject = w[2], sid = w[3], reply = n == 5 and w[4] or nil, total = tonumber(w[n]),
             hdr = 0 }
  elseif verb == "HMSG" then
    return { subject = w[2], sid = w[3], reply = n == 6 and w[4] or nil, hdr = tonumber(w[n - 1]),
             total = tonumber(w[n]) }
  end
  return nil
end

-- The header block: "NATS/1.0[ status[ description]]" then "Key: Value" lines.
local function dissect_headers(tvb, off, len, t)
  local block = tvb:raw(off, len)
  local first, status = true, nil
  local pos = 1
  for line in block:gmatch("([^\r\n]*)\r\n") do
    if first then
      local code, desc = line:match("^NATS/%d+%.%d+%s+(%d%d%d)%s*(.*)$")
      if code then
        status = code
        t:add(nf.status, tvb(off + pos - 1 + line:find(code, 1, true) - 1, 3), tonumber(code))
        if desc ~= "" then t:add(nf.description, desc) end
      end
      first = false
    elseif line ~= "" then
      t:add(nf.header, tvb(off + pos - 1, #line), line)
    end
    pos = pos + #line + 2
  end
  return status
end

-- One frame at `off`: bytes consumed, or a negative count of bytes still missing.
local function dissect_frame(tvb, pinfo, tree, off, info)
  local avail = tvb:len() - off
  local s = tvb:raw(off, math.min(avail, MAX_LINE))
  local eol = s:find("\r\n", 1, true)
  if eol == nil then
    if avail >= MAX_LINE then return avail end  -- not NATS framing: give up on this data
    return -DESEGMENT_ONE_MORE_SEGMENT
  end
  local line = s:sub(1, eol - 1)
  local w = words(line)
  local verb = (w[1] or ""):upper()
  local args = payload_args(verb, w)
  local line_len = eol + 1
  local size = line_len
  if args and args.total and args.hdr and args.total >= args.hdr then
    size = line_len + args.total + 2
    if size > avail then return avail - size end
  else
    args = nil
  end
  local t = tree:add(nats, tvb(off, size))
  t:add(nf.verb, tvb(off, #(w[1] or "")), verb)
  t:append_text(", " .. verb)
  info[#info + 1] = verb
  if args then
    -- Every message adds each of these once (empty when it has none).
    t:add(nf.subject, args.subject)
    t:add(nf.reply, args.reply or "")
    t:add(nf.sid, args.sid or "")
    t:add(nf.hdr_len, args.hdr)
    t:add(nf.payload_len, args.total - args.hdr)
    t:append_text(" " .. args.subject)
    info[#info] = verb .. " " .. args.subject
    local status = args.hdr > 0 and dissect_headers(tvb, off + line_len, args.hdr, t) or nil
    dissect_payload(tvb, pinfo, off + line_len + args.hdr, args.total - args.hdr, t, args.subject,
                    args.reply, status)
  else
    t:add(nf.line, tvb(off, eol - 1), line)
  end
  return size
end

function nats.dissector(tvb, pinfo, tree)
  local len, off, info = tvb:len(), 0, {}
  -- Read before any subdissector runs: calling one (protobuf) lowers it.
  local can_desegment = pinfo.can_desegment
  local guard = len + 1  -- every frame consumes at least one byte
  while off < len and guard > 0 do
    guard = guard - 1
    local n = dissect_frame(tvb, pinfo, tree, off, info)
    if n < 0 then
      if can_desegment > 0 then
        pinfo.desegment_offset = off
        pinfo.desegment_len = (n == -DESEGMENT_ONE_MORE_SEGMENT) and DESEGMENT_ONE_MORE_SEGMENT or -n
        break
      end
      off = len  -- cannot reassemble: the rest is a partial frame
    else
      off = off + n
    end
  end
  pinfo.cols.protocol = "NATS"
  if #info > 0 then pinfo.cols.info = table.concat(info, "; ") end
  return len
end

local registered_port = nil
local function register_port()
  local tcp = DissectorTable.get("tcp.port")
  if registered_port then tcp:remove(registered_port, nats) end
  registered_port = nats.prefs.tcp_port
  tcp:add(registered_port, nats)
end
nats.prefs_changed = register_port
register_port()

-- Liftbridge's client API is gRPC over cleartext HTTP/2 (h2c): its ports go
-- to Wireshark's HTTP/2 dissector, whose gRPC hands each message to protobuf,
-- which finds its type by the call's :path in api.proto's `service API`.
lb.prefs.api_ports = Pref.range("API ports", "9292",
  "TCP ports of Liftbridge's gRPC API (a range, as 9292 or 29392-29394)", 65535)
local http2 = Dissector.get("http2")
local registered_api = nil
local function register_api_ports()
  if http2 == nil then return end
  local tcp = DissectorTable.get("tcp.port")
  if registered_api then tcp:remove(registered_api, http2) end
  registered_api = lb.prefs.api_ports
  if registered_api ~= "" then tcp:add(registered_api, http2) end
end
register_api_ports()

lb.prefs_changed = function()
  register_api_ports()
  if chosen_layout() == nil then
    report_failure("liftbridge.layout is '" .. lb.prefs.layout .. "', not one of " .. LAYOUT_CHOICES)
  end
end
"""
