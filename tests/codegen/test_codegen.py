"""`lbparse generate`: every Kaitai target compiles, and each folder is complete."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from support.cli import LBPARSE

from lbparse.codegen import targets
from lbparse_generated.tables import LAYOUTS

ROOT = Path(__file__).resolve().parents[2]
KSY = sorted(p.stem for p in (ROOT / "spec").glob("*.ksy"))
PROTOS = sorted(p.name for p in (ROOT / "spec" / "proto").glob("*.proto"))
# Targets whose 0.11 compiler lacks a construct our spec uses; ksc.js then
# drops just that check and says so. Any other warning is a regression. (Nim's
# missing checks are written by lbparse.codegen.kaitai_fixups: no warning is left.)
KNOWN_GAPS: dict[str, str] = {}


@pytest.fixture(scope="module")
def every_language(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, targets.Generated]:
    out = tmp_path_factory.mktemp("codegen")
    # One call, one Node process for all 14 Kaitai targets, plus Wireshark.
    return out, targets.generate(["all"], out)


@pytest.mark.slow  # Node: the Kaitai compiler
@pytest.mark.parametrize("lang", list(targets.KAITAI_TARGETS))
def test_every_kaitai_target_compiles(every_language, lang: str) -> None:
    out, result = every_language
    folder = out / lang
    assert result.folders[lang] == folder
    sources = result.parsers[lang]
    assert sources and all(p.parent == folder for p in sources)
    # One parser per .ksy at least (C++ writes a header and a source file each).
    assert len(sources) >= len(KSY), sources
    for path in sources:
        assert path.stat().st_size > 500, f"{path} is suspiciously small"
    for name in PROTOS + ["lbparse.desc"]:
        assert (folder / "proto" / name).is_file()
    assert (folder / "msg_types.json").is_file()
    assert (folder / "README.md").is_file()


@pytest.mark.slow  # Node: the Kaitai compiler
def test_wireshark_folder_holds_only_the_plugin(every_language) -> None:
    out, result = every_language
    folder = out / "wireshark"
    written = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert written == {p.relative_to(folder).as_posix() for p in result.files["wireshark"]}
    assert "liftbridge.lua" in written
    # Nothing a plugins folder does not load: no tables, descriptor sets, FlatBuffers.
    assert not {w for w in written if w.endswith((".json", ".desc", ".fbs", ".md"))}
    assert 'Proto("liftbridge"' in (folder / "liftbridge.lua").read_text()


@pytest.mark.slow  # Node: the Kaitai compiler
def test_only_known_compiler_gaps(every_language) -> None:
    out, result = every_language
    for warning in result.warnings:
        target = warning.split(":", 1)[0]
        lang = next(k for k, v in targets.KAITAI_TARGETS.items() if v == target)
        assert lang in KNOWN_GAPS and KNOWN_GAPS[lang] in warning, warning
        assert warning in (out / lang / "WARNINGS.txt").read_text()


@pytest.mark.slow  # Node: the Kaitai compiler
def test_go_gets_a_package_clause_and_a_module(every_language) -> None:
    out, _ = every_language
    for path in (out / "go").glob("*.go"):
        assert f"\npackage {targets.GO_PACKAGE}\n" in path.read_text()
    mod = (out / "go" / "go.mod").read_text()
    assert f"module {targets.GO_PACKAGE}\n" in mod
    assert f"{targets.GO_RUNTIME} {targets.GO_RUNTIME_VERSION}" in mod


@pytest.mark.slow  # Node: the Kaitai compiler
def test_java_gets_a_package_clause(every_language) -> None:
    out, _ = every_language
    for path in (out / "java").glob("*.java"):
        if path.name != "Example.java":
            assert f"\npackage {targets.JAVA_PACKAGE};\n" in path.read_text()


@pytest.mark.slow  # Node: the Kaitai compiler
def test_python_target_matches_the_committed_parsers(every_language) -> None:
    # The same compiler over the same spec gives what `make generate` committed.
    out, _ = every_language
    committed = ROOT / "generated" / "lbparse_generated" / "kaitai"
    parsers = [p for p in committed.glob("*.py") if p.name != "__init__.py"]
    assert len(parsers) == len(KSY)
    for path in parsers:
        # Inside the package, `make generate` makes imports between specs
        # relative (tools/ksy_storage.relative_kaitai_imports).
        committed_text = re.sub(
            r"^from \. import (\w+)$", r"import \1", path.read_text(), flags=re.M
        )
        assert (out / "python" / path.name).read_text() == committed_text, path.name


@pytest.mark.slow  # Node: the Kaitai compiler
def test_descriptor_set_holds_every_payload_type(every_language) -> None:
    out, _ = every_language
    fds = descriptor_pb2.FileDescriptorSet.FromString(
        (out / "javascript" / "proto" / "lbparse.desc").read_bytes()
    )
    assert {f.name for f in fds.file} >= set(PROTOS)
    messages = {f"{f.package}.{m.name}" for f in fds.file for m in f.message_type}
    protobuf = [lay for lay in LAYOUTS.values() if lay["payload_format"] == "protobuf"]
    wanted = {p for lay in protobuf for _, p in lay["msg_types"].values()}
    wanted |= {p for lay in protobuf for p in (lay["payload"], *lay["payload_alternatives"])}
    wanted -= {None, "raw", "bytes"}  # not protobuf: commit-log entries, opaque bytes
    assert wanted <= messages, wanted - messages


@pytest.mark.slow  # Node: the Kaitai compiler
def test_msg_types_json_is_the_dispatch_table(every_language) -> None:
    out, _ = every_language
    table = json.loads((out / "rust" / "msg_types.json").read_text())
    assert list(table["layouts"]) == list(LAYOUTS)
    for name, raw in LAYOUTS.items():
        got = table["layouts"][name]
        assert got["id"] == raw["id"] and got["byte7"] == raw["byte7"]
        assert {m["value"]: (m["name"], m["payload_type"]) for m in got["msg_types"]} == raw[
            "msg_types"
        ]
        assert got["byte7_meaning"], name  # every layout says what byte 7 is
        assert {m["value"] for m in got["msg_types"] if m["internal"]} == set(
            raw.get("internal_msg_types", ())
        )
    assert "MsgType" in table["layouts"]["v0"]["byte7_meaning"]
    assert "reserved" in table["layouts"]["legacy"]["byte7_meaning"]
    assert "no envelope header" in table["layouts"]["plain"]["byte7_meaning"]
    assert "bad_magic" in table["error_kinds"]


@pytest.mark.slow  # Node: the Kaitai compiler
def test_js_folder_pins_the_runtime(every_language) -> None:
    out, _ = every_language
    pkg = json.loads((out / "javascript" / "package.json").read_text())
    tools = json.loads((ROOT / "tools" / "package.json").read_text())
    assert pkg["dependencies"]["kaitai-struct"] == tools["dependencies"]["kaitai-struct"]


@pytest.mark.slow  # Node: the Kaitai compiler
def test_cli_single_language_writes_flat(tmp_path: Path) -> None:
    res = subprocess.run(
        [*LBPARSE, "generate", "--lang", "js", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "javascript:" in res.stdout
    assert (tmp_path / "LiftbridgeEnvelope.js").is_file()
    assert (tmp_path / "proto" / "lbparse.desc").is_file()
    assert not (tmp_path / ".lbparse-codegen").exists()


def test_unknown_language_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown language 'cobol'"):
        targets.resolve_languages(["cobol"])
    assert targets.resolve_languages(["js,c++", "js"]) == ["javascript", "cpp"]
    assert targets.resolve_languages(["all"]) == list(targets.LANGUAGES)


@pytest.mark.slow  # Node: the Kaitai compiler
def test_ksc_js_single_language_stays_flat(tmp_path: Path) -> None:
    # tools/generate.py calls ksc.js with one language and expects no sub-folder.
    res = subprocess.run(
        [
            "node",
            str(ROOT / "tools" / "ksc.js"),
            "python",
            str(tmp_path),
            str(ROOT / "spec" / "envelope.ksy"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "liftbridge_envelope.py").is_file()
