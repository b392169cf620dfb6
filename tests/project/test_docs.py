"""The manual: a short README and the documentation site (docs/mkdocs.yml,
docs/pages). `make docs` builds the site strictly (CI); these check what a
strict build does not."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "pages"
# The modules the manual has users import, each documented in the API reference
# with a name it must show (docs/pages/api.md).
API_MODULES = {
    "lbparse": "decode_tables",
    "lbparse.spark": "from_envelope",
    "lbparse.storage": "read_segment",
    "lbparse.raft": "decode_log_entry",
    "lbparse.streams": None,  # the package says where the client is; it holds no names
    "lbparse.streams.client": "StreamsClient",
}


def _nav() -> list[str]:
    config = yaml.safe_load((ROOT / "docs" / "mkdocs.yml").read_text())
    return [page for item in config["nav"] for page in item.values()]


def test_the_readme_is_a_short_tour() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    assert sorted(_nav()) == sorted(p.name for p in PAGES.glob("*.md"))


def test_the_readmes_links_to_the_manual_are_pages() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\]\(docs/pages/([\w.-]+\.md)", readme))
    assert linked and linked <= {p.name for p in PAGES.glob("*.md")}
    assert set(_nav()) - {"index.md", "api.md"} <= linked  # the README names every page


def _api_blocks() -> set[str]:
    return set(re.findall(r"^::: ([\w.]+)\s*$", (PAGES / "api.md").read_text(), re.M))


def test_the_api_reference_has_every_module_the_manual_names() -> None:
    assert set(API_MODULES) <= _api_blocks()


def test_the_api_reference_reads_google_docstrings() -> None:
    # The docstrings' Args/Returns/Raises sections (tests/project/test_docstrings.py)
    # are rendered as sections only when mkdocstrings is told their style.
    config = yaml.safe_load((ROOT / "docs" / "mkdocs.yml").read_text())
    (plugin,) = [p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict)]
    assert plugin["handlers"]["python"]["options"]["docstring_style"] == "google"


def test_the_api_reference_modules_are_the_packages() -> None:
    for module in API_MODULES:
        path = ROOT.joinpath(*module.split("."))
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), module


def _code_map() -> set[str]:
    """What format.md's tree of the checkout names directly under lbparse/."""
    text = (PAGES / "format.md").read_text()
    tree = text.split("<!-- example: spec-tree -->", 1)[1].split("```")[1]
    named: set[str] = set()
    inside = False
    for line in tree.splitlines():
        if line and not line.startswith(" "):
            inside = line.startswith("lbparse/ ")
        elif inside and line.startswith("  ") and not line.startswith(" " * 3):
            named.update(re.split(r"\s{2,}", line.strip())[0].split(", "))
    return named


