"""The manual: a short README and the documentation site (docs/mkdocs.yml,
docs/pages). `make docs` builds the site strictly (CI); these check what a
strict build does not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import yaml

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "pages"


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


@pytest.mark.slow
def test_the_site_builds_with_the_readme_home_and_the_api_reference(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    import pytest

    pytest.importorskip("mkdocs", reason="mkdocs is a dev dependency (pyproject.toml)")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f",
                           str(ROOT / "docs" / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr
    home = (tmp_path / "site" / "index.html").read_text()
    assert "One example per job" in home and 'href="cli/"' in home  # links made the site's
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("decode_tables", "read_capture_tables", "EnvelopeError", "encode"):
        assert name in api, name
