"""Every public function and class documents itself in Google style (issue #49,
item 4): what it takes (Args), what it gives back (Returns or Yields), what it
raises (Raises), as mkdocstrings' `docstring_style: google` reads them for the
API reference (docs/pages/api.md).

The rule, read from the source with `ast` (nothing is imported, so the wings
that need an extra are checked without it):

- a public module is a .py under lbparse/ none of whose path parts starts
  with `_` (`__init__.py` counts), lbparse/examples/ excepted;
- its public names are its `__all__`, else its top-level names not starting
  with `_`; only what the module defines counts (a re-export is checked
  where it is defined);
- checked: each public function, each public class, each method of a public
  class not starting with `_`, and `__init__`'s parameters;
- each has a docstring whose first line is a summary ending with a period,
  followed by a blank line if more text comes;
- `Args:` names every parameter but self/cls (`*args`, `**kwargs` too); a
  class's `__init__` parameters are named in the class docstring or in
  `__init__`'s; a dataclass, NamedTuple or TypedDict names its fields under
  `Attributes:` instead;
- `Returns:` when the return annotation is there and is not None (`Yields:`
  for a generator annotated Iterator/Iterable/Generator); a property needs
  its docstring only;
- `Raises:` names each class the body raises (`raise X(...)`, `raise X`;
  not a bare `raise`, not a caught lowercase variable), nested definitions
  not counted.

A failure names the module and lists each gap: the definition, its line and
what it lacks.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.imports import parsed

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lbparse"

SECTIONS = ("Args", "Returns", "Yields", "Raises", "Attributes")
_SECTION = re.compile(r"^(\w+):\s*$")
# An entry of Args/Raises/Attributes: `name:`, `name (type):`, `*args:`, `mod.Error:`.
_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_][\w.]*)\s*(?:\([^)]*\))?\s*:")
_GENERATORS = {
    "Iterator",
    "Iterable",
    "Generator",
    "AsyncIterator",
    "AsyncIterable",
    "AsyncGenerator",
}
_NO_RETURN = {"None", "NoReturn", "Never"}
_PROPERTIES = {"property", "cached_property"}
_RECORDS = {"NamedTuple", "TypedDict"}


def public_modules() -> list[Path]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if parts[0] == "examples":
            continue
        if any(part.startswith("_") for part in parts if part != "__init__.py"):
            continue
        found.append(path)
    return found


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _literal_names(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.List | ast.Tuple) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    return None


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The module's statements, those under a top-level if/try included
    (a definition made only when an import succeeds is still the module's)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _top_level(block)
            for handler in node.handlers:
                yield from _top_level(handler.body)


def public_names(tree: ast.Module) -> set[str] | None:
    """`__all__` as the module spells it, or None when it has none."""
    names: list[str] | None = None
    for node in _top_level(tree.body):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert node.value is not None
                names = _literal_names(node.value)
                assert names is not None, "__all__ must be a literal list of strings"
        elif (
            isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "__all__"
        ):
            extra = _literal_names(node.value)
            assert names is not None and extra is not None, "__all__ += must add a literal list"
            names += extra
    return None if names is None else set(names)


@dataclass
class Doc:
    """A docstring split into its summary and its Google sections."""

    summary_problem: str | None
    sections: dict[str, list[str]]  # section -> its entry names (or its text lines)


def parse_doc(text: str) -> Doc:
    lines = inspect.cleandoc(text).splitlines()
    problem = None
    if not lines or not lines[0].strip():
        problem = "a summary line"
    elif not lines[0].rstrip().endswith("."):
        problem = "a one-line summary ending with a period"
    elif len(lines) > 1 and lines[1].strip():
        problem = "a blank line after the one-line summary"
    sections: dict[str, list[str]] = {}
    current: str | None = None
    block: list[str] = []

    def close() -> None:
        if current is None:
            return
        body = [line for line in block if line.strip()]
        if current in ("Returns", "Yields"):
            sections[current] = [line.strip() for line in body]
            return
        indent = min((len(line) - len(line.lstrip()) for line in body), default=0)
        entries = []
        for line in body:
            if len(line) - len(line.lstrip()) == indent:
                match = _ENTRY.match(line.strip())
                if match:
                    entries.append(match.group(1))
        sections[current] = entries

    for line in lines[1:]:
        match = _SECTION.match(line)
        if match and match.group(1) in SECTIONS:
            close()
            current, block = match.group(1), []
        elif current is not None and line.strip() and not line[0].isspace():
            close()  # prose at the margin ends a section
            current, block = None, []
        elif current is not None:
            block.append(line)
    close()
    return Doc(problem, sections)


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    if isinstance(node, ast.Call):
        return _name(node.func)
    return None


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str]:
    return {name for d in node.decorator_list if (name := _name(d)) is not None}


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a definition's body, nested definitions left out."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        yield child
        yield from _own_nodes(child)


def raised(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The classes the body raises by name, in order, once each."""
    found: list[str] = []
    for child in _own_nodes(node):
        if not isinstance(child, ast.Raise) or child.exc is None:
            continue
        exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
        name = _name(exc) if isinstance(exc, ast.Name | ast.Attribute) else None
        # A class by its name: `raise err` (a caught variable) or `raise make()` is not.
        if name and name.lstrip("_")[:1].isupper() and name not in found:
            found.append(name)
    return found


