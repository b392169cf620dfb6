"""Subscribe to a NATS server and write every message to our capture format.

-o FILE.jsonl writes JSON Lines (payload base64), -o FILE.parquet writes
Parquet (payload binary); both hold one record per message, the fields of
`lbparse capture`, and every lbparse reader accepts them like a pcap.
Recording stops after --count messages, after --duration seconds, or on
Ctrl-C / SIGTERM; the file is complete in every case.

examples:
  lbparse record nats://127.0.0.1:4222 'foo.>' -o traffic.parquet --duration 60
  lbparse record nats://127.0.0.1:4222 lb.x --count 100 -o x.jsonl --user me --password pw
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from lbparse.capture.reader import default_layout
from lbparse.capture.recordings import JsonlRecordWriter, record_writer
from lbparse.capture.records import Record
from lbparse.cli.common import add_layout_argument
from lbparse.cli.tap_cmd import add_connection_arguments, connect_options, ready_message
from lbparse.live import subscribe

NAME = "record"
HELP = "record a NATS server's messages to .jsonl or .parquet"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_connection_arguments(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="FILE.jsonl or FILE.parquet")
    add_layout_argument(p, default=default_layout())


def run(args: argparse.Namespace) -> int:
    options = connect_options(args)
    writer = record_writer(args.output)
    n = 0

    def write(rec: Record) -> None:
        writer.write(rec)
        if isinstance(writer, JsonlRecordWriter):
            writer.flush()  # so `tail -f` (and a test) sees each record as it comes

    try:
        n = asyncio.run(subscribe(args.server, args.subjects, write, options=options,
                                  layout=args.layout, count=args.count, duration=args.duration,
                                  on_ready=lambda: ready_message(NAME, args)))
    finally:
        writer.close()
    print(f"lbparse record: {n} messages to {args.output}", file=sys.stderr)
    return 0
