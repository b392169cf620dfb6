"""Read NATS traffic from captures and decode every message's envelope.

FILE is pcap or pcapng (Ethernet, Linux cooked v1/v2, BSD loopback or raw
IP; IPv4 and IPv6), or our own records from `lbparse record` (.jsonl or
.parquet); `-` is standard input, read as it arrives (`tcpdump -U -w - |
lbparse capture -`; each record is written out as soon as it is
complete). TCP connections are reassembled, the NATS protocol is parsed,
and each PUB, HPUB, MSG and HMSG becomes one record, in capture order:
JSON Lines with ts, src, dst, direction, verb, subject, reply, sid,
headers, payload (base64), and `envelope` or `error`.

Cleartext HTTP/2 (gRPC, Liftbridge's client API) is read too, on any
port: one record per gRPC message ({"grpc": "message", ...}: the call's
stream id, method, direction, type and the message as JSON) and one per
call ({"grpc": "call", ...}: method, request and response messages,
grpc-status and grpc-message, times of request, first response and
trailers, how it ended), in capture order among the NATS records (not
with --subject; -c counts NATS messages only).

Gaps in the capture (dropped packets, a short snap length), bytes that
are not NATS, damaged file blocks and resource limits hit are reported on
stderr; parsing resumes at the next control line (or file block), so no
record is ever made of bytes that did not arrive.

Without --format: a table when the output is a terminal, JSON Lines
elsewhere (a pipe, a file, -o FILE).
The table view shows capture times in RFC 3339, UTC. --stats folds
subjects that differ only in a random part (reply inboxes, Raft RPC
inboxes, per-partition replication subjects) into one NATS wildcard row
each and shows the --top N rows of each section (--all: every row, every
subject), the NATS status messages (503s) by the subject of their request,
and the connections by their CONNECT name.

Exit status: 0 when every file was read whole, 1 when a problem was
reported (gap, cut message, protocol problem, truncated file, a limit, a
line of a recording that is not a record), 2 when a file could not be read
at all (the other files are still read). Notes of normal client or capture
behaviour (a cancelled gRPC call, a call cut by the capture's end) are
counted in one line per file, not problems.

examples:
  lbparse capture nats.pcap --subject 'foo.>'
  lbparse capture a.pcapng b.pcap --format table --stats
  lbparse capture traffic.parquet -q --stats
  lbparse capture a.pcapng --tables out/
  duckdb -c "FROM 'out/messages/*.parquet'"   # the tables, queried
  tcpdump -i lo -U -w - port 4222 | lbparse capture - --format table
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from typing import TextIO

from lbparse.capture import CaptureError, CaptureReader, Notice, Record, Stats, default_layout
from lbparse.capture.grpc import CLIENT_TO_SERVER, SERVER_TO_CLIENT, GrpcCall, GrpcMessage
from lbparse.capture.pipe import STDIN, input_name
from lbparse.capture.records import DESCRIPTION, NO_TIME, STATUS
from lbparse.capture.statsview import DEFAULT_TOP, ClusterView, section
from lbparse.cli.common import (
    add_layout_argument,
    add_limit_arguments,
    add_terminal_format_arguments,
    format_for_output,
    limits_from,
)
from lbparse.cli.output import add_output_argument, rfc3339
from lbparse.cli.status import DATA, OK, USAGE, UsageError, exit_status, warn
from lbparse.codec import jsonform
from lbparse.digits import ascii_int
from lbparse.errors import InputError
from lbparse.extras import need
from lbparse.outputs import STDOUT
from lbparse.textform import msg_type_word, printable

NAME = "capture"

# Files smaller than this finish before a progress bar would be read.
PROGRESS_MIN_BYTES = 8 << 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse capture`'s options to its parser.

    Args:
        p: The command's parser.
    """
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="pcap, pcapng, or records written by `lbparse record` (.jsonl, .parquet); '-' = stdin",
    )
    add_layout_argument(p, default=default_layout())
    p.add_argument(
        "--subject",
        metavar="PATTERN",
        help="only messages whose subject matches (NATS wildcards * and >)",
    )
    p.add_argument(
        "-c",
        "--count",
        type=_count,
        metavar="N",
        help="stop after N messages (of all the files, counted after --subject), as tshark -c",
    )
    p.add_argument(
        "--lenient",
        action="store_true",
        help="accept what the upstream server accepts, with warnings (as decode)",
    )
    p.add_argument(
        "--no-verify-crc",
        dest="verify_crc",
        action="store_false",
        help="do not check the CRC-32C (as decode)",
    )
    add_terminal_format_arguments(p, jsonl="one JSON object per message", table="an aligned table")
    p.add_argument(
        "--stats",
        action="store_true",
        help="print a summary on stderr at the end: messages per subject (folded), "
        "layout and MsgType, errors by kind, gaps, bytes read, 503s, connections",
    )
    p.add_argument(
        "--top",
        type=_positive,
        default=DEFAULT_TOP,
        metavar="N",
        help=f"--stats: the N largest rows of each section (default {DEFAULT_TOP})",
    )
    p.add_argument(
        "--all", action="store_true", help="--stats: every row, every subject as it is (no folding)"
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no records (with --stats: only the summary)"
    )
    add_output_argument(p, inputs="files", what="the records")
    p.add_argument(
        "--tables",
        metavar="DIR",
        help="instead of records, write the decoded tables (messages, one per "
        "payload type, the Raft traffic) to a new directory DIR as Parquet, "
        "DIR/<table>/part-00000.parquet, as `lbparse pipeline` writes them "
        "(without Spark)",
    )
    p.add_argument(
        "--json-columns",
        action="store_true",
        help="--tables: also the JSON text columns of the Raft traffic (traffic_json, "
        "fields_json, command_json), as `lbparse pipeline --json-columns` writes them",
    )
    add_limit_arguments(p, ("max_payload", "max_frame", "max_depth", "max_reassembly"))


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of rows, 1 or more")
    return n


