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

Which status an exception ends a run with is one table, `EXIT_STATUS_OF`
(`exit_status`): by lbparse.errors' family, its branches and the members
that differ from their branch.
"""

from __future__ import annotations

import os
import sys
from typing import ClassVar

from lbparse.errors import InputError, LbparseError, OperationalError
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
    "exit_status",
    "silence_stdout",
    "status_of",
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


class UsageError(InputError):
    """The command was asked something it cannot do: exit status 2."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"bad_option"})


class DataError(OperationalError):
    """The data (or the server holding it) stopped the command: exit status 1."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"unreachable"})


# How a command ends for what it raises: the one table (lbparse.cli.main and
# every command that ends on an exception it caught ask `exit_status`). The
# first row whose class the exception is an instance of gives the status, so
# the specific come before their branch. Rows name their class by module: a
# class of a module this run did not import cannot have been raised, and
# `lbparse decode` must not import the Spark job to ask.
EXIT_STATUS_OF: tuple[tuple[str, str, int], ...] = (
    ("lbparse.pipeline.job", "JobFailed", JOB_FAILED),  # the job, not the data nor the options
    ("lbparse.extras", "MissingExtra", USAGE),  # the install: an extra to add
    ("lbparse.outputs", "OutputError", USAGE),  # an output refused or not written
    ("lbparse.codegen.targets", "CodegenError", DATA),  # generate: a tool failed on the spec
    ("lbparse.errors", "EnvelopeError", DATA),  # bytes that do not decode
    ("lbparse.cli.status", "DataError", DATA),  # a server that cannot be reached
    ("lbparse.errors", "InputError", USAGE),  # a value or a file the user gave
    ("lbparse.errors", "OperationalError", DATA),  # a server or a tool that failed
    ("builtins", "ValueError", USAGE),  # a value the user gave, said by a library
    ("builtins", "OSError", USAGE),  # a file that cannot be opened
)


def exit_status(exc: BaseException) -> int | None:
    """The status a command's exception ends the run with.

    Args:
        exc: The exception a command raised or caught.

    Returns:
        The exit status EXIT_STATUS_OF gives the first class `exc` is an
        instance of; None for anything else: a bug, whose traceback is what a
        report needs.
    """
    for module, name, status in EXIT_STATUS_OF:
        loaded = sys.modules.get(module)
        cls = getattr(loaded, name, None) if loaded is not None else None
        if isinstance(cls, type) and isinstance(exc, cls):
            return status
    return None


def status_of(exc: LbparseError) -> int:
    """`exit_status` of a member of the family, which always has one.

    Args:
        exc: An error of lbparse's family.

    Returns:
        Its exit status (EXIT_STATUS_OF ends with both branches of the family).
    """
    status = exit_status(exc)
    assert status is not None, exc  # EXIT_STATUS_OF ends with both branches
    return status


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
