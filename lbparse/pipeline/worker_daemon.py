"""Spark's Python daemon, importing pyspark as installed rather than from Spark's zip.

Spark starts its Python workers with `pyspark.zip` and py4j's source zip
first on PYTHONPATH (PythonWorkerFactory). Python compiles what it imports
from a zip anew in every process (it keeps no bytecode cache there): the
daemon and each worker it forks spent ~1 s of CPU compiling pyspark (a
Python worker's boot 1.2-1.3 s, where pyspark imported from site-packages
takes 0.2). A session lbparse starts names this module as
`spark.python.daemon.module` (lbparse.pipeline.session): when the same
pyspark and py4j are installed where this interpreter finds them, the zips
go to the end of sys.path, then Spark's own daemon runs, unchanged. With
another version installed, or none, nothing is moved.

No I/O beyond reading each package's version file, in the zip and where it
is installed; run with `python -m`, as Spark runs its daemon module
(importing lbparse before the daemon forks: no thread is started by it).
"""

from __future__ import annotations

import os
import sys
import zipfile
from importlib.machinery import PathFinder

from lbparse.extras import need

# The packages Spark puts on PYTHONPATH as zips, by the file saying their version.
_VERSION_FILES = {"pyspark": "pyspark/version.py", "py4j": "py4j/version.py"}


def _zip_of(package: str, path: list[str]) -> str | None:
    """The zip on `path` that holds `package`, if any."""
    for entry in path:
        if entry.endswith(".zip") and os.path.isfile(entry):
            try:
                with zipfile.ZipFile(entry) as z:
                    z.getinfo(_VERSION_FILES[package])
            except (OSError, KeyError, zipfile.BadZipFile):
                continue
            return entry
    return None


def _same_installed(package: str, zip_path: str, path: list[str]) -> bool:
    """Whether `package` is also installed outside zips on `path`, in the zip's version."""
    plain = [p for p in path if not p.endswith(".zip")]
    spec = PathFinder.find_spec(package, plain)
    if spec is None or not spec.submodule_search_locations:
        return False
    installed = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(installed, "rb") as f:
            mine = f.read()
        with zipfile.ZipFile(zip_path) as z:
            theirs = z.read(_VERSION_FILES[package])
    except (OSError, KeyError, zipfile.BadZipFile):
        return False
    return mine == theirs


def prefer_installed(path: list[str]) -> list[str]:
    """Move Spark's zips of pyspark and py4j to the end of a search path.

    Each zip moves only when the same version of its package is installed
    outside a zip on the path; otherwise it stays where it is.

    Args:
        path: A module search path (sys.path).

    Returns:
        The new search path (`path` itself is not changed).
    """
    moved: list[str] = []
    for package in _VERSION_FILES:
        found = _zip_of(package, path)
        if found is not None and _same_installed(package, found, path):
            moved.append(found)
    return [p for p in path if p not in moved] + moved


def main() -> None:
    """Run Spark's Python daemon (pyspark.daemon), the installed pyspark preferred."""
    sys.path[:] = prefer_installed(sys.path)
    need("pyspark.daemon").manager()


if __name__ == "__main__":
    main()