def _yields(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(n, ast.Yield | ast.YieldFrom) for n in _own_nodes(node))


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    args = node.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    if method and "staticmethod" not in _decorators(node) and positional:
        if positional[0] in ("self", "cls", "mcs", "metacls"):
            positional = positional[1:]
    names = positional + [a.arg for a in args.kwonlyargs]
    if args.vararg:
        names.append("*" + args.vararg.arg)
    if args.kwarg:
        names.append("**" + args.kwarg.arg)
    return names


def _documented(entries: list[str], name: str) -> bool:
    bare = name.lstrip("*")
    return any(e == name or e.lstrip("*") == bare or e.rsplit(".", 1)[-1] == bare for e in entries)


class Gaps:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, line: int, what: str, missing: str) -> None:
        self.items.append(f"line {line}: {what}: missing {missing}")

    def wrong(self, line: int, what: str, problem: str) -> None:
        self.items.append(f"line {line}: {what}: {problem}")


def _docstring(node: ast.AST) -> str | None:
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module)
    return ast.get_docstring(node, clean=False)


def check_function(
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    qualname: str,
    gaps: Gaps,
    *,
    method: bool = False,
) -> None:
    what = f"def {qualname}"
    text = _docstring(node)
    if text is None:
        gaps.add(node.lineno, what, "a docstring")
        return
    doc = parse_doc(text)
    if doc.summary_problem:
        gaps.add(node.lineno, what, doc.summary_problem)
    decorators = _decorators(node)
    if decorators & _PROPERTIES or decorators & {"setter", "deleter"}:
        return  # a property says what it is; no sections
    check_sections(node, doc, what, gaps, method=method)


