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


def _zipped(path: list[str]) -> dict[str, tuple[str, bytes]]:
    """Each package's first zip on `path`, with its version file's bytes
    (each zip opened once)."""
    found: dict[str, tuple[str, bytes]] = {}
    for entry in path:
        if not entry.endswith(".zip") or not os.path.isfile(entry):
            continue
        try:
            with zipfile.ZipFile(entry) as z:
                names = set(z.namelist())
                for package, name in _VERSION_FILES.items():
                    if package not in found and name in names:
                        found[package] = (entry, z.read(name))
        except (OSError, zipfile.BadZipFile):
            continue
    return found


def _installed_version(package: str, plain: list[str]) -> bytes | None:
    """The version file of `package` as installed on `plain` (no zips), if it is."""
    spec = PathFinder.find_spec(package, plain)
    if spec is None or not spec.submodule_search_locations:
        return None
    installed = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(installed, "rb") as f:
            return f.read()
    except OSError:
        return None


def prefer_installed(path: list[str]) -> list[str]:
    """Move Spark's zips of pyspark and py4j to the end of a search path.

    Each zip moves only when the same version of its package is installed
    outside a zip on the path; otherwise it stays where it is.

    Args:
        path: A module search path (sys.path).

    Returns:
        The new search path (`path` itself is not changed).
    """
    plain = [p for p in path if not p.endswith(".zip")]
    moved = {  # a dict: one zip holding both packages moves once
        zip_path: None
        for package, (zip_path, theirs) in _zipped(path).items()
        if _installed_version(package, plain) == theirs
    }
    return [p for p in path if p not in moved] + list(moved)


def main() -> None:
    """Run Spark's Python daemon (pyspark.daemon), the installed pyspark preferred."""
    sys.path[:] = prefer_installed(sys.path)
    need("pyspark.daemon").manager()


if __name__ == "__main__":
    main()
