"""lbparse as installed: where the tests import it from, and what the wheel carries.

CI installs the wheel (built from the sdist) into a fresh virtualenv and
sets LBPARSE_EXPECT_INSTALLED: then lbparse, its generated package and the
command line the tests run must all come from that install, not from the
checkout, and `generate` must find the spec and the Kaitai compiler's
manifest in the package data (lbparse/resources.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support.cli import LBPARSE, run_cli

import lbparse
import lbparse_generated
from lbparse import resources

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = bool(os.environ.get("LBPARSE_EXPECT_INSTALLED"))
needs_install = pytest.mark.skipif(
    not INSTALLED,
    reason="LBPARSE_EXPECT_INSTALLED is not set (CI sets it, testing the installed wheel)",
)


@pytest.mark.slow
def test_the_command_line_runs_the_lbparse_the_tests_import(tmp_path: Path) -> None:
    code = (
        "import lbparse, lbparse_generated; "
        "print(lbparse.__file__); print(lbparse_generated.__file__)"
    )
    # From the checkout's root, where `python -m` would put the checkout first without -P.
    res = subprocess.run(
        [*LBPARSE[:-2], "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [lbparse.__file__, lbparse_generated.__file__]
    version = run_cli("--version", cwd=ROOT).stdout.decode()
    assert f" from {Path(lbparse.__file__).parent} " in version


@needs_install
def test_lbparse_comes_from_the_installed_wheel() -> None:
    for module in (lbparse, lbparse_generated):
        where = Path(module.__file__ or "").resolve().parent
        assert where.parent.name == "site-packages", f"{module.__name__} from {where}"
        assert ROOT / "lbparse" != where and ROOT / "generated" not in where.parents
    from importlib import metadata

    dist = metadata.distribution("lbparse")
    assert dist.version == lbparse.__version__
    # Not an editable install: the files are in the wheel's record.
    assert any(str(f).endswith("lbparse/cli/__init__.py") for f in dist.files or [])


@needs_install
def test_the_wheel_carries_the_spec_and_the_compiler_manifest() -> None:
    spec, tools = resources.spec_dir(), resources.tools_dir()
    assert spec == Path(lbparse.__file__).parent / "_data" / "spec"
    assert tools == Path(lbparse.__file__).parent / "_data" / "tools"
    ours = sorted(p.relative_to(ROOT / "spec") for p in (ROOT / "spec").rglob("*") if p.is_file())
    assert sorted(p.relative_to(spec) for p in spec.rglob("*") if p.is_file()) == ours
    for rel in ours:
        assert (spec / rel).read_bytes() == (ROOT / "spec" / rel).read_bytes(), rel
    for name in resources.KAITAI_FILES:
        assert (tools / name).read_bytes() == (ROOT / "tools" / name).read_bytes(), name


def test_a_checkout_reads_spec_and_tools_in_place() -> None:
    # Where lbparse is imported from, not LBPARSE_EXPECT_INSTALLED alone: a
    # venv with the wheel installed runs the suite as well, flag or not.
    if INSTALLED or Path(lbparse.__file__).resolve().parent != ROOT / "lbparse":
        pytest.skip(
            f"lbparse is imported from {Path(lbparse.__file__).parent}, not this "
            "checkout: the package data is read (test above)"
        )
    assert resources.spec_dir() == ROOT / "spec"
    assert resources.tools_dir() == ROOT / "tools"


def _manifest_copy(tmp_path: Path) -> Path:
    """The compiler's manifest alone, as an installed lbparse has it (no node_modules)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in resources.KAITAI_FILES:
        shutil.copyfile(resources.tools_dir() / name, tools / name)
    return tools


def test_missing_node_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = _manifest_copy(tmp_path)
    monkeypatch.setattr(resources, "tools_dir", lambda: tools)
    monkeypatch.setenv("LBPARSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(
        resources.ResourceError, match="node not found on PATH.*apt-get install nodejs npm"
    ):
        resources.kaitai_compiler(say=lambda message: None)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


