"""Emit a `construct` declaration from a Kaitai Struct (.ksy) spec.

The Kaitai compiler has a `construct` target, but it leaves `contents`
unchecked, drops `params` and `valid`, and emits undefined helpers for
`_io` expressions. lbparse needs a construct schema that parses as strictly
as the Kaitai parser and also builds, so this emitter covers exactly the
subset of .ksy that spec/ uses and refuses anything else loudly:

- seq fields: integer types (u1..u8, s1..s8), `contents`, `size`,
  `size-eos`, user types (with or without `size`), `type: str` with an
  encoding, `if`, `repeat: eos` and `repeat: expr`, `valid` (a value,
  `any-of`, or `expr`);
- value instances (`value`, optional `if`);
- expressions: field names, `_` (the value under validation), `_parent`,
  `_root.PARAM`, `enum::name`, integer literals, Python-compatible
  operators (Kaitai's operator precedence matches Python's for those).

Added for the on-disk specs (segment, index, checkpoint, bbolt), each in
its own method below: little-endian specs and per-field `u8be`/`u4le`
types; `imports:` (a type `other_id::name` is that spec's construct, which
must be emitted earlier in the same module); strings with a `terminator`
or `size-eos`, the meta `encoding` default, and string `valid` values;
types with `params` whose every use passes `_index` (an element's index
in its array, construct's `this._index`); instances with `pos` (a
`Pointer`, relative to the type's stream as in Kaitai); `size-eos` user
types; references to types emitted later (and to the root type) through
`LazyBound`; hex integer literals.

A validation becomes a named `Check` right after its field, named
`_valid_<field>`, so a construct error path says which field failed.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

INT_TYPES = {
    "u1": "Int8ub",
    "u2": "Int16ub",
    "u4": "Int32ub",
    "u8": "Int64ub",
    "s1": "Int8sb",
    "s2": "Int16sb",
    "s4": "Int32sb",
    "s8": "Int64sb",
}
# A spec's default endianness, and explicit per-field types (`u8be`, `s4le`).
INT_TYPES_LE = {k: v[:-1] + "l" for k, v in INT_TYPES.items()}
INT_TYPES_EXPLICIT = {
    **{k + "be": v for k, v in INT_TYPES.items() if k not in ("u1", "s1")},
    **{k + "le": v for k, v in INT_TYPES_LE.items() if k not in ("u1", "s1")},
}
KEYWORDS = {"and", "or", "not"}
LITERALS = {"true": "True", "false": "False"}
TOKEN = re.compile(
    r"0[xX][0-9a-fA-F_]+|([A-Za-z_][A-Za-z0-9_]*)(::[A-Za-z_][A-Za-z0-9_]*)?"
    r"|\.[A-Za-z_][A-Za-z0-9_]*|.",
    re.S,
)


# What a `size-eos` user type gets: the rest of the stream it is read from.
REST_HELPER = """

def _rest(stream):
    \"\"\"Bytes left in `stream` (a `size-eos` substream is the rest of its parent).\"\"\"
    here = stream.tell()
    end = stream.seek(0, 2)
    stream.seek(here)
    return end - here
"""
# Kaitai's `pos` counts from the start of the type's own stream; construct's
# substreams (FixedSized) report and seek positions of the outermost stream.
BASE_HELPER = """

def _base(stream):
    \"\"\"Where `stream` starts in the outermost stream (0 unless a substream).\"\"\"
    return getattr(stream, "parent_stream_offset", 0)
