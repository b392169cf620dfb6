"""Build an envelope from a message given as JSON (--payload, or --payload-file).

--type names the payload by its MsgType name in the layout (Publish, Ack,
ServerInfoRequest, ...) or by its full type name (proto.Message,
protocol.ServerInfoRequest, raw). The JSON is what `lbparse decode` prints
as `payload_json`: the proto3 JSON mapping of a protobuf message; the
fields of a FlatBuffers table in the FlatBuffers layouts; for
ReplicationResponse (raw) {"leader_epoch", "high_watermark", "data_hex"},
or "entries" instead of "data_hex" ([{"offset", "timestamp",
"leader_epoch", "key_hex", "value_hex", "headers_hex"}], the
`commitlog_messages` of the decoded JSON); for opaque bytes {"hex"}.

The envelope is printed as hex, or as raw bytes with --raw; -o FILE
writes it to FILE. (--json and --json-file, the old names of --payload
and --payload-file, still work and say so: --json names JSON output in
every other command.)

examples:
  lbparse encode --type Ack --payload '{"stream": "foo", "offset": "42"}' --crc
  lbparse encode --type ServerInfoRequest --payload '{"id": "s1"}' --raw >r.bin
  lbparse encode --layout flatbuffers --type Ack \\
      --payload '{"stream": "foo", "offset": "42"}'
  lbparse encode --layout flatbuffers-draft --type Replication \\
      --payload '{"hex": "00ff"}'
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import construct

from lbparse.cli.output import add_output_argument
from lbparse.cli.status import warn
from lbparse.codec.api import encode, payload_from_json
from lbparse.codec.dispatch import ENCODERS
from lbparse.errors import InputError

NAME = "encode"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse encode`'s options to its parser.

    Args:
        p: The command's parser.
    """
    p.add_argument("--type", required=True, help="MsgType name or full payload type name")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--payload", metavar="JSON", help="the message as JSON")
    src.add_argument(
        "--payload-file", metavar="FILE", help="file with the message as JSON ('-' = stdin)"
    )
    # The old names: --json is JSON output everywhere else (lbparse.cli.output).
    src.add_argument("--json", dest="old_payload", help=argparse.SUPPRESS)
    src.add_argument("--json-file", dest="old_payload_file", help=argparse.SUPPRESS)
    p.add_argument(
        "--layout",
        default="v0",
        choices=encodable_layouts(),
        metavar="LAYOUT",
        help=f"envelope generation to write: {', '.join(encodable_layouts())} (default: v0)",
    )
    p.add_argument("--crc", action="store_true", help="add the CRC-32C (12-byte header)")
    p.add_argument("--raw", action="store_true", help="write raw bytes instead of hex")
    add_output_argument(p, inputs=("payload_file", "old_payload_file"), what="the envelope")


def encodable_layouts() -> list[str]:
    """The envelope layouts `lbparse encode --layout` can write.

    Returns:
        The encoders' names, in their order.
    """
    return list(ENCODERS)


_OLD_NAMES = (
    ("old_payload", "payload", "--json", "--payload"),
    ("old_payload_file", "payload_file", "--json-file", "--payload-file"),
)


def _payload_text(args: argparse.Namespace) -> tuple[str, str]:
    """The message's JSON text, and the option that gave it."""
    for old, new, said, _ in _OLD_NAMES:
        if getattr(args, old) is not None:
            setattr(args, new, getattr(args, old))
            option = said
            break
    else:
        option = "--payload" if args.payload is not None else "--payload-file"
    if args.payload is not None:
        return args.payload, option
    text = (
        sys.stdin.read()
        if args.payload_file == "-"
        else Path(args.payload_file).read_text(encoding="utf-8")
    )
    return text, option


def _encode(message: Any, layout: str, crc: bool, option: str) -> bytes:
    """The envelope; a value its field cannot hold (a commit-log entry's offset
    of -1 or 2^64, a magic of 300: the spec's field sizes) is one line."""
    try:
        return encode(message, layout=layout, crc=crc)
    except construct.ConstructError as exc:
        # construct says "Error in path (building) -> offset" and the reason
        # on a line of its own
        text = " ".join(str(exc).split())
        where = re.match(r"Error in path \(building\) -> (\S+) (.*)", text)
        field, why = (where[1], where[2]) if where else ("a value", text)
        raise InputError(
            "bad_json", f"{option}: {field} does not fit its field in the spec ({why})"
        ) from None


def run(args: argparse.Namespace) -> int:
    """Run `lbparse encode`: the envelope of a JSON message, as hex (or --raw bytes).

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0.

    Raises:
        InputError: The payload is not JSON, not a JSON object, not a message of
            --type, or a value does not fit its field (exit status 2).
    """
    text, option = _payload_text(args)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError("bad_json", f"{option} is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise InputError(
            "bad_json",
            f"{option} is {text.strip()[:40]}, not a JSON object of the message's fields",
        )
    # --type names a MsgType or payload type of --layout: its codec (protobuf,
    # FlatBuffers, ReplicationResponse, bytes) reads the JSON.
    try:
        message = payload_from_json(args.type, obj, layout=args.layout)
    except ValueError as exc:
        raise InputError("bad_json", f"{option}: {exc}") from None
    wire = _encode(message, args.layout, args.crc, option)
    if args.raw:
        sys.stdout.buffer.write(wire)
    else:
        print(wire.hex())
    for _, _, said, now in _OLD_NAMES:
        if option == said:  # after the work: an error stays one line
            warn(NAME, f"{said} is now {now} ({said} still works, for now)")
    return 0
