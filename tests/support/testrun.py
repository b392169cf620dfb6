"""The test run's own: its temporary directory, and what is made once a run.

Made once a test run, shared by every pytest-xdist worker. A session
fixture runs once per worker: on `make test`'s two workers a real
Liftbridge cluster (90 s of three nodes, a client and a capture) or a
pipeline run was made twice, once for each worker its tests landed on.
`once_a_run(factory, name, make)` makes it once: the first worker to ask
holds a lock in the run's shared temporary directory while `make(DIR)`
runs; every other worker waits on the lock and unpickles the value it
wrote (paths, summaries: what the tests share is small). A `make` that
failed fails the others the same way, without running it again; one that
skipped skips them.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, cast

import pytest

T = TypeVar("T")


def run_dir(factory: pytest.TempPathFactory) -> Path:
    """The temporary directory of this whole run: the workers' common parent
    under xdist, the session's own otherwise."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_a_run(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]) -> T:
    """`make(DIR)` once a run (DIR: a fresh directory of its own), its value
    pickled for every worker that asks after it."""
    root = run_dir(factory) / "once"
    root.mkdir(exist_ok=True)
    done, failed, skipped = (root / f"{name}.{end}" for end in ("value", "failed", "skipped"))
    with open(root / f"{name}.lock", "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if done.exists():
            return cast(T, pickle.loads(done.read_bytes()))
        if skipped.exists():
            pytest.skip(skipped.read_text())
        if failed.exists():
            pytest.fail(
                f"{name}: failed in another worker of this run:\n"
                f"{failed.read_text(errors='replace')}"
            )
        out = root / name
        out.mkdir()
        try:
            value = make(out)
        except pytest.skip.Exception as exc:
            skipped.write_text(str(exc))
            raise
        except BaseException as exc:
            failed.write_text(f"{type(exc).__name__}: {exc}")
            raise
        partial = root / f"{name}.value.partial"
        partial.write_bytes(pickle.dumps(value))
        partial.rename(done)
        return value


# ----------------------------------------------------------------------
# The run's own temporary directory, removed when the run ends (conftest).
#
# Every process the tests start finds it as TMPDIR (Python's tempfile,
# Chromium, Go's nats-server and Liftbridge) and Spark's JVMs as
# java.io.tmpdir (support/jvm.py), which is also Spark's local directory. What
# a process killed on purpose leaves behind (a JVM's spark-*, blockmgr-* and
# artifacts-* directories, the native libraries it unpacked, lbparse's scratch
# directory) then goes with the run instead of staying in /tmp for good: about
# 1 MB a run, on CI machines whose /tmp serves hundreds of runs. lbparse's
# cache of the run (conftest's LBPARSE_CACHE_DIR) is in it too.
#
# Made once, by the process that imports this first (pytest's controller); its
# workers inherit the variable and share it. The controller keeps its own
# tempfile directory as it was: pytest's base directory, which keeps a failed
# test's files, stays where pytest puts it.

ENV = "LBPARSE_TEST_TMPDIR"

OWN: str | None = None  # made by this process: removed by it at the end
if not os.environ.get(ENV):
    OWN = tempfile.mkdtemp(prefix="lbparse-test-tmp-")
    os.environ[ENV] = os.environ["TMPDIR"] = OWN
PATH: str = os.environ[ENV]