def test_the_code_map_names_every_wing_and_module_of_the_package() -> None:
    package = ROOT / "lbparse"
    wings = {p.name + "/" for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"}
    modules = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    named = _code_map()
    assert {"spark/", "streams/", "pipeline/", "live/", "report/", "cli/"} <= wings
    assert wings | modules <= named, sorted((wings | modules) - named)


def test_the_changelog_keeps_its_form_and_names_the_version() -> None:
    # Keep a Changelog: an Unreleased section first, then each version with its date;
    # the version lbparse says it is (lbparse/version.py) has its section.
    text = (ROOT / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert versions and versions[0] == ("Unreleased", ""), versions
    assert all(date for _, date in versions[1:]), versions
    version = re.search(r'__version__ = "([^"]+)"', (ROOT / "lbparse/version.py").read_text())
    assert version and version[1] in [v for v, _ in versions], versions
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        kinds = re.findall(r"^### (.+)$", part, re.M)
        assert set(kinds) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_every_module_the_manuals_code_imports_is_in_the_api_reference() -> None:
    text = "\n".join(p.read_text() for p in [ROOT / "README.md", *PAGES.glob("*.md")])
    imported = set(re.findall(r"^\s*import (lbparse[\w.]*)", text, re.M))
    imported |= set(re.findall(r"^\s*from (lbparse[\w.]*) import", text, re.M))
    assert imported and imported <= _api_blocks(), imported - _api_blocks()


def test_the_report_pages_image_is_the_checkouts_file() -> None:
    # What GitHub shows: the image's path from the page itself.
    srcs = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", (PAGES / "report.md").read_text())
    assert srcs and all((PAGES / src).resolve().is_file() for src in srcs), srcs


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`make docs`'s build (--strict -q) into `site`."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-q",
            "-f",
            str(config),
            "-d",
            str(site),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="mkdocs is a dev dependency (pyproject.toml)")
    out = tmp_path_factory.mktemp("docs") / "site"
    done = _build(ROOT / "docs" / "mkdocs.yml", out)
    assert done.returncode == 0, done.stderr
    return out


def _img_srcs(html: str) -> list[str]:
    return re.findall(r"<img\b[^>]*?\bsrc=\"([^\"]*)\"", html)


@pytest.mark.slow
def test_the_site_builds_with_the_readme_home_and_the_api_reference(site: Path) -> None:
    home = (site / "index.html").read_text()
    assert "One example per job" in home and 'href="cli.html"' in home  # links made the site's
    api = (site / "api.html").read_text()
    for name in ("decode_tables", "read_capture_tables", "EnvelopeError", "encode"):
        assert name in api, name


@pytest.mark.slow
def test_the_api_reference_documents_each_module(site: Path) -> None:
    api = (site / "api.html").read_text()
    for module, name in API_MODULES.items():
        assert f'id="{module}"' in api, module
        if name is not None:
            assert f'id="{module}.{name}"' in api, f"{module}.{name}"


@pytest.mark.slow
def test_the_api_reference_renders_each_modules_docstring_sections(site: Path) -> None:
    # Each module's part of the page, from its heading to the next module's:
    # its members are there with their Google sections rendered as sections.
    api = (site / "api.html").read_text()
    starts = sorted((api.index(f'id="{module}"'), module) for module in API_MODULES)
    for (start, module), (end, _) in zip(starts, [*starts[1:], (len(api), "")], strict=True):
        name = API_MODULES[module]
        if name is None:
            continue
        part = api[start:end]
        for section in ("Parameters:", "Returns:"):
            assert f'doc-section-title">{section}' in part, (module, section)


@pytest.mark.slow
def test_the_report_image_is_in_the_site(site: Path) -> None:
    shot = site / "report-full-run.png"
    assert shot.read_bytes() == (ROOT / "docs" / "report-full-run.png").read_bytes()
    srcs = _img_srcs((site / "report.html").read_text())
    assert [(site / unquote(src)).resolve() for src in srcs] == [shot.resolve()]


@pytest.mark.slow
def test_every_image_of_the_site_is_a_file_of_it(site: Path) -> None:
    # Read from disk, as the README says: a page's relative src from its own folder.
    seen = 0
    for page in site.rglob("*.html"):
        for src in _img_srcs(page.read_text()):
            parts = urlsplit(src)
            if parts.scheme or parts.netloc:
                continue
            seen += 1
            target = (page.parent / unquote(parts.path)).resolve()
            assert target.is_relative_to(site.resolve()) and target.is_file(), (page.name, src)
    assert seen


@pytest.mark.slow
def test_the_site_reads_from_disk_and_the_readme_says_how_to_search(site: Path) -> None:
    # file:// opens a folder as a listing, not its index.html: pages link files.
    home = (site / "index.html").read_text()
    assert not re.search(r'href="[\w-]+/"', home), re.findall(r'href="[\w-]+/"', home)
    assert (site / "cli.html").is_file()
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "search needs http" in readme and "python3 -m http.server -d build/site" in readme


@pytest.mark.slow
def test_a_strict_build_fails_on_an_image_not_in_the_site(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is a dev dependency (pyproject.toml)")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    pages = tmp_path / "docs" / "pages"
    (pages / "api.md").write_text("# API reference\n")  # no package to read here
    report = pages / "report.md"
    text = report.read_text()
    assert "](../report-full-run.png)" in text
    # the path the page had (relative to the checkout, not the page), and a file that is not there
    report.write_text(
        text.replace("](../report-full-run.png)", "](docs/report-full-run.png)")
        + '\n<img src="missing%20shot.png" alt="gone">\n'
    )
    done = _build(tmp_path / "docs" / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    for src in ("docs/report-full-run.png", "missing%20shot.png"):
        assert re.search(
            rf"report\.md: the image '{re.escape(src)}' is not a file of the site", done.stderr
        ), done.stderr
