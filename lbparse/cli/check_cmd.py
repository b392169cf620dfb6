"""Tell what each generation of the upstream Go decoders does with each input.

For every input: the current server (accepted as MsgType N, stored as a
plain message, rejected with which error, or crashes), the v1.0.0-alpha
server, the Go client v2 and the LIFT-era client. The exit status is 1 when
any input would crash an upstream server (a header length past the data
panics the server's envelope check), so `lbparse check` can guard what is
published to a NATS deployment. Inputs as for `lbparse decode`; a bad
line of --hex or --base64 is reported on stderr with its line number and
the run goes on (exit status 1 at the end; 2 for an argument that is
neither a file nor hex).

examples:
  lbparse check b90e43b40028000a0a026964
  lbparse check --hex suspicious.txt --json
"""

from __future__ import annotations

import argparse

from lbparse.cli.inputs import add_input_arguments, read_inputs
from lbparse.cli.output import add_output_argument, print_json
from lbparse.cli.status import DATA, OK, warn
from lbparse.codec.upstream import upstream_verdict

NAME = "check"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse check`'s options to its parser.

    Args:
        p: The command's parser.
    """
    add_input_arguments(p)
    p.add_argument("--json", action="store_true", help="one JSON object per input (JSON Lines)")
    add_output_argument(p, inputs="inputs")


def run(args: argparse.Namespace) -> int:
    """Run `lbparse check`: what each upstream generation would do with each input.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 ok, 1 if an input crashes an upstream server (or
        could not be read as data), 2 for an input that cannot be read.
    """
    status = OK
    for item in read_inputs(args.inputs, args.mode):
        if item.problem is not None:
            warn(NAME, item.problem)
            status = max(status, item.status)
            continue
        verdict = upstream_verdict(item.data)
        if verdict.crashes:
            status = max(status, DATA)
        if args.json:
            print_json({"input": item.where, **verdict.to_json_dict()})
            continue
        flag = "  CRASHES AN UPSTREAM SERVER" if verdict.crashes else ""
        print(f"== {item.where} ({len(item.data)} bytes){flag}")
        for v in verdict.verdicts:
            print(f"  {v.generation:<32} {v.outcome:<9} {v.detail}")
    return status