"""


def _split_ternary(src: str) -> tuple[str, str, str] | None:
    """(condition, then, else) of a top-level `c ? a : b`, or None."""
    depth, q = 0, None
    for i, ch in enumerate(src):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch == "?" and q is None:
            q = i
        elif (
            depth == 0
            and ch == ":"
            and q is not None
            and src[i - 1 : i] != ":"
            and src[i + 1 : i + 2] != ":"
        ):
            return src[:q], src[q + 1 : i], src[i + 1 :]
    return None


class UnsupportedKsy(ValueError):
    """The .ksy uses a feature this emitter does not translate."""


class Emitter:
    def __init__(self, ksy: dict[str, Any]):
        self.ksy = ksy
        self.root = ksy["meta"]["id"]
        endian = ksy["meta"].get("endian")
        if endian not in ("be", "le", None):
            raise UnsupportedKsy(f"endian {endian!r}: only `be` and `le` specs are supported")
        # Without a default endianness only single bytes and explicit types.
        default = {"be": INT_TYPES, "le": INT_TYPES_LE}.get(
            endian, {k: v for k, v in INT_TYPES.items() if k in ("u1", "s1")}
        )
        self.int_types = {**default, **INT_TYPES_EXPLICIT}
        self.encoding = ksy["meta"].get("encoding")
        self.params = {p["id"] for p in ksy.get("params", [])}
        self.enums = {
            name: {self._enum_id(v): int(k) for k, v in table.items()}
            for name, table in ksy.get("enums", {}).items()
        }
        self.type_params: set[str] = set()  # params of the type being emitted
        self.emitted: set[str] = set()  # types already declared above
        self.call_args = self._call_args()

    @staticmethod
    def _enum_id(v: Any) -> str:
        return v["id"] if isinstance(v, dict) else v

    def expr(self, src: Any, self_field: str | None = None) -> str:
        """Translate a Kaitai expression to a Python expression over `this`."""
        src = str(src)
        ternary = _split_ternary(src)
        if ternary is not None:
            # `c ? a : b`, Kaitai's conditional: Python's `a if c else b`.
            c, a, b = (
                self.expr(part, self_field).replace("lambda this: ", "", 1) for part in ternary
            )
            return f"lambda this: (({a}) if ({c}) else ({b}))"
        if "?" in src or "_io" in src:
            raise UnsupportedKsy(f"expression not supported: {src!r}")
        out = []
        for m in TOKEN.finditer(src):
            tok = m.group(0)
            ident, enum_member = m.group(1), m.group(2)
            if ident is None:
                out.append(tok)  # operator, literal digit, attribute access
            elif enum_member:
                out.append(str(self.enums[ident][enum_member[2:]]))
            elif ident in KEYWORDS:
                out.append(ident)
            elif ident in LITERALS:
                out.append(LITERALS[ident])
            elif ident == "_":
                if self_field is None:
                    raise UnsupportedKsy(f"`_` outside a validation: {src!r}")
                out.append(f"this.{self_field}")
            elif ident == "_parent":
                out.append("this._")
            elif ident == "_root":
                out.append("this._params")
            elif ident[0].isdigit():
                out.append(tok)
            elif ident in self.type_params and not (out and out[-1].endswith(".")):
                out.append("this._index")  # see _call_args: every use passes _index
            elif ident in self.params and not (out and out[-1].endswith(".")):
                out.append(f"this._params.{ident}")
            else:
                out.append(f"this.{ident}")
        # `_root.x` only ever names a parameter in our specs, and construct
        # keeps parse/build keyword arguments in `_params`.
        text = re.sub(r"(this(?:\.\w+)+)\.length\b", r"len(\1)", "".join(out))
        # An enum constant's `.to_i` is the number it already is here.
        text = re.sub(r"\b(\d+)\.to_i\b", r"\1", text)
        return "lambda this: " + text

    def type_name(self, name: str) -> str:
        if "::" in name:  # a type of an imported spec, emitted earlier
            spec, _, sub = name.partition("::")
            return f"{spec}__{sub}"
        return self.root if name == self.root else f"{self.root}__{name}"

    def field(self, f: dict[str, Any]) -> list[str]:
        fid = f["id"]
        sub = self.subcon(f)
        if "repeat" in f:
            if f["repeat"] == "eos":
                sub = f"GreedyRange({sub})"
            elif f["repeat"] == "expr":
                # Kaitai repeats a negative count zero times; construct's
                # Array raises on it.
                count = self.expr(f["repeat-expr"]).replace("lambda this: ", "", 1)
                sub = f"Array(lambda this: max({count}, 0), {sub})"
            else:
                raise UnsupportedKsy(f"repeat: {f['repeat']}")
        if "if" in f:
            sub = f"If({self.expr(f['if'])}, {sub})"
        lines = [f'"{fid}" / {sub},']
        if f.get("repeat") == "eos":
            # GreedyRange stops quietly at the first element that fails to
            # parse; Kaitai's repeat-eos fails instead. Terminated makes
            # leftover bytes (a broken last element) the error it is; under
            # an `if`, only when the field is read at all.
            lines.append(
                f'"_eos_{fid}" / If({self.expr(f["if"])}, Terminated),'
                if "if" in f
                else "Terminated,"
            )
        if "valid" in f:
            check = f"Check({self.valid(fid, f['valid'])})"
            if "if" in f:  # Kaitai checks a field only when it is read
                check = f"If({self.expr(f['if'])}, {check})"
            lines.append(f'"_valid_{fid}" / {check},')
        return lines

    def subcon(self, f: dict[str, Any]) -> str:
        if "contents" in f:
            c = f["contents"]
            data = c.encode() if isinstance(c, str) else bytes(c)
            return f"Const({data!r})"
        t = f.get("type")
        size = f.get("size")
        if t in self.int_types:
            return self.int_types[t]
        if t == "str":
            return self.string(f)
        if t is not None:
            ref = self.user_type(t)
            if f.get("size-eos"):
                return f"FixedSized(lambda this: _rest(this._io), {ref})"
            return f"FixedSized({self.expr(size)}, {ref})" if size is not None else ref
        if f.get("size-eos"):
            return "GreedyBytes"
        if size is not None:
            return f"Bytes({self.expr(size)})"
        raise UnsupportedKsy(f"field {f['id']!r}: no type, size or contents")

    def string(self, f: dict[str, Any]) -> str:
        enc = (f.get("encoding") or self.encoding or "").lower().replace("-", "")
        if not enc:
            raise UnsupportedKsy(f"field {f['id']!r}: a string needs an encoding")
        if "terminator" in f:
            if f.get("include") or f.get("consume") is False or f.get("eos-error") is False:
                raise UnsupportedKsy(f"field {f['id']!r}: only the default terminator options")
            term = bytes([int(f["terminator"])])
            raw = f"NullTerminated(GreedyBytes, term={term!r})"
        elif f.get("size-eos"):
            raw = "GreedyBytes"
        else:
            raw = f"Bytes({self.expr(f['size'])})"
        return f"StringEncoded({raw}, {enc!r})"

    def user_type(self, t: str) -> str:
        """A reference to a user type: `name(args)`, `spec::name` or the root."""
        name, _, args = t.partition("(")
        if "::" not in name and name != self.root and name not in self.ksy.get("types", {}):
            raise UnsupportedKsy(f"unknown type {t!r}")
        if args and args.rstrip(")").strip() != "_index":
            raise UnsupportedKsy(f"type {t!r}: the only argument supported is _index")
        ref = self.type_name(name)
        if "::" in name or ref in self.emitted:
            return ref
        return f"LazyBound(lambda: {ref})"  # declared below, or recursive

    def _call_args(self) -> dict[str, list[str]]:
        """The arguments each parametrised type is used with."""
        calls: dict[str, list[str]] = {}
        specs = [self.ksy, *self.ksy.get("types", {}).values()]
        for spec in specs:
            fields = list(spec.get("seq", [])) + list(spec.get("instances", {}).values())
            for f in fields:
                t = f.get("type")
                if isinstance(t, str) and "(" in t:
                    name, _, args = t.partition("(")
                    calls.setdefault(name, []).append(args.rstrip(")").strip())
        return calls

    def valid(self, fid: str, v: Any) -> str:
        if isinstance(v, dict) and "any-of" in v:
            return f"lambda this: this.{fid} in {tuple(v['any-of'])!r}"
        if isinstance(v, dict) and "expr" in v:
            return self.expr(v["expr"], self_field=fid)
        if isinstance(v, dict):
            raise UnsupportedKsy(f"valid: {v}")
        if isinstance(v, str):  # an expression, such as a string literal '"0"'
            return f"lambda this: this.{fid} == {self.expr(v).replace('lambda this: ', '', 1)}"
        return f"lambda this: this.{fid} == {v!r}"

    def instance(self, name: str, inst: dict[str, Any]) -> str:
        if "pos" in inst:
            pos = self.expr(inst["pos"]).replace("lambda this: ", "", 1)
            sub = (
                f"Pointer(lambda this: _base(this._io) + {pos}, {self.subcon(dict(inst, id=name))})"
            )
        elif "value" in inst:
            sub = f"Computed({self.expr(inst['value'])})"
        else:
            raise UnsupportedKsy(f"instance {name!r}: only value and pos instances are supported")
        if "if" in inst:
            sub = f"If({self.expr(inst['if'])}, {sub})"
        return f'"{name}" / {sub},'

    def _instance_refs(self, inst: dict[str, Any]) -> set[str]:
        exprs = [inst.get(k) for k in ("value", "pos", "size", "if") if k in inst]
        return {u for e in exprs for u in re.findall(r"this\.(\w+)", self.expr(e))}

    def struct(self, name: str, spec: dict[str, Any]) -> str:
        # Kaitai instances are lazy; construct computes in order, so each
        # instance goes right after the last seq field (or instance) it
        # reads, and before any field that reads it.
        self.type_params = (
            {p["id"] for p in spec.get("params", [])} if spec is not self.ksy else set()
        )
        short = name.split("__", 1)[1] if "__" in name else name
        if self.type_params and set(self.call_args.get(short, [])) != {"_index"}:
            raise UnsupportedKsy(
                f"type {short!r}: params are supported when every use passes _index"
            )
        seq = spec.get("seq", [])
        order = [f["id"] for f in seq]
        slot: dict[str, int] = {}
        placed: dict[int, list[str]] = {}
        for iname, inst in spec.get("instances", {}).items():
            used = self._instance_refs(inst)
            after = max(
                [order.index(u) for u in used if u in order] + [slot[u] for u in used if u in slot],
                default=-1,
            )
            slot[iname] = after
            placed.setdefault(after, []).append(self.instance(iname, inst))
        body = list(placed.get(-1, []))
        for i, f in enumerate(seq):
            body.extend(self.field(f))
            body.extend(placed.get(i, []))
        self.type_params = set()
        self.emitted.add(name)
        doc = " ".join(str(spec.get("doc", "")).split())
        head = "".join(f"# {line}\n" for line in textwrap.wrap(doc, 77, break_on_hyphens=False))
        inner = "\n".join(f"    {line}" for line in body)
        return f"{head}{name} = Struct(\n{inner}\n)\n"

    def emit(self) -> str:
        parts = [f"\n\n# ---- {self.root} ----\n"]
        for tname, tspec in reversed(list(self.ksy.get("types", {}).items())):
            parts.append("\n" + self.struct(self.type_name(tname), tspec))
        parts.append("\n" + self.struct(self.root, self.ksy))
        text = "".join(parts)
        if "_base(" in text:
            text = BASE_HELPER + text
        if "_rest(" in text:
            text = REST_HELPER + text
        return text


def emit_construct(ksy: dict[str, Any]) -> str:
    """Return Python source declaring one construct Struct per .ksy type."""
    return Emitter(ksy).emit()
