"""The Vega, Vega-Lite and vega-embed runtimes as one script, to inline in the page.

vl-convert-python ships the three libraries and bundles them
(`vl_convert.javascript_bundle`, the same bundle Altair inlines with
`inline=True`), for the Vega-Lite version Altair's specs are written for.
Bundling takes a second or two, so the result is kept in the user's cache
directory, keyed by the versions, and read from there afterwards.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from pathlib import Path
from typing import Any


def vegalite_version() -> str:
    """The Vega-Lite version of Altair's schema, as vl-convert names it (v6_4)."""
    from altair.vegalite import SCHEMA_VERSION

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
    """The runtimes' JavaScript, safe inside a <script> element (defines `vegaEmbed`)."""
    from importlib.metadata import version

    import vl_convert as vlc

    vl = vegalite_version()
    name = f"vega-bundle-vlc{version('vl-convert-python')}-{vl}.js"
    path = _cache_dir() / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    # `</script` inside a string would end the element early.
    text = re.sub(r"</(script)", r"<\\/\1", _bundle(vlc, vl),
                  flags=re.IGNORECASE)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)  # whole or not at all: other processes may read it
    except OSError:
        pass  # no cache: the next report bundles again
    return text
