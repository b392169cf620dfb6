"""docs/pages/benchmarks.md is written by the benches (bench/benchdoc.py), never by hand:
each bench rewrites its own section whole and keeps the others, the targets
table is rebuilt from every section, and the committed file is exactly what
the writer makes of its sections. No time is asserted anywhere."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "pages" / "benchmarks.md"


@pytest.fixture(scope="module")
def benchdoc() -> ModuleType:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module("benchdoc")
    finally:
        sys.path.remove(str(ROOT / "bench"))


def _section(benchdoc: ModuleType, name: str, title: str, value: float, limit: float) -> object:
    s = benchdoc.Section(name, title, f"python bench/bench_{name}.py")
    s.target(f"{name} ratio", value, "<=", limit, "{:.2f}x")
    s.para(f"what {name} measured")
    s.table(["case", "ns"], [["a", "1"], ["b", "2"]])
    return s


def test_a_bench_rewrites_its_own_section_and_keeps_the_others(
    benchdoc: ModuleType, tmp_path: Path
) -> None:
    doc = tmp_path / "benchmarks.md"
    _section(benchdoc, "decode", "Decode", 1.2, 1.5).write(doc)
    _section(benchdoc, "tables", "Tables", 0.9, 0.5).write(doc)
    decode_before = benchdoc.read_sections(doc)["decode"]
    _section(benchdoc, "tables", "Tables", 0.4, 0.5).write(doc)
    sections = benchdoc.read_sections(doc)
    assert list(sections) == ["tables", "decode"]  # the file's order, whatever the runs'
    assert sections["decode"] == decode_before
    text = doc.read_text()
    assert text.count("<!-- bench:tables ") == 1 and "0.90x" not in text
    assert "| tables ratio | 0.40x | <= 0.50x | met |" in sections["tables"]
    assert "| decode ratio | 1.20x | <= 1.50x | met |" in sections["decode"]


def test_the_targets_table_gathers_every_sections_targets(
    benchdoc: ModuleType, tmp_path: Path
) -> None:
    doc = tmp_path / "benchmarks.md"
    _section(benchdoc, "decode", "Decode", 1.7, 1.5).write(doc)
    s = benchdoc.Section("capture_tables", "Capture readers", "python bench/x.py")
    s.target("messages/s", 150_000, ">=", 1_000_000, "{:,.0f}")
    s.target("x dpkt", 0.4, "<=", 0.5, "{:.2f}x")
    s.write(doc)
    summary = doc.read_text().split("<!-- bench:")[0]
    rows = [
        line for line in summary.splitlines() if line.startswith("| ") and "bench, run" not in line
    ]
    assert [r.split(" | ")[:4] for r in rows] == [
        ["| messages/s", "150,000", ">= 1,000,000", "**missed**"],
        ["| x dpkt", "0.40x", "<= 0.50x", "met"],
        ["| decode ratio", "1.70x", "<= 1.50x", "**missed**"],
    ]
    assert "[decode](#decode)" in rows[2] and "[capture_tables](#capture-readers)" in rows[0]


def test_a_section_says_the_machine_and_its_load(benchdoc: ModuleType, tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    s = _section(benchdoc, "decode", "Decode", 1.0, 1.5)
    s.cpu = 0
    s.write(doc)
    text = benchdoc.read_sections(doc)["decode"]
    assert "CPUs (" in text and "pinned to CPU 0" in text and "load average" in text
    meta = json.loads(text.split(" ", 2)[2].split(" -->", 1)[0])
    assert meta["targets"] == [
        {"what": "decode ratio", "measured": "1.00x", "target": "<= 1.50x", "met": True}
    ]


def test_the_committed_doc_is_what_the_benches_wrote(benchdoc: ModuleType, tmp_path: Path) -> None:
    """Rebuilt from its own sections, the file is unchanged: its targets table
    and its frame are the writer's, and every section has its markers."""
    text = DOC.read_text()
    sections = benchdoc.read_sections(DOC)
    for name in ("tables", "capture_tables", "decode", "spark", "big"):
        assert name in sections, f"docs/pages/benchmarks.md has no section '{name}'"
    again = tmp_path / "benchmarks.md"
    benchdoc.write_doc(again, sections)
    assert again.read_text() == text