def check_sections(
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    doc: Doc,
    what: str,
    gaps: Gaps,
    *,
    method: bool,
) -> None:
    params = _parameters(node, method)
    if params:
        if "Args" not in doc.sections:
            gaps.add(node.lineno, what, "an Args: section for " + ", ".join(params))
        else:
            lacking = [p for p in params if not _documented(doc.sections["Args"], p)]
            if lacking:
                gaps.add(node.lineno, what, "Args: entries for " + ", ".join(lacking))
    # An entry naming no parameter (a typo, `a, b:` for two) is what the API
    # reference's strict build refuses: griffe warns that it is not in the signature.
    bare = {p.lstrip("*") for p in params}
    strays = [e for e in doc.sections.get("Args", []) if e.lstrip("*") not in bare]
    if strays:
        gaps.wrong(node.lineno, what, "Args: entries naming no parameter: " + ", ".join(strays))
    returns = node.returns
    if returns is not None and node.name != "__init__":
        head = _name(returns)
        is_none = isinstance(returns, ast.Constant) and returns.value is None
        if isinstance(returns, ast.Constant) and isinstance(returns.value, str):
            head = returns.value.split("[", 1)[0].rsplit(".", 1)[-1].strip()
            is_none = head == "None"
        if head in _GENERATORS and _yields(node):
            if not doc.sections.get("Yields"):
                gaps.add(node.lineno, what, "a Yields: section")
        elif not is_none and head not in _NO_RETURN and not doc.sections.get("Returns"):
            gaps.add(node.lineno, what, "a Returns: section")
    errors = raised(node)
    if errors:
        if "Raises" not in doc.sections:
            gaps.add(node.lineno, what, "a Raises: section for " + ", ".join(errors))
        else:
            lacking = [e for e in errors if not _documented(doc.sections["Raises"], e)]
            if lacking:
                gaps.add(node.lineno, what, "Raises: entries for " + ", ".join(lacking))


def _record_fields(node: ast.ClassDef) -> list[str] | None:
    """A dataclass', NamedTuple's or TypedDict's fields; None for another class."""
    bases = {name for b in node.bases if (name := _name(b)) is not None}
    if not ("dataclass" in _decorators(node) or bases & _RECORDS):
        return None
    fields = []
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if _name(stmt.annotation) == "ClassVar" or stmt.target.id.startswith("_"):
                continue
            fields.append(stmt.target.id)
    return fields


def check_class(node: ast.ClassDef, gaps: Gaps) -> None:
    what = f"class {node.name}"
    text = _docstring(node)
    doc = parse_doc(text) if text is not None else None
    if doc is None:
        gaps.add(node.lineno, what, "a docstring")
    elif doc.summary_problem:
        gaps.add(node.lineno, what, doc.summary_problem)
    fields = _record_fields(node)
    if fields and doc is not None:
        lacking = [f for f in fields if not _documented(doc.sections.get("Attributes", []), f)]
        if lacking:
            gaps.add(node.lineno, what, "Attributes: entries for " + ", ".join(lacking))
    for item in node.body:
        if not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if "overload" in _decorators(item):
            continue
        qualname = f"{node.name}.{item.name}"
        if item.name == "__init__":
            check_init(item, doc, qualname, gaps)
        elif not item.name.startswith("_"):
            check_function(item, qualname, gaps, method=True)


def check_init(
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    class_doc: Doc | None,
    qualname: str,
    gaps: Gaps,
) -> None:
    """`__init__`'s Args (and Raises) may be in the class docstring or its own."""
    own_text = _docstring(node)
    own = parse_doc(own_text) if own_text is not None else None
    merged: dict[str, list[str]] = {}
    for doc in (class_doc, own):
        if doc is not None:
            for key, entries in doc.sections.items():
                merged.setdefault(key, []).extend(entries)
    if own is not None and own.summary_problem:
        gaps.add(node.lineno, f"def {qualname}", own.summary_problem)
    check_sections(node, Doc(None, merged), f"def {qualname}", gaps, method=True)


def module_gaps(tree: ast.Module) -> list[str]:
    listed = public_names(tree)
    gaps = Gaps()
    seen: set[str] = set()
    for node in _top_level(tree.body):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        public = node.name in listed if listed is not None else not node.name.startswith("_")
        if not public or node.name in seen:
            continue
        if not isinstance(node, ast.ClassDef) and "overload" in _decorators(node):
            continue
        seen.add(node.name)
        if isinstance(node, ast.ClassDef):
            check_class(node, gaps)
        else:
            check_function(node, node.name, gaps)
    return gaps.items


MODULES = public_modules()


