"""Subscribe to a NATS server and print every message, decoded, as it arrives.

Each message is one JSON line, the shape of `lbparse capture` records
(verb MSG or HMSG, direction server_to_client), or a table row. The tap
stops after --count messages, after --duration seconds, or on Ctrl-C.
Connection options are named as the `nats` command line names them.

When the connection is lost, the tap says so on stderr (when, why), and
reconnects as the NATS clients do, for at most --reconnect-timeout
seconds; back, it says after how long and about how many messages may
have been published meanwhile (NATS does not redeliver them: an estimate
at the rate seen before). Messages are decoded and printed off the
network reader (a backlog in memory, spilled to a private file past
--backlog-mb), so the server never drops the tap as a slow consumer.
Ctrl-C, SIGTERM and SIGHUP stop it after printing what was received; a
second signal stops at once. Exit status: 0 when nothing can be missing,
1 when messages may be missing (the connection could not be made, was
lost at any time or never came back, the client library dropped some, or
some received were not printed), 2 for a bad argument (an invalid subject
or URL).

examples:
  lbparse tap nats://127.0.0.1:4222 'foo.>'
  lbparse tap nats://demo.nats.io:4222 lb.x lb.y --count 10 --format table
  lbparse tap tls://nats.example:4222 '>' --creds me.creds --tlsca ca.pem
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from lbparse.capture.reader import default_layout
from lbparse.capture.records import Record
from lbparse.cli.capture_cmd import table_row
from lbparse.cli.common import add_layout_argument, server_url, subject
from lbparse.cli.output import add_format_arguments, add_output_argument
from lbparse.cli.status import DataError
from lbparse.codec import jsonform
from lbparse.errors import InputError
from lbparse.live import (
    DEFAULT_BACKLOG_BYTES,
    DEFAULT_RECONNECT_TIMEOUT,
    ConnectOptions,
    LiveResult,
    check_credentials,
    shown_url,
    subscribe,
)
from lbparse.textform import printable

NAME = "tap"


def add_connection_arguments(p: argparse.ArgumentParser) -> None:
    """SERVER, SUBJECT..., --count/--duration and the `nats` CLI's connection options.

    Args:
        p: The command's parser (tap's or record's).
    """
    p.add_argument(
        "server",
        metavar="nats://HOST:PORT",
        type=server_url,
        help="the NATS server URL (also tls://, ws://, wss://; HOST:PORT means nats://)",
    )
    p.add_argument(
        "subjects",
        nargs="+",
        metavar="SUBJECT",
        type=subject,
        help="subjects to subscribe to (NATS wildcards * and >)",
    )
    p.add_argument("--count", type=int, metavar="N", help="stop after N messages")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    g = p.add_argument_group("connection (as the nats CLI names them)")
    g.add_argument("--creds", metavar="FILE", help="user credentials file (JWT and NKey seed)")
    g.add_argument("--nkey", metavar="FILE", help="NKey seed file")
    g.add_argument("--user", help="user name")
    g.add_argument("--password", help="password")
    g.add_argument("--token", help="authentication token")
    g.add_argument("--tlscert", metavar="FILE", help="TLS client certificate")
    g.add_argument("--tlskey", metavar="FILE", help="TLS client key")
    g.add_argument("--tlsca", metavar="FILE", help="CA certificate to verify the server with")
    g.add_argument("--tlsfirst", action="store_true", help="TLS handshake before the server's INFO")
    g.add_argument(
        "--timeout", type=float, default=5.0, metavar="S", help="connect timeout (default 5 s)"
    )
    g.add_argument("--connection-name", default="lbparse", help="connection name the server shows")
    p.add_argument(
        "--backlog-mb",
        type=float,
        default=DEFAULT_BACKLOG_BYTES / (1 << 20),
        metavar="MB",
        help="messages received and not yet decoded and written are "
        "held in memory up to MB, then spilled to a private temporary file: the "
        "network is never kept waiting, nothing received is dropped (default "
        f"{DEFAULT_BACKLOG_BYTES >> 20})",
    )
    g.add_argument(
        "--reconnect-timeout",
        type=float,
        default=DEFAULT_RECONNECT_TIMEOUT,
        metavar="S",
        help="after a lost connection, try to reconnect for S seconds, "
        f"then give up with exit status 1 (default {DEFAULT_RECONNECT_TIMEOUT:g}; "
        "0: never reconnect)",
    )


def connect_options(args: argparse.Namespace) -> ConnectOptions:
    """The connection options the command line asks for, checked.

    Args:
        args: The parsed command line.

    Returns:
        The ConnectOptions for subscribe().

    Raises:
        InputError: --count below 1, --reconnect-timeout below 0 or
            --backlog-mb not above 0 (exit status 2); check_credentials raises
            for credentials that cannot be used.
    """
    if args.count is not None and args.count < 1:
        raise InputError("bad_option", "--count must be at least 1")
    if args.reconnect_timeout < 0:
        raise InputError("bad_option", "--reconnect-timeout must be 0 or more seconds")
    if args.backlog_mb <= 0:
        raise InputError("bad_option", "--backlog-mb must be more than 0")
    options = ConnectOptions(
        creds=args.creds,
        nkey=args.nkey,
        user=args.user,
        password=args.password,
        token=args.token,
        tlscert=args.tlscert,
        tlskey=args.tlskey,
        tlsca=args.tlsca,
        tlsfirst=args.tlsfirst,
        timeout=args.timeout,
        name=args.connection_name,
    )
    check_credentials(options)
    return options


def ready_message(command: str, args: argparse.Namespace) -> None:
    """Say on stderr that the subscription is in place (scripts wait for this line).

    Args:
        command: The command's name.
        args: The parsed command line (server and subjects).
    """
    # Scripts (and the tests) wait for this line before publishing.
    print(
        f"lbparse {command}: listening on {shown_url(args.server)} for {' '.join(args.subjects)}",
        file=sys.stderr,
        flush=True,
    )


def event_printer(command: str) -> Callable[[str], None]:
    """Connection losses and returns, as lines on stderr.

    Args:
        command: The command's name, which each line starts with.

    Returns:
        A function that says one line.
    """

    def say(line: str) -> None:
        print(f"lbparse {command}: {printable(line)}", file=sys.stderr, flush=True)

    return say


def live_session(
    command: str,
    args: argparse.Namespace,
    on_record: Callable[[Record], None],
    on_idle: Callable[[], None] | None = None,
) -> LiveResult:
    """Run the subscription of `args` (tap and record share it).

    Args:
        command: The command's name, for its lines on stderr.
        args: The parsed command line (server, subjects, connection options,
            layout, count, duration, backlog).
        on_record: Called with each message received, decoded.
        on_idle: The output's flush (subscribe() calls it when it has caught
            up), or None.

    Returns:
        How the session went: messages received and written, whether complete.

    Raises:
        DataError: The server cannot be reached (one line, status 1, as the
            nats CLI).
    """
    try:
        return asyncio.run(
            subscribe(
                args.server,
                args.subjects,
                on_record,
                options=connect_options(args),
                layout=args.layout,
                count=args.count,
                duration=args.duration,
                on_ready=lambda: ready_message(command, args),
                reconnect_timeout=args.reconnect_timeout,
                on_event=event_printer(command),
                backlog_bytes=int(args.backlog_mb * (1 << 20)),
                on_idle=on_idle,
            )
        )
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise DataError("unreachable", str(exc)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse tap`'s options to its parser.

    Args:
        p: The command's parser.
    """
    add_connection_arguments(p)
    add_layout_argument(p, default=default_layout())
    add_format_arguments(p, "jsonl", jsonl="one JSON object per message", table="a table row")
    add_output_argument(p, what="the messages")


def run(args: argparse.Namespace) -> int:
    """Run `lbparse tap`: print each message of the subjects, decoded, as it comes.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 if the session was complete, 1 if messages may have
        been missed (said on stderr) or the server could not be reached.
    """
    connect_options(args)  # the options' errors before anything starts

    def show(rec: Record) -> None:
        line = jsonform.dumps(rec.to_json_dict()) if args.format == "jsonl" else table_row(rec)
        sys.stdout.write(line + "\n")

    result = live_session(NAME, args, show, on_idle=sys.stdout.flush)
    if result.complete:
        return 0
    event_printer(NAME)(result.summary())
    return 1
