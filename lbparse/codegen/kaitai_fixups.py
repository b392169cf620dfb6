"""Make kaitai-struct-compiler 0.11's output build and behave in each language.

The compiler's JS API cannot set the options its command line has (Go and
Java packages), and some of its targets fall short of the spec in ways that
stop the code from compiling or parsing as the spec says. Each fix here is
one small rewrite of the generated source, applied by `lbparse.codegen.generate`
and held by tests/codegen/test_langs.py (which compiles and runs every language):

- Go, Java: the package clause the compiler leaves out.
- C#: a field named like its type (`header: {type: header}`) or a parameter
  named like its enum (`layout: {enum: layout}`) gives a property and a
  nested type of one name, which C# refuses; the type gets a `Type` suffix.
- Nim: enums of one module may not share a member name (`publish` is in
  three MsgType tables) unless the module allows overloadable enums; and an
  enum instance of a byte outside the enum raised a RangeDefect (a Defect,
  not an error): it raises the runtime's KaitaiError.
- Perl: the compiler forgets the type's `params`: `new` takes them after
  `$_root`, in the spec's order, as every other target does in its own way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from lbparse.errors import InputError

__all__ = ["FIXUPS", "fix_source"]


def go_package(text: str, package: str) -> str:
    if any(line.startswith("package ") for line in text.splitlines()):
        return text
    head, _, rest = text.partition("\n")
    return f"{head}\n\npackage {package}\n{rest}"


def java_package(text: str, package: str) -> str:
    if any(line.startswith("package ") for line in text.splitlines()):
        return text
    head, _, rest = text.partition("\n")
    return f"{head}\n\npackage {package};\n{rest}"


def csharp_clash_names(text: str) -> set[str]:
    """Nested types and enums of a generated C# file that share a property's name."""
    enums = set(re.findall(r"\benum (\w+)\s*\{", text))
    classes = set(re.findall(r"\bpartial class (\w+)", text))
    props = set(re.findall(r"public [\w.<>?\[\]]+ (\w+) \{ get", text))
    return (classes | enums) & props


def csharp_imported(text: str, renamed: dict[str, set[str]]) -> str:
    """References to another spec's renamed types (`Root.Body`, imported by
    this spec) follow that file's renames: qualified by the class, the name
    can only be the type."""
    for root, names in renamed.items():
        for name in names:
            text = re.sub(rf"\b{root}\.{name}\b", f"{root}.{name}Type", text)
    return text


_CS_INTS = {
    "u1": "byte",
    "u2": "ushort",
    "u4": "uint",
    "u8": "ulong",
    "s1": "sbyte",
    "s2": "short",
    "s4": "int",
    "s8": "long",
}


def csharp_typed_ints(text: str, ksy: dict[str, Any]) -> str:
    """ksc 0.11's C# hands a repeat index (`int`) to an unsigned parameter
    and compares it with an unsigned 64-bit count, which C# does not
    convert implicitly; the conversions are written in."""
    for name, spec in ksy.get("types", {}).items():
        params = spec.get("params", [])
        if len(params) == 1 and params[0].get("type") in _CS_INTS:
            cls = camel(name, upper=True)
            text = text.replace(f"new {cls}(i, ", f"new {cls}(({_CS_INTS[params[0]['type']]}) i, ")
    specs = [ksy, *ksy.get("types", {}).values()]
    for f in (f for s in specs for f in s.get("seq", [])):
        if f.get("type") in ("u8", "u8le", "u8be"):
            count = camel(f["id"], upper=True)
            text = text.replace(f"i < {count};", f"(ulong) i < {count};")
    return text


def csharp_clashes(text: str) -> str:
    """Rename nested types and enums that share a name with a property.

    The type is renamed where C# syntax says a type is meant: its own
    declaration and constructor, `new T(`, a declaration `T name`, and for an
    enum `T.Member`. `T.Member` of a class is the property's member, kept.
    """
    enums = dict(re.findall(r"\benum (\w+)\s*\{([^}]*)\}", text))
    for name in sorted(csharp_clash_names(text)):
        new = f"{name}Type"
        text = re.sub(rf"\b(partial class|enum) {name}\b", rf"\1 {new}", text)
        text = re.sub(rf"\b(new|public) {name}\(", rf"\1 {new}(", text)
        text = re.sub(rf"\(\({name}\) ", f"(({new}) ", text)
        text = re.sub(rf"(?<!\w){name}(?= [A-Za-z_]\w*\s*[;,)={{(])", new, text)
        if name in enums:
            members = re.findall(r"(\w+)\s*=", enums.get(new, enums[name]))
            for member in members:
                text = re.sub(rf"(?<!\w){name}\.{member}\b", f"{new}.{member}", text)
    return text


