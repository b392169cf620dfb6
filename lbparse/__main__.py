"""`python -m lbparse`: the command line.

A Ctrl-C while the command line itself is imported ends the run with one
line and status 130, not a traceback (the commands handle it from there).
Once the command has returned, a signal ends the process at once with the
command's status: its work is done and said."""

import os
import signal
import sys

try:
    from lbparse.cli import main
except KeyboardInterrupt:
    sys.stderr.write("lbparse: interrupted while starting; nothing was done\n")
    sys.stderr.flush()
    # Not sys.exit: an import cut by the interrupt can leave the interpreter
    # to report it at exit as a death by SIGINT (status -2, seen in tests).
    os._exit(130)


def _exit_now(status: int) -> None:
    """From here a signal exits with `status` at once: the interpreter's
    shutdown (threads joined, atexit) is no place for a command's handler,
    which would raise there (a traceback, and a death by SIGINT: -2). The
    command flushed its output (lbparse.cli.main); what a handler cuts short
    of the interpreter's exit is flushed by the handler."""

    def handler(_signum: int, _frame: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass  # a closed pipe: nothing more can be said there
        os._exit(status)

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, handler)


status = main()
_exit_now(status)
sys.exit(status)
