"""How the commands print: JSON lines (lbparse's JSON convention), times in
tables (RFC 3339, UTC), and where: stdout, or the file of `-o/--output`.

Every command that prints its result takes `-o FILE` (`-`, the default:
stdout), and `--json` means one thing wherever it is an option: the
result as JSON (JSON Lines: one object a line) instead of a table, on
stdout or in the `-o` file.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from lbparse.cli.status import UsageError, warn
from lbparse.codec import jsonform
from lbparse.outputs import OutputFile, StreamedOutput, inside

__all__ = [
    "STDOUT",
    "Run",
    "add_format_arguments",
    "add_output_argument",
    "print_json",
    "rfc3339",
    "stdout_to",
]

STDOUT = "-"
# Names of standard output itself: written to as `-` is.
_STDOUT_NAMES = ("/dev/stdout", "/proc/self/fd/1", "/dev/fd/1")

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_NS_PER_S = 1_000_000_000


def print_json(obj: Any) -> None:
    """One JSON object on one line, on stdout.

    Written by lbparse.codec.jsonform (64-bit integers as decimal strings,
    UTF-8 as it is, not \\u escapes).

    Args:
        obj: The JSON-ready value.
    """
    sys.stdout.write(jsonform.dumps(obj) + "\n")


def rfc3339(ns: int) -> str:
    """A time as RFC 3339 in UTC with all nine digits: 2026-05-01T22:06:20.302883000Z.

    A time no calendar date can hold (a damaged capture's clock can say
    anything) is written as the number of seconds it says: `1e+20s`.

    Args:
        ns: Integer nanoseconds since the Unix epoch, as every time lbparse gives.

    Returns:
        The text.

    Raises:
        OverflowError: Never out of this function: raised and caught inside for
            a year beyond 1..9999, which is then written as seconds.
    """
    seconds, fraction = divmod(ns, _NS_PER_S)
    try:
        when = _EPOCH + datetime.timedelta(seconds=seconds)
        if not 1 <= when.year <= 9999:
            raise OverflowError
    except OverflowError:
        return f"{ns / _NS_PER_S:g}s"
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{fraction:09d}Z"


# --- -o/--output and --json ------------------------------------------------


def add_output_argument(
    p: argparse.ArgumentParser, inputs: str | tuple[str, ...] = (), what: str = "the output"
) -> None:
    """-o/--output FILE for a command that prints its result on stdout.

    Args:
        p: The command's parser.
        inputs: The dests of the command's input paths (a list or one path),
            which -o may not name.
        what: What the command writes, as its help says it.
    """
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=STDOUT,
        help=f"write {what} to FILE instead of stdout ('-', the default: stdout); "
        "a regular file is replaced when the command ends, a device or FIFO "
        "written in place, a link to a regular file or an input refused",
    )
    p.set_defaults(
        _stdout_file=True, _output_inputs=(inputs,) if isinstance(inputs, str) else inputs
    )


def add_format_arguments(p: argparse.ArgumentParser, default: str, jsonl: str, table: str) -> None:
    """--format jsonl|table, and --json for --format jsonl (its one meaning).

    Args:
        p: The command's parser.
        default: The format's default (or the help's words for it).
        jsonl: The help's words for jsonl.
        table: The help's words for table.
    """
    p.add_argument(
        "--format",
        choices=("jsonl", "table"),
        default=default,
        help=f"{jsonl} or {table} (default: {default})",
    )
    p.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="jsonl",
        help="the same as --format jsonl",
    )


class Run:
    """What the command's run says of its output.

    `failed` (a usage error's status) keeps the old file, as an exception does.
    """

    failed = False


@contextlib.contextmanager
def stdout_to(args: argparse.Namespace, command: str) -> Iterator[Run]:
    """Run the command with sys.stdout on its `-o` file, when it has one.

    The file is checked before any work. A regular file (or a new name) is
    written as a new file beside it and renamed over it at the end, also
    after Ctrl-C (what was written is kept, as tshark keeps its -w file, and
    said); a run that fails (an error, or `Run.failed`) leaves the old file
    as it was.

    Args:
        args: The parsed command line (its -o, and the inputs -o may not name).
        command: The command's name, for the lines said on stderr.

    Yields:
        The Run, whose `failed` the caller sets before the block ends.
    """
    run = Run()
    path = getattr(args, "output", STDOUT) if getattr(args, "_stdout_file", False) else STDOUT
    if path == STDOUT or path in _STDOUT_NAMES:
        with _guarded_stdout():
            yield run
        return
    inputs = _inputs(args)
    _refuse_inside_inputs(path, inputs)
    target = StreamedOutput(path, "-o", inputs)
    text = io.TextIOWrapper(target.open(), encoding="utf-8", newline="\n")
    saved, sys.stdout = sys.stdout, text
    try:
        yield run
    except KeyboardInterrupt:
        _finish(text, target, saved)
        warn(command, f"interrupted: {path} holds what was written before")
        raise
    except BaseException:
        _drop(text, target, saved)
        raise
    if run.failed:
        _drop(text, target, saved)
        if not target.in_place:
            warn(command, f"{path} left as it was")
        return
    _finish(text, target, saved)


@contextlib.contextmanager
def _guarded_stdout() -> Iterator[None]:
    """The process's own stdout, its write errors said as the output's
    (OutputFailed: `standard output: cannot write: No space left on
    device`), not an OSError a command could take for its input's. Only
    the real stdout of the process (an in-process caller's stand-in is
    left alone); written on the same descriptor, never closed here."""
    real = sys.stdout
    buffer = getattr(real, "buffer", None)
    # PYTHONUNBUFFERED (python -u): the text layer writes on the raw file itself
    unbuffered = isinstance(buffer, io.FileIO)
    raw = buffer if unbuffered else getattr(buffer, "raw", None)
    if (
        real is not sys.__stdout__
        or not isinstance(raw, io.FileIO)
        or not isinstance(real, io.TextIOWrapper)
    ):
        yield
        return
    real.flush()
    out = OutputFile(raw.fileno(), "standard output", closefd=False)
    guarded = io.TextIOWrapper(
        out if unbuffered else io.BufferedWriter(out),
        encoding=real.encoding,
        errors=real.errors,
        line_buffering=real.line_buffering,
        write_through=real.write_through,
    )
    sys.stdout = guarded
    try:
        yield
        guarded.flush()
    finally:
        if sys.stdout is guarded:
            sys.stdout = real


def _drop(text: io.TextIOWrapper, target: StreamedOutput, saved: Any) -> None:
    sys.stdout = saved
    with contextlib.suppress(OSError, ValueError):
        text.close()
    target.discard()


def _inputs(args: argparse.Namespace) -> list[str]:
    """The input paths of the command's arguments (dests named by add_output_argument)."""
    found: list[str] = []
    for dest in args._output_inputs:
        value = getattr(args, dest, None)
        if isinstance(value, str):
            found.append(value)
        elif value:
            found.extend(str(v) for v in value)
    return found


def _finish(text: io.TextIOWrapper, target: StreamedOutput, saved: Any) -> None:
    sys.stdout = saved
    try:
        text.close()  # flushes: a full disk is an error here, before the rename
    except BaseException:
        target.discard()
        raise
    target.commit()


def _refuse_inside_inputs(path: str, inputs: Iterable[str]) -> None:
    """-o may not name a file inside an input directory (the next run would read it)."""
    real = os.path.realpath(path)
    for item in inputs:
        if item != STDOUT and os.path.isdir(item) and inside(real, os.path.realpath(item)):
            raise UsageError("bad_option", f"{path}: is inside the input {item}; not written there")