@pytest.mark.slow
def test_generate_without_node_says_so_in_one_line(tmp_path: Path) -> None:
    """What a user without Node sees: one line, status 1, no traceback. (In a
    checkout tools/node_modules is used, and `node` itself is then missing.)"""
    env = dict(os.environ, PATH=str(tmp_path), LBPARSE_CACHE_DIR=str(tmp_path / "cache"))
    res = run_cli("generate", "--lang", "js", "-o", str(tmp_path / "out"), env=env)
    err = res.stderr.decode()
    assert res.returncode == 1 and b"Traceback" not in res.stderr, err
    assert err.startswith("lbparse generate: node not found"), err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("npm") is None, reason="needs npm")
def test_the_compiler_is_installed_into_the_cache_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """First use: `npm ci` of the pinned manifest into the cache, said once;
    then the compiler there compiles the spec."""
    tools = _manifest_copy(tmp_path)
    monkeypatch.setattr(resources, "tools_dir", lambda: tools)
    monkeypatch.setenv("LBPARSE_CACHE_DIR", str(tmp_path / "cache"))
    said: list[str] = []
    ksc = resources.kaitai_compiler(say=said.append)
    assert len(said) == 1 and "installing kaitai-struct-compiler 0.11.0" in said[0]
    assert ksc.parent.parent == tmp_path / "cache"
    assert resources.kaitai_compiler(say=said.append) == ksc and len(said) == 1
    lock = json.loads(
        (ksc.parent / "node_modules" / "kaitai-struct-compiler" / "package.json").read_text()
    )
    assert lock["version"] == "0.11.0"
    res = subprocess.run(
        [
            "node",
            str(ksc),
            "python",
            str(tmp_path / "out"),
            str(resources.spec_dir() / "envelope.ksy"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "liftbridge_envelope.py").is_file()
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")] == [
        ksc.parent.name
    ]  # no half-made folder left beside it


@pytest.mark.slow  # Node: the Kaitai compiler, then the generated parser
@pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm"
)
def test_generate_javascript_and_decode_from_the_install(tmp_path: Path) -> None:
    """The issue's acceptance, run wherever lbparse is installed (in CI, the
    wheel in a fresh virtualenv): `lbparse generate --lang javascript` from a
    directory far from any checkout writes parsers whose example runs in
    Node, and reads the example's envelopes as `lbparse decode` does."""
    runtime = (
        ROOT / "tools" / "node_modules"
    )  # the pinned kaitai-struct runtime (make install-node)
    if not (runtime / "kaitai-struct").is_dir():
        pytest.skip(f"the kaitai-struct runtime is not installed in {runtime} (make install-node)")
    out = tmp_path / "js"
    res = run_cli("generate", "--lang", "javascript", "-o", str(out), cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    assert (out / "LiftbridgeEnvelope.js").is_file() and (out / "proto" / "lbparse.desc").is_file()
    node = subprocess.run(
        ["node", "example.js"],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, NODE_PATH=str(runtime)),
    )
    assert node.returncode == 0, node.stderr
    said = [line for line in node.stdout.splitlines() if line.startswith("v0 ")]
    hexes = re.findall(r'"(b90e43b4[0-9a-f]*)"', (out / "example.js").read_text())
    assert len(said) == len(hexes) == 3, node.stdout
    for hex_text, line in zip(hexes, said):
        got = json.loads(run_cli("decode", hex_text, cwd=tmp_path).stdout)
        name = got.get("msg_type_name") or f"MsgType {bytes.fromhex(hex_text)[7]}"
        assert line.startswith(f"v0 {name}:"), (line, got)
        assert ("unknown_msg_type" in line) == (got.get("error") == "unknown_msg_type"), (line, got)


def test_make_venvs_pins_are_what_the_wheel_requires_with_every_extra() -> None:
    """tools/pins.py (what `make venv` installs while the wheel compiles) reads
    pyproject.toml itself: it must name what lbparse's installed metadata
    requires with [all,dev], no more and no less."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from support.tools import load_tool

    extras = set(metadata.metadata("lbparse").get_all("Provides-Extra") or [])
    wanted = set()
    for line in metadata.requires("lbparse") or []:
        req = Requirement(line)
        if req.name != "lbparse" and (
            req.marker is None  # lbparse[...]: `all`'s, in extras
            or any(req.marker.evaluate({"extra": e}) for e in extras)
        ):
            wanted.add(f"{req.name}{req.specifier}")
    pins = load_tool("pins").requirements(["all", "dev"])
    assert len(pins) == len(set(pins)) == len(wanted)
    assert {f"{r.name}{r.specifier}" for r in map(Requirement, pins)} == wanted
