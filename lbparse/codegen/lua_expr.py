"""Kaitai expressions (the subset lbparse's specs use) translated to Lua 5.2.

`LuaExpr(ksy).translate(expr, type_name)` gives a Lua expression in which
`v` is the value being checked (Kaitai's `_`), `h.NAME` a field already read
of the same type, `layout_id` the `layout` parameter, a value instance is
inlined, `ENUM::ID` becomes its number and `c ? a : b` a function call (Lua
has no conditional expression). Bit operations use Lua 5.2's `bit32`, as
Wireshark's Lua has it.
"""

from __future__ import annotations

import re
from typing import Any

from lbparse.errors import InputError

__all__ = ["LuaExpr"]

_TOKEN = re.compile(
    r"\s*(?:(0x[0-9a-fA-F_]+|\d[\d_]*)"
    r"|([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)?)"
    r"|(==|!=|<=|>=|<<|>>|[-+*/%&|^<>().!~?:]))"
)
_BINARY = {  # Kaitai operator -> (precedence, Lua template)
    "or": (1, "({a} or {b})"),
    "and": (2, "({a} and {b})"),
    "==": (4, "({a} == {b})"),
    "!=": (4, "({a} ~= {b})"),
    "<": (4, "({a} < {b})"),
    "<=": (4, "({a} <= {b})"),
    ">": (4, "({a} > {b})"),
    ">=": (4, "({a} >= {b})"),
    "|": (5, "bit32.bor({a}, {b})"),
    "^": (6, "bit32.bxor({a}, {b})"),
    "&": (7, "bit32.band({a}, {b})"),
    "<<": (8, "bit32.lshift({a}, {b})"),
    ">>": (8, "bit32.rshift({a}, {b})"),
    "+": (9, "({a} + {b})"),
    "-": (9, "({a} - {b})"),
    "*": (10, "({a} * {b})"),
    "/": (10, "math.floor({a} / {b})"),
    "%": (10, "({a} % {b})"),
}


class LuaExpr:
    """Kaitai expression -> Lua, resolving names in the context of one type.

    `_` is the value being checked (`v`), a field of the header is
    `h.NAME`, an instance is inlined, `TYPE.NAME` resolves in that type,
    `_root.layout` is the layout parameter and `ENUM::ID` its number.

    Args:
        ksy: The .ksy the expressions come from, parsed.
    """

    def __init__(self, ksy: dict[str, Any]) -> None:
        self.ksy = ksy

    def translate(self, expr: str, type_name: str) -> str:
        """One Kaitai expression as a Lua expression.

        Args:
            expr: The Kaitai expression.
            type_name: The type it is written in (names resolve there).

        Returns:
            The Lua expression.

        Raises:
            InputError: The expression holds what the translator does not know.
        """
        self.tokens = [t for t in _TOKEN.findall(str(expr))]
        if "".join("".join(t) for t in self.tokens).replace(" ", "") != str(expr).replace(" ", ""):
            raise InputError("bad_spec", f"cannot translate Kaitai expression {expr!r}")
        self.tokens = ["".join(t) for t in self.tokens]
        self.pos, self.type_name = 0, type_name
        out = self._ternary()
        if self.pos != len(self.tokens):
            raise InputError("bad_spec", f"cannot translate Kaitai expression {expr!r}")
        return out

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _next(self) -> str:
        tok = self._peek()
        if tok is None:
            raise InputError("bad_spec", "expression ends too early")
        self.pos += 1
        return tok

    def _ternary(self) -> str:
        """`c ? a : b`, the lowest precedence; Lua has no conditional expression."""
        cond = self._expr(0)
        if self._peek() != "?":
            return cond
        self._next()
        then = self._ternary()
        if self._next() != ":":
            raise InputError("bad_spec", "`?` without `:`")
        other = self._ternary()
        return f"(function() if {cond} then return {then} else return {other} end end)()"

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
            inner = self._ternary()
            if self._next() != ")":
                raise InputError("bad_spec", "unbalanced parenthesis")
            return inner
        if tok[0].isdigit():
            return str(int(tok.replace("_", ""), 0))
        if tok in ("true", "false"):
            return tok
        return self._postfix(self._name(tok))

    def _postfix(self, value: str) -> str:
        """`x.length` (or `.size`) of a byte string: Lua's `#`."""
        while (
            self._peek() == "."
            and self.pos + 1 < len(self.tokens)
            and self.tokens[self.pos + 1] in ("length", "size")
        ):
            self.pos += 2
            value = f"#({value})"
        return value

    def _name(self, tok: str) -> str:
        if "::" in tok:
            enum, ident = tok.split("::")
            for value, attrs in self.ksy["enums"][enum].items():
                if (attrs["id"] if isinstance(attrs, dict) else attrs) == ident:
                    return str(int(value))
            raise InputError("bad_spec", f"unknown enum value {tok}")
        type_name = self.type_name
        if tok == "_root" and self._peek() == ".":
            self._next()
            param = self._next()
            if param != "layout":
                raise InputError("bad_spec", f"unsupported _root.{param}")
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
                raise InputError("bad_spec", f"unsupported parameter {name}")
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
        raise InputError("bad_spec", f"unknown name {name!r} in type {type_name}")
