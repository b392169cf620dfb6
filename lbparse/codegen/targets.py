"""Generate the spec for other languages: one self-contained folder per target.

`generate(["javascript"], out)` writes, into `out`:

- the Kaitai Struct parsers of every `spec/*.ksy` for that target (compiled
  by kaitai-struct-compiler 0.11 through `tools/ksc.js`, one Node process
  for all targets);
- `proto/`: the `spec/proto/*.proto` schemas and `lbparse.desc`, a
  FileDescriptorSet of all of them (`protoc --include_imports`), for
  languages that load schemas at run time;
- `flatbuffers/`: the `spec/flatbuffers/*.fbs` schema of the FlatBuffers
  layouts, for flatc;
- `msg_types.json`: the layouts and MsgType tables of the generated
  layout tables (`lbparse_generated.tables`), and the error kinds.

With several targets each gets its own folder `out/LANG`. The target
`wireshark` is not a Kaitai language: it writes the Lua dissector of
`lbparse.codegen.wireshark` beside the same schemas.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from lbparse import resources
from lbparse.codegen.kaitai_fixups import FIXUPS, WRITES_CHECKS, csharp_clash_names, fix_source
from lbparse.codegen.langdocs import write_docs
from lbparse.codegen.wireshark import write_plugin
from lbparse.errors import ENVELOPE_KINDS, InputError, OperationalError
from lbparse.extras import need
from lbparse_generated.tables import FIELD_ERRORS, LAYOUTS

__all__ = [
    "ALIASES",
    "KAITAI_TARGETS",
    "LANGUAGES",
    "CodegenError",
    "Generated",
    "generate",
    "msg_type_table",
    "resolve_languages",
]

# Package data of an installed lbparse, or spec/ and tools/ of a checkout.
SPEC = resources.spec_dir()
TOOLS = resources.tools_dir()

# Our name of each target -> kaitai-struct-compiler 0.11's name (`ksc.languages`).
KAITAI_TARGETS: Mapping[str, str] = {
    "javascript": "javascript",
    "java": "java",
    "go": "go",
    "cpp": "cpp_stl",
    "csharp": "csharp",
    "rust": "rust",
    "ruby": "ruby",
    "php": "php",
    "perl": "perl",
    "lua": "lua",
    "nim": "nim",
    "python": "python",
    "graphviz": "graphviz",
    "html": "html",
}
LANGUAGES: tuple[str, ...] = (*KAITAI_TARGETS, "wireshark")
ALIASES: Mapping[str, str] = {
    "js": "javascript",
    "node": "javascript",
    "cpp_stl": "cpp",
    "c++": "cpp",
    "cs": "csharp",
    "c#": "csharp",
    "dot": "graphviz",
    "py": "python",
    "lua-wireshark": "wireshark",
}
# The JS API of the compiler cannot set `--go-package` or `--java-package`,
# and Go source without a package clause does not compile: we add the clauses,
# and a go.mod, so that each folder builds as it is.
GO_PACKAGE = "liftbridge"
JAVA_PACKAGE = "liftbridge"
# The Kaitai runtimes the generated code imports, at the compiler's version.
GO_RUNTIME = "github.com/kaitai-io/kaitai_struct_go_runtime"
GO_RUNTIME_VERSION = "v0.11.0"
GO_TEXT_VERSION = "v0.28.0"  # what the Go runtime v0.11.0's go.mod requires
NODE_TIMEOUT = 120  # seconds; the compiler loads in about one


class CodegenError(OperationalError):
    """A generator step failed (compiler error, missing tool)."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"missing", "failed"})


@dataclass
class Generated:
    """What `generate` wrote: folder and files per target, and warnings.

    Attributes:
        folders: Each target's folder.
        files: Each target's files.
        parsers: Each target's compiled .ksy files.
        warnings: What the compiler or the fixes said, one line each.
    """

    folders: dict[str, Path] = field(default_factory=dict)
    files: dict[str, list[Path]] = field(default_factory=dict)
    parsers: dict[str, list[Path]] = field(default_factory=dict)  # the compiled .ksy files
    warnings: list[str] = field(default_factory=list)


