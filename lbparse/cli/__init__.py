"""The `lbparse` command line. Each subcommand lives in its own module.

A command module has `NAME`, `add_arguments(parser)` and `run(args) ->
int`; `COMMANDS` lists them, with their line of `--help`, in its order. A
run imports the one command it runs: `lbparse decode` does not load
pyarrow, the Spark job or the report for commands it does not run.
`main` turns what a command raises into one line on stderr and an exit
status (lbparse.cli.status: 0 ok, 1 data problems or nothing selected,
2 usage, 3 a failed pipeline job, 130 interrupted).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import lbparse
from lbparse.capture import HOT_MODULES, compiled_modules
from lbparse.cli.arrow_start import without_pandas
from lbparse.cli.output import stdout_to
from lbparse.cli.status import (
    EXIT_STATUSES,
    INTERRUPTED,
    USAGE,
    exit_status,
    silence_stdout,
    warn,
)
from lbparse.extras import missing_extra

# command -> its line in `lbparse --help`, in that order; its module
# lbparse.cli.COMMAND_cmd is imported only when it runs (or for its own --help)
COMMANDS: dict[str, str] = {
    "decode": "decode envelopes from hex, files or stdin",
    "encode": "build an envelope from JSON",
    "check": "what upstream Liftbridge would do with the bytes (exit 1 if they crash it)",
    "capture": "decode the NATS messages in pcap, pcapng or recorded files",
    "tap": "subscribe to a NATS server and print each message decoded",
    "record": "record a NATS server's messages to .jsonl or .parquet",
    "spec": "print the layouts and MsgType tables of the spec",
    "demo": "decode the bundled examples, run the Spark pipeline on the bundled capture, "
    "and write its report",
    "generate": "generate parsers, schemas and a Wireshark dissector for other languages",
    "pipeline": "decode captures or payload tables on Spark into a Parquet dataset",
    "segments": "read (or --verify) Liftbridge segments, indexes and checkpoints on disk",
    "raft": "read the metadata Raft log and stable store in a node's raft/raft.db",
    "report": "write an HTML report (charts) of captures, recordings or pipeline output",
}


class Parser(argparse.ArgumentParser):
    """argparse with a usage error in one line, status 2 (the nats CLI's way)."""

    def error(self, message: str) -> NoReturn:
        """Print the usage error in one line and exit with status 2.

        Args:
            message: What was wrong with the arguments.

        Returns:
            It does not return: it exits (SystemExit with USAGE, 2).
        """
        self.exit(USAGE, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


class CommandParser(Parser):
    """A subcommand's parser: what it does not know is its usage error.

    argparse hands a subcommand's unknown arguments up to the top parser,
    whose error would say `lbparse: unrecognized arguments` without the
    command; here the command's own parser says it (`lbparse capture: ...`).
    """

    def parse_known_args(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse the command's arguments; any left unknown are its usage error.

        Args:
            args: The arguments (None: sys.argv's).
            namespace: The namespace to fill, or None for a new one.

        Returns:
            (the namespace, []): extras never come back, they exit with status 2.
        """
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns, extras


class _Version(argparse.Action):
    """--version: the version and where it runs from, the way `pip --version` says it."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            help="print the version, where "
            "lbparse is installed and whether its capture path is compiled, and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        print(version_text())
        parser.exit(0)


def version_text() -> str:
    """What `lbparse --version` prints.

    Returns:
        One line: the version, where lbparse is installed, the Python version
        and whether its capture path is compiled.
    """
    import os
    import platform

    compiled = len(compiled_modules())
    build = (
        "capture path compiled"
        if compiled == len(HOT_MODULES)
        else "pure Python"
        if compiled == 0
        else f"{compiled}/{len(HOT_MODULES)} compiled"
    )
    where = os.path.dirname(lbparse.__file__ or "?")
    return (
        f"lbparse {lbparse.__version__} from {where} (Python {platform.python_version()}, {build})"
    )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line.

    With `only`, that command's options alone, the others listed by name and
    help (what parsing a run of `only` needs; "" for none: `lbparse --help`,
    `--version` or a word that is no command). Only the command modules whose
    options are built are imported.

    Args:
        only: The one command whose options to build, "" for none, or None
            for every command.

    Returns:
        The top-level parser; each command's parser sets `_run` to its run().
    """
    parser = Parser(
        prog="lbparse",
        description="Read and write the Liftbridge envelope protocol (every generation),\n"
        "from captures, live NATS servers and files.",
        epilog=exit_status_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=CommandParser
    )
    for name, help_line in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_line)
            continue
        mod = importlib.import_module(f"lbparse.cli.{name}_cmd")
        p = sub.add_parser(
            name,
            help=help_line,
            description=mod.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def command_of(argv: Sequence[str]) -> str:
    """The command `argv` runs, or "" if it names none.

    The command is its first word that is not an option, when it names one (the
    top level's options take no value).

    Args:
        argv: The command line's words after the program's name.

    Returns:
        The command's name, or "".
    """
    first = next((a for a in argv if not a.startswith("-")), "")
    return first if first in COMMANDS else ""


def exit_status_text() -> str:
    """The exit statuses of every command, as `lbparse --help` ends.

    Returns:
        The text, wrapped to 80 columns.
    """
    import textwrap

    lines = ["exit status (every command):"]
    for status, meaning in EXIT_STATUSES.items():
        lines += textwrap.wrap(
            meaning, 76, initial_indent=f"  {status:<5}", subsequent_indent=" " * 7
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `lbparse` with `argv`: parse, run the command, map its failure to a status.

    A known failure (lbparse.cli.status) is one line on stderr; a bug raises
    with its traceback. A reader that leaves (`| head`) ends the run quietly.

    Args:
        argv: The command line's words after the program's name; None for
            sys.argv's.

    Returns:
        The exit status: the command's (0 ok, 1 data problems or nothing
        selected, 2 usage, 3 a failed pipeline job), 2 for a missing optional
        extra, 130 interrupted.
    """
    command = "lbparse"
    if argv is None:  # this process is the command's: pyarrow need not load pandas
        without_pandas()
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser(command_of(words)).parse_args(words)  # --help, --version print
        command = args.command
        with stdout_to(args, command) as run:  # -o FILE, checked before the command starts
            status = int(args._run(args) or 0)
            run.failed = status == USAGE
            sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return status
    except BrokenPipeError:  # the reader left (`| head`): not an error
        silence_stdout()
        return 0
    except SystemExit:  # argparse after --help, --version or a usage error
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            silence_stdout()
        raise
    except KeyboardInterrupt:
        if command_of(words) == "pipeline":  # before (or after) its own handling: one line
            warn("pipeline", "interrupted")
        return INTERRUPTED
    except ModuleNotFoundError as exc:
        hint = missing_extra(exc)
        if hint is None:
            raise  # not an optional part: a broken install or a bug, its traceback says which
        warn(command, hint)
        return USAGE
    except Exception as exc:
        failed = exit_status(exc)
        if failed is None:
            raise  # a bug in lbparse: its traceback is what a report needs
        warn(command, str(exc) or type(exc).__name__)
        return failed


if __name__ == "__main__":
    sys.exit(main())
