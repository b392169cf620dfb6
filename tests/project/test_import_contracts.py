"""The architecture as contracts CI checks: lbparse's wings and the
directions they may import in, and no import circle anywhere (imports inside
functions counted: that is where circles hide). Read from the source
(tests/support/imports.py), nothing imported."""

from __future__ import annotations

import ast
import sys

import pytest
from support.imports import (
    ROOT,
    circles,
    function_imports,
    graph,
    module_name,
    parsed,
    third_party,
    walked,
)

from lbparse.extras import LATE, MODULES, NEEDS_EXTRA

# The top level but the front (__init__) and __main__: what every wing may
# use (the error base, the version, the extras' helper, package data, output
# files, scratch space, text for people, the bundled examples, numbers read from
# text); it imports no
# wing and not the codec.
BASE = {
    "errors",
    "version",
    "extras",
    "resources",
    "outputs",
    "scratch",
    "textform",
    "examples",
    "digits",
    "native_switch",
}
# The wings, one folder one job; below them all the envelope codec
# (lbparse/codec): bytes in, objects out; no numpy, no I/O, no wing.
WINGS = (
    "columnar",
    "capture",
    "storage",
    "raft",
    "pipeline",
    "spark",
    "report",
    "cli",
    "streams",
    "codegen",
    "live",
)

# wing -> the wings it must not import (a wing may always import the codec)
FORBIDDEN: dict[str, set[str]] = {
    "base": {*WINGS, "codec"},
    "codec": set(WINGS),
    "raft": {
        "columnar",
        "capture",
        "storage",
        "pipeline",
        "spark",
        "report",
        "cli",
        "codegen",
        "live",
    },
    "storage": {"columnar", "capture", "pipeline", "spark", "report", "cli", "codegen", "live"},
    "capture": {"columnar", "storage", "pipeline", "spark", "report", "cli", "codegen", "live"},
    "columnar": {"pipeline", "spark", "report", "cli", "codegen", "live"},
    "pipeline": {"spark", "report", "cli", "codegen", "live"},
    "spark": {"report", "cli", "codegen", "live"},
    "report": {"spark", "cli", "codegen", "live"},
    # the gRPC client of live streams: the codec's generated messages, no other wing
    "streams": {
        "columnar",
        "capture",
        "storage",
        "raft",
        "pipeline",
        "spark",
        "report",
        "cli",
        "codegen",
        "live",
    },
    # other languages and Wireshark, from the spec and the codec's tables: no other wing
    "codegen": {
        "columnar",
        "capture",
        "storage",
        "raft",
        "pipeline",
        "spark",
        "report",
        "cli",
        "live",
        "streams",
    },
    # tap and record: a NATS subscription made capture's records, no table, no Spark
    "live": {
        "columnar",
        "storage",
        "raft",
        "pipeline",
        "spark",
        "report",
        "cli",
        "streams",
        "codegen",
    },
}


def wing(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "front"
    if parts[1] in BASE:
        return "base"
    return parts[1]  # a wing, "codec" or "__main__"


def test_every_module_is_in_a_wing() -> None:
    """One folder one job: a module added at the top level, beside the front,
    is in no wing, and fails here until it is put in one (or in BASE)."""
    known = {"front", "__main__", "base", "codec", *WINGS}
    assert sorted(m for m in graph() if wing(m) not in known) == []


def test_there_is_no_import_circle() -> None:
    assert circles(graph()) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FORBIDDEN))
def test_each_wing_imports_only_down(name: str) -> None:
    bad = sorted(
        f"{m} -> {x}"
        for m, deps in graph().items()
        if wing(m) == name
        for x in deps
        if wing(x) in FORBIDDEN[name]
    )
    assert bad == []


def test_only_the_command_line_imports_the_command_line() -> None:
    bad = sorted(
        f"{m} -> {x}"
        for m, deps in graph().items()
        if wing(m) not in ("cli", "__main__")
        for x in deps
        if wing(x) == "cli"
    )
    assert bad == []


@pytest.mark.slow
def test_the_codec_needs_no_numpy_and_no_arrow() -> None:
    heavy = {"numpy", "pyarrow", "pandas", "pyspark"}
    bad = {m: sorted(third_party(m) & heavy) for m in graph() if wing(m) in ("codec", "base")}
    assert {m: v for m, v in bad.items() if v} == {}


def test_the_contract_test_sees_a_circle_and_a_wrong_direction() -> None:
    """The checks themselves: a made-up graph with a circle hidden in a
    function and an import that runs up."""
    g = {
        "lbparse.capture.a": {"lbparse.capture.b"},
        "lbparse.capture.b": {"lbparse.capture.a"},
        "lbparse.storage.x": {"lbparse.report.y"},
        "lbparse.report.y": set(),
    }
    assert circles(g) == [["lbparse.capture.a", "lbparse.capture.b"]]
    assert wing("lbparse.report.y") in FORBIDDEN[wing("lbparse.storage.x")]


def _late_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each import inside a function that is not the standard
    library's (lbparse, lbparse_generated, a dependency), and each call of
    lbparse.extras.need whose module is not in its tables."""
    bad = [
        (line, name)
        for line, name in function_imports(tree)
        if name.split(".")[0] not in sys.stdlib_module_names
    ]
    for node in walked(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "need"
        ):
            arg = node.args[0] if node.args else None
            name = arg.value if isinstance(arg, ast.Constant) else None
            if not isinstance(name, str) or not (
                name.split(".")[0] in MODULES
                or name in NEEDS_EXTRA
                or name in LATE
                or name.split(".")[0] in LATE
            ):
                bad.append((node.lineno, f"need({ast.unparse(arg) if arg else ''})"))
    return bad


def test_a_function_imports_only_through_the_helper() -> None:
    """No import inside a function but the standard library's: the rest at the
    top, or through lbparse.extras.need for an optional module, an lbparse
    module that needs an extra, or what startup leaves out (LATE)."""
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = parsed(path)
        bad += [f"{module_name(path)}:{line}: {what}" for line, what in _late_imports(tree)]
    assert bad == []


def test_the_helper_check_sees_a_late_import_and_a_stray_need() -> None:
    tree = ast.parse(
        "import os\n"
        "def f():\n    import json\n    from lbparse.codec.api import decode\n"
        "    import pyarrow\n    need('pyspark.sql')\n    need('pyarrow.dataset')\n"
        "    need('lbparse.storage')\n"
        "    if TYPE_CHECKING:\n        import numpy\n"
        "class C:\n    async def g(self):\n        import nats\n"
    )
    assert _late_imports(tree) == [
        (4, "lbparse.codec.api"),
        (5, "pyarrow"),
        (13, "nats"),
        (8, "need('lbparse.storage')"),
    ]


@pytest.mark.parametrize("module", sorted(NEEDS_EXTRA))
def test_each_module_said_to_need_an_extra_imports_it(module: str) -> None:
    """NEEDS_EXTRA says which extra: the module, or an lbparse module it
    imports, imports a module of that extra at the top."""
    extra = NEEDS_EXTRA[module]
    found = set().union(*(third_party(m) for m in {module, *graph()[module]}))
    assert {m for m in found if MODULES.get(m, ("", ""))[1] == extra}, (module, extra)
