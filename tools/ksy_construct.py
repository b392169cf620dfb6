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

A validation becomes a named `Check` right after its field, named
`_valid_<field>`, so a construct error path says which field failed.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

INT_TYPES = {
    "u1": "Int8ub", "u2": "Int16ub", "u4": "Int32ub", "u8": "Int64ub",
    "s1": "Int8sb", "s2": "Int16sb", "s4": "Int32sb", "s8": "Int64sb",
}
KEYWORDS = {"and", "or", "not"}
LITERALS = {"true": "True", "false": "False"}
TOKEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(::[A-Za-z_][A-Za-z0-9_]*)?|\.[A-Za-z_][A-Za-z0-9_]*|.", re.S)


def _split_ternary(src: str) -> tuple[str, str, str] | None:
    """(condition, then, else) of a top-level `c ? a : b`, or None."""
    depth, q = 0, None
    for i, ch in enumerate(src):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch == "?" and q is None:
            q = i
        elif (depth == 0 and ch == ":" and q is not None and src[i - 1:i] != ":"
              and src[i + 1:i + 2] != ":"):
            return src[:q], src[q + 1:i], src[i + 1:]
    return None


class UnsupportedKsy(ValueError):
    """The .ksy uses a feature this emitter does not translate."""


class Emitter:
    def __init__(self, ksy: dict[str, Any]):
        self.ksy = ksy
        self.root = ksy["meta"]["id"]
        if ksy["meta"].get("endian") != "be":
            raise UnsupportedKsy("only big-endian specs are supported")
        self.params = {p["id"] for p in ksy.get("params", [])}
        self.enums = {
            name: {self._enum_id(v): int(k) for k, v in table.items()}
            for name, table in ksy.get("enums", {}).items()
        }

    @staticmethod
    def _enum_id(v: Any) -> str:
        return v["id"] if isinstance(v, dict) else v

    def expr(self, src: Any, self_field: str | None = None) -> str:
        """Translate a Kaitai expression to a Python expression over `this`."""
        src = str(src)
        ternary = _split_ternary(src)
        if ternary is not None:
            # `c ? a : b`, Kaitai's conditional: Python's `a if c else b`.
            c, a, b = (self.expr(part, self_field).replace("lambda this: ", "", 1)
                       for part in ternary)
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
            elif ident in self.params and not (out and out[-1].endswith(".")):
                out.append(f"this._params.{ident}")
            else:
                out.append(f"this.{ident}")
        # `_root.x` only ever names a parameter in our specs, and construct
        # keeps parse/build keyword arguments in `_params`.
        text = re.sub(r"(this(?:\.\w+)+)\.length\b", r"len(\1)", "".join(out))
        return "lambda this: " + text

    def type_name(self, name: str) -> str:
        return f"{self.root}__{name}"

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
            # leftover bytes (a broken last element) the error it is.
            lines.append("Terminated,")
        if "valid" in f:
            lines.append(f'"_valid_{fid}" / Check({self.valid(fid, f["valid"])}),')
        return lines

    def subcon(self, f: dict[str, Any]) -> str:
        if "contents" in f:
            c = f["contents"]
            data = c.encode() if isinstance(c, str) else bytes(c)
            return f"Const({data!r})"
        t = f.get("type")
        size = f.get("size")
        if t in INT_TYPES:
            return INT_TYPES[t]
        if t == "str":
            enc = f["encoding"].lower().replace("-", "")
            return f"StringEncoded(Bytes({self.expr(size)}), {enc!r})"
        if t is not None:
            if t not in self.ksy.get("types", {}):
                raise UnsupportedKsy(f"unknown type {t!r}")
            ref = self.type_name(t)
            return f"FixedSized({self.expr(size)}, {ref})" if size is not None else ref
        if f.get("size-eos"):
            return "GreedyBytes"
        if size is not None:
            return f"Bytes({self.expr(size)})"
        raise UnsupportedKsy(f"field {f['id']!r}: no type, size or contents")

    def valid(self, fid: str, v: Any) -> str:
        if isinstance(v, dict) and "any-of" in v:
            return f"lambda this: this.{fid} in {tuple(v['any-of'])!r}"
        if isinstance(v, dict) and "expr" in v:
            return self.expr(v["expr"], self_field=fid)
        if isinstance(v, dict):
            raise UnsupportedKsy(f"valid: {v}")
        return f"lambda this: this.{fid} == {v!r}"

    def instance(self, name: str, inst: dict[str, Any]) -> str:
        if "value" not in inst:
            raise UnsupportedKsy(f"instance {name!r}: only value instances are supported")
        sub = f"Computed({self.expr(inst['value'])})"
        if "if" in inst:
            sub = f"If({self.expr(inst['if'])}, {sub})"
        return f'"{name}" / {sub},'

    def struct(self, name: str, spec: dict[str, Any]) -> str:
        # Kaitai instances are lazy; construct computes in order, so each
        # value instance goes right after the last seq field it reads, and
        # before any field that reads it.
        seq = spec.get("seq", [])
        order = [f["id"] for f in seq]
        placed: dict[int, list[str]] = {}
        for iname, inst in spec.get("instances", {}).items():
            used = set(re.findall(r"this\.(\w+)", self.expr(inst["value"])))
            after = max((order.index(u) for u in used if u in order), default=-1)
            placed.setdefault(after, []).append(self.instance(iname, inst))
        body = list(placed.get(-1, []))
        for i, f in enumerate(seq):
            body.extend(self.field(f))
            body.extend(placed.get(i, []))
        doc = " ".join(str(spec.get("doc", "")).split())
        head = "".join(f"# {line}\n" for line in textwrap.wrap(doc, 77, break_on_hyphens=False))
        inner = "\n".join(f"    {line}" for line in body)
        return f"{head}{name} = Struct(\n{inner}\n)\n"

    def emit(self) -> str:
        parts = [f"\n\n# ---- {self.root} ----\n"]
        for tname, tspec in reversed(list(self.ksy.get("types", {}).items())):
            parts.append("\n" + self.struct(self.type_name(tname), tspec))
        parts.append("\n" + self.struct(self.root, self.ksy))
        return "".join(parts)


def emit_construct(ksy: dict[str, Any]) -> str:
    """Return Python source declaring one construct Struct per .ksy type."""
    return Emitter(ksy).emit()
