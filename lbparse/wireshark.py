"""Generate a Wireshark Lua dissector for NATS and the Liftbridge envelope.

`write_dissector(folder)` writes `liftbridge.lua`. Everything that
describes the envelope comes from the spec: the header fields, their byte
offsets and checks are read from `spec/envelope.ksy` (Kaitai `seq`,
`contents`, `valid`, `if` expressions translated to Lua, `-error` kinds),
the layouts and MsgType names from the generated dispatch table
(`lbparse.layouts.LAYOUTS`). The Lua below is the fixed part: the NATS
framing (not in the spec) and the walk over those tables.

Load it with `tshark -X lua_script:liftbridge.lua` or copy it to a
Wireshark plugin folder. Preferences: `nats.tcp_port` (default 4222) and
`liftbridge.layout` (which generation wrote the envelopes; the header alone
cannot always tell).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from lbparse.layouts import LAYOUTS, Layout
from lbparse.errors import KINDS

__all__ = ["DEFAULT_PORT", "FILE_NAME", "lua_source", "write_dissector"]

ROOT = Path(__file__).resolve().parent.parent
ENVELOPE_KSY = ROOT / "spec" / "envelope.ksy"
FILE_NAME = "liftbridge.lua"
DEFAULT_PORT = 4222
INT_SIZES = {"u1": 1, "u2": 2, "u4": 4}


def _need_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"error kind {kind!r} is not one of lbparse's KINDS")
    return kind


# --- Kaitai expressions (the subset the spec uses) to Lua ----------------

_TOKEN = re.compile(r"\s*(?:(0x[0-9a-fA-F_]+|\d[\d_]*)|([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)?)"
                    r"|(==|!=|<=|>=|<<|>>|[-+*/%&|^<>().!~]))")
_BINARY = {  # Kaitai operator -> (precedence, Lua template)
    "or": (1, "({a} or {b})"), "and": (2, "({a} and {b})"),
    "==": (4, "({a} == {b})"), "!=": (4, "({a} ~= {b})"), "<": (4, "({a} < {b})"),
    "<=": (4, "({a} <= {b})"), ">": (4, "({a} > {b})"), ">=": (4, "({a} >= {b})"),
    "|": (5, "bit32.bor({a}, {b})"), "^": (6, "bit32.bxor({a}, {b})"),
    "&": (7, "bit32.band({a}, {b})"), "<<": (8, "bit32.lshift({a}, {b})"),
    ">>": (8, "bit32.rshift({a}, {b})"), "+": (9, "({a} + {b})"), "-": (9, "({a} - {b})"),
    "*": (10, "({a} * {b})"), "/": (10, "math.floor({a} / {b})"), "%": (10, "({a} % {b})"),
}


class _ExprTranslator:
    """Kaitai expression -> Lua, resolving names in the context of one type.

    `_` is the value being checked (`v`), a field of the header is
    `h.NAME`, an instance is inlined, `TYPE.NAME` resolves in that type,
    `_root.layout` is the layout parameter and `ENUM::ID` its number.
    """

    def __init__(self, ksy: dict[str, Any]) -> None:
        self.ksy = ksy

    def translate(self, expr: str, type_name: str) -> str:
        self.tokens = [t for t in _TOKEN.findall(str(expr))]
        if "".join("".join(t) for t in self.tokens).replace(" ", "") != str(expr).replace(" ", ""):
            raise ValueError(f"cannot translate Kaitai expression {expr!r}")
        self.tokens = ["".join(t) for t in self.tokens]
        self.pos, self.type_name = 0, type_name
        out = self._expr(0)
        if self.pos != len(self.tokens):
            raise ValueError(f"cannot translate Kaitai expression {expr!r}")
        return out

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _next(self) -> str:
        tok = self._peek()
        if tok is None:
            raise ValueError("expression ends too early")
        self.pos += 1
        return tok

    def _expr(self, min_prec: int) -> str:
        left = self._unary()
        while (op := self._peek()) in _BINARY and _BINARY[op][0] > min_prec:
            self._next()
            prec, template = _BINARY[op]
            left = template.format(a=left, b=self._expr(prec))
        return left

    def _unary(self) -> str:
        tok = self._next()
        if tok == "not":
            return f"(not {self._expr(3)})"
        if tok == "-":
            return f"(-{self._unary()})"
        if tok == "~":
            return f"bit32.bnot({self._unary()})"
        if tok == "(":
            inner = self._expr(0)
            if self._next() != ")":
                raise ValueError("unbalanced parenthesis")
            return inner
        if tok[0].isdigit():
            return str(int(tok.replace("_", ""), 0))
        if tok in ("true", "false"):
            return tok
        return self._name(tok)

    def _name(self, tok: str) -> str:
        if "::" in tok:
            enum, ident = tok.split("::")
            for value, attrs in self.ksy["enums"][enum].items():
                if (attrs["id"] if isinstance(attrs, dict) else attrs) == ident:
                    return str(int(value))
            raise ValueError(f"unknown enum value {tok}")
        type_name = self.type_name
        if tok == "_root" and self._peek() == ".":
            self._next()
            param = self._next()
            if param != "layout":
                raise ValueError(f"unsupported _root.{param}")
            return "layout_id"
        if tok in self.ksy.get("types", {}) and self._peek() == ".":
            self._next()
            type_name, tok = tok, self._next()
        if tok == "header" and self._peek() == ".":  # the seq field `header`
            self._next()
            type_name, tok = "header", self._next()
        return self._member(type_name, tok)

    def _member(self, type_name: str, name: str) -> str:
        if name == "_":
            return "v"
        if name in {p["id"] for p in self.ksy.get("params", [])}:
            if name != "layout":
                raise ValueError(f"unsupported parameter {name}")
            return "layout_id"
        root = type_name == self.ksy["meta"]["id"]
        spec = self.ksy if root else self.ksy["types"][type_name]
        if any(f["id"] == name for f in spec.get("seq", [])):
            return f"h.{name}"
        inst = spec.get("instances", {}).get(name)
        if inst and "value" in inst:
            saved = (self.tokens, self.pos, self.type_name)
            try:
                return f"({self.translate(inst['value'], type_name)})"
            finally:
                self.tokens, self.pos, self.type_name = saved
        raise ValueError(f"unknown name {name!r} in type {type_name}")


# --- the spec as Lua tables ----------------------------------------------

def _lua_str(s: str) -> str:
    return '"' + "".join(c if c.isascii() and (c.isalnum() or c in " _-.:,()/'") else f"\\{ord(c):03d}"
                         for c in s) + '"'


def _size(field: dict[str, Any]) -> int:
    if "contents" in field:
        return len(field["contents"])
    if field.get("type") in INT_SIZES:
        return INT_SIZES[field["type"]]
    raise ValueError(f"field {field['id']}: only contents and u1/u2/u4 are supported")


def _check(field: dict[str, Any], tr: _ExprTranslator) -> str | None:
    """Lua expression of the field's check (`v` the value, `h` the header), or None."""
    if "contents" in field:
        c = field["contents"]
        raw = c if isinstance(c, str) else "".join(chr(b) for b in c)
        return f"(v == {_lua_str(raw)})"
    valid = field.get("valid")
    if valid is None:
        return None
    if not isinstance(valid, dict):
        return f"(v == {int(valid)})"
    parts = []
    if "eq" in valid:
        parts.append(f"(v == {int(valid['eq'])})")
    if "any-of" in valid:
        parts.append("(" + " or ".join(f"v == {int(x)}" for x in valid["any-of"]) + ")")
    if "min" in valid:
        parts.append(f"(v >= {int(valid['min'])})")
    if "max" in valid:
        parts.append(f"(v <= {int(valid['max'])})")
    if "expr" in valid:
        parts.append(tr.translate(valid["expr"], "header"))
    return "(" + " and ".join(parts) + ")"


