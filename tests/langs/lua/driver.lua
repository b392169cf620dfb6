-- Conformance driver: the generated Lua parser over hex lines.
-- Input, one case a line: "LAYOUT_ID HEX"; output one JSON object a line
-- (tests/langs/README.md). The Lua runtime raises plain error strings: those of
-- a read past the end and of a failed check are parse errors; any other error
-- is a crash and ends the process.
local stringstream = require("string_stream")
require("kaitaistruct")
local LiftbridgeEnvelope = require("liftbridge_envelope")
local LiftbridgeCommitlog = require("liftbridge_commitlog")
-- The generated modules define globals; `require` returns true for them.
LiftbridgeEnvelope = _G.LiftbridgeEnvelope
LiftbridgeCommitlog = _G.LiftbridgeCommitlog

local PARSE_ERRORS = { "bytes, but only %d+ bytes available", "Validation%a+Error", "not equal, expected" }

local function jstr(s)
  return '"' .. s:gsub('[%c"\\\128-\255]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- Lua 5.3 integers are signed 64-bit: a u8 above 2^63-1 is negative; print it unsigned.
local function u64(v)
  if v >= 0 then return tostring(v) end
  local q = (v >> 1) // 5
  return tostring(q) .. tostring(v - q * 10)
end

local NULL = {}  -- a marker for null fields in a table (nil would drop the key)

local function json(v)
  local t = type(v)
  if v == nil or v == NULL then return "null"
  elseif t == "boolean" then return tostring(v)
  elseif t == "number" then return tostring(v)
  elseif t == "string" then return jstr(v)
  elseif v.__list then
    local out = {}
    for i = 1, #v.items do out[i] = json(v.items[i]) end
    return "[" .. table.concat(out, ",") .. "]"
  end
  local keys, out = {}, {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    out[#out + 1] = jstr(k) .. ":" .. json(v[k])
  end
  return "{" .. table.concat(out, ",") .. "}"
end


local function list(items) return { __list = true, items = items } end

local function failure(err)
  local msg = tostring(err)
  for _, p in ipairs(PARSE_ERRORS) do
    if msg:find(p) then return { ok = false, error = msg } end
  end
  error(err, 0)
end

local function commitlog(payload)
  local ok, cl = pcall(LiftbridgeCommitlog, KaitaiStream(stringstream(payload)))
  if not ok then return failure(cl) end
  local entries = {}
  for _, e in ipairs(cl.entries) do
    local b = e.body
    local headers = {}
    for _, h in ipairs(b.headers) do headers[#headers + 1] = list({ hex(h.key), hex(h.value) }) end
    entries[#entries + 1] = {
      offset = u64(e.offset), timestamp = tostring(e.timestamp), leader_epoch = u64(e.leader_epoch),
      size = e.size, crc32c = b.crc32c, magic = b.magic, attributes = b.attributes,
      key = b.key_len >= 0 and hex(b.key) or NULL, value = b.value_len >= 0 and hex(b.value) or NULL,
      headers = list(headers),
    }
  end
  return { ok = true, leader_epoch = u64(cl.leader_epoch), high_watermark = tostring(cl.high_watermark),
           entries = list(entries) }
end

local function parse(data, layout_id)
  local layout = LiftbridgeEnvelope.Layout(layout_id)
  local ok, env = pcall(LiftbridgeEnvelope, layout, KaitaiStream(stringstream(data)))
  if not ok then return failure(env) end
  local res = { ok = true, version = NULL, header_len = NULL, flags = NULL, msg_type = NULL,
                crc32c = NULL, commitlog = NULL,
                payload_offset = #data - #env.payload, payload_len = #env.payload }
  local h = env.header
  if h ~= nil then
    res.version, res.header_len, res.flags, res.msg_type = h.version, h.header_len, h.flags, h.msg_type
    if h.has_crc then res.crc32c = env.crc32c end
    if env.layout == LiftbridgeEnvelope.Layout.v0
        and h.v0_msg_type == LiftbridgeEnvelope.V0MsgType.replication_response then
      res.commitlog = commitlog(env.payload)
    end
  end
  return res
end

for line in io.lines() do
  local layout, hexs = line:match("^(%d+)%s*(%x*)")
  if layout then
    local data = hexs:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end)
    io.write(json(parse(data, tonumber(layout))), "\n")
  end
end
