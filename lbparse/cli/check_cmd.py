"""Tell what each generation of the upstream Go decoders does with each input.

For every input: the current server (accepted as MsgType N, stored as a
plain message, rejected with which error, or crashes), the v1.0.0-alpha
server, the Go client v2 and the LIFT-era client. The exit status is 1 when
any input would crash an upstream server (a header length past the data
panics the server's envelope check), so `lbparse check` can guard what is
published to a NATS deployment. Inputs as for `lbparse decode`.

examples:
  lbparse check b90e43b40028000a0a026964
  lbparse check --hex suspicious.txt --json
"""

from __future__ import annotations

import argparse

from lbparse.cli.common import add_input_arguments, print_json, read_inputs
from lbparse.upstream import upstream_verdict

NAME = "check"
HELP = "what upstream Liftbridge would do with the bytes (exit 1 if they crash it)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_input_arguments(p)
    p.add_argument("--json", action="store_true", help="one JSON object per input")


def run(args: argparse.Namespace) -> int:
    crashing = 0
    for where, data in read_inputs(args.inputs, args.mode):
        verdict = upstream_verdict(data)
        crashing += verdict.crashes
        if args.json:
            print_json({"input": where, **verdict.to_json_dict()})
            continue
        flag = "  CRASHES AN UPSTREAM SERVER" if verdict.crashes else ""
        print(f"== {where} ({len(data)} bytes){flag}")
        for v in verdict.verdicts:
            print(f"  {v.generation:<32} {v.outcome:<9} {v.detail}")
    return 1 if crashing else 0