def _fields_lua(ksy: dict[str, Any]) -> tuple[str, int]:
    """The header fields in read order with absolute offsets, and the fixed length."""
    tr = _ExprTranslator(ksy)
    rows: list[str] = []
    offset = 0
    fixed_len = None

    def row(field: dict[str, Any], at: int, type_name: str) -> str:
        size = _size(field)
        kind = field.get("-error")
        check = _check(field, tr)
        cond = tr.translate(field["if"], type_name) if "if" in field else None
        return ("  { id = %s, offset = %d, size = %d, bytes = %s, error = %s,\n"
                "    check = %s,\n    present = %s },\n") % (
            _lua_str(field["id"]), at, size, "true" if "contents" in field else "false",
            _lua_str(_need_kind(kind)) if kind else "nil",
            f"function(v, h, layout_id) return {check} end" if check else "nil",
            f"function(h, layout_id) return {cond} end" if cond else "nil")

    # Fields that exist only in layouts without the envelope header (the
    # LIFT cookie) are not the dissector's: it dissects enveloped layouts.
    headerless = [f"layout::{lay.kaitai_id}" for lay in LAYOUTS.values() if not lay.has_header]
    for top in ksy["seq"]:
        if any(str(top.get("if", "")).replace(" ", "") == f"layout=={h}" for h in headerless):
            continue
        if top.get("type") in ksy.get("types", {}):
            start = offset
            for field in ksy["types"][top["type"]].get("seq", []):
                rows.append(row(field, offset, top["type"]))
                offset += _size(field)
            if "size" in top:
                offset = start + int(top["size"])
            fixed_len = offset if fixed_len is None else fixed_len
        elif top.get("size-eos"):
            break  # the payload, from header_len
        else:
            rows.append(row(top, offset, ksy["meta"]["id"] if top["id"] not in ksy.get("types", {})
                            else top["id"]))
            offset += _size(top)
    if fixed_len is None:
        raise ValueError("spec has no header type in its top-level seq")
    return "local FIELDS = {\n" + "".join(rows) + "}\n", fixed_len


