"""Where lbparse finds its spec and the Kaitai compiler, installed or in a checkout.

`lbparse generate` (lbparse/codegen/) reads the spec
(`spec/*.ksy`, `spec/proto`, `spec/flatbuffers`) and runs the Kaitai Struct
compiler through `tools/ksc.js`. An installed lbparse carries those files as
package data, `lbparse/_data/spec` and `lbparse/_data/tools` (setup.py copies
them there when it builds a wheel); in a checkout (the tests, an editable
install) they are `spec/` and `tools/` beside the package. This module is
the one place that knows both.

The compiler itself, the npm package kaitai-struct-compiler (GPL), is not in
the wheel: only its pinned manifest (package.json, package-lock.json) is.
The first `generate` that needs it runs `npm ci` of that manifest into a
per-user cache (`$LBPARSE_CACHE_DIR`, else `$XDG_CACHE_HOME/lbparse`, else
`~/.cache/lbparse`), in a folder named for the manifest's hash, so a new
pin gets a new folder and an old one is never half-updated. A checkout where
`make install-node` ran uses `tools/node_modules` as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import ClassVar

from lbparse.errors import OperationalError

__all__ = [
    "KAITAI_FILES",
    "ResourceError",
    "cache_dir",
    "compiler_folder",
    "kaitai_compiler",
    "private_folder",
    "spec_dir",
    "tools_dir",
]

# What the Kaitai side of `generate` needs, beside the spec: the driver and
# the npm manifest it is installed from.
KAITAI_FILES = ("ksc.js", "package.json", "package-lock.json")
COMPILER_PACKAGE = "kaitai-struct-compiler"
NPM_TIMEOUT = 600  # seconds; a cold npm cache fetches ~10 MB
_CHECKOUT = Path(__file__).resolve().parent.parent


class ResourceError(OperationalError):
    """A file or tool `generate` needs is missing, or could not be installed."""

    KINDS: ClassVar[frozenset[str]] = frozenset(
        {"missing", "unsafe", "failed"}  # unsafe: a cache others could change
    )


def _package_data(name: str) -> Path | None:
    """lbparse/_data/NAME of an installed lbparse, as a file-system path."""
    found = resources.files("lbparse").joinpath("_data", name)
    if isinstance(found, Path) and found.is_dir():
        return found
    return None  # a checkout, or lbparse imported from a zip (Spark's --py-files)


def spec_dir() -> Path:
    """The folder of the spec: envelope.ksy, commitlog.ksy, proto/, flatbuffers/.

    Returns:
        The package data's spec/ (an installed wheel), else the checkout's.
    """
    return _package_data("spec") or _CHECKOUT / "spec"


def tools_dir() -> Path:
    """The folder holding ksc.js and the npm manifest of the Kaitai compiler.

    Returns:
        The package data's tools/ (an installed wheel), else the checkout's.
    """
    return _package_data("tools") or _CHECKOUT / "tools"


def cache_dir() -> Path:
    """Where lbparse keeps what it installs for one user.

    Returns:
        $LBPARSE_CACHE_DIR if set, else lbparse/ in $XDG_CACHE_HOME (default
        ~/.cache); the folder may not exist yet.
    """
    explicit = os.environ.get("LBPARSE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "lbparse"


def private_folder(folder: Path) -> bool:
    """Whether `folder` is a directory of this user's that nobody else may change.

    A real directory (not a link), owned by this user, writable by its group
    only when that is the user's own group (as a umask of 002 makes it):
    what lbparse runs from the cache (Node's packages, the JVM's class
    archive) must never be another user's.

    Args:
        folder: The directory.

    Returns:
        True when it is such a directory; False when it is not, or is not there.
    """
    try:
        st = folder.lstat()
    except OSError:
        return False
    group_ok = not st.st_mode & stat.S_IWGRP or st.st_gid == os.getgid()
    return (
        stat.S_ISDIR(st.st_mode)
        and st.st_uid == os.getuid()
        and not st.st_mode & stat.S_IWOTH
        and group_ok
    )


def _ready(folder: Path) -> bool:
    return (folder / "ksc.js").is_file() and (
        folder / "node_modules" / COMPILER_PACKAGE / "package.json"
    ).is_file()


def _pinned_version(tools: Path) -> str:
    deps = json.loads((tools / "package.json").read_text(encoding="utf-8"))["dependencies"]
    return str(deps.get(COMPILER_PACKAGE, "?"))


def _say(message: str) -> None:
    print(f"lbparse: {message}", file=sys.stderr, flush=True)


def kaitai_compiler(say: Callable[[str], None] = _say) -> Path:
    """The path of ksc.js, in a folder whose node_modules holds the compiler.

    Installs the pinned compiler into the cache on first use.

    Args:
        say: Called with one line for the user before an install (once).

    Returns:
        The ksc.js to run with Node: the tools folder's when its node_modules
        is ready, else the cache folder's (`compiler_folder`).

    Raises:
        ResourceError: The package data lacks the compiler's files, a cache
            folder is not this user's alone, or Node or npm is missing or
            `npm ci` fails; the message says what to do.
    """
    tools = tools_dir()
    if _ready(tools):
        return tools / "ksc.js"
    missing = [name for name in KAITAI_FILES if not (tools / name).is_file()]
    if missing:
        raise ResourceError(
            "missing",
            f"{tools} lacks {', '.join(missing)}: this lbparse was installed "
            "without its package data (build it with `pip wheel .` or "
            "`python -m build`)",
        )
    version = _pinned_version(tools)
    target = compiler_folder(tools)
    for folder in (target.parent, target):
        if os.path.lexists(folder) and not private_folder(folder):
            # Node runs what is in there: never a folder another user made
            # or can change (a cache directory may be shared; issue #19).
            raise ResourceError(
                "unsafe",
                f"{folder} is not a directory of this user's that only it can "
                "change: not used (remove it, or set LBPARSE_CACHE_DIR)",
            )
    if not _ready(target):
        _install(tools, target, version, say)
    return target / "ksc.js"


def compiler_folder(tools: Path) -> Path:
    """The cache folder the compiler of `tools`' manifest is installed into.

    Args:
        tools: The folder holding ksc.js and its npm manifest (`tools_dir`).

    Returns:
        A folder of `cache_dir` named by the pinned compiler version and a
        digest of the manifest; it may not exist yet.
    """
    digest = hashlib.sha256()
    for name in KAITAI_FILES:
        digest.update((tools / name).read_bytes())
    return cache_dir() / f"{COMPILER_PACKAGE}-{_pinned_version(tools)}-{digest.hexdigest()[:12]}"


def _need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise ResourceError(
            "missing",
            f"{program} not found on PATH: `lbparse generate` runs the Kaitai Struct compiler, "
            "an npm package, under Node.js (20 or later) and installs it with npm on first "
            "use; install Node.js and npm (Debian: apt-get install nodejs npm)",
        )
    return path


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One installer at a time (two `generate` runs may start together)."""
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _install(tools: Path, target: Path, version: str, say: Callable[[str], None]) -> None:
    _need("node")
    npm = _need("npm")
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f"{target.name}.lock"):
        if _ready(target):  # another process installed it while we waited
            return
        if target.exists():  # a copy someone damaged: start again
            shutil.rmtree(target)
        say(f"installing {COMPILER_PACKAGE} {version} (npm ci, once) into {target}")
        # Installed beside, then renamed: the folder is complete or absent.
        work = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
        try:
            for name in KAITAI_FILES:
                shutil.copyfile(tools / name, work / name)
            try:
                res = subprocess.run(
                    [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                    cwd=work,
                    capture_output=True,
                    text=True,
                    timeout=NPM_TIMEOUT,
                )
            except subprocess.TimeoutExpired:
                raise ResourceError(
                    "failed",
                    f"npm ci of {COMPILER_PACKAGE} {version} took more than "
                    f"{NPM_TIMEOUT} s; stopped",
                ) from None
            if res.returncode != 0 or not _ready(work):
                detail = (res.stderr or res.stdout).strip().splitlines()[-5:]
                raise ResourceError(
                    "failed",
                    f"npm ci of {COMPILER_PACKAGE} {version} failed (exit {res.returncode}; "
                    "it fetches the pinned package from the npm registry once): "
                    + " | ".join(detail),
                )
            os.rename(work, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
