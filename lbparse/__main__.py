"""`python -m lbparse`: the command line.

A Ctrl-C while the command line itself is imported ends the run with one
line and status 130, not a traceback (the commands handle it from there)."""

import os
import sys

try:
    from lbparse.cli import main
except KeyboardInterrupt:
    sys.stderr.write("lbparse: interrupted while starting; nothing was done\n")
    sys.stderr.flush()
    # Not sys.exit: an import cut by the interrupt can leave the interpreter
    # to report it at exit as a death by SIGINT (status -2, seen in tests).
    os._exit(130)

sys.exit(main())
