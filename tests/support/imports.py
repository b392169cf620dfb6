"""lbparse's import graph, read from the source (ast): every `import` of an
lbparse module, at module level or inside a function (where a circle hides),
but those under `if TYPE_CHECKING:` (never run)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent / "lbparse"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, modules: set[str], here: str) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for a in node.names:
                found.update(_resolve(a.name, modules))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.update(_resolve(sub if sub in modules else node.module, modules))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(here)
    return found


def _resolve(name: str, modules: set[str]) -> set[str]:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return {name} if name.startswith("lbparse") else set()


@functools.cache
def graph() -> dict[str, set[str]]:
    """module -> the lbparse modules it imports (made once a process: read it,
    never change it)."""
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    # C extensions are modules too (their stubs name them): none imports back
    modules = set(paths) | {module_name(p) for p in ROOT.rglob("*.pyi")}
    return {m: _imports(parsed(p), modules, m) for m, p in paths.items()}


@functools.cache
def parsed(path: Path) -> ast.Module:
    """`path`'s syntax tree, parsed once a process (the contract tests ask for
    the whole graph a dozen times; nothing mutates a tree)."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def walked(tree: ast.AST) -> tuple[ast.AST, ...]:
    """Every node of `tree` in ast.walk's order, listed once a process: five
    checks walk the whole package (~250,000 nodes, a second each)."""
    return tuple(ast.walk(tree))


def function_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of each import inside a function (but under `if
    TYPE_CHECKING:`, never run); `from X import y` gives X."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, inside: bool) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child, inside)
            return
        if inside and isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif inside and isinstance(node, ast.ImportFrom):
            found.append((node.lineno, "." * node.level + (node.module or "")))
        inside = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, False)
    return found


def third_party(module: str) -> set[str]:
    """The top-level names of what `module` imports from outside lbparse."""
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    tree = parsed(paths[module])
    out = set()
    for node in walked(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out - {"lbparse", "__future__"}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            strong(v)
    return out