def _count(text: str) -> int:
    count = ascii_int(text.strip())
    if not count:
        raise argparse.ArgumentTypeError(
            f"a count is a whole number of messages, 1 or more, not {text!r}"
        )
    return count


def table_row(rec: Record) -> str:
    """The table row of a record (`--format table`), escaped for the terminal.

    Args:
        rec: A capture record.

    Returns:
        One line: time, endpoints, verb, subject, size and what it decoded to.
    """
    # a recording's time that did not fit (said as a bad_record): no time, not 1677
    t = "(no time)".ljust(30) if rec.ts == NO_TIME else rfc3339(rec.ts)
    arrow = f"{rec.src} -> {rec.dst}"
    extra = " ".join(
        x
        for x in (f"sid={rec.sid}" if rec.sid else "", f"reply={rec.reply}" if rec.reply else "")
        if x
    )
    headers = rec.headers
    if rec.traffic is not None:  # Liftbridge's own non-envelope traffic
        what = rec.traffic.summary()
    elif headers and headers[0][0] == STATUS:  # a NATS status message (503: no responders)
        what = " ".join(["status", *(v for k, v in headers[:2] if k in (STATUS, DESCRIPTION))])
    elif rec.envelope is not None:
        what = f"{rec.envelope.layout} {msg_type_word(rec.envelope.msg_type_name)}"
    elif rec.error is not None:
        what = f"error {rec.error.kind}"
    else:
        what = ""
    # Subjects, replies and header values are the input's: escaped for the terminal.
    return printable(
        f"{t}  {arrow:<43} {rec.verb:<4} {rec.subject:<24} {len(rec.payload):>7}B  "
        f"{what}{'  ' + extra if extra else ''}"
    )


