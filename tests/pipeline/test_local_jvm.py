"""The JVM of a local session lbparse starts runs the JIT's first tier and the
serial collector (lbparse.pipeline.session.LOCAL_JVM_OPTIONS): Spark's start
is most of a local pipeline run's time, and there the JVM mostly waits on
its Python workers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from lbparse.pipeline.session import LOCAL_JVM_OPTIONS, driver_java_options


def test_a_local_master_gets_the_options_a_cluster_does_not() -> None:
    assert driver_java_options("local[2]", quiet=False) == LOCAL_JVM_OPTIONS
    assert driver_java_options("local", quiet=False) == LOCAL_JVM_OPTIONS
    assert driver_java_options("spark://127.0.0.1:7077", quiet=False) == ""
    quiet = driver_java_options("local[*]", quiet=True)
    # the log4j file last: its path runs to the end of the string
    assert quiet.startswith(LOCAL_JVM_OPTIONS + " -Dlog4j2.configurationFile=file:")
    assert driver_java_options("spark://127.0.0.1:7077", quiet=True).startswith("-Dlog4j2.")


# A run's own session (run_session): its JVM's arguments and its web UI (none).
_RUN = """
from lbparse.pipeline.session import run_session
with run_session('local[1]') as s:
    bean = s._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    print('\\n'.join(bean.getInputArguments()))
    print('ui', s.sparkContext.uiWebUrl)
"""


@pytest.mark.slow
def test_the_jvm_of_a_local_session_runs_with_them() -> None:
    """A real session by run_session, its JVM asked for its own arguments.
    Without the tests' SPARK_SUBMIT_OPTS (which carry such flags for every
    JVM of the suite): the options must come from lbparse. It has no web
    UI (LOCAL_CONF)."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    out = subprocess.run(
        [sys.executable, "-P", "-c", _RUN], capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    args = out.stdout.split("\n")
    for flag in LOCAL_JVM_OPTIONS.split():
        assert flag in args, (flag, args)
    assert "ui None" in args, [a for a in args if a.startswith("ui")]  # LOCAL_CONF: no web UI
