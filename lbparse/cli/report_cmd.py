"""Write one HTML page of what happened in a Liftbridge cluster.

INPUT is a capture (pcap, pcapng; `-` reads one from stdin), a recording
of `lbparse record` (.jsonl, .parquet), the output directory of `lbparse
pipeline` or `capture --tables` (DIR or DIR/messages), or Liftbridge data
directories (a node's, or a folder of them: segments, checkpoints,
raft.db). Every input is read once, in a streaming pass that keeps
counts per time bin (the bins widen with the time span, so the page stays
a few MB whatever the input), and the page shows:

  traffic       messages per second by MsgType and by stream, bytes per second
  latency       each Publish paired with its Ack (ack inbox, correlation id):
                the distribution and over time by AckPolicy; unacked publishes
  client        when a capture holds the gRPC API (cleartext HTTP/2): latency
                per method, PublishAsync's responses by correlation id per
                AckPolicy, error statuses over time, subscriptions, each
                publish joined to its NATS Publish and Ack, and metadata
                lookups during and after failovers
  partitions    leader and leader epoch of each partition over time (from the
                leaders' ReplicationResponses, ISR changes, the Raft log where
                decoded), leader changes, follower lag, ISR changes
  cluster       NATS 503s (requests nobody answered: a node was down), the
                metadata leader, Raft elections and metadata operations,
                nodes gone silent (none of their connections said anything)
  data dirs     messages stored by stream over time, each replica's offsets,
                HW and leader epochs; raft.db's ops name each epoch's leader
  problems      envelopes that did not decode, capture notices and damage on
                disk, over time, with the first examples of each kind

The page is self-contained (Vega-Lite charts, their runtime inlined): it
opens without a network. --json writes the data behind every chart (the
page is rendered from exactly that data; times of charts in milliseconds,
exact times as *_ns, nanoseconds since the epoch written as decimal
strings by lbparse's JSON convention, with their UTC text as *_utc);
--screenshot takes a PNG of the page in headless Chromium.

Outputs (-o, --json, --screenshot) are checked before any input is read,
as coreutils treat them: `-` is standard output; a device or a FIFO
(-o /dev/null) is written in place; a regular file is replaced whole
(a new file beside it, renamed over it); a directory, an input, and a
symbolic link to a file are refused (a link to a device, as /dev/stdout,
is followed unless it is another user's in a sticky shared directory).

Exit status: 0 when every input was read whole, 1 when the capture reader
noticed a problem (gaps, cut messages, bytes that are not NATS, a limit)
or a data directory holds damage (all shown in the page, as are envelopes
that do not decode), 2 when an input could not be read or the options are
wrong. Notes of normal client or capture behaviour (a cancelled gRPC call,
a call cut by the capture's end) are shown and counted, not problems.

examples:
  lbparse report cluster.pcap -o report.html
  lbparse report a.pcapng b.pcap --json report.json -o report.html
  lbparse report out/pipeline -o report.html --screenshot report.png
  tcpdump -w - -c 10000 port 4222 | lbparse report - -o report.html
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from typing import Any

from lbparse.capture import CaptureError, Notice, default_layout
from lbparse.cli.capture_cmd import Progress
from lbparse.cli.common import add_layout_argument, add_limit_arguments, limits_from
from lbparse.cli.status import DATA, OK, silence_stdout, status_of, warn
from lbparse.codec import jsonform
from lbparse.errors import InputError
from lbparse.extras import need
from lbparse.outputs import FileOutput, check_file, check_files
from lbparse.report.browser import BrowserError, look
from lbparse.report.build import build_model
from lbparse.report.inputs import ReadOptions
from lbparse.textform import printable

NAME = "report"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse report`'s options to its parser.

    Args:
        p: The command's parser.
    """
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="pcap, pcapng, .jsonl/.parquet recordings ('-' = stdin), "
        "`lbparse pipeline` output, or Liftbridge data directories",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="HTML",
        help="the page to write ('-' = stdout; default: report.html unless only --json is asked)",
    )
    p.add_argument(
        "--json",
        metavar="FILE",
        dest="json_out",
        help="also write the data behind every chart as JSON ('-' = stdout)",
    )
    p.add_argument(
        "--screenshot",
        metavar="PNG",
        help="open the page in headless Chromium and save a full-page PNG of it",
    )
    p.add_argument(
        "--no-raft",
        dest="raft",
        action="store_false",
        help="do not decode the Raft transport (faster; no elections or log ops)",
    )
    add_layout_argument(p, default=default_layout())
    add_limit_arguments(
        p, ("max_payload", "max_frame", "max_depth", "max_reassembly", "max_raft_db")
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or summary on stderr")


def run(args: argparse.Namespace) -> int:
    """Run `lbparse report`: the HTML page (and --json model, --screenshot) of the inputs.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 ok, 1 if the reading noticed problems, an input was
        empty or a data directory had findings, 2 if an input is no capture.

    Raises:
        InputError: '-' (stdin) given more than once, or --screenshot without
            a page in a file (exit status 2).
    """
    if args.inputs.count("-") > 1:
        raise InputError("bad_option", "'-' (stdin) can be read only once")
    output = args.output or (None if args.json_out else "report.html")
    # The page needs Altair (the report extra): missing, said before any input is read.
    render = need("lbparse.report.render") if output else None
    if args.screenshot and not output:
        raise InputError("bad_option", "--screenshot needs the page: give -o HTML")
    if args.screenshot and output == "-":
        raise InputError(
            "bad_option", "--screenshot needs the page in a file, not on standard output"
        )
    # Every output checked before any input is read (a directory, an input,
    # a link: refused now, not after the work).
    outs = check_files(
        [("-o", output), ("--json", args.json_out), ("--screenshot", args.screenshot)], args.inputs
    )
    noticed = 0
    bar: Progress | None = None

    def progress(name: str, done: int, total: int) -> None:
        nonlocal bar
        if args.quiet or not total:
            return
        if bar is None or bar.name != name:
            if bar is not None:
                bar.done()
            bar = Progress(sys.stderr, name, total)
        bar.update(done)

    def notice(name: str, n: Notice) -> None:
        nonlocal noticed
        noticed += not n.info  # a note (normal behaviour) is no problem

    start = time.monotonic()
    try:
        model = build_model(
            args.inputs,
            ReadOptions(
                layout=args.layout, limits=limits_from(args), on_progress=progress, on_notice=notice
            ),
            raft=args.raft,
        )
    except CaptureError as exc:  # an input that is no capture at all
        warn(NAME, str(exc))
        return status_of(exc)
    finally:
        if bar is not None:
            bar.done()
    if "--json" in outs:
        _write_json(model, outs["--json"])
    if render is not None and "-o" in outs:
        _write(outs["-o"], render.render_html(model))
    if "--screenshot" in outs and output:
        _screenshot(output, outs["--screenshot"])
    if not args.quiet:
        _summary(model, outs, time.monotonic() - start)
    empty = _empty_files(args.inputs)
    for name in empty:  # said as capture says it: nothing in it to report on
        warn(NAME, f"{name}: empty (0 bytes): nothing to read")
    return DATA if noticed or empty or model["storage"]["findings"] else OK


def _empty_files(inputs: list[str]) -> list[str]:
    """The inputs that are regular files of 0 bytes (a capture cut before its header)."""
    empty = []
    for name in inputs:
        try:
            st = os.stat(name)
        except OSError:
            continue  # stdin, a folder's absence: the readers say it
        if stat.S_ISREG(st.st_mode) and st.st_size == 0:
            empty.append(name)
    return empty


def _write_json(model: dict[str, Any], out: FileOutput) -> None:
    # lbparse's JSON convention: exact times (the *_ns fields) as decimal strings.
    _write(out, jsonform.dumps(model, indent=1) + "\n")


def _write(out: FileOutput, text: str) -> None:
    # lbparse.outputs: stdout, a device in place, or a file replaced whole
    # through a fresh file of a random name (issue #19: `<path>.tmp<pid>`
    # could be planted in /tmp).
    try:
        out.write(text)
    except BrokenPipeError:
        # The reader left (`| head`): not an error, and the other outputs
        # are still written (lbparse.cli.main would end the run here).
        silence_stdout()


def _write_text(path: str, text: str) -> None:
    """`text` to the output file `path`, checked as -o is."""
    _write(check_file(path, "-o"), text)


def _screenshot(page: str, png: FileOutput) -> None:
    try:
        seen = look(page)
    except BrowserError as exc:
        raise InputError("bad_option", f"--screenshot: {exc}") from None
    png.write(seen.png)
    for err in seen.errors:
        print(f"lbparse report: the page in Chromium: {err}", file=sys.stderr)
    if seen.rendered != "ok":
        print(f"lbparse report: the page in Chromium: {seen.rendered}", file=sys.stderr)


def _summary(model: dict[str, Any], outs: dict[str, FileOutput], seconds: float) -> None:
    t, lat, parts = model["totals"], model["latency"], model["partitions"]
    changes = [c for c in parts["leader_changes"] if c["leader_changed"]]
    inferred = sum(1 for c in changes if c.get("inferred"))
    dated = (
        (f" ({inferred} dated by the first write of their epoch in data directories: inferred)")
        if inferred
        else ""
    )
    lines = [
        f"lbparse report: {t.get('messages', 0):,} messages from {len(model['inputs'])} "
        f"input(s) in {seconds:.1f} s; {lat['acked']:,} publishes acked, "
        f"{lat['unacked']:,} never acked; {len(changes)} partition leader changes{dated}; "
        f"{model['cluster']['no_responders_total']:,} NATS 503s; "
        f"{model['problems']['total']:,} problems"
        + (
            f" ({notes:,} notes of normal client or capture behaviour, not problems)"
            if (notes := model["problems"].get("notes", {}).get("total"))
            else ""
        )
    ]
    for option in ("-o", "--json", "--screenshot"):
        out = outs.get(option)
        if out is None or out.kind == "stdout":
            continue
        size = os.path.getsize(out.path) if out.kind == "replace" else None
        lines.append(
            f"lbparse report: wrote {out.path}"
            + (f" ({size / 1e6:.1f} MB)" if option == "-o" and size is not None else "")
        )
    print("\n".join(printable(x) for x in lines), file=sys.stderr)  # paths are the user's
