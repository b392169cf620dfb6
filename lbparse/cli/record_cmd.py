"""Subscribe to a NATS server and write every message to our capture format.

-o FILE.jsonl writes JSON Lines (payload base64), -o FILE.parquet writes
Parquet (payload binary); both hold one record per message, the fields of
`lbparse capture`, and every lbparse reader accepts them like a pcap.
Recording stops after --count messages, after --duration seconds, on
Ctrl-C / SIGTERM, or when a lost server does not come back within
--reconnect-timeout; the file is complete and readable in every case.
A lost connection is said on stderr when it happens and when it comes
back (see `lbparse tap --help`); the exit status is then 1: messages
published meanwhile are not in the file.

examples:
  lbparse record nats://127.0.0.1:4222 'foo.>' -o traffic.parquet --duration 60
  lbparse record nats://127.0.0.1:4222 lb.x --count 100 -o x.jsonl --user me --password pw
"""

from __future__ import annotations

import argparse
import sys

from lbparse.capture.reader import default_layout
from lbparse.capture.recordings import JsonlRecordWriter, record_writer
from lbparse.capture.records import Record
from lbparse.cli.common import add_layout_argument
from lbparse.cli.tap_cmd import add_connection_arguments, connect_options, live_session

NAME = "record"
HELP = "record a NATS server's messages to .jsonl or .parquet"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_connection_arguments(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="FILE.jsonl or FILE.parquet")
    add_layout_argument(p, default=default_layout())


def run(args: argparse.Namespace) -> int:
    connect_options(args)  # the options' errors before the file is made
    writer = record_writer(args.output)

    def write(rec: Record) -> None:
        writer.write(rec)
        if isinstance(writer, JsonlRecordWriter):
            writer.flush()  # so `tail -f` (and a test) sees each record as it comes

    try:
        result = live_session(NAME, args, write)
    finally:
        writer.close()  # whatever happened: a whole file of what was received
    print(f"lbparse record: {result.summary()} to {args.output}", file=sys.stderr)
    return 0 if result.complete else 1
