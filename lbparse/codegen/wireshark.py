"""Generate the Wireshark plugin: a Lua dissector for NATS and Liftbridge.

`write_plugin(folder)` writes what belongs in a Wireshark plugins folder:
`liftbridge.lua` and `liftbridge-proto/*.proto` (the payload schemas, which
the plugin hands to Wireshark's protobuf dissector). Every fact about the
bytes comes from the spec, as Lua tables at the top of the file:

- `SEQ`: the envelope's fields in read order (`spec/envelope.ksy`: sizes,
  `contents`, `valid` and `if` expressions translated to Lua by
  `lbparse.codegen.lua_expr`, `-error` kinds);
- `LAYOUTS`: every layout, newest first, with its MsgType table and payload
  types (`lbparse.codec.layouts`, generated from the spec);
- `FLAG_SPLIT`: which kind a failed CRC-flag check is, flag set or clear
  (the spec's `-error` and `-error-flag-clear`);
- `WIRE`: the field numbers and wire types of every protobuf payload type
  (from the generated descriptors), for `auto`'s evidence;
- `COMMITLOG`: the ReplicationResponse payload (`spec/commitlog.ksy`), read
  into a subtree;
- `SUBJECTS`, `RPC_TYPES`: the NATS subjects of a Liftbridge cluster and
  what travels on them, and the Raft RPC types, from `spec/raft.ksy`'s
  `-nats-subjects` and `rpc_type` when the spec has them, else from the
  fallback below (the facts of shared/liftbridge/README.md).

The Lua after the tables (`lbparse.codegen.wireshark_lua`) is the fixed part: NATS
framing, the walk over those tables, the trees.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from google.protobuf.descriptor import FieldDescriptor

from lbparse import resources
from lbparse.codec.layouts import LAYOUTS, Layout
from lbparse.codec.payloads import message_class
from lbparse.codegen.lua_expr import LuaExpr
from lbparse.codegen.wireshark_lua import LUA_BODY
from lbparse.errors import ENVELOPE_KINDS, InputError

__all__ = [
    "DEFAULT_PORT",
    "FILE_NAME",
    "PROTO_DIR",
    "lua_source",
    "write_dissector",
    "write_plugin",
]

SPEC = resources.spec_dir()  # package data of an installed lbparse, or spec/ of a checkout
ENVELOPE_KSY = SPEC / "envelope.ksy"
COMMITLOG_KSY = SPEC / "commitlog.ksy"
RAFT_KSY = SPEC / "raft.ksy"
FILE_NAME = "liftbridge.lua"
PROTO_DIR = "liftbridge-proto"  # beside the .lua: Wireshark loads only .lua files
DEFAULT_PORT = 4222
INT_SIZES = {"u1": 1, "u2": 2, "u4": 4, "u8": 8, "s1": 1, "s2": 2, "s4": 4, "s8": 8}

# What shared/liftbridge/README.md says travels on a Liftbridge cluster's
# NATS subjects besides envelopes, in the shape of spec/raft.ksy's
# `-nats-subjects` (used only when the spec has no such table).
FALLBACK_SUBJECTS: tuple[dict[str, str], ...] = (
    {
        "pattern": "{ns}.raft.metadata.{node}.request.{inbox}",
        "kind": "raft_stream",
        "name": "raft transport stream",
    },
    {
        "pattern": "{ns}.raft.metadata.{node}.accept",
        "kind": "raft_accept",
        "name": "raft accept handshake",
    },
    {
        "pattern": "{ns}.raft.metadata.bootstrap",
        "kind": "bootstrap_probe",
        "name": "bootstrap probe",
    },
)
FALLBACK_RPC_TYPES = {0: "AppendEntries", 1: "RequestVote", 2: "InstallSnapshot", 3: "TimeoutNow"}
# Placeholders of the subject patterns, as Lua patterns.
_PLACEHOLDERS = {
    "ns": "[^.]+",
    "node": "[^.]+",
    "nuid": "[^.]+",
    "stream": "[^.]+",
    "partition": "%d+",
    "inbox": "_INBOX%..+",
}


def _need_kind(kind: str) -> str:
    if kind not in ENVELOPE_KINDS:
        raise InputError("bad_spec", f"error kind {kind!r} is not one of lbparse's KINDS")
    return kind


def _lua_str(s: str) -> str:
    return (
        '"'
        + "".join(
            c if c.isascii() and (c.isalnum() or c in " _-.:,()/'{}[]<>=+*?!") else f"\\{b:03d}"
            for c in s
            for b in c.encode()
        )
        + '"'
    )


def _load(path: Path) -> dict[str, Any]:
    return dict(yaml.safe_load(path.read_text(encoding="utf-8")))


# --- the envelope: fields in read order ------------------------------------


def _check(field: dict[str, Any], tr: LuaExpr, type_name: str) -> str | None:
    """Lua expression of the field's check (`v` the value, `h` the fields read), or None."""
    if "contents" in field:
        c = field["contents"]
        raw = c.encode() if isinstance(c, str) else bytes(c)
        return "(v == " + '"' + "".join(f"\\{b:03d}" for b in raw) + '")'
    valid = field.get("valid")
    if valid is None:
        return None
    if not isinstance(valid, dict):
        valid = {"eq": valid}
    parts = []
    if "eq" in valid:
        parts.append(f"(v == {tr.translate(str(valid['eq']), type_name)})")
    if "any-of" in valid:
        parts.append(
            "("
            + " or ".join(f"v == {tr.translate(str(x), type_name)}" for x in valid["any-of"])
            + ")"
        )
    if "min" in valid:
        parts.append(f"(v >= {tr.translate(str(valid['min']), type_name)})")
    if "max" in valid:
        parts.append(f"(v <= {tr.translate(str(valid['max']), type_name)})")
    if "expr" in valid:
        parts.append(tr.translate(str(valid["expr"]), type_name))
    return "(" + " and ".join(parts) + ")"