def _layouts_lua(layouts: dict[str, Layout]) -> str:
    rows = []
    for lay in layouts.values():
        if lay.byte7 not in ("msg_type", "reserved"):
            continue  # no envelope header (lift-cookie & co): not ours to dissect
        names = "".join(f"[{v}] = {_lua_str(mt.name)}, " for v, mt in sorted(lay.msg_types.items()))
        rows.append(f"  {{ name = {_lua_str(lay.name)}, id = {lay.id}, has_msg_type = "
                    f"{'true' if lay.has_msg_type else 'false'}, byte7_name = "
                    f"{_lua_str(lay.byte7_name) if lay.byte7_name else 'nil'},\n"
                    f"    msg_types = {{ {names}}} }},\n")
    if not rows:
        raise ValueError("the spec declares no layout with an envelope header")
    return "local LAYOUTS = {\n" + "".join(rows) + "}\n"


def lua_source(ksy_path: Path = ENVELOPE_KSY, layouts: dict[str, Layout] | None = None,
               default_port: int = DEFAULT_PORT) -> str:
    """The whole dissector, as Lua source."""
    ksy = yaml.safe_load(ksy_path.read_text(encoding="utf-8"))
    fields, fixed_len = _fields_lua(ksy)
    fields_by_id = {f["id"] for t in ksy.get("types", {}).values() for f in t.get("seq", [])}
    for needed in ("magic", "version", "header_len", "flags"):
        if needed not in fields_by_id:
            raise ValueError(f"spec header has no field {needed!r}")
    tables = "".join([
        f"local FIXED_LEN = {fixed_len}\n",
        f"local DEFAULT_PORT = {int(default_port)}\n",
        "local KIND = { too_short = %s, truncated = %s, crc_mismatch = %s, unknown_msg_type = %s,"
        " bad_header_len = %s }\n" % tuple(_lua_str(_need_kind(k)) for k in (
            "too_short", "truncated", "crc_mismatch", "unknown_msg_type", "bad_header_len")),
        fields,
        _layouts_lua(dict(layouts if layouts is not None else LAYOUTS)),
    ])
    return (_BANNER.format(src=ksy_path.name) + tables + _LUA_BODY)


