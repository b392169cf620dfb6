"""No lbparse module imports a private name of another lbparse package (issue #24).

A name with a leading underscore is its package's own business: another
package that imports it breaks when it changes (`pipeline.tasks._decoder`
was imported privately by three packages before the columnar core had
`decoder_for`). A module may import its own package's private names,
C extension modules (`lbparse.columnar._kernels`) included; anything else
must go through a public name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.imports import ROOT, parsed, walked


def _package_of(path: Path) -> str:
    """The package a source file belongs to: lbparse/a/b.py and
    lbparse/a/__init__.py -> lbparse.a."""
    return ".".join(path.relative_to(ROOT.parent).parent.parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _owner(parts: list[str], first: int) -> str:
    """The package whose private name `parts[first]` is: the package it is in,
    or the package of the module it is in."""
    where = parts[:first]
    return ".".join(where if ROOT.parent.joinpath(*where).is_dir() else where[:-1])


def private_imports(tree: ast.AST, package: str) -> list[str]:
    """The private names of other packages that a module of `package` imports,
    as 'line: what'."""
    found = []
    for node in walked(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, `level - 1` packages up
                up = package.split(".")
                base = ".".join(up[: len(up) - node.level + 1] + ([base] if base else []))
            targets = [(base, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [(a.name.rpartition(".")[0], a.name.rpartition(".")[2]) for a in node.names]
        else:
            continue
        for module, name in targets:
            if module != "lbparse" and not module.startswith("lbparse."):
                continue
            parts = module.split(".") + [name]
            first = next((i for i, p in enumerate(parts) if _private(p)), None)
            if first is not None and _owner(parts, first) != package:
                found.append(f"{node.lineno}: {'.'.join(parts)}")
    return found


def test_no_module_imports_another_packages_private_names() -> None:
    bad = {
        str(p.relative_to(ROOT.parent)): hits
        for p in sorted(ROOT.rglob("*.py"))
        if (hits := private_imports(parsed(p), _package_of(p)))
    }
    assert not bad, bad


@pytest.mark.parametrize(
    "source,package,private",
    [
        ("from lbparse.columnar.decode_arrow import _Rows", "lbparse.report", True),
        ("from lbparse.columnar import _kernels", "lbparse.capture", True),
        ("import lbparse.columnar._kernels", "lbparse.spark", True),
        ("from ..columnar.decode_arrow import _strings", "lbparse.report", True),
        (
            "from lbparse.scratch import _made",
            "lbparse.columnar",
            True,
        ),  # the parent's: not its own
        (
            "from lbparse.codec.api import _decoder",
            "lbparse",
            True,
        ),  # the front's wing: not its own
        ("from lbparse.pipeline.tasks import decode_unit", "lbparse.report", False),
        ("from lbparse.report import __doc__", "lbparse.spark", False),
        ("import numpy._core", "lbparse.report", False),
        # its own package's private names, C extension modules included
        ("from lbparse.columnar._structs import decode", "lbparse.columnar", False),
        ("from ._kernels import ranges", "lbparse.columnar", False),
        ("from lbparse.columnar.decode_arrow import _strings", "lbparse.columnar", False),
    ],
)
def test_the_check_sees_what_it_must(source: str, package: str, private: bool) -> None:
    assert bool(private_imports(ast.parse(source), package)) == private