def _fn(args: str, body: str | None) -> str:
    return f"function({args}) return {body} end" if body else "nil"


def _row(field: dict[str, Any], tr: LuaExpr, type_name: str, offset: int | None) -> str:
    """One field as a Lua table: size, kind of value, check, condition, error kind."""
    kind = field.get("-error")
    if ("contents" in field or "valid" in field) and not kind:
        raise InputError("bad_spec", f"{type_name}.{field['id']} has a check but no -error kind")
    if "contents" in field:
        size, value = len(field["contents"]), "bytes"
    elif field.get("type") in INT_SIZES:
        size, value = INT_SIZES[field["type"]], "int"
    elif field.get("size-eos"):
        size, value = -1, "rest"
    elif isinstance(field.get("size"), int):
        size, value = int(field["size"]), "block"
    else:
        raise InputError("bad_spec", f"field {field['id']}: not a size the dissector reads")
    cond = tr.translate(str(field["if"]), type_name) if "if" in field else None
    parts = [
        f"id = {_lua_str(field['id'])}",
        f"size = {size}",
        f"value = {_lua_str(value)}",
        f"error = {_lua_str(_need_kind(kind)) if kind else 'nil'}",
        f"check = {_fn('v, h, layout_id', _check(field, tr, type_name))}",
        f"present = {_fn('h, layout_id', cond)}",
    ]
    if offset is not None:
        parts.append(f"offset = {offset}")
    return "{ " + ", ".join(parts) + " }"


def seq_lua(ksy: dict[str, Any]) -> str:
    """`SEQ`: the top-level fields; a sized block of a type lists that type's fields."""
    tr = LuaExpr(ksy)
    root = ksy["meta"]["id"]
    rows = []
    for top in ksy["seq"]:
        if top.get("type") in ksy.get("types", {}):
            sub, offset = [], 0
            for field in ksy["types"][top["type"]].get("seq", []):
                sub.append("      " + _row(field, tr, top["type"], offset) + ",\n")
                offset += INT_SIZES.get(field.get("type", ""), 0) or len(field.get("contents", ()))
            block = _row({k: v for k, v in top.items() if k != "type"}, tr, root, None)
            rows.append(f"  {block[:-2]}, fields = {{\n{''.join(sub)}    }} }},\n")
        else:
            rows.append(f"  {_row(top, tr, root, None)},\n")
    return "local SEQ = {\n" + "".join(rows) + "}\n"


# --- layouts, MsgTypes, error kinds ------------------------------------------