def test_the_manual_links_the_benchmarks() -> None:
    speed = (ROOT / "docs" / "pages" / "speed.md").read_text()
    assert "(benchmarks.md)" in speed
    assert len(speed.splitlines()) < 25  # a few lines and the link, not a log
    assert "(docs/pages/benchmarks.md)" in (ROOT / "README.md").read_text()


@pytest.mark.slow
def test_bench_tables_writes_its_section(tmp_path: Path) -> None:
    """One round of bench_tables.py into a scratch doc: its section, its three
    targets (figures, whatever they are), the whole mix and a row per MsgType."""
    from support.shared import LIFTBRIDGE

    if not (Path(LIFTBRIDGE) / "bin" / "lbbench").exists():
        pytest.skip(f"needs {LIFTBRIDGE}/bin/lbbench")
    doc = tmp_path / "benchmarks.md"
    env = {**__import__("os").environ, "LBPARSE_BENCH_DOC": str(doc)}
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_tables.py"), "--rounds", "1"],
        check=True,
        env=env,
        capture_output=True,
        timeout=600,
    )
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        benchdoc = importlib.import_module("benchdoc")
    finally:
        sys.path.remove(str(ROOT / "bench"))
    section = benchdoc.read_sections(doc)["tables"]
    meta = json.loads(section.split(" ", 2)[2].split(" -->", 1)[0])
    assert [t["what"] for t in meta["targets"]] == [
        "decode_tables, the real envelope mix",
        "decode_tables, the mix in one 65,536-row batch",
        "decode_tables, header-only ReplicationResponses",
    ]
    assert all(t["measured"].endswith("x Go") for t in meta["targets"])
    for row in (
        "| the whole mix |",
        "| the whole mix, repeated to one 65,536-row batch |",
        "| Publish |",
        "| ReplicationResponse, header only |",
        "| Ack |",
    ):
        assert row in section


@pytest.mark.slow
def test_bench_live_writes_its_section(tmp_path: Path) -> None:
    """One small round of bench_live.py (a real nats-server, `lbparse record`
    both ways) into a scratch doc: a row per recorder form, the shipped one's
    ratio to the other's, every message written (else the bench fails)."""
    if shutil.which("nats-server") is None:
        pytest.skip("nats-server is not installed")
    doc = tmp_path / "benchmarks.md"
    env = {**__import__("os").environ, "LBPARSE_BENCH_DOC": str(doc)}
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_live.py"), "--rounds", "1",
         "--messages", "3000"],
        check=True, env=env, capture_output=True, timeout=600,
    )  # fmt: skip
    section = doc.read_text()
    assert "<!-- bench:live " in section and "3,000 envelopes" in section
    assert re.search(r"\| reader first \| [\d,]+ \| [\d,]+ \| [\d,]+ \| [\d.]+x \|", section)
    assert "| shared | " in section and "| 1.00x |" in section


@pytest.mark.parametrize(
    "bench", sorted(p.name for p in (ROOT / "bench").glob("*.py")), ids=lambda n: n
)
def test_every_module_a_bench_imports_exists(bench: str) -> None:
    """`make bench` runs every bench/bench_*.py and stops at the first that fails:
    one importing a module that is gone (bench_native_pass.py imported
    bench_native.py a commit had removed) stops the benches after it. Each
    import at a bench's top level resolves, from the benches' folder or the
    environment; nothing is run."""
    import ast
    import importlib.util

    tree = ast.parse((ROOT / "bench" / bench).read_text(), bench)
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        missing = []
        for n in sorted(names):
            try:
                found = importlib.util.find_spec(n) is not None
            except ModuleNotFoundError:  # a dotted name whose package is missing
                found = False
            if not found:
                missing.append(n)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert not missing, f"bench/{bench} imports modules that do not exist: {missing}"
