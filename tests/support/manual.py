"""The manual's text: README.md and the documentation pages (docs/pages),
where the tests find the examples they run."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PAGES = ROOT / "docs" / "pages"


def manual() -> str:
    """README.md then every page, one text (a marker is found wherever it lives)."""
    parts = [(ROOT / "README.md").read_text(encoding="utf-8")]
    parts += [p.read_text(encoding="utf-8") for p in sorted(PAGES.glob("*.md"))]
    return "\n".join(parts)
