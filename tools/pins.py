"""Print lbparse's pinned requirements, and those of the extras named, one a line.

    python tools/pins.py all dev > requirements.txt

What `pip install "lbparse[all,dev]"` installs besides lbparse itself, read
from pyproject.toml (an extra that names lbparse's own extras, as `all`
does, is followed). `make venv` installs these while the wheel compiles.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def requirements(extras: list[str]) -> list[str]:
    """The requirement strings of the dependencies and `extras`, in order, once each."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional: dict[str, list[str]] = project["optional-dependencies"]
    out: list[str] = []
    todo = list(project["dependencies"]) + [f"lbparse[{e}]" for e in extras]
    while todo:
        req = todo.pop(0)
        own = re.fullmatch(r"lbparse\[([\w,\s-]+)\]", req)
        if own is None:
            if req not in out:
                out.append(req)
            continue
        for extra in (e.strip() for e in own.group(1).split(",")):
            if extra not in optional:
                raise SystemExit(
                    f"pins: pyproject.toml has no extra {extra!r} (it has {', '.join(optional)})"
                )
            todo.extend(optional[extra])
    return out


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1:])))