def nim_overloadable_enums(text: str) -> str:
    pragma = '{.experimental: "overloadableEnums".}'
    if pragma in text:
        return text
    return f"{pragma}\n{text}"


_NIM_ENUM_HELPER = """
proc lbparseEnum[T: enum](v: SomeInteger): T =
  ## lbparse: a value outside the enum (an unknown MsgType) is a KaitaiError,
  ## where the plain conversion raises a RangeDefect.
  for e in T:
    if ord(e) == int(v): return e
  raise newException(KaitaiError, "ValidationNotInEnumError: " & $int(v) & " is not a " & $T)
"""


def nim_checked_enums(text: str) -> str:
    """Enum instances (`v0_msg_type`) of an unknown byte: a KaitaiError, not a RangeDefect."""
    enums = set(re.findall(r"^  (\w+)\* = enum$", text, re.M))
    pattern = re.compile(r"\b(\w+)\(\1\((this\.\w+)\)\)")
    fixed = pattern.sub(
        lambda m: f"lbparseEnum[{m.group(1)}]({m.group(2)})" if m.group(1) in enums else m.group(0),
        text,
    )
    if fixed == text:
        return text
    head, sep, rest = fixed.partition("\ntype\n")
    return head + _NIM_ENUM_HELPER + sep + rest


def perl_params(text: str, params: list[str]) -> str:
    """`new($class, $_io, $_parent, $_root, PARAMS...)` for the root type."""
    if not params:
        return text
    args = ", ".join(f"${p}" for p in params)
    sets = "".join(f"    $self->{{{p}}} = ${p};\n" for p in params)
    pattern = re.compile(
        r"(sub new \{\n    my \(\$class, \$_io, \$_parent, \$_root)\) = @_;\n"
        r"(.*?\n)(    \$self->_read\(\);)",
        re.S,
    )
    return pattern.sub(
        lambda m: f"{m.group(1)}, {args}) = @_;\n{m.group(2)}{sets}{m.group(3)}", text, count=1
    )


def _root_params(ksy: dict[str, Any]) -> list[str]:
    return [p["id"] for p in ksy.get("params", [])]


_GO_INTS = {
    "u1": "uint8",
    "u2": "uint16",
    "u4": "uint32",
    "u8": "uint64",
    "s1": "int8",
    "s2": "int16",
    "s4": "int32",
    "s8": "int64",
}


def go_typed_ints(text: str, ksy: dict[str, Any]) -> str:
    """Go has no implicit integer conversions, and ksc 0.11's Go output
    mixes them: a repeat index (`int`) handed to a `u4` parameter, a field
    compared with a literal-valued instance (`int`), a field and'ed with an
    enum's `.to_i` (left as the enum's own type). Each gets the conversion."""
    root = camel(ksy["meta"]["id"], upper=True)
    for name, spec in ksy.get("types", {}).items():
        params = spec.get("params", [])
        if len(params) == 1 and params[0].get("type") in _GO_INTS:
            ctor = f"New{root}_{camel(name, upper=True)}"
            text = text.replace(f"{ctor}(i)", f"{ctor}({_GO_INTS[params[0]['type']]}(i))")
    literal = {
        camel(n, upper=True)
        for n, inst in ksy.get("instances", {}).items()
        if isinstance(inst.get("value"), int)
    }
    tmps = {
        m.group(1)
        for m in re.finditer(r"(tmp\d+), err := this\.(\w+)\(\)", text)
        if m.group(2) in literal
    }
    text = re.sub(
        r"(this\.\w+) (==|!=) (tmp\d+)\b",
        lambda m: (
            f"int({m.group(1)}) {m.group(2)} {m.group(3)}" if m.group(3) in tmps else m.group(0)
        ),
        text,
    )
    return re.sub(rf"(this\.\w+) & ({root}_\w+__\w+)\b", r"int(\1) & int(\2)", text)


