"""Build an envelope from a message given as JSON.

--type names the payload by its MsgType name in the layout (Publish, Ack,
ServerInfoRequest, ...) or by its full type name (proto.Message,
protocol.ServerInfoRequest, raw). The JSON is the proto3 JSON mapping of
the message; for ReplicationResponse (raw) it is {"leader_epoch",
"high_watermark", "entries": [{"offset", "timestamp", "leader_epoch",
"key_hex", "value_hex", "headers_hex"}]}.

examples:
  lbparse encode --type Ack --json '{"stream": "foo", "offset": "42"}' --crc
  lbparse encode --type ServerInfoRequest --json '{"id": "s1"}' --raw > req.bin
"""

from __future__ import annotations

import argparse
import json
import sys

from google.protobuf import json_format

from lbparse.api import encode
from lbparse.layouts import layout_named
from lbparse.payloads import CODECS, codec_for

NAME = "encode"
HELP = "build an envelope from JSON"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--type", required=True, help="MsgType name or full payload type name")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--json", help="the message as JSON")
    src.add_argument("--json-file", help="file with the message as JSON ('-' = stdin)")
    p.add_argument("--layout", default="v0", help="envelope generation to write (default: v0)")
    p.add_argument("--crc", action="store_true", help="add the CRC-32C (12-byte header)")
    p.add_argument("--raw", action="store_true", help="write raw bytes instead of hex")


def payload_type_named(name: str, layout: str) -> str:
    if name in CODECS:
        return name
    lay = layout_named(layout)
    for mt in lay.msg_types.values():
        if mt.name.lower() == name.lower():
            return mt.payload_type
    matches = [p for p in lay.payload_types if p.rsplit(".", 1)[-1].lower() == name.lower()]
    if len(matches) == 1:
        return matches[0]
    names = [mt.name for mt in lay.msg_types.values()] or list(lay.payload_types)
    raise ValueError(f"unknown type {name!r} for layout {layout}; one of: {', '.join(names)}")


def run(args: argparse.Namespace) -> int:
    text = args.json
    if text is None:
        text = sys.stdin.read() if args.json_file == "-" else open(args.json_file).read()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--json is not JSON: {exc}") from None
    ptype = payload_type_named(args.type, args.layout)
    try:
        message = codec_for(ptype).from_json(obj)
    except json_format.ParseError as exc:
        raise ValueError(f"JSON does not fit {ptype}: {exc}") from None
    wire = encode(message, layout=args.layout, crc=args.crc)
    if args.raw:
        sys.stdout.buffer.write(wire)
    else:
        print(wire.hex())
    return 0
