"""mkdocs hooks: the site's home page is the README, its links made the site's;
the images beside the pages (docs/*.png) are published with them; a page
whose image is not a file of the site is a warning, which fails --strict
(-q included)."""

from __future__ import annotations

import logging
import posixpath
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from mkdocs.plugins import get_plugin_logger
from mkdocs.structure.files import File, Files

DOCS = Path(__file__).resolve().parent
README = DOCS.parent / "README.md"
# Images kept in docs/ (where `lbparse report --screenshot docs/NAME.png` puts
# them) are outside docs_dir, so mkdocs would leave them out of the site.
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp"}
IMAGES = sorted(p.name for p in DOCS.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)

log = get_plugin_logger("hooks")


def on_config(config: Any) -> Any:
    # `mkdocs build -q` raises the "mkdocs" logger to ERROR, so a warning is
    # never counted and --strict passes whatever happens (mkdocs issue #4126);
    # `make docs` is -q --strict. A strict build hears its warnings again: a
    # build that passes prints nothing more, one that fails says why.
    mkdocs_log = logging.getLogger("mkdocs")
    if config.strict and mkdocs_log.getEffectiveLevel() > logging.WARNING:
        mkdocs_log.setLevel(logging.WARNING)
    return config


def on_files(files: Files, config: Any) -> Files:
    for name in IMAGES:
        files.append(File(name, str(DOCS), config.site_dir, config.use_directory_urls))
    return files


def on_page_read_source(page: Any, config: Any) -> str | None:
    if page.file.src_uri != "index.md":
        return None
    text = README.read_text(encoding="utf-8")
    return text.replace("](docs/pages/", "](")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    # A page names an image by its path in the checkout, which is what GitHub
    # and an editor's preview show (README.md: docs/x.png; docs/pages/*.md:
    # ../x.png); in the site it sits at the root, beside the home page.
    prefix = "docs/" if page.file.src_uri == "index.md" else "../"
    for name in IMAGES:
        markdown = re.sub(
            r"\]\(\s*" + re.escape(prefix + name) + r"(?=[\s)#?])", "](" + name, markdown
        )
    return markdown


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.srcs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.srcs.append(dict(attrs).get("src") or "")


def missing_images(html: str, page_dest_uri: str, site_uris: set[str]) -> list[str]:
    """The <img src> of a page's HTML that name no file of the site (a remote
    image or a data: URI is not checked)."""
    parser = _Images()
    parser.feed(html)
    parser.close()
    missing = []
    for src in parser.srcs:
        parts = urlsplit(src)
        if parts.scheme or parts.netloc:
            continue
        if not parts.path:
            missing.append(src)
            continue
        path = unquote(parts.path)
        if path.startswith("/"):
            target = posixpath.normpath(path.lstrip("/"))
        else:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(page_dest_uri), path))
        if target not in site_uris:
            missing.append(src)
    return missing


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    # validation.links in mkdocs.yml lets a page link files of the checkout
    # outside the site (spec/, lbparse/), so mkdocs' own check lets a broken
    # image by; an image is shown in the page, so it must be in the site.
    site_uris = {f.dest_uri for f in files if f.inclusion.is_included()}
    where = "README.md (the home page)" if page.file.src_uri == "index.md" else page.file.src_uri
    for src in missing_images(html, page.file.dest_uri, site_uris):
        log.warning("%s: the image %r is not a file of the site", where, src)
    return html


def on_serve(server: Any, config: Any, builder: Any) -> Any:
    # mkdocs serve watches docs_dir (docs/pages); the home page and the images live outside it.
    server.watch(str(README))
    for name in IMAGES:
        server.watch(str(DOCS / name))
    return server