def layouts_lua(layouts: Mapping[str, Layout]) -> str:
    """`LAYOUTS`, newest first (the order `auto` prefers)."""
    rows = []
    for lay in sorted(layouts.values(), key=lambda x: x.recency):
        types = "".join(
            f"[{v}] = {{ name = {_lua_str(mt.name)}, ptype = {_lua_str(mt.payload_type)} }}, "
            for v, mt in sorted(lay.msg_types.items())
        )
        alts = ", ".join(_lua_str(a) for a in lay.payload_alternatives)
        rows.append(
            f"  {{ name = {_lua_str(lay.name)}, id = {lay.id}, has_header = "
            f"{'true' if lay.has_header else 'false'}, byte7 = "
            f"{_lua_str(lay.byte7) if lay.byte7 else 'nil'}, byte7_name = "
            f"{_lua_str(lay.byte7_name) if lay.byte7_name else 'nil'},\n"
            f"    payload = {_lua_str(lay.default_payload_type or 'bytes')}, "
            f"alternatives = {{ {alts} }}, format = {_lua_str(lay.payload_format)},\n"
            f"    msg_types = {{ {types}}} }},\n"
        )
    return "local LAYOUTS = {\n" + "".join(rows) + "}\n"


def flag_split(ksy: dict[str, Any]) -> dict[str, str]:
    """The field whose one check fails two ways (the CRC flag against the
    header length), and its kind with the flag set (`-error`) and clear
    (`-error-flag-clear`), as the spec says."""
    for spec in (ksy, *ksy.get("types", {}).values()):
        for f in spec.get("seq", []):
            if "-error-flag-clear" in f:
                return {"field": f["id"], "set": f["-error"], "clear": f["-error-flag-clear"]}
    raise InputError("bad_spec", "the spec has no field with -error-flag-clear")


def has_crc_lua(ksy: dict[str, Any]) -> str:
    """`HAS_CRC(h)`: the header's `has_crc` instance, as the spec computes it."""
    return (
        f"local function HAS_CRC(h, layout_id) return "
        f"{LuaExpr(ksy).translate('has_crc', 'header')} end\n"
    )


# --- protobuf field tables (auto's evidence) ---------------------------------

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _wire_types(desc: Any) -> dict[int, set[int | str]]:
    F = FieldDescriptor
    wire = {
        F.TYPE_FIXED64: _I64,
        F.TYPE_SFIXED64: _I64,
        F.TYPE_DOUBLE: _I64,
        F.TYPE_FIXED32: _I32,
        F.TYPE_SFIXED32: _I32,
        F.TYPE_FLOAT: _I32,
        F.TYPE_STRING: _LEN,
        F.TYPE_BYTES: _LEN,
        F.TYPE_MESSAGE: _LEN,
    }
    out: dict[int, set[int | str]] = {}
    for f in desc.fields:
        w = wire.get(f.type, _VARINT)
        out[f.number] = {w, _LEN} if f.is_repeated and w != _LEN else {w}  # packed repeated
        if f.type == F.TYPE_STRING:
            out[f.number].add("utf8")  # protobuf refuses a string that is not UTF-8
    return out


def wire_lua(layouts: Mapping[str, Layout]) -> str:
    """`WIRE[type][field number] = {wire types}` for every protobuf payload type."""
    names = sorted(
        {
            t
            for lay in layouts.values()
            if lay.payload_format == "protobuf"
            for t in lay.payload_types
            if t not in ("raw", "bytes")
        }
    )
    rows = []
    for name in names:
        table = _wire_types(message_class(name).DESCRIPTOR)
        cells = " ".join(
            "[{}] = {{ {} }},".format(
                n,
                ", ".join(
                    f"[{w}] = true" if isinstance(w, int) else f"{w} = true"
                    for w in sorted(ws, key=str)
                ),
            )
            for n, ws in sorted(table.items())
        )
        rows.append(f"  [{_lua_str(name)}] = {{ {cells} }},\n")
    return "local WIRE = {\n" + "".join(rows) + "}\n"


# --- the commit log -----------------------------------------------------------


def _struct_row(field: dict[str, Any], tr: LuaExpr, type_name: str, ksy: dict[str, Any]) -> str:
    parts = [f"id = {_lua_str(field['id'])}"]
    ftype = str(field.get("type", ""))
    if ftype in INT_SIZES:
        parts += [
            'value = "int"',
            f"size = {INT_SIZES[ftype]}",
            f"signed = {'true' if ftype.startswith('s') else 'false'}",
        ]
    elif ftype in ksy.get("types", {}):
        parts += ['value = "struct"', f"type = {_lua_str(ftype)}"]
    elif "size" in field:
        parts.append(f"value = {_lua_str('str' if ftype == 'str' else 'bytes')}")
    else:
        raise InputError("bad_spec", f"{type_name}.{field['id']}: not a field the dissector reads")
    if "size" in field:
        parts.append(f"length = {_fn('h', tr.translate(str(field['size']), type_name))}")
    if field.get("repeat") == "eos":
        parts.append('rep = "eos"')
    elif field.get("repeat") == "expr":
        count = tr.translate(str(field["repeat-expr"]), type_name)
        parts.append(f'rep = "expr", count = {_fn("h", count)}')
    if "if" in field:
        parts.append(f"present = {_fn('h', tr.translate(str(field['if']), type_name))}")
    check = _check(field, tr, type_name)
    if check:
        parts.append(f"check = {_fn('v, h', check)}")
    return "{ " + ", ".join(parts) + " }"