def resolve_languages(names: Iterable[str]) -> list[str]:
    """Our target names for `names` (aliases allowed, `all` = every target).

    Args:
        names: Language names as given, each possibly a comma-separated list.

    Returns:
        The targets, in the order given, each once.

    Raises:
        InputError: A name is no target or alias, or no name was given.
    """
    out: list[str] = []
    for raw in names:
        for name in (n.strip().lower() for n in raw.split(",")):
            if not name:
                continue
            picked = list(LANGUAGES) if name == "all" else [ALIASES.get(name, name)]
            for lang in picked:
                if lang not in LANGUAGES:
                    raise InputError(
                        "bad_option",
                        f"unknown language {name!r}; known: {', '.join(LANGUAGES)}, all",
                    )
                if lang not in out:
                    out.append(lang)
    if not out:
        raise InputError("bad_option", "no language given")
    return out


def ksy_files() -> list[Path]:
    files = sorted(SPEC.glob("*.ksy"))
    if not files:
        raise CodegenError("missing", f"no .ksy files in {SPEC}")
    # ksc.js resolves `imports:` next to the first file; all of ours sit together.
    return files


def proto_files() -> list[Path]:
    return sorted((SPEC / "proto").glob("*.proto"))


def run_kaitai(langs: Sequence[str], outdir: Path) -> tuple[dict[str, list[Path]], list[str]]:
    """Compile every .ksy for `langs` (ours) into outdir/LANG; (files, warnings)."""
    targets = [KAITAI_TARGETS[lang] for lang in langs]
    # The trailing comma asks ksc.js for per-language folders even for one target.
    try:
        ksc = resources.kaitai_compiler()  # installs it on first use
    except resources.ResourceError as exc:
        raise CodegenError("failed", str(exc)) from None
    cmd = ["node", str(ksc), ",".join(targets) + ",", str(outdir), *map(str, ksy_files())]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=NODE_TIMEOUT)
    except FileNotFoundError:
        raise CodegenError(
            "missing", "node not found: the Kaitai compiler runs under Node 20"
        ) from None
    if res.returncode != 0:
        raise CodegenError("failed", f"kaitai-struct-compiler failed:\n{res.stderr.strip()}")
    warnings = [
        line.removeprefix("warning: ")
        for line in res.stderr.splitlines()
        if line.startswith("warning: ")
    ]
    by_target = {KAITAI_TARGETS[lang]: lang for lang in langs}
    files: dict[str, list[Path]] = {lang: [] for lang in langs}
    for line in res.stdout.splitlines():
        path = Path(line)
        files[by_target[path.relative_to(outdir).parts[0]]].append(path)
    return files, warnings


