"""Read NATS traffic from captures and decode every message's envelope.

FILE is pcap or pcapng (Ethernet, Linux cooked v1/v2, BSD loopback or raw
IP; IPv4 and IPv6), or our own records from `lbparse record` (.jsonl or
.parquet). TCP connections are reassembled, the NATS protocol is parsed,
and each PUB, HPUB, MSG and HMSG becomes one record, in capture order:
JSON Lines with ts, src, dst, direction, verb, subject, reply, sid,
headers, payload (base64), and `envelope` or `error`.

Gaps in the capture (dropped packets, a short snap length), bytes that
are not NATS, damaged file blocks and resource limits hit are reported on
stderr; parsing resumes at the next control line (or file block), so no
record is ever made of bytes that did not arrive.

Exit status: 0 when every file was read whole, 1 when something was
reported (gap, cut message, protocol problem, truncated file, a line of a
recording that is not a record), 2 when a file could not be read at all
(the other files are still read).

examples:
  lbparse capture nats.pcap --subject 'foo.>'
  lbparse capture a.pcapng b.pcap --format table --stats
  lbparse capture traffic.parquet -q --stats
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from functools import partial
from typing import TextIO

from lbparse import jsonform
from lbparse.capture import CaptureError, CaptureReader, Notice, Record, Stats, default_layout
from lbparse.capture.records import DESCRIPTION, STATUS
from lbparse.cli.common import add_layout_argument, add_limit_arguments, limits_from

NAME = "capture"
HELP = "decode the NATS messages in pcap, pcapng or recorded files"

# Files smaller than this finish before a progress bar would be read.
PROGRESS_MIN_BYTES = 8 << 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="pcap, pcapng, or records written by `lbparse record` (.jsonl, .parquet)")
    add_layout_argument(p, default=default_layout())
    p.add_argument("--subject", metavar="PATTERN",
                   help="only messages whose subject matches (NATS wildcards * and >)")
    p.add_argument("--format", choices=("jsonl", "table"), default="jsonl",
                   help="one JSON object per message (default) or an aligned table")
    p.add_argument("--stats", action="store_true",
                   help="print a summary on stderr at the end: messages per subject, layout and "
                   "MsgType, errors by kind, gaps, bytes read")
    p.add_argument("-q", "--quiet", action="store_true", help="no records (with --stats: only the summary)")
    add_limit_arguments(p, ("max_payload", "max_frame", "max_depth", "max_reassembly"))


def _clock(ts: int) -> str:
    """A capture time (nanoseconds since the epoch) as UTC hh:mm:ss.nnnnnnnnn."""
    seconds, ns = divmod(ts, 1_000_000_000)
    try:
        hms = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%H:%M:%S")
    except (OverflowError, ValueError, OSError):  # a capture's clock can say anything
        return f"{ts / 1e9:<18.6g}"  # seconds
    return f"{hms}.{ns:09d}"


def table_row(rec: Record) -> str:
    t = _clock(rec.ts)
    arrow = f"{rec.src} -> {rec.dst}"
    extra = " ".join(x for x in (f"sid={rec.sid}" if rec.sid else "",
                                 f"reply={rec.reply}" if rec.reply else "") if x)
    headers = rec.headers
    if rec.traffic is not None:  # Liftbridge's own non-envelope traffic
        what = rec.traffic.summary()
    elif headers and headers[0][0] == STATUS:  # a NATS status message (503: no responders)
        what = " ".join(["status", *(v for k, v in headers[:2] if k in (STATUS, DESCRIPTION))])
    elif rec.envelope is not None:
        what = f"{rec.envelope.layout} {rec.envelope.msg_type_name}"
    elif rec.error is not None:
        what = f"error {rec.error.kind}"
    else:
        what = ""
    return (f"{t}  {arrow:<43} {rec.verb:<4} {rec.subject:<24} {len(rec.payload):>7}B  "
            f"{what}{'  ' + extra if extra else ''}")


def format_stats(stats: Stats) -> str:
    d = stats.to_json_dict()
    lines = [f"messages {d['messages']}  packets {d['packets']}  bytes read {d['bytes_read']}  "
             f"gaps {d['gaps']} ({d['gap_bytes']} bytes)"]
    for title, key in (("per subject", "per_subject"), ("per verb", "per_verb"),
                       ("per layout", "per_layout"), ("per MsgType", "per_msg_type"),
                       ("errors by kind", "errors"), ("notices", "notices"),
                       ("limits hit", "limits"), ("control lines", "controls")):
        if d[key]:
            lines.append(f"{title}:")
            lines += [f"  {k:<32} {v}" for k, v in d[key].items()]
    return "\n".join(lines)


class Progress:
    """A one-line progress bar on a terminal; silent anywhere else."""

    def __init__(self, out: TextIO, name: str, total: int) -> None:
        self.out, self.name, self.total = out, name, total
        self.on = out.isatty() and total >= PROGRESS_MIN_BYTES
        self.last = 0.0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if not self.on or now - self.last < 0.2:
            return
        self.last = now
        frac = min(done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        self.out.write(f"\r{self.name[-30:]} [{bar:<30}] {frac:4.0%} "
                       f"{done / 1e6:.1f}/{self.total / 1e6:.1f} MB")
        self.out.flush()

    def done(self) -> None:
        if self.on:
            self.out.write("\r\033[K")
            self.out.flush()


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except BrokenPipeError:
        # The reader of our output left (`| head`): not an error. Point
        # stdout at nothing so the interpreter's final flush stays quiet.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(args: argparse.Namespace) -> int:
    total = Stats()
    reported = 0

    def notice(n: Notice, name: str) -> None:
        nonlocal reported
        reported += 1
        print(f"lbparse capture: {name}: {n}", file=sys.stderr)

    write = sys.stdout.write
    limits = limits_from(args)
    unreadable = 0
    for name in args.files:
        try:
            reader = CaptureReader(name, layout=args.layout, subject=args.subject, limits=limits,
                                   on_notice=partial(notice, name=name))
        except (CaptureError, OSError) as exc:
            # One file that cannot be read must not cost the files after it.
            unreadable += 1
            print(f"lbparse capture: {_reason(exc)}", file=sys.stderr)
            continue
        bar = Progress(sys.stderr, name, reader.size)
        try:
            for i, rec in enumerate(reader):
                if not args.quiet:
                    if args.format == "jsonl":
                        write(jsonform.dumps(rec.to_json_dict()) + "\n")
                    else:
                        write(table_row(rec) + "\n")
                if bar.on and not i & 1023:
                    bar.update(reader.bytes_read)
        except CaptureError as exc:  # unreadable from the start (a bad file header)
            unreadable += 1
            print(f"lbparse capture: {_reason(exc)}", file=sys.stderr)
        finally:
            bar.done()
        total.merge(reader.stats)
    sys.stdout.flush()
    if args.stats:
        print(format_stats(total), file=sys.stderr)
    return 2 if unreadable else 1 if reported else 0


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc)
