"""Print the layouts and MsgType tables, as read from the generated spec.

Use --json for a machine-readable copy of the same tables (one JSON object,
on one line).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from lbparse.cli.output import add_output_argument
from lbparse.codec.layouts import LAYOUTS

NAME = "spec"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse spec`'s options to its parser.

    Args:
        p: The command's parser.
    """
    p.add_argument("--json", action="store_true", help="print the tables as JSON")
    add_output_argument(p, what="the tables")


def as_json() -> dict[str, Any]:
    """The spec's layouts as `lbparse spec --json` prints them.

    Returns:
        Layout name -> its byte7, doc, payload_types and msg_types (MsgType
        number as text -> name and payload type).
    """
    return {
        name: {
            "byte7": lay.byte7,
            "doc": lay.doc,
            "payload_types": list(lay.payload_types),
            "msg_types": {
                str(v): {"name": mt.name, "payload_type": mt.payload_type}
                for v, mt in lay.msg_types.items()
            },
        }
        for name, lay in LAYOUTS.items()
    }


def run(args: argparse.Namespace) -> int:
    """Run `lbparse spec`: print the layouts and MsgType tables (or --json).

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0.
    """
    if args.json:  # one line, as --json is everywhere (`| jq .` to indent it)
        print(json.dumps(as_json()))
        return 0
    for name, lay in LAYOUTS.items():
        print(f"layout {name}: {lay.doc}")
        if lay.msg_types:
            print(f"  {'MsgType':>7}  {'name':<26} payload type")
            for v, mt in lay.msg_types.items():
                print(f"  {v:>7}  {mt.name:<26} {mt.payload_type}")
        else:
            byte7 = f"byte 7 {lay.byte7}" if lay.byte7 else "no envelope header"
            print(f"  {byte7}; payload: {' or '.join(lay.payload_types)}")
        print()
    return 0