def grpc_row(item: GrpcMessage | GrpcCall) -> str:
    """The table row of a gRPC message or call.

    Args:
        item: A gRPC message, or a call as it ends.

    Returns:
        One line, escaped for the terminal.
    """
    if isinstance(item, GrpcMessage):
        arrow = f"{item.src} -> {item.dst}"
        what = f"error {item.error}" if item.error is not None else (item.type or "")
        return printable(
            f"{rfc3339(item.ts or 0)}  {arrow:<43} GRPC {item.method or '?':<24} "
            f"{item.length:>7}B  {what}  stream={item.stream_id} #{item.index}"
        )
    arrow = f"{item.client} -> {item.server}"
    took = ""
    if item.request_ts is not None and item.end_ts is not None:
        took = f" {(item.end_ts - item.request_ts) / 1e6:.3f}ms"
    counts = f"{item.counts[CLIENT_TO_SERVER]}->{item.counts[SERVER_TO_CLIENT]}"
    # a call cut before its trailers has no status: said so, not as Python's None
    status = "no status" if item.grpc_status is None else f"status={item.grpc_status}"
    return printable(
        f"{rfc3339(item.end_ts or 0)}  {arrow:<43} CALL {item.method_name or '?':<24} "
        f"{counts:>8}  {status} {item.end}{took}  stream={item.stream_id}"
    )


def format_stats(
    stats: Stats,
    view: ClusterView | None = None,
    top: int | None = None,
    grpc: dict[str, int] | None = None,
) -> str:
    """The --stats summary.

    Args:
        stats: The reader's counts, over every file.
        view: The records' ClusterView: subjects folded into patterns, NATS
            statuses and connections by CONNECT name; None for the plain counts.
        top: At most that many rows per section (None: all, subjects unfolded).
        grpc: gRPC calls by method and how they ended (`grpc_key`) -> count.

    Returns:
        The summary's lines, joined.
    """
    d = stats.to_json_dict()
    lines = [
        f"messages {d['messages']}  packets {d['packets']}  bytes read {d['bytes_read']}  "
        f"gaps {d['gaps']} ({d['gap_bytes']} bytes)"
    ]
    if view is not None and top is not None:
        lines += section("per subject", view.subject_rows(), top, view.fold_note())
    else:
        lines += section("per subject", d["per_subject"], top)
    for title, key in (
        ("per verb", "per_verb"),
        ("per layout", "per_layout"),
        ("per MsgType", "per_msg_type"),
        ("errors by kind", "errors"),
        ("notices", "notices"),
        ("notes (not problems)", "notes"),
        ("limits hit", "limits"),
        ("control lines", "controls"),
    ):
        lines += section(title, d[key], top)
    if view is not None:
        lines += section(
            "NATS status messages", view.statuses, top, "by the subject pattern of the request"
        )
        lines += section(
            "connections by CONNECT name",
            view.by_name(stats.connect_names),
            top,
            "messages published and delivered",
        )
    lines += section("gRPC calls", grpc or {}, top, "by method and grpc-status, or how they ended")
    return "\n".join(lines)


class Notes:
    """An input's information notices (Notice.info).

    A cancelled call, a call cut by the capture's end...: counted, and said in
    one line when the input is done, never a problem (the exit status stays 0
    for them).
    """

    def __init__(self) -> None:
        self.count = 0
        self.first: Notice | None = None

    def add(self, n: Notice) -> None:
        """Count one information notice.

        Args:
            n: The notice (the first one is quoted).
        """
        self.count += 1
        self.first = self.first or n

    def say(self, name: str) -> None:
        """Say the input's notices in one line on stderr, if any, and start over.

        Args:
            name: The input's name, as the line says it.
        """
        if self.count:
            warn(
                NAME,
                f"{name}: {self.count} note{'s' if self.count > 1 else ''} of normal "
                f"client or capture behaviour, not problems (the first: {self.first})",
            )
        self.count, self.first = 0, None