# lang -> (file suffix, fix(text, ksy, options) -> text)
FIXUPS: dict[str, tuple[str, Callable[[str, dict[str, Any], dict[str, Any]], str]]] = {
    "go": (".go", lambda t, k, o: go_typed_ints(go_package(t, o["go_package"]), k)),
    "java": (".java", lambda t, k, o: java_package(t, o["java_package"])),
    "csharp": (
        ".cs",
        lambda t, k, o: csharp_typed_ints(
            csharp_imported(csharp_clashes(t), o.get("csharp_renamed", {})), k
        ),
    ),
    "nim": (".nim", lambda t, k, o: nim_overloadable_enums(t)),
    "perl": (".pm", lambda t, k, o: perl_params(t, _root_params(k))),
}


def fix_source(lang: str, text: str, ksy: dict[str, Any], options: dict[str, Any]) -> str:
    """The generated source of one .ksy in `lang`, with that language's fixes.

    Args:
        lang: The target's name (`targets.LANGUAGES`).
        text: The Kaitai compiler's output for the .ksy.
        ksy: The .ksy, parsed.
        options: The target's compiler options (package names, ...).

    Returns:
        The source as it is written; `text` itself when the language needs
        no fix.
    """
    suffix_fix = FIXUPS.get(lang)
    return text if suffix_fix is None else suffix_fix[1](text, ksy, options)


# --- checks the compiler leaves out (Perl, Nim) or leaves without a spec path (Lua) ---
#
# kaitai-struct-compiler 0.11 writes no `contents`/`valid` checks at all for
# Perl and Nim, and Lua's checks raise a bare string that does not say which
# field failed. The checks are the spec's, so they are written here from the
# .ksy: after the line that stores each checked field, the check, raising
# the target's error with the field's spec path (`/types/header/seq/1`), as
# the other targets' runtimes do.

_TOKEN = re.compile(
    r"\s*(?:(0x[0-9a-fA-F_]+|-?\d[\d_]*)|([A-Za-z_]\w*(?:::\w+)?)"
    r"|(==|!=|<=|>=|<<|>>|[-+*/%&|^<>().~])|(\"[^\"\\$@]*\"))"
)
_BINARY = {
    "or": 1,
    "and": 2,
    "==": 4,
    "!=": 4,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "|": 5,
    "^": 6,
    "&": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "%": 10,
}