def test_the_rule_finds_the_package() -> None:
    names = {module_name(p) for p in MODULES}
    assert {"lbparse", "lbparse.spark", "lbparse.storage", "lbparse.raft"} <= names
    assert "lbparse.examples" not in names and not any("._" in n for n in names)


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_public_definitions_have_google_docstrings(path: Path) -> None:
    gaps = module_gaps(parsed(path))
    assert not gaps, f"{path.relative_to(ROOT)}: {len(gaps)} gaps\n" + "\n".join(gaps)


# The rule itself, on made-up modules: each gap it must find, and what it lets by.

GOOD = '''
"""A module."""

from dataclasses import dataclass
from typing import Iterator, NamedTuple

__all__ = ["decode", "Reader", "Point", "Pair", "walk", "fail"]


def decode(data: bytes, *, layout: str = "v0", **extra: int) -> int:
    """Decode one envelope.

    Args:
        data: The bytes.
        layout (str): Which layout.
        **extra: Anything else.

    Returns:
        The count.

    Raises:
        errors.DecodeError: When the bytes are not an envelope.
    """
    if not data:
        raise errors.DecodeError("empty")
    try:
        pass
    except ValueError as err:
        raise err
    raise
    return 1


def walk(n: int) -> Iterator[int]:
    """Walk.

    Args:
        n: How far.

    Yields:
        Each step.
    """
    def inner() -> int:
        raise KeyError("not this function's")
    yield n


def fail() -> None:
    """Never returns a thing."""
    raise _make_error()


class Reader:
    """Reads.

    Args:
        path: Where.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    @property
    def size(self) -> int:
        """The size in bytes."""
        return 0

    @staticmethod
    def parse(text: str) -> None:
        """Parse.

        Args:
            text: What.
        """

    def _private(self, x: int) -> int:
        return x


@dataclass
class Point:
    """A point.

    Attributes:
        x: Across.
        y: Down.
    """

    x: int
    y: int


class Pair(NamedTuple):
    """Two.

    Attributes:
        a: First.
        b: Second.
    """

    a: int
    b: int


def helper(x):
    pass
'''


def _gaps_of(source: str) -> list[str]:
    return module_gaps(ast.parse(source))


def test_the_rule_lets_a_documented_module_by() -> None:
    assert _gaps_of(GOOD) == []


@pytest.mark.parametrize(
    ("old", "new", "gap"),
    [
        ('"""Decode one envelope.\n', '"""Decode one envelope\n', "ending with a period"),
        ('"""A point.\n\n', '"""A point.\n    More.\n\n', "a blank line after"),
        ("        layout (str): Which layout.\n", "", "Args: entries for layout"),
        ("        **extra: Anything else.\n", "", "Args: entries for **extra"),
        ("    Returns:\n        The count.\n", "", "a Returns: section"),
        ("    Yields:\n        Each step.\n", "", "a Yields: section"),
        ("        errors.DecodeError: When", "        Other: When", "Raises: entries for Decode"),
        ('    """Never returns a thing."""\n    raise _make', "    raise _make", "a docstring"),
        ('    """Reads.\n\n    Args:\n        path: Where.\n', '    """Reads.\n', "for path"),
        ("        y: Down.\n", "", "Attributes: entries for y"),
        ("        b: Second.\n", "", "Attributes: entries for b"),
        ("        Args:\n            text: What.\n", "", "an Args: section for text"),
        ("            text: What.\n", "            text: What.\n            txt: Typo.\n", "txt"),
        ('"fail"]', '"fail", "helper"]', "def helper: missing a docstring"),
    ],
)
def test_the_rule_finds_each_gap(old: str, new: str, gap: str) -> None:
    assert old in GOOD
    gaps = _gaps_of(GOOD.replace(old, new, 1))
    assert any(gap in g for g in gaps), gaps


def test_without_all_the_public_names_are_those_without_underscore() -> None:
    source = GOOD.replace('__all__ = ["decode", "Reader", "Point", "Pair", "walk", "fail"]', "")
    gaps = _gaps_of(source)
    assert len(gaps) == 1 and "def helper: missing a docstring" in gaps[0], gaps
