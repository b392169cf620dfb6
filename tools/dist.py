"""`make dist`: what a Spark cluster needs to run the pipeline.

    python tools/dist.py [DIR]      (default: dist)

writes
  DIR/lbparse.zip           lbparse and lbparse_generated, for --py-files
  DIR/lbparse_pipeline.py   the application file spark-submit runs
  DIR/requirements.txt      the pinned dependencies executors must have

The zip holds only lbparse's own Python: its dependencies include compiled
code (protobuf's upb, crc32c, numpy, pyarrow) that a zip on the Python path
cannot carry, so every executor's Python needs requirements.txt installed
(`pip install -r DIR/requirements.txt`), and PYSPARK_PYTHON must name that
Python. Then:

  spark-submit --master spark://HOST:7077 --py-files DIR/lbparse.zip \\
      DIR/lbparse_pipeline.py INPUT... --out OUT
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = ["build"]

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = '''\
"""spark-submit's application file: `lbparse pipeline` with these arguments."""
import sys

from lbparse.pipeline.job import main

sys.exit(main(sys.argv[1:]))
'''


def _packages() -> list[tuple[Path, str]]:
    """(directory, name inside the zip) of the packages to ship."""
    import lbparse
    import lbparse_generated

    return [(Path(lbparse.__file__).parent, "lbparse"),
            (Path(lbparse_generated.__file__).parent, "lbparse_generated")]


def _requirements() -> list[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"]) + list(project["optional-dependencies"]["spark"])


def build(out: str | os.PathLike[str] = "dist") -> list[Path]:
    """Write the zip, the launcher and requirements.txt to `out`; returns their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    zpath = out / "lbparse.zip"
    # A new file of a random name beside the zip (O_EXCL), not a fixed
    # `lbparse.zip.tmp` that someone sharing the directory could plant.
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".lbparse.zip.", suffix=".tmp")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as z:
        for src, name in _packages():
            for path in sorted(src.rglob("*")):
                # Compiled modules (setup.py) cannot load from a zip, and
                # their .py source beside them is what runs from one.
                if path.is_file() and "__pycache__" not in path.parts \
                        and path.suffix not in (".pyc", ".so", ".pyd"):
                    z.write(path, f"{name}/{path.relative_to(src)}")
    os.replace(tmp, zpath)
    launcher = out / "lbparse_pipeline.py"
    launcher.write_text(LAUNCHER)
    reqs = out / "requirements.txt"
    reqs.write_text("# what every executor's Python needs (pinned as lbparse pins them)\n"
                    + "".join(f"{r}\n" for r in _requirements()))
    return [zpath, launcher, reqs]


if __name__ == "__main__":
    for p in build(sys.argv[1] if len(sys.argv) > 1 else "dist"):
        print(f"{p}  ({p.stat().st_size:,} bytes)")
