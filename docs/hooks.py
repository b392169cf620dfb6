"""mkdocs hooks: the site's home page is the README, its links made the site's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"


def on_page_read_source(page: Any, config: Any) -> str | None:
    if page.file.src_uri != "index.md":
        return None
    text = README.read_text(encoding="utf-8")
    return text.replace("](docs/pages/", "](")
