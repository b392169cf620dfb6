"""The `lbparse` command line. Each subcommand lives in its own module.

A command module has `NAME`, `HELP`, `add_arguments(parser)` and
`run(args) -> int`; `COMMANDS` lists them in the order `--help` shows.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from lbparse.errors import EnvelopeError

COMMANDS = ["decode", "encode", "check", "capture", "tap", "record", "spec", "demo", "generate", "pipeline",
            "segments", "raft", "report"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lbparse",
        description="Read and write the Liftbridge envelope protocol (every generation), "
        "from captures, live NATS servers and files.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        mod = importlib.import_module(f"lbparse.cli.{name}_cmd")
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except (ValueError, OSError) as exc:
        if isinstance(exc, EnvelopeError):
            raise
        print(f"lbparse {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
