"""Exit statuses and how a command ends: the conventions of tshark, jq and the nats CLI.

0 (OK): everything was read and done. 1 (DATA): a data problem (an input
that does not decode, a gap in a capture, a server that cannot be
reached), or nothing matched what was asked (an empty selection, an empty
file), said on stderr. 2 (USAGE): a usage problem (a bad option value, a
file that cannot be opened, an argument that is neither a file nor hex).
3 (JOB_FAILED): `pipeline` only, the job itself failed (Spark, a worker,
the output's filesystem). 130 (INTERRUPTED): Ctrl-C (128 + SIGINT, as a
shell reports it); `pipeline` says the same for SIGTERM, its earlier
output kept. A user's mistake is one line on stderr, `lbparse COMMAND:
what was wrong`, never a traceback. A reader that goes away
(`lbparse decode ... | head`) ends the run quietly with status 0.
"""

from __future__ import annotations

import os
import sys

from lbparse.textform import printable

__all__ = [
    "DATA",
    "EXIT_STATUSES",
    "INTERRUPTED",
    "JOB_FAILED",
    "OK",
    "USAGE",
    "DataError",
    "UsageError",
    "silence_stdout",
    "warn",
]

OK, DATA, USAGE = 0, 1, 2
JOB_FAILED = 3  # pipeline: the job failed, not the data (1) nor the arguments (2)
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it

# What each status means, as `lbparse --help` and the README say it.
EXIT_STATUSES = {
    OK: "everything was read and done",
    DATA: "a data problem (an input that does not decode, a gap in a capture, damage on "
    "disk, a server that cannot be reached), or nothing matched what was asked (an "
    "empty selection, an empty file), said on stderr",
    USAGE: "a usage problem (a bad option, a file that cannot be opened)",
    JOB_FAILED: "pipeline: the job itself failed (Spark, a worker, the output's filesystem)",
    INTERRUPTED: "interrupted (Ctrl-C; pipeline: SIGINT or SIGTERM, earlier output kept)",
}


class UsageError(Exception):
    """The command was asked something it cannot do: exit status 2."""


class DataError(Exception):
    """The data (or the server holding it) stopped the command: exit status 1."""


def warn(command: str, message: str) -> None:
    """One line on stderr, named for the command (what came from the input escaped).

    Args:
        command: The command's name ("capture"...): the line reads
            `lbparse COMMAND: MESSAGE`.
        message: What to say; unprintable characters are escaped.
    """
    print(f"lbparse {command}: {printable(message)}", file=sys.stderr, flush=True)


def silence_stdout() -> None:
    """Point stdout at /dev/null after its reader left.

    What Python's documentation recommends for SIGPIPE: the interpreter
    flushes stdout once more at exit, and that flush must not fail again
    (it would print `Exception ignored ... BrokenPipeError`)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (an in-process test)
        pass
