"""The architecture as contracts CI checks: lbparse's wings and the
directions they may import in, and no import circle anywhere (imports inside
functions counted: that is where circles hide). Read from the source
(tests/support/imports.py), nothing imported."""

from __future__ import annotations

import pytest

from support.imports import circles, graph, third_party

# The envelope codec: bytes in, objects out; no numpy, no I/O, no wing.
CODEC = {"api", "envelope", "header", "headerless", "enveloped", "payloads", "errors", "wire",
         "layouts", "commitlog", "flatbuf", "detect", "dispatch", "generation", "upstream",
         "limits", "jsonform", "textform", "version", "extras"}
WINGS = ("columnar", "capture", "storage", "raft", "pipeline", "spark", "report", "cli")

# wing -> the wings it must not import (a wing may always import the codec)
FORBIDDEN: dict[str, set[str]] = {
    "codec": set(WINGS),
    "raft": {"columnar", "capture", "storage", "pipeline", "spark", "report", "cli"},
    "storage": {"columnar", "capture", "pipeline", "spark", "report", "cli"},
    "capture": {"columnar", "storage", "pipeline", "spark", "report", "cli"},
    "columnar": {"pipeline", "spark", "report", "cli"},
    "pipeline": {"spark", "report", "cli"},
    "spark": {"report", "cli"},
    "report": {"spark", "cli"},
}


def wing(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "front"
    if parts[1] in WINGS:
        return parts[1]
    return "codec" if parts[1] in CODEC else parts[1]


def test_there_is_no_import_circle() -> None:
    assert circles(graph()) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FORBIDDEN))
def test_each_wing_imports_only_down(name: str) -> None:
    bad = sorted(f"{m} -> {x}" for m, deps in graph().items() if wing(m) == name
                 for x in deps if wing(x) in FORBIDDEN[name])
    assert bad == []


def test_only_the_command_line_imports_the_command_line() -> None:
    bad = sorted(f"{m} -> {x}" for m, deps in graph().items()
                 if wing(m) not in ("cli", "__main__") for x in deps if wing(x) == "cli")
    assert bad == []


@pytest.mark.slow
def test_the_codec_needs_no_numpy_and_no_arrow() -> None:
    heavy = {"numpy", "pyarrow", "pandas", "pyspark"}
    bad = {m: sorted(third_party(m) & heavy) for m in graph() if wing(m) == "codec"}
    assert {m: v for m, v in bad.items() if v} == {}


def test_the_contract_test_sees_a_circle_and_a_wrong_direction() -> None:
    """The checks themselves: a made-up graph with a circle hidden in a
    function and an import that runs up."""
    g = {"lbparse.capture.a": {"lbparse.capture.b"}, "lbparse.capture.b": {"lbparse.capture.a"},
         "lbparse.storage.x": {"lbparse.report.y"}, "lbparse.report.y": set()}
    assert circles(g) == [["lbparse.capture.a", "lbparse.capture.b"]]
    assert wing("lbparse.report.y") in FORBIDDEN[wing("lbparse.storage.x")]