def _spec_of(path: Path, specs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The .ksy a generated file came from (file names follow `meta.id`)."""
    stem = path.stem.replace("_", "").lower()
    for ksy in specs:
        if ksy["meta"]["id"].replace("_", "").lower() == stem:
            return ksy
    return None


def _fix_options(lang: str, sources: list[Path]) -> dict[str, Any]:
    """What a fixup of one file needs to know of the others."""
    options: dict[str, Any] = {"go_package": GO_PACKAGE, "java_package": JAVA_PACKAGE}
    if lang == "csharp":  # an imported spec's renamed types, as its own file renames them
        options["csharp_renamed"] = {
            p.stem: csharp_clash_names(p.read_text(encoding="utf-8"))
            for p in sources
            if p.suffix == ".cs"
        }
    return options


def _fix(lang: str, path: Path, specs: list[dict[str, Any]], options: dict[str, Any]) -> None:
    """Apply lbparse.codegen.kaitai_fixups to one generated source file, in place."""
    suffix = FIXUPS.get(lang, ("",))[0]
    ksy = _spec_of(path, specs)
    if path.suffix != suffix or ksy is None:
        return
    text = path.read_text(encoding="utf-8")
    fixed = fix_source(lang, text, ksy, options)
    if fixed != text:
        path.write_text(fixed, encoding="utf-8")


def write_go_mod(folder: Path, package: str = GO_PACKAGE) -> Path:
    """A go.mod naming the runtime, so the folder is a module `go build` takes."""
    path = folder / "go.mod"
    path.write_text(
        f"module {package}\n\ngo 1.19\n\nrequire (\n"
        f"\t{GO_RUNTIME} {GO_RUNTIME_VERSION}\n"
        f"\tgolang.org/x/text {GO_TEXT_VERSION} // indirect\n)\n",
        encoding="utf-8",
    )
    return path


def write_descriptor_set(out: Path) -> Path:
    """Copy the .proto files into `out` and write `out/lbparse.desc`."""
    protoc = need("grpc_tools.protoc")  # the generate extra's; the rest of codegen needs none
    out.mkdir(parents=True, exist_ok=True)
    protos = proto_files()
    for p in protos:
        shutil.copyfile(p, out / p.name)
    desc = out / "lbparse.desc"
    args = [
        "protoc",
        f"-I{SPEC / 'proto'}",
        f"--descriptor_set_out={desc}",
        "--include_imports",
        *map(str, protos),
    ]
    if protoc.main(args) != 0:
        raise CodegenError("failed", "protoc could not build the descriptor set")
    return desc


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _msg_type_json(value: int, mt: Any) -> dict[str, Any]:
    if isinstance(mt, dict):
        return {"value": value, **{k: _jsonable(v) for k, v in mt.items()}}
    return {"value": value, "name": mt[0], "payload_type": mt[1]}


def byte7_meaning(raw: Mapping[str, Any]) -> str:
    """What header byte 7 means in a layout, in words, from its table entry."""
    byte7, types = raw.get("byte7"), raw.get("msg_types", {})
    if byte7 == "msg_type":
        return (
            f"the MsgType: one of the {len(types)} values in msg_types, which name the "
            "payload type; any other value is unknown_msg_type"
        )
    if byte7 == "reserved":
        kinds = " or ".join([raw.get("payload") or "bytes", *raw.get("payload_alternatives", [])])
        return (
            f"reserved (not a MsgType; any value is accepted): the payload is {kinds}, "
            "and the header does not say which"
        )
    return "no envelope header in this layout: byte 7 is part of the payload"


def msg_type_table() -> dict[str, Any]:
    """The JSON form of the generated layout tables, for any language.

    Every key of each layout is copied as it is, so layouts and keys the
    spec gains later appear without a change here; only `msg_types`
    becomes a list of {value, name, payload_type} for JSON.

    Returns:
        {"source", "layouts", "field_errors", "error_kinds"}: what each
        target's msg_types.json holds.
    """
    layouts = {}
    for name, raw in LAYOUTS.items():
        entry = {k: _jsonable(v) for k, v in raw.items() if k != "msg_types"}
        internal = set(raw.get("internal_msg_types", ()))
        entry["msg_types"] = [
            {**_msg_type_json(v, mt), "internal": v in internal}
            for v, mt in sorted(raw.get("msg_types", {}).items())
        ]
        entry["byte7_meaning"] = byte7_meaning(raw)
        layouts[name] = entry
    return {
        "source": "spec/envelope.ksy (through lbparse_generated.tables)",
        "layouts": layouts,
        "field_errors": dict(FIELD_ERRORS),
        "error_kinds": list(ENVELOPE_KINDS),
    }


def _write_support(folder: Path, desc: Path) -> list[Path]:
    """proto/ and msg_types.json beside the code of one target."""
    proto = folder / "proto"
    proto.mkdir(parents=True, exist_ok=True)
    written = []
    for p in [*proto_files(), desc]:
        shutil.copyfile(p, proto / p.name)
        written.append(proto / p.name)
    fbs = folder / "flatbuffers"
    fbs.mkdir(exist_ok=True)
    for p in sorted((SPEC / "flatbuffers").glob("*.fbs")):
        shutil.copyfile(p, fbs / p.name)
        written.append(fbs / p.name)
    table = folder / "msg_types.json"
    table.write_text(
        json.dumps(msg_type_table(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    written.append(table)
    return written


def _write_js_package(folder: Path) -> Path:
    """A package.json pinning the Kaitai runtime the generated JS requires."""
    pinned = json.loads((TOOLS / "package.json").read_text(encoding="utf-8"))["dependencies"]
    pkg = {
        "name": "liftbridge-kaitai",
        "private": True,
        "description": "Kaitai Struct parsers of the Liftbridge envelope, generated by lbparse",
        "dependencies": {"kaitai-struct": pinned["kaitai-struct"]},
    }
    path = folder / "package.json"
    path.write_text(json.dumps(pkg, indent=2) + "\n", encoding="utf-8")
    return path


def generate(
    languages: Iterable[str], outdir: Path | str, *, nest: bool | None = None
) -> Generated:
    """Write every target of `languages` under `outdir`.

    Args:
        languages: Target names or aliases (`resolve_languages`).
        outdir: The folder to write into (made if missing).
        nest: Put each target in `outdir/LANG`; None: when more than one
            target is asked; False: the single target's files go straight
            into `outdir`.

    Returns:
        What was written, target by target, and the warnings.

    Raises:
        ValueError: A language is unknown.
        CodegenError: The Kaitai compiler cannot be found, installed or run
            under Node, or it failed (its stderr is the message).
    """
    langs = resolve_languages(languages)
    outdir = Path(outdir)
    nest = len(langs) > 1 if nest is None else nest
    result = Generated()
    work = outdir / ".lbparse-codegen"
    if work.exists():
        shutil.rmtree(work)
    try:
        desc = write_descriptor_set(work / "proto")
        kaitai = [lang for lang in langs if lang in KAITAI_TARGETS]
        specs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in ksy_files()]
        compiled, warnings = run_kaitai(kaitai, work / "kaitai") if kaitai else ({}, [])
        # Checks the compiler could not write for a target, written by
        # kaitai_fixups instead, are no longer missing.
        result.warnings = [
            w
            for w in warnings
            if not any(w.startswith(f"{KAITAI_TARGETS[lang]}: ") for lang in WRITES_CHECKS)
        ]
        for lang in langs:
            folder = outdir / lang if nest else outdir
            folder.mkdir(parents=True, exist_ok=True)
            if lang == "wireshark":
                # Only what belongs in a Wireshark plugins folder.
                result.folders[lang], result.files[lang] = folder, write_plugin(folder)
                result.parsers[lang] = []
                continue
            files: list[Path] = []
            src_root = work / "kaitai" / KAITAI_TARGETS.get(lang, "")
            options = _fix_options(lang, compiled.get(lang, []))
            for src in compiled.get(lang, []):
                target = folder / src.relative_to(src_root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(src), target)
                _fix(lang, target, specs, options)
                files.append(target)
            result.parsers[lang] = list(files)
            if lang == "go":
                files.append(write_go_mod(folder))
            if lang == "javascript":
                files.append(_write_js_package(folder))
            files += _write_support(folder, desc)
            files += write_docs(lang, folder)
            notes = [w for w in result.warnings if w.startswith(f"{KAITAI_TARGETS.get(lang)}: ")]
            if notes:
                # Beside the code, so whoever takes the folder sees what is missing.
                path = folder / "WARNINGS.txt"
                path.write_text("".join(f"{n}\n" for n in notes), encoding="utf-8")
                files.append(path)
            result.folders[lang] = folder
            result.files[lang] = files
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result
