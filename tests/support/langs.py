"""Build and run the conformance driver of each language (tests/langs/LANG).

`LANGS[name].build(generated, runtime, work)` compiles the driver with the
parsers `lbparse generate --lang NAME` wrote into `generated` and the Kaitai
0.11 runtime of that language (shared/kaitai-runtimes/RUNTIME), in `work`;
it returns the command that runs the driver: cases on stdin, results on
stdout (tests/support/conformance.py says what they are). Every toolchain is
a Debian package (`make install-langs`); `missing()` names what is not there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = ROOT / "tests" / "langs"
GO_X_TEXT = Path("/usr/share/gocode/src/golang.org/x/text")  # Debian golang-golang-x-text-dev
BUILD_TIMEOUT = 600  # seconds; javac, mcs, nim and g++ each take a few on 2 cores


class BuildError(RuntimeError):
    """A compiler refused the generated code or the driver."""


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    res = subprocess.run(
        cmd,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        env=None if env is None else {**os.environ, **env},
    )
    if res.returncode != 0:
        raise BuildError(
            f"{' '.join(cmd)} (in {cwd}) exited {res.returncode}:\n"
            f"{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
        )


def go_env(work: Path) -> dict[str, str]:
    # Offline: no module proxy, module sums not checked against a server.
    return {
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GONOSUMDB": "*",
        "GOPATH": str(work / "gopath"),
        "GOCACHE": str(work / "gocache"),
    }


def go_offline_replaces(module_dir: Path, runtime: Path) -> None:
    """Point the generated module's requirements at the local runtime copies."""
    for mod, path in (
        ("github.com/kaitai-io/kaitai_struct_go_runtime", runtime),
        ("golang.org/x/text", GO_X_TEXT),
    ):
        run(["go", "mod", "edit", f"-replace={mod}={path}"], module_dir)


def build_go(gen: Path, runtime: Path, work: Path) -> list[str]:
    lib = work / "liftbridge"
    shutil.copytree(gen, lib)
    go_offline_replaces(lib, runtime)
    run(["go", "build", "./..."], lib, go_env(work))  # the generated module alone
    drv = work / "driver"
    drv.mkdir()
    shutil.copy(DRIVERS / "go" / "main.go", drv)
    (drv / "go.mod").write_text(
        "module lbdriver\n\ngo 1.19\n\nrequire liftbridge v0.0.0\n\n"
        "replace liftbridge => ../liftbridge\n",
        encoding="utf-8",
    )
    go_offline_replaces(drv, runtime)
    run(["go", "build", "-o", str(work / "driver.bin"), "."], drv, go_env(work))
    return [str(work / "driver.bin")]


def build_javascript(gen: Path, runtime: Path, work: Path) -> list[str]:
    # The generated code requires 'kaitai-struct/KaitaiStream': the pinned
    # runtime is in tools/node_modules (`make install-node`).
    modules = ROOT / "tools" / "node_modules"
    (work / "run.sh").write_text(
        f'#!/bin/sh\nNODE_PATH="{modules}" exec node '
        f'"{DRIVERS / "javascript" / "driver.js"}" "{gen}"\n',
        encoding="utf-8",
    )
    (work / "run.sh").chmod(0o755)
    return [str(work / "run.sh")]


def build_java(gen: Path, runtime: Path, work: Path) -> list[str]:
    classes = work / "classes"
    sources = sorted((runtime / "src" / "main" / "java").rglob("*.java"))
    sources += sorted(gen.glob("Liftbridge*.java")) + [DRIVERS / "java" / "Driver.java"]
    run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(classes), *map(str, sources)], work)
    return ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", str(classes), "Driver"]


def build_cpp(gen: Path, runtime: Path, work: Path) -> list[str]:
    sources = [
        runtime / "kaitai" / "kaitaistream.cpp",
        *sorted(gen.glob("liftbridge_*.cpp")),
        DRIVERS / "cpp" / "driver.cpp",
    ]
    out = work / "driver.bin"
    run(
        [
            "g++",
            "-std=c++11",
            "-O1",
            "-Wall",
            "-DKS_STR_ENCODING_ICONV",
            f"-I{runtime}",
            f"-I{gen}",
            "-o",
            str(out),
            *map(str, sources),
        ],
        work,
    )
    return [str(out)]


