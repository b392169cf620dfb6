"""Build an envelope from a message given as JSON.

--type names the payload by its MsgType name in the layout (Publish, Ack,
ServerInfoRequest, ...) or by its full type name (proto.Message,
protocol.ServerInfoRequest, raw). The JSON is what `lbparse decode` prints
as `payload_json`: the proto3 JSON mapping of a protobuf message; the
fields of a FlatBuffers table in the FlatBuffers layouts; for
ReplicationResponse (raw) {"leader_epoch", "high_watermark", "data_hex"},
or "entries" instead of "data_hex" ([{"offset", "timestamp",
"leader_epoch", "key_hex", "value_hex", "headers_hex"}], the
`commitlog_messages` of the decoded JSON); for opaque bytes {"hex"}.

examples:
  lbparse encode --type Ack --json '{"stream": "foo", "offset": "42"}' --crc
  lbparse encode --type ServerInfoRequest --json '{"id": "s1"}' --raw > req.bin
  lbparse encode --layout flatbuffers --type Ack --json '{"stream": "foo", "offset": "42"}'
  lbparse encode --layout flatbuffers-draft --type Replication --json '{"hex": "00ff"}'
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lbparse.api import encode, payload_from_json

NAME = "encode"
HELP = "build an envelope from JSON"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--type", required=True, help="MsgType name or full payload type name")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--json", help="the message as JSON")
    src.add_argument("--json-file", metavar="FILE", help="file with the message as JSON ('-' = stdin)")
    p.add_argument("--layout", default="v0", choices=encodable_layouts(),
                   help="envelope generation to write (default: v0)")
    p.add_argument("--crc", action="store_true", help="add the CRC-32C (12-byte header)")
    p.add_argument("--raw", action="store_true", help="write raw bytes instead of hex")


def encodable_layouts() -> list[str]:
    from lbparse.dispatch import ENCODERS

    return list(ENCODERS)


def run(args: argparse.Namespace) -> int:
    text = args.json
    if text is None:
        text = (sys.stdin.read() if args.json_file == "-"
                else Path(args.json_file).read_text(encoding="utf-8"))
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--json is not JSON: {exc}") from None
    # --type names a MsgType or payload type of --layout: its codec (protobuf,
    # FlatBuffers, ReplicationResponse, bytes) reads the JSON.
    message = payload_from_json(args.type, obj, layout=args.layout)
    wire = encode(message, layout=args.layout, crc=args.crc)
    if args.raw:
        sys.stdout.buffer.write(wire)
    else:
        print(wire.hex())
    return 0