class ExprError(InputError):
    """A Kaitai expression this module does not translate."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"bad_spec"})


def parse_expr(src: str) -> Any:
    """A Kaitai expression (the subset the spec's checks use) as nested tuples.

    ("int", n) ("bool", b) ("str", s) ("name", id) ("enum", enum, id) ("attr", node, id)
    ("not", node) ("neg", node) ("bin", op, left, right).
    """
    tokens = ["".join(t) for t in _TOKEN.findall(src)]
    if "".join(tokens).replace(" ", "") != src.replace(" ", ""):
        raise ExprError("bad_spec", f"cannot read Kaitai expression {src!r}")
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise ExprError("bad_spec", f"expression {src!r} ends early")
        pos += 1
        return tokens[pos - 1]

    def unary() -> Any:
        tok = take()
        if tok == "not":
            return ("not", expr(3))
        if tok == "-":
            return ("neg", unary())
        if tok == "(":
            inner = expr(0)
            if take() != ")":
                raise ExprError("bad_spec", f"unbalanced parenthesis in {src!r}")
            node = inner
        elif tok[0].isdigit() or (tok[0] == "-" and len(tok) > 1):
            node = ("int", int(tok.replace("_", ""), 0))
        elif tok in ("true", "false"):
            node = ("bool", tok == "true")
        elif tok.startswith('"'):
            node = ("str", tok[1:-1])
        elif "::" in tok:
            node = ("enum", *tok.split("::"))
        else:
            node = ("name", tok)
        while peek() == ".":
            take()
            node = ("attr", node, take())
        return node

    def expr(min_prec: int) -> Any:
        left = unary()
        while (op := peek()) in _BINARY and _BINARY[op] > min_prec:
            take()
            left = ("bin", op, left, expr(_BINARY[op]))
        return left

    tree = expr(0)
    if pos != len(tokens):
        raise ExprError("bad_spec", f"cannot read Kaitai expression {src!r}")
    return tree


def enum_value(ksy: dict[str, Any], enum: str, ident: str) -> int:
    for value, attrs in ksy["enums"][enum].items():
        if (attrs["id"] if isinstance(attrs, dict) else attrs) == ident:
            return int(value)
    raise ExprError("bad_spec", f"unknown enum value {enum}::{ident}")


def camel(ident: str, upper: bool = False) -> str:
    parts = ident.split("_")
    head = parts[0].capitalize() if upper else parts[0]
    return head + "".join(p.capitalize() for p in parts[1:])


class Dialect:
    """How one target language writes a check; subclasses fill the names in."""

    ops: dict[str, str] = {}

    def __init__(self, ksy: dict[str, Any], type_name: str | None) -> None:
        self.ksy, self.type_name = ksy, type_name

    def fields(self) -> list[dict[str, Any]]:
        spec = self.ksy["types"][self.type_name] if self.type_name else self.ksy
        return list(spec.get("seq", []))

    def render(self, node: Any, this: str | None) -> str:
        kind = node[0]
        if kind == "int":
            return str(node[1])
        if kind == "bool":
            return self.bool(node[1])
        if kind == "str":
            return f'"{node[1]}"'
        if kind == "enum":
            return str(enum_value(self.ksy, node[1], node[2]))
        if kind == "not":
            return f"({self.not_op} {self.render(node[1], this)})"
        if kind == "neg":
            return f"(-{self.render(node[1], this)})"
        if kind == "bin":
            _, op, a, b = node
            return f"({self.render(a, this)} {self.ops.get(op, op)} {self.render(b, this)})"
        if kind == "attr":
            base, attr = node[1], node[2]
            if base == ("name", "_root") and attr in self.params():
                return self.param(attr)
            if attr in ("length", "size"):
                return self.length(self.render(base, this))
            raise ExprError("bad_spec", f"unsupported attribute .{attr}")
        name = node[1]
        if name == "_":
            if this is None:
                raise ExprError("bad_spec", "`_` outside a check")
            return self.value(this)
        if name in self.params():
            return self.param(name)
        if any(f["id"] == name for f in self.fields()):
            return self.value(name)
        raise ExprError("bad_spec", f"unknown name {name!r}")

    def params(self) -> dict[str, dict[str, Any]]:
        return {p["id"]: p for p in self.ksy.get("params", [])}

    def is_str(self, field_id: str) -> bool:
        f = next((f for f in self.fields() if f["id"] == field_id), {})
        return f.get("type") in ("str", "strz")

    def eq(self, field_id: str, other: str) -> str:
        return f"({self.value(field_id)} == {other})"

    def is_bytes(self, field_id: str) -> bool:
        f = next((f for f in self.fields() if f["id"] == field_id), {})
        return "contents" in f or ("size" in f or "size-eos" in f) and "type" not in f

    def condition(self, field: dict[str, Any]) -> tuple[str, str] | None:
        """(expression that must hold, Kaitai error class) for one seq field, or None."""
        fid = field["id"]
        if "contents" in field:
            c = field["contents"]
            raw = list(c.encode()) if isinstance(c, str) else [int(b) for b in c]
            return self.bytes_eq(fid, raw), "ValidationNotEqualError"
        valid = field.get("valid")
        if valid is None:
            return None
        if not isinstance(valid, dict):
            valid = {"eq": valid}
        parts, error = [], "ValidationExprError"
        v = self.value(fid)
        if "eq" in valid:
            parts.append(self.eq(fid, self.render(parse_expr(str(valid["eq"])), fid)))
            error = "ValidationNotEqualError"
        if "any-of" in valid:
            alts = [self.eq(fid, self.render(parse_expr(str(x)), fid)) for x in valid["any-of"]]
            parts.append("(" + f" {self.ops['or']} ".join(alts) + ")")
            error = "ValidationNotAnyOfError"
        if "min" in valid:
            parts.append(f"({v} >= {self.render(parse_expr(str(valid['min'])), fid)})")
            error = "ValidationLessThanError"
        if "max" in valid:
            parts.append(f"({v} <= {self.render(parse_expr(str(valid['max'])), fid)})")
            error = "ValidationGreaterThanError"
        if "expr" in valid:
            parts.append(self.render(parse_expr(str(valid["expr"])), fid))
        return f" {self.ops['and']} ".join(parts), error

    not_op = "not"

    def bool(self, b: bool) -> str:
        return "true" if b else "false"

    def value(self, field_id: str) -> str:
        raise NotImplementedError

    def param(self, name: str) -> str:
        raise NotImplementedError

    def length(self, expr: str) -> str:
        raise NotImplementedError

    def bytes_eq(self, field_id: str, raw: list[int]) -> str:
        raise NotImplementedError

    def statement(self, cond: str, error: str, path: str, indent: str) -> str:
        """The check as a statement that raises `error` with the spec path."""
        raise NotImplementedError


class PerlDialect(Dialect):
    ops = {"and": "&&", "or": "||", "==": "==", "!=": "!="}
    not_op = "!"

    def bool(self, b: bool) -> str:
        return "1" if b else "0"

    def value(self, field_id: str) -> str:
        v = f"$self->{{{field_id}}}"
        return v

    def param(self, name: str) -> str:
        return f"$self->{{_root}}->{{{name}}}"

    def eq(self, field_id: str, other: str) -> str:
        # Perl's `==` compares numbers: "0" == "00" holds, "0" eq "00" does not.
        op = "eq" if self.is_str(field_id) else "=="
        return f"({self.value(field_id)} {op} {other})"

    def length(self, expr: str) -> str:
        return f"length({expr})"

    def bytes_eq(self, field_id: str, raw: list[int]) -> str:
        return f"({self.value(field_id)} eq pack('C*', {', '.join(map(str, raw))}))"

    def statement(self, cond: str, error: str, path: str, indent: str) -> str:
        return (
            f'{indent}die "{error}: {path}: at pos " . $self->{{_io}}->pos() . "\\n" '
            f"unless {cond};\n"
        )


class NimDialect(Dialect):
    ops = {
        "and": "and",
        "or": "or",
        "==": "==",
        "!=": "!=",
        "&": "and",
        "|": "or",
        "^": "xor",
        "<<": "shl",
        ">>": "shr",
        "/": "div",
        "%": "mod",
    }

    def value(self, field_id: str) -> str:
        if self.is_bytes(field_id) or self.is_str(field_id):
            return f"this.{camel(field_id)}"
        return f"int(this.{camel(field_id)})"

    def param(self, name: str) -> str:
        root = camel(self.ksy["meta"]["id"], upper=True)
        # Enum-typed parameters compare as their numbers.
        return f"ord({root}(this.root).{camel(name)})"

    def length(self, expr: str) -> str:
        return f"len({expr})"

    def bytes_eq(self, field_id: str, raw: list[int]) -> str:
        return f"({self.value(field_id)} == @[{', '.join(f'{b}.byte' for b in raw)}])"

    def statement(self, cond: str, error: str, path: str, indent: str) -> str:
        return (
            f"{indent}if not ({cond}):\n{indent}  raise newException(KaitaiError, "
            f'"{error}: {path}: at pos " & $this.io.pos)\n'
        )


def _types_in_order(ksy: dict[str, Any]) -> list[str | None]:
    return [None, *ksy.get("types", {})]


def _spec_path(type_name: str | None, index: int) -> str:
    return f"/types/{type_name}/seq/{index}" if type_name else f"/seq/{index}"


def _region(text: str, start: re.Pattern[str], end: re.Pattern[str]) -> tuple[int, int] | None:
    m = start.search(text)
    if m is None:
        return None
    e = end.search(text, m.end())
    return m.end(), (e.start() if e else len(text))


def _insert_checks(
    text: str,
    ksy: dict[str, Any],
    dialect: type[Dialect],
    region_of: Callable[[str | None], tuple[re.Pattern[str], re.Pattern[str]]],
    assign_of: Callable[[str], str],
) -> str:
    for type_name in _types_in_order(ksy):
        d = dialect(ksy, type_name)
        start, end = region_of(type_name)
        for index, field in enumerate(d.fields()):
            cond = d.condition(field)
            span = _region(text, start, end)
            if cond is None or span is None:
                continue
            body = text[span[0] : span[1]]
            m = re.search(rf"^( *){re.escape(assign_of(field['id']))} = .*\n", body, re.M)
            if m is None:
                raise ExprError(
                    "bad_spec",
                    f"no assignment of {field['id']} in the generated {dialect.__name__}",
                )
            line = d.statement(cond[0], cond[1], _spec_path(type_name, index), m.group(1))
            at = span[0] + m.end()
            text = text[:at] + line + text[at:]
    return text


def perl_checks(text: str, ksy: dict[str, Any]) -> str:
    root = camel(ksy["meta"]["id"], upper=True)

    def region(type_name: str | None) -> tuple[re.Pattern[str], re.Pattern[str]]:
        pkg = root if type_name is None else f"{root}::{camel(type_name, upper=True)}"
        return (
            re.compile(rf"^package {re.escape(pkg)};\n(?:.*\n)*?sub _read \{{\n", re.M),
            re.compile(r"^\}\n", re.M),
        )

    return _insert_checks(text, ksy, PerlDialect, region, lambda f: f"$self->{{{f}}}")


def nim_checks(text: str, ksy: dict[str, Any]) -> str:
    root = camel(ksy["meta"]["id"], upper=True)

    def region(type_name: str | None) -> tuple[re.Pattern[str], re.Pattern[str]]:
        name = root if type_name is None else f"{root}_{camel(type_name, upper=True)}"
        return (
            re.compile(rf"^proc read\*\(_: typedesc\[{name}\].*=\n", re.M),
            re.compile(r"^proc ", re.M),
        )

    return _insert_checks(text, ksy, NimDialect, region, lambda f: f"this.{camel(f)}")


def lua_check_paths(text: str, ksy: dict[str, Any]) -> str:
    """Add the field's spec path to each check's `error(...)` of the Lua output."""
    root = camel(ksy["meta"]["id"], upper=True)
    for type_name in _types_in_order(ksy):
        name = root if type_name is None else f"{root}.{camel(type_name, upper=True)}"
        fields = Dialect(ksy, type_name).fields()
        for index, field in enumerate(fields):
            if "contents" not in field and "valid" not in field:
                continue
            span = _region(
                text,
                re.compile(rf"^function {re.escape(name)}:_read\(\)\n", re.M),
                re.compile(r"^end\n", re.M),
            )
            if span is None:
                continue
            body = text[span[0] : span[1]]
            m = re.search(
                rf"^ *self\.{field['id']} = .*\n"
                r"(?:(?! *self\.\w+ = ).*\n)*? *error\((.*)\)\n",
                body,
                re.M,
            )
            if m is None:
                raise ExprError("bad_spec", f"no check of {field['id']} in the generated Lua")
            path = _spec_path(type_name, index)
            at = span[0] + m.start(1)
            end = span[0] + m.end(1)
            text = f'{text[:at]}"{path}: " .. {text[at:end]}{text[end:]}'
    return text


FIXUPS["perl"] = (".pm", lambda t, k, o: perl_checks(perl_params(t, _root_params(k)), k))
FIXUPS["nim"] = (
    ".nim",
    lambda t, k, o: nim_checked_enums(nim_checks(nim_overloadable_enums(t), k)),
)
FIXUPS["lua"] = (".lua", lambda t, k, o: lua_check_paths(t, k))


# --- JavaScript: exact 64-bit integers, and errors that say where -----------

_JS_BIGINT = """
// lbparse: 64-bit integers are read as BigInt, exact (the runtime's
// readU8be/readS8be return a Number, which loses precision above 2^53).
function readBigU8be(io) {
  var b = io.readBytes(8);
  return new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0);
}
function readBigS8be(io) {
  var b = io.readBytes(8);
  return new DataView(b.buffer, b.byteOffset, 8).getBigInt64(0);
}
"""


def _sixty_four_bit_fields(ksy: dict[str, Any]) -> set[str]:
    specs = [ksy, *ksy.get("types", {}).values()]
    return {
        f["id"]
        for s in specs
        for f in s.get("seq", [])
        if f.get("type") in ("u8", "s8", "u8be", "s8be")
    }


def _expressions(node: Any) -> list[tuple[str, str]]:
    """(key, expression) of every expression of a .ksy (if, size, repeat-expr, value...)."""
    out: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("if", "size", "repeat-expr", "value", "pos", "expr") and isinstance(
                value, (str, int)
            ):
                out.append((key, str(value)))
            else:
                out += _expressions(value)
    elif isinstance(node, list):
        for item in node:
            out += _expressions(item)
    return out


_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


def _computed_with(node: Any, wide: set[str], compared: bool) -> set[str]:
    """The 64-bit names `node` computes with (not only compares): ksc's
    JavaScript compares with `==`/`<`, exact between a BigInt and a Number,
    while arithmetic mixing them throws."""
    kind = node[0]
    if kind == "name":
        return {node[1]} & wide if not compared else set()
    if kind == "attr":
        own = {node[2]} & wide if not compared else set()
        return own | _computed_with(node[1], wide, False)
    if kind == "bin":
        ok = node[1] in _COMPARISONS
        return _computed_with(node[2], wide, ok) | _computed_with(node[3], wide, ok)
    if kind in ("not", "neg"):
        return _computed_with(node[1], wide, False)
    return set()


def _bigint_conflicts(key: str, expr: str, wide: set[str]) -> set[str]:
    try:
        tree = parse_expr(expr)
    except ExprError:  # not read here: any 64-bit name in it is a conflict
        names = re.sub(r'"[^"]*"|[A-Za-z_]\w*::\w+', " ", expr)
        return wide & set(re.findall(r"[A-Za-z_]\w*", names))
    # A repeat count is compared with the index; a value instance is the number itself.
    return _computed_with(tree, wide, key in ("repeat-expr", "value", "if"))


def js_bigint(text: str, ksy: dict[str, Any]) -> str:
    """Read u8/s8 as BigInt. Refused if an expression of the spec computes
    with one of those fields: BigInt and Number do not mix in JavaScript."""
    wide = _sixty_four_bit_fields(ksy)
    for key, expr in _expressions(ksy):
        used = _bigint_conflicts(key, expr, wide)
        if used:
            raise ExprError(
                "bad_spec",
                f"{', '.join(sorted(used))} (64-bit) used in expression {expr!r}: "
                "cannot read it as BigInt",
            )
    if not wide or "readBigU8be" in text:
        return text
    text = re.sub(r"this\._io\.readU8be\(\)", "readBigU8be(this._io)", text)
    text = re.sub(r"this\._io\.readS8be\(\)", "readBigS8be(this._io)", text)
    head, sep, rest = text.partition("\n(function (root, factory) {")
    return head + _JS_BIGINT + sep + rest if sep else _JS_BIGINT + text


def js_error_paths(text: str) -> str:
    """The JS runtime drops the spec path the generated code hands its
    validation errors; keep it as `srcPath` and in the message."""
    pattern = re.compile(
        r"throw new KaitaiStream\.(Validation\w+Error)\((.*), "
        r'this\._io, "(/[^"]*)"\);'
    )
    return pattern.sub(
        lambda m: f'throw withPath(new KaitaiStream.{m.group(1)}({m.group(2)}), "{m.group(3)}");',
        text,
    )


_JS_WITH_PATH = """
// lbparse: a failed check says which field of the spec failed.
function withPath(err, srcPath) {
  err.srcPath = srcPath;
  err.message = srcPath + ": " + err.message;
  return err;
}
"""


def js_fixes(text: str, ksy: dict[str, Any]) -> str:
    text = js_bigint(text, ksy)
    fixed = js_error_paths(text)
    if fixed != text and "function withPath(" not in fixed:
        head, sep, rest = fixed.partition("\n(function (root, factory) {")
        fixed = head + _JS_WITH_PATH + sep + rest if sep else _JS_WITH_PATH + fixed
    return fixed


FIXUPS["javascript"] = (".js", lambda t, k, o: js_fixes(t, k))
# Targets whose missing checks are written here: the compiler's warnings
# about checks it could not generate for them are answered.
WRITES_CHECKS = frozenset({"perl", "nim"})
