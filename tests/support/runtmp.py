"""The run's own temporary directory, removed when the run ends (conftest).

Every process the tests start finds it as TMPDIR (Python's tempfile,
Chromium, Go's nats-server and Liftbridge) and Spark's JVMs as
java.io.tmpdir (support/jvm.py), which is also Spark's local directory. What
a process killed on purpose leaves behind (a JVM's spark-*, blockmgr-* and
artifacts-* directories, the native libraries it unpacked, lbparse's scratch
directory) then goes with the run instead of staying in /tmp for good: about
1 MB a run, on CI machines whose /tmp serves hundreds of runs. lbparse's
cache of the run (conftest's LBPARSE_CACHE_DIR) is in it too.

Made once, by the process that imports this first (pytest's controller); its
workers inherit the variable and share it. The controller keeps its own
tempfile directory as it was: pytest's base directory, which keeps a failed
test's files, stays where pytest puts it.
"""

from __future__ import annotations

import os
import tempfile

ENV = "LBPARSE_TEST_TMPDIR"

OWN: str | None = None  # made by this process: removed by it at the end
if not os.environ.get(ENV):
    OWN = tempfile.mkdtemp(prefix="lbparse-test-tmp-")
    os.environ[ENV] = os.environ["TMPDIR"] = OWN
PATH: str = os.environ[ENV]