def build_ruby(gen: Path, runtime: Path, work: Path) -> list[str]:
    return ["ruby", "-I", str(runtime / "lib"), "-I", str(gen), str(DRIVERS / "ruby" / "driver.rb")]


def build_php(gen: Path, runtime: Path, work: Path) -> list[str]:
    return [
        "php",
        "-d",
        "error_reporting=E_ALL",
        "-d",
        "display_errors=stderr",
        str(DRIVERS / "php" / "driver.php"),
        str(runtime / "lib"),
        str(gen),
    ]


def build_perl(gen: Path, runtime: Path, work: Path) -> list[str]:
    return ["perl", "-I", str(runtime / "lib"), "-I", str(gen), str(DRIVERS / "perl" / "driver.pl")]


def build_lua(gen: Path, runtime: Path, work: Path) -> list[str]:
    path = ";".join(f"{d}/?.lua" for d in (gen, runtime, DRIVERS / "lua"))
    (work / "run.sh").write_text(
        f'#!/bin/sh\nLUA_PATH="{path};;" exec lua5.3 "{DRIVERS / "lua" / "driver.lua"}"\n',
        encoding="utf-8",
    )
    (work / "run.sh").chmod(0o755)
    return [str(work / "run.sh")]


def build_csharp(gen: Path, runtime: Path, work: Path) -> list[str]:
    out = work / "driver.exe"
    sources = [
        *sorted(runtime.glob("*.cs")),
        *sorted(gen.glob("Liftbridge*.cs")),
        DRIVERS / "csharp" / "Driver.cs",
    ]
    run(["mcs", "-nologo", "-warn:0", f"-out:{out}", *map(str, sources)], work)
    return ["mono", str(out)]


def build_nim(gen: Path, runtime: Path, work: Path) -> list[str]:
    out = work / "driver.bin"
    run(
        [
            "nim",
            "c",
            "--hints:off",
            "--warnings:off",
            "-d:release",
            f"--nimcache:{work / 'nimcache'}",
            f"--path:{runtime}",
            f"--path:{gen}",
            f"-o:{out}",
            str(DRIVERS / "nim" / "driver.nim"),
        ],
        work,
    )
    return [str(out)]


@dataclass(frozen=True)
class Language:
    name: str  # lbparse's target name (`lbparse generate --lang NAME`)
    runtime: str | None  # folder under shared/kaitai-runtimes (None: from a package registry)
    tools: tuple[str, ...]  # executables the build and the run need
    debian: tuple[str, ...]  # the Debian packages that give them
    build: Callable[[Path, Path, Path], list[str]]
    files: tuple[Path, ...] = ()  # other files the build needs

    def missing(self) -> list[str]:
        return [t for t in self.tools if shutil.which(t) is None] + [
            str(f) for f in self.files if not f.exists()
        ]


LANGS: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language(
            "javascript",
            None,
            ("node",),
            ("nodejs",),
            build_javascript,
            (ROOT / "tools" / "node_modules" / "kaitai-struct",),
        ),
        Language(
            "go", "go", ("go",), ("golang-go", "golang-golang-x-text-dev"), build_go, (GO_X_TEXT,)
        ),
        Language("java", "java", ("javac", "java"), ("openjdk-17-jdk-headless",), build_java),
        Language("cpp", "cpp_stl", ("g++",), ("g++",), build_cpp),
        Language("ruby", "ruby", ("ruby",), ("ruby",), build_ruby),
        Language("php", "php", ("php",), ("php-cli",), build_php),
        Language("perl", "perl", ("perl",), ("perl",), build_perl),
        Language("lua", "lua", ("lua5.3",), ("lua5.3",), build_lua),
        Language("csharp", "csharp", ("mcs", "mono"), ("mono-mcs", "mono-runtime"), build_csharp),
        Language("nim", "nim", ("nim",), ("nim",), build_nim),
    )
}
