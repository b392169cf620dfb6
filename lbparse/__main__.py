"""`python -m lbparse`: the command line.

A signal that comes before the command has put its own handling in place
(while lbparse imports, while the arguments are read) ends the run with
one line and status 130, never a traceback: SIGINT always, SIGTERM for
`lbparse pipeline`, whose manual promises it the same end."""

import os
import signal
import sys


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


# The command is the first word that is not an option (the top level's take no value).
if next((a for a in sys.argv[1:] if not a.startswith("-")), "") == "pipeline":
    signal.signal(signal.SIGTERM, _stop)
try:
    from lbparse.cli import main
except KeyboardInterrupt:
    sys.stderr.write("lbparse: interrupted while starting; nothing was done\n")
    sys.stderr.flush()
    # Not sys.exit: an import cut by the interrupt can leave the interpreter
    # to report it at exit as a death by SIGINT (status -2, seen in tests).
    os._exit(130)

sys.exit(main())
