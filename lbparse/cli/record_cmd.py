"""Subscribe to a NATS server and write every message to our capture format.

-o FILE.jsonl writes JSON Lines (payload base64), -o FILE.parquet writes
Parquet (payload binary), -o - writes the JSON Lines on stdout; all hold
one record per message, the fields of `lbparse capture`, and every
lbparse reader accepts them like a pcap.
Recording stops after --count messages, after --duration seconds, on
Ctrl-C, SIGTERM or SIGHUP, or when a lost server does not come back
within --reconnect-timeout; every message received is written first, and
the file is complete and readable in every case (a second signal stops
at once: what was received and not written is counted and said).
Decoding and writing run off the network reader: a backlog in memory,
spilled to a private temporary file past --backlog-mb (said once, when
it starts), so the server never drops the recorder as a slow consumer,
whatever the rate. Memory stays within 3 x --backlog-mb + 64 MiB of the
idle recorder's: the client library's own queue is held to the backlog's
measure, and a message past it is dropped, counted and said.
A lost connection is said on stderr when it happens and when it comes
back (see `lbparse tap --help`). Exit status: 0 when the file holds every
message the subscription could have received, 1 when messages may be
missing (a lost connection, messages dropped by the client library,
received ones not written), with a line saying which; 2 on bad arguments
or when the server cannot be reached.

examples:
  lbparse record nats://127.0.0.1:4222 'foo.>' -o traffic.parquet --duration 60
  lbparse record nats://127.0.0.1:4222 lb.x --count 100 -o x.jsonl \\
      --user me --password pw
"""

from __future__ import annotations

import argparse
import sys

from lbparse.capture.reader import default_layout
from lbparse.capture.recordings import JsonlRecordWriter, check_record_name, record_writer
from lbparse.capture.records import Record
from lbparse.cli.common import add_layout_argument
from lbparse.cli.tap_cmd import add_connection_arguments, connect_options, live_session
from lbparse.outputs import StreamedOutput

NAME = "record"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse record`'s options to its parser.

    Args:
        p: The command's parser.
    """
    add_connection_arguments(p)
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="FILE.jsonl or FILE.parquet; '-' (or a device or FIFO): JSON Lines "
        "on stdout (or there). A new FILE "
        "grows as messages come (`tail -f` follows it); an existing one is "
        "kept until the recording ends and replaces it (meanwhile it grows as "
        ".FILE.*.tmp beside it); a device or FIFO is written in place; a link "
        "to a file is refused",
    )
    add_layout_argument(p, default=default_layout())


def run(args: argparse.Namespace) -> int:
    """Run `lbparse record`: a NATS server's messages to FILE.jsonl or FILE.parquet.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 if the recording is complete, 1 if it may be
        missing messages (said on stderr).
    """
    connect_options(args)  # the options' errors before the file is made
    # Checked before connecting (lbparse.outputs): a device or FIFO written in
    # place, a regular file replaced whole at the end, a link to a file refused.
    target = None if args.output == "-" else StreamedOutput(args.output, "-o", grow_new=True)
    device = target is not None and target.in_place
    if not device:
        check_record_name(args.output)
    writer = record_writer(args.output, None if target is None else target.open(), device=device)
    written = 0

    def write(rec: Record) -> None:
        nonlocal written
        writer.write(rec)
        written += 1

    ended = False
    try:
        # JSON Lines flushed whenever the recording has caught up: `tail -f`
        # (and a test) sees each record as it comes
        result = live_session(
            NAME,
            args,
            write,
            on_idle=writer.flush if isinstance(writer, JsonlRecordWriter) else None,
        )
        ended = True
    finally:
        writer.close()  # whatever happened: a whole file of what was received
        if target is not None and (ended or written):
            target.commit()
        elif target is not None:  # never started (no server): the old file stays
            target.discard()
    extra = "" if result.written == result.messages else f" ({result.written} written)"
    if result.spilled:
        extra += f" ({result.spilled} by way of the spill file)"
    where = "stdout" if args.output == "-" else args.output
    print(f"lbparse record: {result.summary()} to {where}{extra}", file=sys.stderr)
    if result.complete:
        return 0
    print(f"lbparse record: {where} MAY BE MISSING MESSAGES (see above)", file=sys.stderr)
    return 1