def grpc_key(call: GrpcCall) -> str:
    """A call's row in --stats: its method and status (or how it ended without one).

    Args:
        call: The gRPC call, ended.

    Returns:
        "METHOD status N", or "METHOD END" without a status.
    """
    end = f"status {call.grpc_status}" if call.grpc_status is not None else call.end
    return f"{call.method_name or '(method unknown)'} {end}"


class Progress:
    """A one-line progress bar on a terminal; silent anywhere else.

    Shown only for files of PROGRESS_MIN_BYTES or more.

    Args:
        out: Where to draw it (stderr); it draws only if this is a terminal.
        name: The input's name (its last 30 characters are shown).
        total: The input's size in bytes.
    """

    def __init__(self, out: TextIO, name: str, total: int) -> None:
        self.out, self.name, self.total = out, name, total
        self.on = out.isatty() and total >= PROGRESS_MIN_BYTES
        self.last = 0.0

    def update(self, done: int) -> None:
        """Redraw the bar (at most five times a second).

        Args:
            done: Bytes read so far.
        """
        now = time.monotonic()
        if not self.on or now - self.last < 0.2:
            return
        self.last = now
        frac = min(done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        self.out.write(
            f"\r{self.name[-30:]} [{bar:<30}] {frac:4.0%} "
            f"{done / 1e6:.1f}/{self.total / 1e6:.1f} MB"
        )
        self.out.flush()

    def done(self) -> None:
        """Clear the bar's line."""
        if self.on:
            self.out.write("\r\033[K")
            self.out.flush()


def run(args: argparse.Namespace) -> int:
    """Run `lbparse capture`: each file's records to stdout (or --tables DIR).

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 ok, 1 if a notice (a data problem) was reported or a
        file was empty, 2 if a file could not be read at all.

    Raises:
        UsageError: --lenient with --layout auto.
        InputError: '-' (stdin) given more than once.
    """
    if args.lenient and args.layout == "auto":  # as lbparse.decode refuses it, before any reading
        raise UsageError(
            "bad_option",
            "--lenient needs a named --layout (auto tells generations apart by "
            "what each accepts; lenient would blur that)",
        )
    if args.tables is not None:
        return run_tables(args)
    if args.json_columns:  # the records' JSON holds all of it already (`liftbridge`)
        raise UsageError("bad_option", "--json-columns goes with --tables DIR")
    if args.files.count(STDIN) > 1:
        raise InputError("bad_option", "'-' (stdin) can be read only once")
    format_for_output(args)
    total = Stats()
    status = OK
    limits = limits_from(args)
    reported = 0
    view = ClusterView() if args.stats else None

    notes = Notes()

    def notice(n: Notice, name: str) -> None:
        nonlocal reported
        if n.info:  # normal behaviour: counted, said once per file, not a problem
            notes.add(n)
            return
        reported += 1
        warn(NAME, f"{input_name(name)}: {n}")

    grpc_calls: dict[str, int] = {}

    def grpc(item: GrpcMessage | GrpcCall) -> None:
        if isinstance(item, GrpcCall):
            key = grpc_key(item)
            grpc_calls[key] = grpc_calls.get(key, 0) + 1
        if args.quiet or args.subject is not None:
            return
        if args.format == "jsonl":
            sys.stdout.write(jsonform.dumps(item.to_json_dict()) + "\n")
        else:
            sys.stdout.write(grpc_row(item) + "\n")

    left = args.count  # messages still to write; None: all
    for name in args.files:
        if left == 0:
            break
        try:
            reader = CaptureReader(
                name,
                layout=args.layout,
                subject=args.subject,
                limits=limits,
                on_notice=functools.partial(notice, name=name),
                verify_crc=args.verify_crc,
                lenient=args.lenient,
                on_grpc=grpc,
            )
            left = read_one(reader, args, left, view)
            notes.say(input_name(name))
        except BrokenPipeError:
            raise
        except (CaptureError, OSError) as exc:  # the file as a whole cannot be read
            warn(
                NAME,
                str(exc)
                if isinstance(exc, CaptureError)
                else f"{input_name(name)}: cannot read: {exc.strerror or exc}",
            )
            status = max(status, exit_status(exc) or USAGE)
            continue
        total.merge(reader.stats)
        if not (reader.stats.bytes_read or reader.stats.packets or reader.stats.messages):
            warn(NAME, f"{reader.name}: empty (0 bytes): nothing to read")
            reported += 1
    if reported:
        status = max(status, DATA)
    sys.stdout.flush()
    if args.stats:
        print(
            format_stats(total, view, None if args.all else args.top, grpc_calls), file=sys.stderr
        )
    return status


# What --tables cannot honour: its tables are the whole of each file.
_NOT_WITH_TABLES = (
    ("subject", "--subject"),
    ("count", "-c/--count"),
    ("stats", "--stats"),
    ("quiet", "-q/--quiet"),
)


def run_tables(args: argparse.Namespace) -> int:
    """--tables DIR: the files through the columnar core into Parquet tables.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 ok, 1 if the reading found problems, 2 if a file
        could not be read at all.

    Raises:
        UsageError: An option that does not go with --tables was given, or
            '-' (stdin) as a file.
    """
    for dest, option in _NOT_WITH_TABLES:
        if getattr(args, dest):
            raise UsageError(
                "bad_option",
                f"{option} does not go with --tables (the tables hold every "
                "message: filter them where you read them)",
            )
    if args.output != STDOUT or args.format not in (None, "jsonl"):
        raise UsageError(
            "bad_option",
            "--tables writes its own directory: -o/--output and --format do not go with it",
        )
    if STDIN in args.files:
        raise UsageError(
            "bad_option", "--tables reads files, not '-' (stdin): write the capture to a file first"
        )
    # pyarrow's, loaded for --tables only: the other runs start 0.2 s sooner
    out = need("lbparse.cli.tables_out")
    out.check_tables_dir(args.tables, args.files)
    done = out.write_tables(
        args.tables,
        args.files,
        args.layout,
        verify_crc=args.verify_crc,
        lenient=args.lenient,
        limits=limits_from(args),
        on_problem=lambda kind, text: warn(NAME, text),
        json_columns=args.json_columns,
    )
    for name, said in done.notes.items():
        notes = Notes()
        for n in said:
            notes.add(n)
        notes.say(input_name(name))
    rows = ", ".join(f"{t} {n:,}" for t, n in done.rows.items())
    print(f"{args.tables}: {len(done.rows)} tables ({rows})", file=sys.stderr)
    kinds = {k for k, _ in done.problems}
    if kinds & {"unreadable", "unknown_format"}:
        return USAGE  # a file could not be read at all, as without --tables
    return DATA if done.problems else OK


def read_one(
    reader: CaptureReader, args: argparse.Namespace, left: int | None, view: ClusterView | None
) -> int | None:
    """Write the records of one input and count them in `view`.

    Args:
        reader: The input's CaptureReader.
        args: The parsed command line (quiet, format).
        left: At most this many records are written (None: all).
        view: The ClusterView counting the records, or None.

    Returns:
        How many more records may follow (None: no limit).
    """
    write = sys.stdout.write
    # From a pipe (a live tcpdump) each record goes out when it is complete.
    live = reader.path == STDIN
    bar = Progress(sys.stderr, reader.name, reader.size)
    try:
        for i, rec in enumerate(reader):
            if view is not None:
                view.add(rec)
            if not args.quiet:
                if args.format == "jsonl":
                    write(jsonform.dumps(rec.to_json_dict()) + "\n")
                else:
                    write(table_row(rec) + "\n")
                if live:
                    sys.stdout.flush()
            if bar.on and not i & 1023:
                bar.update(reader.bytes_read)
            if left is not None:
                left -= 1
                if left == 0:
                    break  # at once: a live pipe is not waited on for one more
    finally:
        bar.done()
    return left
