"""The Vega, Vega-Lite and vega-embed runtimes as one script, to inline in the page.

vl-convert-python ships the three libraries and bundles them
(`vl_convert.javascript_bundle`, the same bundle Altair inlines with
`inline=True`), for the Vega-Lite version the specs are written for
(lbparse.report.vegalite.SCHEMA_VERSION, the pinned Altair's).
Bundling takes a second or two, so the result is kept in the user's cache
directory, keyed by the versions, and read from there afterwards.

Only the page (lbparse.report.render) imports this module: vl-convert,
of the report extra, is imported at the top.
"""

from __future__ import annotations

import functools
import os
import re
from importlib.metadata import version
from pathlib import Path
from typing import Any

import vl_convert as vlc

from lbparse.report.vegalite import SCHEMA_VERSION
from lbparse.scratch import read_own, replace_file


def vegalite_version() -> str:
    """The Vega-Lite version of the specs, as vl-convert names it (v6_4).

    Returns:
        The version as "major_minor", e.g. "6_4".
    """
    return "_".join(SCHEMA_VERSION.split(".")[:2])


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lbparse"


def _bundle(vlc: Any, vl: str) -> str:
    # Without a snippet vl-convert bundles vega-embed as a global `vegaEmbed`
    # (its stub says the snippet is required; an empty one bundles nothing).
    return str(vlc.javascript_bundle(vl_version=vl))


@functools.lru_cache(maxsize=1)
def vega_bundle() -> str:
    """The runtimes' JavaScript, safe inside a <script> element (defines `vegaEmbed`).

    Bundled once per process and cached in the user's cache directory, keyed by
    the versions; a cache that cannot be written is skipped silently.

    Returns:
        The JavaScript text, with `</script` escaped.
    """
    vl = vegalite_version()
    name = f"vega-bundle-vlc{version('vl-convert-python')}-{vl}.js"
    path = _cache_dir() / name
    # Inlined into the page as script: used only if this user wrote it (a
    # cache directory may be shared, as XDG_CACHE_HOME=/tmp/... makes it).
    cached = read_own(path)
    if cached is not None:
        return cached.decode("utf-8", errors="replace")
    # `</script` inside a string would end the element early.
    text = re.sub(r"</(script)", r"<\\/\1", _bundle(vlc, vl), flags=re.IGNORECASE)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Whole or not at all (other processes may read it); never writable by
        # others, whatever the umask, or read_own would refuse it.
        replace_file(path, text, mode=0o644)
    except OSError:
        pass  # no cache: the next report bundles again
    return text