def write_dissector(folder: Path | str) -> Path:
    """Write `liftbridge.lua` into `folder`; return its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAME
    path.write_text(lua_source(), encoding="utf-8")
    return path


_BANNER = """\
-- Wireshark dissector for NATS client protocol frames and the Liftbridge
-- envelope inside them. Generated by `lbparse generate --lang wireshark`
-- from spec/{src} and lbparse's dispatch table: do not edit, change the spec.
-- Load: tshark -X lua_script:liftbridge.lua  (or copy to a plugin folder).
-- Preferences: nats.tcp_port (TCP port of the NATS server),
-- liftbridge.layout (which generation of the envelope to decode as).

-- ---- from the spec -------------------------------------------------------
"""

_LUA_BODY = r"""
-- ---- fixed part: NATS framing and the walk over the tables above ----------
local MAX_LINE = 65536  -- longest control line we wait for (INFO/CONNECT JSON)

-- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one table lookup per byte.
local CRC_TABLE = {}
for n = 0, 255 do
  local c = n
  for _ = 1, 8 do
    if bit32.band(c, 1) ~= 0 then c = bit32.bxor(bit32.rshift(c, 1), 0x82F63B78)
    else c = bit32.rshift(c, 1) end
  end
  CRC_TABLE[n] = c
end

local function crc32c(s)
  local c = 0xFFFFFFFF
  local byte, band, bxor, rshift = string.byte, bit32.band, bit32.bxor, bit32.rshift
  for i = 1, #s do
    c = bxor(CRC_TABLE[band(bxor(c, byte(s, i)), 0xFF)], rshift(c, 8))
  end
  return bxor(c, 0xFFFFFFFF)
end

local layout_by_id, layout_enum, default_layout = {}, {}, LAYOUTS[1].id
for i, lay in ipairs(LAYOUTS) do
  layout_by_id[lay.id] = lay
  layout_enum[i] = { i, lay.name, lay.id }
end

-- ---- protocols and fields -----------------------------------------------
local nats = Proto("nats", "NATS client protocol")
local nf = {
  verb = ProtoField.string("nats.verb", "Verb"),
  subject = ProtoField.string("nats.subject", "Subject"),
  reply = ProtoField.string("nats.reply", "Reply subject"),
  sid = ProtoField.string("nats.sid", "Subscription id"),
  hdr_len = ProtoField.uint32("nats.hdr_len", "Header block length"),
  payload_len = ProtoField.uint32("nats.payload_len", "Payload length"),
  line = ProtoField.string("nats.line", "Control line"),
}
nats.fields = { nf.verb, nf.subject, nf.reply, nf.sid, nf.hdr_len, nf.payload_len, nf.line }
nats.prefs.tcp_port = Pref.uint("TCP port", DEFAULT_PORT, "TCP port of the NATS server")

local lb = Proto("liftbridge", "Liftbridge envelope")
local lf = {
  layout = ProtoField.string("liftbridge.layout", "Layout"),
  version = ProtoField.uint8("liftbridge.version", "Version"),
  header_len = ProtoField.uint8("liftbridge.header_len", "Header length"),
  flags = ProtoField.uint8("liftbridge.flags", "Flags", base.HEX),
  msg_type = ProtoField.uint8("liftbridge.msg_type", "MsgType"),
  msg_type_name = ProtoField.string("liftbridge.msg_type_name", "MsgType name"),
  crc32c = ProtoField.uint32("liftbridge.crc32c", "CRC-32C", base.HEX),
  crc_ok = ProtoField.bool("liftbridge.crc_ok", "CRC-32C correct"),
  payload_len = ProtoField.uint32("liftbridge.payload_len", "Payload length"),
  error = ProtoField.string("liftbridge.error", "Error"),
}
lb.fields = { lf.layout, lf.version, lf.header_len, lf.flags, lf.msg_type, lf.msg_type_name,
              lf.crc32c, lf.crc_ok, lf.payload_len, lf.error }
local bad_envelope = ProtoExpert.new("liftbridge.bad_envelope", "Not a well-formed envelope",
                                     expert.group.MALFORMED, expert.severity.ERROR)
