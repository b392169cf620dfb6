"""The generated parser of every language, compiled and run, agrees with lbparse.

For each language with a Debian toolchain (tests/support/langs.py), the
parsers `lbparse generate --lang LANG` writes are compiled with the Kaitai
0.11 runtime of that language (shared/kaitai-runtimes) and a small driver
(tests/langs/LANG), once per session; one process of the driver then reads
every case. The cases: every reference vector under every layout, and every
distinct envelope of the real cluster's capture (samples/short.pcapng) under
the layout lbparse classifies it as. Each result must agree with
`lbparse.decode` of the same bytes (tests/support/conformance.py): an error
exactly where lbparse's error is one the parser can see, the header fields,
payload offset and length otherwise, and for a ReplicationResponse the
commit-log entries. A crash (a panic, an uncaught exception, a Defect) ends
the driver and fails the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.conformance import capture_cases, compare, driver_input, odd_key_cases, vector_cases
from support.langs import LANGS, BuildError, Language
from support.shared import shared_path

from lbparse.codegen import generate
from lbparse.codegen.langdocs import DOCS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 300  # seconds for one driver over every case
SHOWN = 15  # disagreements printed when a language fails


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str] | str]:
    """Per language: the driver's command, or why it could not be built (cached per session)."""
    return {}


def driver(
    lang: Language, built: dict[str, list[str] | str], tmp_path_factory: pytest.TempPathFactory
) -> list[str]:
    missing = lang.missing()
    if missing:
        pytest.skip(
            f"{lang.name} toolchain missing: {', '.join(missing)} "
            f"(Debian: {' '.join(lang.debian)}; `make install-langs`)"
        )
    if lang.name not in built:
        runtime = shared_path("kaitai-runtimes", lang.runtime) if lang.runtime else Path()
        work = tmp_path_factory.mktemp(f"lang-{lang.name}")
        gen = work / "generated"
        generate([lang.name], gen)
        try:
            built[lang.name] = lang.build(gen, runtime, work)
        except BuildError as exc:
            built[lang.name] = str(exc)
    cmd = built[lang.name]
    if isinstance(cmd, str):
        pytest.fail(f"{lang.name}: the generated code or the driver does not build:\n{cmd}")
    return cmd


# A language's generated parser and driver are built once a worker (`built`):
# its tests share one xdist group, so under `make test` they run on one
# worker and the build happens once a run, not once per worker.
BY_LANGUAGE = [pytest.param(name, marks=pytest.mark.xdist_group(f"lang-{name}")) for name in LANGS]


def run_driver(cmd: list[str], cases: list[tuple[str, bytes, str]]) -> str:
    res = subprocess.run(
        cmd, input=driver_input(cases), capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    assert res.returncode == 0, (
        f"the driver crashed (exit {res.returncode}) after "
        f"{len(res.stdout.splitlines())} of {len(cases)} cases:\n"
        f"{res.stderr[-3000:]}"
    )
    return res.stdout


def check(lang: str, cases: list[tuple[str, bytes, str]], stdout: str) -> None:
    bad = list(compare(cases, stdout))
    assert not bad, (
        f"{lang}: {len(bad)} of {len(cases)} cases disagree with lbparse:\n"
        + "\n".join(bad[:SHOWN])
    )


@pytest.mark.parametrize("name", BY_LANGUAGE)
def test_reference_vectors_every_layout(name: str, built, tmp_path_factory) -> None:
    cmd = driver(LANGS[name], built, tmp_path_factory)
    cases = vector_cases()
    check(name, cases, run_driver(cmd, cases))


@pytest.mark.parametrize("name", BY_LANGUAGE)
def test_real_cluster_capture(name: str, built, tmp_path_factory) -> None:
    capture = shared_path("liftbridge", "samples", "short.pcapng")
    cmd = driver(LANGS[name], built, tmp_path_factory)
    cases = capture_cases(capture)
    assert len(cases) > 100  # the short run holds ~600 distinct envelopes
    check(name, cases, run_driver(cmd, cases))


@pytest.mark.parametrize("name", BY_LANGUAGE)
def test_header_keys_that_are_not_utf8(name: str, built, tmp_path_factory) -> None:
    cmd = driver(LANGS[name], built, tmp_path_factory)
    cases = odd_key_cases()
    check(name, cases, run_driver(cmd, cases))


# --- each folder's README: its build line builds, its example prints what it says ---

EXAMPLE_ENV = {  # offline: no module proxy, caches in the test's folder
    "GOFLAGS": "-mod=mod",
    "GOPROXY": "off",
    "NODE_PATH": str(ROOT / "tools" / "node_modules"),
}


@pytest.mark.parametrize("name", list(DOCS))
def test_readme_example_runs(name: str, tmp_path: Path) -> None:
    doc = DOCS[name]
    missing = [t for t in doc.tools if shutil.which(t) is None]
    lang = LANGS.get(name)
    if lang is not None:
        missing += lang.missing()
    if missing:
        pytest.skip(f"{name} toolchain missing: {', '.join(missing)} (`make install-langs`)")
    runtime = shared_path("kaitai-runtimes", lang.runtime) if lang and lang.runtime else tmp_path
    folder = tmp_path / name
    generate([name], folder)
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert doc.build in readme and doc.source in readme and doc.output in readme
    env = {
        **os.environ,
        **EXAMPLE_ENV,
        "KAITAI_RUNTIME": str(runtime),
        "GOPATH": str(tmp_path / "gopath"),
        "GOCACHE": str(tmp_path / "gocache"),
    }
    if name == "javascript":  # `npm install` is for people; the pinned runtime is installed here
        build = doc.build.replace("npm install", "true")
    else:
        build = doc.build
    res = subprocess.run(
        ["sh", "-ec", build],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert res.returncode == 0, (
        f"{name}: the README's build line failed:\n{res.stdout}\n{res.stderr}"
    )
    assert res.stdout.endswith(doc.output), f"{name} printed:\n{res.stdout}"


def test_readme_javascript_snippet(tmp_path: Path) -> None:
    """The manual's JavaScript: no crash on an unknown MsgType, 64-bit exact."""
    lang = LANGS["javascript"]
    if lang.missing():
        pytest.skip(f"javascript toolchain missing: {', '.join(lang.missing())}")
    text = (ROOT / "docs" / "pages" / "languages.md").read_text(encoding="utf-8")
    opening = "<!-- js example: snippet -->\n```js\n"
    start = text.index(opening) + len(opening)
    snippet = text[start : text.index("```", start)]
    expected: list[str] = []  # what it prints: the comment lines it ends with
    for line in reversed(snippet.rstrip().splitlines()):
        if not line.startswith("// "):
            break
        expected.insert(0, line[3:])
    generate(["javascript"], tmp_path)
    (tmp_path / "snippet.js").write_text(snippet, encoding="utf-8")
    res = subprocess.run(
        ["node", "snippet.js"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env={**os.environ, **EXAMPLE_ENV},
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == expected
    assert "9007199254740993n" in res.stdout