def commitlog_lua(ksy: dict[str, Any]) -> str:
    """`COMMITLOG`: every type of commitlog.ksy as a list of fields."""
    tr = LuaExpr(ksy)
    root = ksy["meta"]["id"]
    types = {root: ksy["seq"], **{n: t.get("seq", []) for n, t in ksy.get("types", {}).items()}}
    wide = {f["id"] for seq in types.values() for f in seq if f.get("type") in ("u8", "s8")}
    for name, seq in types.items():
        for f in seq:
            for key in ("size", "if", "repeat-expr"):
                used = wide & set(re.findall(r"\w+", str(f.get(key, ""))))
                if used:  # Lua 5.2 numbers are doubles: 64-bit values are shown, not computed with
                    raise InputError(
                        "bad_spec", f"{name}.{f['id']}: {key} uses 64-bit {sorted(used)}"
                    )
    rows = []
    for name, seq in types.items():
        cells = "".join(f"    {_struct_row(f, tr, name, ksy)},\n" for f in seq)
        rows.append(f"  [{_lua_str(name)}] = {{\n{cells}  }},\n")
    return (
        f"local COMMITLOG_ROOT = {_lua_str(root)}\nlocal COMMITLOG = {{\n" + "".join(rows) + "}\n"
    )


def commitlog_fields(ksy: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(abbreviation, type, field id) of every commit-log field: liftbridge.commitlog[.TYPE].ID."""
    root = ksy["meta"]["id"]
    types = {root: ksy["seq"], **{n: t.get("seq", []) for n, t in ksy.get("types", {}).items()}}
    out = []
    for name, seq in types.items():
        prefix = "liftbridge.commitlog" if name == root else f"liftbridge.commitlog.{name}"
        for f in seq:
            ftype = f.get("type")
            text = ftype == "str" or f.get("-text") == "go-utf8"
            kind = (
                "none"
                if ftype in types
                else "string"
                if text
                else ftype
                if ftype in INT_SIZES
                else "bytes"
            )
            out.append((f"{prefix}.{f['id']}", kind, f"{name}.{f['id']}"))
    return out


def commitlog_fields_lua(ksy: dict[str, Any]) -> str:
    rows = "".join(
        f"  {{ {_lua_str(abbr)}, {_lua_str(kind)}, {_lua_str(key)} }},\n"
        for abbr, kind, key in commitlog_fields(ksy)
    )
    return "local COMMITLOG_FIELDS = {\n" + rows + "}\n"


# --- what else travels on a cluster's subjects --------------------------------


def subjects_and_rpcs() -> tuple[list[dict[str, str]], dict[int, str], str]:
    """The subject table and Raft RPC names: spec/raft.ksy's, or the fallback."""
    if RAFT_KSY.is_file():
        raft = _load(RAFT_KSY)
        subjects = raft.get("-nats-subjects")
        rpcs = raft.get("enums", {}).get("rpc_type")
        if subjects and rpcs:
            names = {
                int(v): (a.get("-name") or a["id"]) if isinstance(a, dict) else str(a)
                for v, a in rpcs.items()
            }
            return list(subjects), names, "spec/raft.ksy"
    return (
        list(FALLBACK_SUBJECTS),
        dict(FALLBACK_RPC_TYPES),
        "shared/liftbridge/README.md (fallback)",
    )


def _subject_pattern(pattern: str) -> str:
    out = []
    for part in re.split(r"(\{\w+\})", pattern):
        if part.startswith("{") and part.endswith("}"):
            out.append(_PLACEHOLDERS.get(part[1:-1], "[^.]+"))
        else:
            out.append(re.sub(r"([^\w])", r"%\1", part))
    return "^" + "".join(out) + "$"


def subjects_lua() -> str:
    subjects, rpcs, source = subjects_and_rpcs()
    rows = "".join(
        f"  {{ pattern = {_lua_str(_subject_pattern(s['pattern']))}, kind = "
        f"{_lua_str(s['kind'])}, name = {_lua_str(s['name'])} }},\n"
        for s in subjects
    )
    rpc = "".join(f"[{v}] = {_lua_str(n)}, " for v, n in sorted(rpcs.items()))
    return f"-- from {source}\nlocal SUBJECTS = {{\n{rows}}}\nlocal RPC_TYPES = {{ {rpc}}}\n"


# --- the whole file -----------------------------------------------------------


def lua_source(
    ksy_path: Path = ENVELOPE_KSY,
    layouts: Mapping[str, Layout] | None = None,
    default_port: int = DEFAULT_PORT,
) -> str:
    """The whole dissector, as Lua source.

    Args:
        ksy_path: The envelope's .ksy (another spec's, in tests).
        layouts: The layouts to dissect; None: the generated ones.
        default_port: The TCP port the dissector registers for NATS.

    Returns:
        The Lua source of liftbridge.lua.

    Raises:
        InputError: No layout has the envelope header.
    """
    ksy = _load(ksy_path)
    commitlog = _load(COMMITLOG_KSY)
    lays = dict(layouts if layouts is not None else LAYOUTS)
    if not any(lay.has_header for lay in lays.values()):
        raise InputError("bad_spec", "the spec declares no layout with an envelope header")
    split = flag_split(ksy)
    tables = "".join(
        [
            f"local DEFAULT_PORT = {int(default_port)}\n",
            f"local PROTO_DIR = {_lua_str(PROTO_DIR)}\n",
            "local FLAG_SPLIT = {{ field = {}, set = {}, clear = {} }}\n".format(
                _lua_str(split["field"]),
                _lua_str(_need_kind(split["set"])),
                _lua_str(_need_kind(split["clear"])),
            ),
            has_crc_lua(ksy),
            "local KIND = {{ {} }}\n".format(
                ", ".join(f"{k} = {_lua_str(k)}" for k in ENVELOPE_KINDS)
            ),
            seq_lua(ksy),
            layouts_lua(lays),
            wire_lua(lays),
            commitlog_lua(commitlog),
            commitlog_fields_lua(commitlog),
            subjects_lua(),
        ]
    )
    return _BANNER.format(src=ksy_path.name) + tables + LUA_BODY


def write_dissector(folder: Path | str) -> Path:
    """Write `liftbridge.lua` into `folder`; return its path.

    Args:
        folder: Where to write it (made if missing).

    Returns:
        The dissector's path.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAME
    path.write_text(lua_source(), encoding="utf-8")
    return path


def proto_files() -> list[Path]:
    return sorted((SPEC / "proto").glob("*.proto"))


def write_plugin(folder: Path | str) -> list[Path]:
    """What belongs in a Wireshark plugins folder: the dissector and its .proto files.

    Args:
        folder: The plugins folder (made if missing).

    Returns:
        The files written.
    """
    folder = Path(folder)
    written = [write_dissector(folder)]
    protos = folder / PROTO_DIR
    protos.mkdir(parents=True, exist_ok=True)
    for p in proto_files():
        shutil.copyfile(p, protos / p.name)
        written.append(protos / p.name)
    return written


def field_names(extra: Iterable[str] = ()) -> list[str]:
    """Every field abbreviation the dissector registers (for docs and tests)."""
    return [m.group(1) for m in re.finditer(r'ProtoField\.\w+\("([\w.]+)"', LUA_BODY)] + list(extra)


_BANNER = """\
-- Wireshark dissector for NATS client protocol frames and the Liftbridge
-- traffic inside them. Generated by `lbparse generate --lang wireshark`
-- from spec/{src}, spec/commitlog.ksy and lbparse's layout tables: do not
-- edit, change the spec. Install: copy this file and the folder
-- liftbridge-proto/ beside it into a Wireshark plugins folder (or run
-- tshark -X lua_script:liftbridge.lua).
-- Preferences: nats.tcp_port (TCP port of the NATS server),
-- liftbridge.layout (auto, or the generation the envelopes are),
-- liftbridge.api_ports (the gRPC API's ports, read as HTTP/2: gRPC messages
-- then show as pbf.proto.* fields, their types from api.proto's service).

-- ---- from the spec -------------------------------------------------------
"""
