"""`python -m lbparse` once its command has returned (lbparse/__main__.py).

A command's own signal handlers stay in place after it returns (the
pipeline's raise Interrupted: a signal once Spark has stopped). A signal
landing after that, while the interpreter shuts down (joining threads,
running atexit), was raised there: a traceback and a death by SIGINT
(status -2) for a run whose output was already written and said. Now it
ends the process at once with the command's status.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

# `python -m lbparse` with a command that does its work, says so, leaves its
# handler (as the pipeline's does: raising KeyboardInterrupt) and a thread that
# outlives it (as Spark's may), and returns 3. The thread waits until
# __main__ has put its handler in place of the command's (bounded), then signals
# the process while the interpreter is joining it.
_SCRIPT = """
import os, runpy, signal, sys, threading, time
import lbparse.cli

def late(signum):
    def run():
        for _ in range(2000):  # bounded: 20 s
            if signal.getsignal(signum) is not raising:
                break
            time.sleep(0.01)
        os.kill(os.getpid(), signum)
        time.sleep(30)  # the interpreter's shutdown waits for this thread
    return run

def raising(signum, frame):
    raise KeyboardInterrupt

def command(argv=None):
    signum = int(sys.argv[1])
    signal.signal(signum, raising)
    threading.Thread(target=late(signum)).start()
    print("done", flush=True)
    return 3

lbparse.cli.main = command
runpy.run_module("lbparse", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("signum", [2, 15], ids=["SIGINT", "SIGTERM"])
def test_a_signal_after_the_command_returned_exits_with_its_status(signum: int) -> None:
    res = subprocess.run(
        [sys.executable, "-P", "-c", _SCRIPT, str(signum)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 3, (res.returncode, res.stderr[-2000:])
    assert res.stdout == "done\n"
    assert res.stderr == ""
