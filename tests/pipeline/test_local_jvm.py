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


# A run's own session (run_session): its JVM's arguments, its web UI (none), a
# job of Python tasks (their accumulator updates go to PySpark's accumulator
# server), then what the session's end left: the context stopped, the server
# shut down by a thread of its own (SparkContext.stop() waited up to a second
# on it, every run), closed.
_RUN = """
import threading
from lbparse.pipeline.session import run_session
with run_session('local[1]') as s:
    bean = s._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    print('\\n'.join(bean.getInputArguments()))
    print('ui', s.sparkContext.uiWebUrl)
    server = s.sparkContext._accumulatorServer
    counted = s.sparkContext.accumulator(0)
    s.sparkContext.parallelize(range(4), 2).foreach(lambda x: counted.add(x))
    print('counted', counted.value)
print('stopped', s.sparkContext._jsc is None)
stoppers = [t for t in threading.enumerate() if t.name == 'lbparse-accumulator-server-stop']
print('stoppers', len(stoppers))
for t in stoppers:
    t.join(30)
print('closed', server.socket.fileno() == -1 and not any(t.is_alive() for t in stoppers))
"""


@pytest.mark.slow
def test_the_jvm_of_a_local_session_runs_with_them() -> None:
    """A real session by run_session, its JVM asked for its own arguments.
    Without the tests' SPARK_SUBMIT_OPTS (which carry such flags for every
    JVM of the suite): the options must come from lbparse. It has no web
    UI (LOCAL_CONF). Its end stops the context at once and leaves the
    accumulator server to a thread that shuts it down
    (lbparse.pipeline.session._stop)."""
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
    assert "counted 6" in args, args[-6:]
    assert args[-4:] == ["stopped True", "stoppers 1", "closed True", ""], args[-6:]