lb.experts = { bad_envelope }
lb.prefs.layout = Pref.enum("Layout", default_layout,
  "Which generation of the envelope the payloads are (the header cannot always tell)",
  layout_enum, false)

-- ---- the envelope -------------------------------------------------------
local function fail(item, kind, why)
  item:add(lf.error, kind)
  item:add_proto_expert_info(bad_envelope, kind .. ": " .. why)
  return kind
end

-- Dissect `len` bytes at `off` of `tvb` as one envelope; return the error kind or nil.
local function dissect_envelope(tvb, off, len, tree)
  local lay = layout_by_id[lb.prefs.layout] or LAYOUTS[1]
  local item = tree:add(lb, tvb(off, len))
  item:add(lf.layout, lay.name)
  if len < FIXED_LEN then
    return fail(item, KIND.too_short, len .. " bytes, the header needs " .. FIXED_LEN)
  end
  local h, err = {}, nil
  for _, f in ipairs(FIELDS) do
    if f.present == nil or f.present(h, lay.id) then
      if f.offset + f.size > len then
        return err or fail(item, f.error or KIND.truncated, f.id .. " runs past the data")
      end
      local r = tvb(off + f.offset, f.size)
      local v = f.bytes and r:raw() or r:uint()
      h[f.id] = v
      if lf[f.id] and not (f.id == "msg_type" and not lay.has_msg_type) then
        item:add(lf[f.id], r)
      end
      if err == nil and f.check and not f.check(v, h, lay.id) then
        local kind = f.error
        -- The spec checks the CRC flag and header_len 12 together on the
        -- flags byte; with the flag clear it is the 12 that is wrong (lbparse).
        if f.id == "flags" and bit32.band(v, 1) == 0 then kind = KIND.bad_header_len end
        err = fail(item, kind, f.id .. " fails its check")
      end
    end
  end
  if err then return err end
  if len < h.header_len then
    return fail(item, KIND.truncated, "header_len " .. h.header_len .. " but " .. len .. " bytes")
  end
  item:add(lf.payload_len, len - h.header_len)
  if h.crc32c ~= nil then
    local ok = crc32c(tvb:raw(off + h.header_len, len - h.header_len)) == h.crc32c
    item:add(lf.crc_ok, ok)
    if not ok then return fail(item, KIND.crc_mismatch, "payload does not match the CRC-32C") end
  end
  if lay.has_msg_type then
    local name = lay.msg_types[h.msg_type]
    if name == nil then
      return fail(item, KIND.unknown_msg_type, "MsgType " .. h.msg_type .. " not in " .. lay.name)
    end
    item:add(lf.msg_type_name, name)
    item:append_text(", " .. name)
  elseif lay.byte7_name then
    item:add(lf.msg_type_name, lay.byte7_name)
  end
  return nil
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
    t:add(nf.subject, args.subject)
    if args.reply then t:add(nf.reply, args.reply) end
    if args.sid then t:add(nf.sid, args.sid) end
    t:add(nf.hdr_len, args.hdr)
    t:add(nf.payload_len, args.total - args.hdr)
    t:append_text(" " .. args.subject)
    info[#info] = verb .. " " .. args.subject
    dissect_envelope(tvb, off + line_len + args.hdr, args.total - args.hdr, t)
  else
    t:add(nf.line, tvb(off, eol - 1), line)
  end
  return size
end

function nats.dissector(tvb, pinfo, tree)
  local len, off, info = tvb:len(), 0, {}
  pinfo.cols.protocol = "NATS"
  local guard = len + 1  -- every frame consumes at least one byte
  while off < len and guard > 0 do
    guard = guard - 1
    local n = dissect_frame(tvb, pinfo, tree, off, info)
    if n < 0 then
      if pinfo.can_desegment > 0 then
        pinfo.desegment_offset = off
        pinfo.desegment_len = (n == -DESEGMENT_ONE_MORE_SEGMENT) and DESEGMENT_ONE_MORE_SEGMENT or -n
        break
      end
      off = len  -- cannot reassemble: the rest is a partial frame
    else
      off = off + n
    end
  end
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
"""
