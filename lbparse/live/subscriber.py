"""Live traffic: subscribe to a NATS server and make a `Record` of every
message as it arrives (nats-py).

`subscribe(url, subjects, on_record, ...)` runs until `count` messages,
`duration` seconds, SIGINT/SIGTERM, or the server is gone for good, and
returns a `LiveResult`. Connection options are named as the NATS command
line names them (`ConnectOptions`).

When the connection is lost, it is re-established as the NATS clients do
(the subscriptions are made again), for at most `reconnect_timeout`
seconds; every loss is an `Outage`: when, why, for how long, and how many
messages were missed meanwhile (NATS core does not redeliver them):
counted where the messages carry offsets (Liftbridge's Acks:
`gaps.OffsetGaps`), else an estimate at the rate seen before the
loss, and said to be one. `on_event` is told
each loss and return as it happens. A result with an outage, or one that
gave up waiting, is not `complete`: messages may be missing.

nats-py hands callbacks parsed headers only, so an empty header block
would look like none and repeated keys would merge. To keep records
byte-exact, `_RawClient` keeps the raw header block nats-py parsed from
(nats-py 2.16 internals, hence the fallback to the parsed headers).
"""

from __future__ import annotations

import asyncio
import errno
import signal
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlparse, urlunparse

from lbparse.capture.records import Record, build_header_block, decode_into
from lbparse.capture.traffic import TrafficReader
from lbparse.codec.generation import GenerationContext, connection_key
from lbparse.errors import InputError, OperationalError
from lbparse.extras import need
from lbparse.live.backlog import Backlog, Raw
from lbparse.live.gaps import OffsetGaps


class NotConnected(OperationalError, ConnectionError):
    """No NATS server could be connected to (refused, silent, or not NATS).

    Still a ConnectionError (an OSError), as it was: callers catch it as one."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"unreachable"})


@dataclass
class ConnectOptions:
    """Credentials, TLS and timeouts, by their `nats` CLI names.

    Attributes:
        creds: A .creds file (JWT and NKey seed).
        nkey: An NKey seed file.
        user: The user name.
        password: The user's password.
        token: An authentication token.
        tlscert: A client certificate file (PEM).
        tlskey: The client certificate's key file.
        tlsca: A CA file to verify the server with.
        tlsfirst: TLS handshake before the server's INFO.
        timeout: Connect timeout, seconds.
        name: The connection's name (CONNECT's `name`).
    """

    creds: str | None = None  # a .creds file (JWT and NKey seed)
    nkey: str | None = None  # an NKey seed file
    user: str | None = None
    password: str | None = None
    token: str | None = None
    tlscert: str | None = None
    tlskey: str | None = None
    tlsca: str | None = None
    tlsfirst: bool = False  # TLS handshake before the server's INFO
    timeout: float = 5.0  # connect timeout, seconds
    name: str = "lbparse"

    def nats_kwargs(self, url: str, reconnect: bool = False) -> dict[str, Any]:
        """The keyword arguments of nats-py's `connect` for these options.

        Args:
            url: The server's URL (`tls://` turns TLS on).
            reconnect: Let nats-py reconnect after a loss (subscribe bounds it
                by its own deadline).

        Returns:
            A new dict of keyword arguments; a TLS context when TLS is asked for.
        """
        kw: dict[str, Any] = {
            "servers": [url],
            "name": self.name,
            "connect_timeout": self.timeout,
            # Reconnecting is bounded by subscribe()'s own deadline, and every
            # loss is reported (Outage), so that none is hidden.
            "allow_reconnect": reconnect,
            "max_reconnect_attempts": -1 if reconnect else 0,
            "reconnect_time_wait": RECONNECT_WAIT,
        }
        if self.creds:
            kw["user_credentials"] = self.creds
        if self.nkey:
            kw["nkeys_seed"] = self.nkey
        if self.user is not None:
            kw["user"] = self.user
        if self.password is not None:
            kw["password"] = self.password
        if self.token is not None:
            kw["token"] = self.token
        if self.tlscert or self.tlsca or self.tlsfirst or urlparse(url).scheme == "tls":
            ctx = ssl.create_default_context(cafile=self.tlsca)
            if self.tlscert:
                ctx.load_cert_chain(self.tlscert, self.tlskey)
            kw["tls"] = ctx
            kw["tls_handshake_first"] = self.tlsfirst
        return kw


def check_credentials(options: ConnectOptions) -> None:
    """Check the --nkey and --creds files before connecting.

    nats-py would fail on a bad one while connecting, with a traceback:
    unreadable, no user JWT, no NKey seed, or a seed that is not one.

    Args:
        options: The connection options whose files are checked.

    Raises:
        InputError: A file is unreadable or not what it should be (one line
            saying which and why).
    """
    if options.nkey:
        _check_seed("--nkey", options.nkey, _read(options.nkey, "--nkey").strip())
    if options.creds:
        text = _read(options.creds, "--creds")
        if _block(text, b"BEGIN NATS USER JWT") is None:
            raise InputError(
                "bad_option",
                f"--creds {options.creds}: no user JWT (a line "
                "'-----BEGIN NATS USER JWT-----' and the JWT after it)",
            )
        seed = _block(text, b"BEGIN USER NKEY SEED")
        if seed is None:
            raise InputError(
                "bad_option",
                f"--creds {options.creds}: no NKey seed (a line "
                "'-----BEGIN USER NKEY SEED-----' and the seed after it)",
            )
        _check_seed("--creds", options.creds, seed)


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)  # a credentials file is a few hundred bytes
    except OSError as exc:
        raise InputError("bad_option", f"{flag} {path}: {exc.strerror or exc}") from None


def _block(text: bytes, marker: bytes) -> bytes | None:
    """The line after the one holding `marker` (as nats-py reads a .creds file)."""
    lines = text.splitlines()
    for k, line in enumerate(lines[:-1]):
        if marker in line and lines[k + 1].strip():
            return lines[k + 1].strip()
    return None


def _check_seed(flag: str, path: str, seed: bytes) -> None:
    nkeys = need("nkeys")
    try:
        nkeys.from_seed(bytearray(seed)).wipe()
    except (nkeys.NkeysError, ValueError) as exc:  # binascii.Error is a ValueError
        raise InputError(
            "bad_option",
            f"{flag} {path}: not an NKey seed ({exc or type(exc).__name__}; "
            "a user seed is 58 characters starting with SU)",
        ) from None


DEFAULT_RECONNECT_TIMEOUT = 60.0  # seconds a lost server may take to come back
DEFAULT_BACKLOG_BYTES = 64 << 20  # messages held in memory before the backlog spills to disk
RECONNECT_WAIT = 0.5  # between attempts (nats-py's default is 2 s)
RATE_WINDOW = 10.0  # seconds of arrivals the missed-message estimate uses
RATE_SLICES = 100  # the window's slices (its edge moves a tenth of a second at a time)


def shown_url(url: str) -> str:
    """The URL without its secrets, for messages.

    A password is never printed, and neither is a user part without one (NATS
    reads `nats://TOKEN@host` as an authentication token).

    Args:
        url: A server URL.

    Returns:
        The URL with its user part masked (`***`); unchanged without one.
    """
    try:
        u = urlparse(url)
        port = u.port
    except ValueError:  # not a URL we can take apart: show nothing of its user part
        return url.rpartition("@")[2] if "@" in url else url
    if "@" not in u.netloc:
        return url
    user = "***" if u.password is None else f"{u.username}:***"
    netloc = f"{user}@{u.hostname}" + (f":{port}" if port else "")
    return urlunparse(u._replace(netloc=netloc))


@dataclass
class Outage:
    """One loss of the connection: when, why, until when, and the rate before it.

    Times are Unix time, integer nanoseconds, as every time lbparse gives;
    the arrival rate before it is for the estimate of what was missed.

    Attributes:
        lost_at: When the connection was lost.
        reason: Why, as nats-py or the server said.
        rate: Messages a second received before the loss.
        back_at: When it came back; None: never came back.
    """

    lost_at: int
    reason: str
    rate: float
    back_at: int | None = None  # None: never came back

    def seconds(self, now: int | None = None) -> float:
        """How long it lasted (until `now`, ns, or the present while it lasts).

        Args:
            now: The end to count to while it lasts (Unix ns); None: now.

        Returns:
            Its length in seconds (never negative).
        """
        end = self.back_at if self.back_at is not None else (now or time.time_ns())
        return max(end - self.lost_at, 0) / 1e9

    def may_have_missed(self, now: int | None = None) -> int:
        """Messages that may have been published meanwhile, at the rate seen before.

        Args:
            now: The end to count to while it lasts (Unix ns); None: now.

        Returns:
            The estimate, rounded.
        """
        return round(self.rate * self.seconds(now))


@dataclass
class LiveResult:
    """What a live session got: messages, the connection's losses, whether it gave up.

    Attributes:
        messages: Received from the server.
        outages: Every loss of the connection, in order.
        gave_up: The server did not come back within reconnect_timeout.
        written: Handed to on_record (decoded and written).
        unwritten: Received, not written: a second signal, or a failure.
        dropped: Dropped by the client library as a slow consumer.
        spilled: Went through the backlog's spill file (not a loss).
        failure: Why writing stopped, when it did.
        gaps: Offsets skipped across outages.
    """

    messages: int = 0  # received from the server
    outages: list[Outage] = field(default_factory=list)
    gave_up: bool = False  # the server did not come back within reconnect_timeout
    written: int = 0  # handed to on_record (decoded and written)
    unwritten: int = 0  # received, not written: a second signal, or a failure
    dropped: int = 0  # dropped by the client library as a slow consumer
    spilled: int = 0  # went through the backlog's spill file (not a loss)
    failure: str | None = None  # why writing stopped, when it did
    gaps: OffsetGaps = field(default_factory=OffsetGaps)  # offsets skipped across outages

    @property
    def complete(self) -> bool:
        """No loss: nothing can be missing."""
        return (
            not self.outages
            and not self.gave_up
            and not self.unwritten
            and not self.dropped
            and self.failure is None
        )

    def may_have_missed(self) -> int:
        """Messages that may have been published during the outages (an estimate).

        Returns:
            The sum of each outage's estimate at the rate seen before it.
        """
        return sum(o.may_have_missed() for o in self.outages)

    def missed_text(self) -> str:
        """What was missed during the outages, in words.

        Counted by the offsets where messages carry them, an estimate (said to
        be one) for the others.

        Returns:
            The text.
        """
        gaps = self.gaps
        if not gaps.counted():
            return (
                f"messages published meanwhile were not received (about "
                f"{self.may_have_missed()}: an estimate at the rates seen before; no "
                "offsets received on both sides of a loss to count them by)"
            )
        text = (
            f"{gaps.missed()} acked messages not received (counted: the offsets their "
            f"partitions' acks skipped across the loss)"
        )
        if gaps.without_offsets:
            rest = round(self.may_have_missed() * gaps.share_without())
            text += (
                f"; messages without offsets: about {rest} not received (an estimate "
                "at the rates seen before)"
            )
        return text

    def summary(self) -> str:
        """One line: what was received and what may be missing.

        Returns:
            The line.
        """
        text = f"{self.messages} messages"
        if self.outages:
            secs = sum(o.seconds() for o in self.outages)
            text += (
                f"; connection lost {len(self.outages)} time(s), {secs:.1f} s in all: "
                + self.missed_text()
            )
        if self.gave_up:
            text += "; the server did not come back: gave up"
        if self.dropped:
            text += (
                f"; {self.dropped} dropped on arrival as a slow consumer's (the client "
                "library's pending limits, set by --backlog-mb)"
            )
        if self.failure is not None:
            text += f"; writing failed: {self.failure}"
        if self.unwritten:
            text += f"; {self.unwritten} received but NOT written"
        return text


class _Rate:
    """Messages a second over the last RATE_WINDOW seconds of a connection.

    Counted in RATE_SLICES slices of the window, its edge moving a slice at
    a time (every arrival's time, kept as it once was, held 32 bytes a
    message outside the backlog's measure: 32 MB at 100,000 messages a second).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.since = clock()
        self.slices: deque[list[int]] = deque()  # [slice number, messages], oldest first

    def tick(self) -> None:
        k = int(self.clock() * (RATE_SLICES / RATE_WINDOW))
        slices = self.slices
        if slices and slices[-1][0] == k:
            slices[-1][1] += 1
        else:
            slices.append([k, 1])
            self._trim(k)

    def _trim(self, k: int) -> None:
        slices = self.slices
        while slices and slices[0][0] <= k - RATE_SLICES:
            slices.popleft()

    def rate(self) -> float:
        now = self.clock()
        self._trim(int(now * (RATE_SLICES / RATE_WINDOW)))
        span = min(now - self.since, RATE_WINDOW)
        return sum(n for _, n in self.slices) / span if span > 0 else 0.0

    def restart(self) -> None:
        self.since = self.clock()
        self.slices.clear()


def _stamp(ns: int) -> str:
    """A Unix time in nanoseconds as UTC, to the millisecond."""
    s, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{frac // 1_000_000:03d}Z"


def _raw_client_class() -> type:
    # nats-py is the live extra's; this module is not (the command line
    # imports it for tap's and record's options): its Client is found here.
    class _RawClient(need("nats.aio.client").Client):  # type: ignore[misc]
        _lb_raw: bytes | None = None

        async def _process_msg(
            self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes
        ) -> None:
            # Called once per MSG/HMSG, in order, and it builds the Msg
            # before returning: the stash cannot be overtaken.
            self._lb_raw = headers or None
            await super()._process_msg(sid, subject, reply, data, headers)

        def _build_message(self, *args: Any, **kw: Any) -> Any:
            msg = super()._build_message(*args, **kw)
            msg._lb_raw_headers = self._lb_raw
            return msg

    return _RawClient


def _endpoints(nc: Any, url: str) -> tuple[str, str]:  # url: shown (no password)
    """(server, local) as host:port; the socket's when nats-py lets us see it."""

    def fmt(addr: Any) -> str | None:
        if isinstance(addr, tuple) and len(addr) >= 2:
            host = addr[0]
            return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"
        return None

    writer = getattr(getattr(nc, "_transport", None), "_io_writer", None)
    peer = local = None
    if writer is not None:
        peer = fmt(writer.get_extra_info("peername"))
        local = fmt(writer.get_extra_info("sockname"))
    u = urlparse(url)
    return peer or f"{u.hostname}:{u.port or 4222}", local or "local:0"


def message_record(msg: Any, server: str, local: str) -> Record:
    """A Record of a message nats-py delivered, stamped with the time now.

    The raw header block kept by the client is used when there is one, so
    that the record is byte-exact; else the parsed headers are rebuilt.

    Args:
        msg: nats-py's Msg.
        server: The server's endpoint, host:port (the record's src).
        local: The subscriber's endpoint, host:port (the record's dst).

    Returns:
        The undecoded Record (MSG, or HMSG with a header block).
    """
    raw = getattr(msg, "_lb_raw_headers", None)
    if raw is None and msg.headers:
        raw = build_header_block(list(msg.headers.items()))
    sid = getattr(msg, "_sid", None)
    return Record.make(
        time.time_ns(),
        server,
        local,
        "HMSG" if raw is not None else "MSG",
        msg.subject,
        msg.reply or None,
        None if sid is None else str(sid),
        raw,
        msg.data,
    )


class _Session:
    """The connection's state for subscribe(): losses, returns, the give-up deadline."""

    def __init__(
        self, url: str, reconnect_timeout: float, on_event: Callable[[str], None] | None
    ) -> None:
        self.url = shown_url(url)
        self.reconnect_timeout = reconnect_timeout
        self.on_event = on_event or (lambda line: None)
        self.result = LiveResult()
        self.rate = _Rate()
        self.last_error: str | None = None
        # What the server said when it refused a first connection: nats-py
        # retries, and a later attempt's reset socket must not hide it.
        self.refusal: str | None = None
        # Set by a refusal that no retry can change (wrong credentials):
        # connecting stops at once rather than at its time limit.
        self.refused = asyncio.Event()
        self.lost: Outage | None = None
        self.lost_mono = 0.0
        self.done = asyncio.Event()
        self.nc: Any = None
        self.server = self.local = ""
        self.connected = False  # a first connection was made: only then can one be lost
        self.dropped = 0  # messages the client library dropped as a slow consumer's

    def endpoints(self) -> None:
        """(server, local) of the current connection: a new one has a new local port."""
        self.server, self.local = _endpoints(self.nc, self.url)

    async def error(self, exc: Exception) -> None:
        errors = need("nats.errors")
        if isinstance(exc, errors.SlowConsumerError):
            # nats-py's pending limits were passed: it dropped this message.
            # Said at the first, counted always (the summary has the total).
            self.dropped += 1
            if self.dropped == 1:
                self.on_event(
                    f"messages are being DROPPED as a slow consumer's (first on "
                    f"{exc.subject}: the client library's queue, bounded by "
                    "--backlog-mb, is full): they will be missing; counting them"
                )
            return
        if not self.connected and isinstance(exc, asyncio.TimeoutError):
            return  # silence, not a cause: _not_connected says no server answered
        text = str(exc) or type(exc).__name__
        if "slow consumer" in text.lower():  # the server's word for it, when it says so
            self.on_event(f"the server reports a slow consumer: {text}")
        # The cause of the next disconnection; nats-py would also log each one.
        self.last_error = text
        # nats-py raises a plain Error with the text of the server's -ERR line
        # while connecting; subclasses are its own (timeouts, closed, ...).
        if not self.connected and type(exc) in (errors.Error, errors.AuthorizationError):
            self.refusal = text
            if _FINAL_REFUSAL in text.lower() or isinstance(exc, errors.AuthorizationError):
                self.refused.set()
        elif not self.connected and _nothing_listening(exc):
            # nats-py would try again every 2 s until our time limit; the `nats`
            # CLI and curl say it at once, and so do we (--timeout is for silence)
            self.refusal = "connection refused: is a NATS server running there?"
            self.refused.set()

    async def disconnected(self) -> None:
        if not self.connected or self.lost is not None or self.done.is_set():
            return  # a first connect that failed (_connect says why), already lost, or closing
        self.lost = Outage(time.time_ns(), self.last_error or "connection closed", self.rate.rate())
        self.lost_mono = time.monotonic()
        self.result.outages.append(self.lost)
        how = (
            f"reconnecting for up to {self.reconnect_timeout:g} s"
            if self.reconnect_timeout > 0
            else "not reconnecting (--reconnect-timeout 0)"
        )
        self.on_event(
            f"connection to {self.url} lost at {_stamp(self.lost.lost_at)} "
            f"({self.lost.reason}); {how}"
        )
        if self.reconnect_timeout <= 0:
            self.give_up()

    async def reconnected(self) -> None:
        self.endpoints()
        if self.lost is None:
            return
        self.lost.back_at = time.time_ns()
        o, self.lost = self.lost, None
        self.last_error = None
        self.rate.restart()
        self.on_event(
            f"reconnected to {self.url} after {o.seconds():.1f} s; messages "
            f"published meanwhile were not received (about {o.may_have_missed()}: "
            f"an estimate at the {o.rate:.1f} msg/s seen before; counted at the end "
            "where messages carry offsets)"
        )

    def give_up(self) -> None:
        self.result.gave_up = True
        self.done.set()
        if self.lost is not None:
            self.on_event(
                f"{self.url} did not come back within "
                f"{self.reconnect_timeout:g} s: giving up (about "
                f"{self.lost.may_have_missed()} messages may be missing: an "
                "estimate at the rate seen before)"
            )

    async def watch(self, nc: Any) -> None:
        """Give up once the server has been gone for reconnect_timeout, or when
        the connection is closed for good."""
        while not self.done.is_set():
            if self.lost is not None and time.monotonic() - self.lost_mono > self.reconnect_timeout:
                self.give_up()
                return
            if nc.is_closed:
                if self.lost is None:  # closed without a disconnection first
                    await self.disconnected()
                self.give_up()
                return
            await asyncio.sleep(0.1)


async def subscribe(
    url: str,
    subjects: Sequence[str],
    on_record: Callable[[Record], None],
    *,
    options: ConnectOptions | None = None,
    layout: str | None = None,
    count: int | None = None,
    duration: float | None = None,
    on_ready: Callable[[], None] | None = None,
    reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT,
    on_event: Callable[[str], None] | None = None,
    backlog_bytes: int = DEFAULT_BACKLOG_BYTES,
    on_idle: Callable[[], None] | None = None,
) -> LiveResult:
    """Subscribe to `subjects` and call `on_record` for each message.

    `on_record` runs in a worker thread, fed through a `Backlog` (memory up
    to `backlog_bytes`, then a private spill file): the network reader only
    hands messages on, so the server never finds it slow. On SIGINT, SIGTERM
    or SIGHUP it stops receiving and everything received is handed to
    `on_record` before it returns; a second signal stops that too, and the
    result counts what was not written.

    Args:
        url: The NATS server's URL.
        subjects: The subjects (patterns) to subscribe to.
        on_record: Called with each message's Record, in arrival order.
        options: Credentials, TLS and timeouts (default: none, 5 s).
        layout: The envelope layout messages are decoded as (None: not
            decoded).
        count: Stop after this many messages (None: no limit).
        duration: Stop after this many seconds (None: no limit).
        on_ready: Called once the server has the subscriptions.
        reconnect_timeout: Reconnect after a loss for at most this many
            seconds (0: never).
        on_event: Gets a line for each loss and return.
        backlog_bytes: The messages held in memory before the backlog
            spills to disk (also sets nats-py's pending limits).
        on_idle: Called whenever the worker has caught up (nothing left to
            hand on): flush there, not at each message, and a reader of the
            output sees every message as it comes when they come slowly, in
            large writes under a flood.

    Returns:
        The LiveResult: messages received and written, outages, what may be
        missing.

    Raises:
        OSError: The first connection fails (refused, no answer within the
            timeout, not a NATS server).
        BrokenPipeError: The reader of the output went away while writing
            (the command's to handle; the result's counts are set first).
    """
    options = options or ConnectOptions()
    nc = _raw_client_class()()
    session = _Session(url, reconnect_timeout, on_event)
    session.nc = nc
    await _connect(nc, url, options, session)
    session.connected = True
    session.endpoints()
    done = session.done
    result = session.result

    traffic = TrafficReader() if layout is not None else None
    # auto: ambiguous envelopes resolved by what this session has received so
    # far (lbparse.codec.generation; nothing is held back: a tap prints as it goes).
    context = GenerationContext(window=0) if layout == "auto" else None
    backlog = Backlog(backlog_bytes)
    loop = asyncio.get_running_loop()

    def process(raw: Raw) -> None:
        """Decode and hand on one message: the worker thread's work."""
        rec = Record.make(
            raw.ts,
            raw.server,
            raw.local,
            "HMSG" if raw.headers is not None else "MSG",
            raw.subject,
            raw.reply,
            raw.sid,
            raw.headers,
            raw.data,
        )
        if layout is not None:
            decode_into(rec, layout)
        if traffic is not None:
            rec.traffic = traffic.read(
                rec.src, rec.dst, rec.subject, rec.reply, rec.payload, rec.header_block
            )
        if context is not None and rec.envelope is not None:
            rec.envelope = context.see(
                connection_key(rec.src, rec.dst), rec.subject, rec.envelope, rec.payload
            )
        result.gaps.see(rec, result.outages)
        on_record(rec)

    def failed() -> None:  # from the worker thread: stop the session
        loop.call_soon_threadsafe(done.set)

    worker = _Worker(backlog, process, failed, on_idle)
    worker.start()

    accepting = True  # until --count is reached, or the connection is closed after a drain
    stops = 0
    behind_said = False

    def say_behind() -> None:
        # Once a session: the disk is used from then on, and a user watching
        # it grow should know why (the summary counts what went that way).
        nonlocal behind_said
        behind_said = True
        if on_event is not None:
            on_event(
                f"writing is behind: the backlog's {backlog.max_bytes / (1 << 20):g} MiB in "
                "memory are full, and the messages after them wait in a temporary file on "
                "disk until they are written (none is lost)"
            )

    async def handle(msg: Any) -> None:
        # The network reader's loop: nothing here but handing the message on.
        nonlocal accepting
        if not accepting:
            if stops >= 2:  # received while draining, then told to stop at once
                result.messages += 1
                result.unwritten += 1
            return
        raw = getattr(msg, "_lb_raw_headers", None)
        if raw is None and msg.headers:
            raw = build_header_block(list(msg.headers.items()))
        sid = getattr(msg, "_sid", None)
        backlog.put(
            Raw(
                time.time_ns(),
                session.server,
                session.local,
                msg.subject,
                msg.reply or None,
                None if sid is None else str(sid),
                raw,
                msg.data,
            )
        )
        result.messages += 1
        session.rate.tick()
        if backlog.spilled and not behind_said:
            say_behind()
        if count is not None and result.messages >= count:
            accepting = False
            done.set()

    def stop() -> None:
        """SIGINT, SIGTERM, SIGHUP: stop receiving and write what was received;
        a second one: stop writing too (what is left is counted, and said)."""
        nonlocal stops
        stops += 1
        done.set()
        if stops == 2:
            result.unwritten += backlog.abandon()

    for sig in STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, stop)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    watcher = None
    try:
        msgs_limit, bytes_limit = pending_limits(backlog_bytes, nc.max_payload)
        for subject in subjects:
            await nc.subscribe(
                subject, cb=handle, pending_msgs_limit=msgs_limit, pending_bytes_limit=bytes_limit
            )
        # The server has the subscriptions once it answered our PING.
        await nc.flush(timeout=options.timeout)
        if on_ready is not None:
            on_ready()
        if count is None or result.messages < count:
            watcher = asyncio.ensure_future(session.watch(nc))
            waiter = asyncio.ensure_future(done.wait())
            try:
                await asyncio.wait(
                    {waiter, watcher}, timeout=duration, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                waiter.cancel()
    finally:
        done.set()  # a disconnection while closing is not an outage
        if watcher is not None:
            watcher.cancel()
        if accepting and nc.is_connected:
            # Stopped by a signal or --duration: unsubscribe and read what the
            # server had sent until then (its PONG comes after it), so that
            # what reached the socket is received, and written.
            try:
                await asyncio.wait_for(nc.drain(), options.timeout * 2 + 1)
            except Exception:
                pass
        accepting = False
        if not nc.is_closed:
            await _close_quietly(nc)
        # Everything received is written before the file is closed (unless a
        # second signal says stop now): the signals stay ours meanwhile.
        backlog.close()
        left = backlog.pending()
        if left > DRAIN_NOTICE and on_event is not None:
            on_event(
                f"writing the {left} messages received and not yet written; "
                "signal again to stop now (they would be lost)"
            )
        await loop.run_in_executor(None, worker.join)
        for sig in STOP_SIGNALS:
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass
    result.written = worker.written
    result.spilled = backlog.spilled
    result.dropped = session.dropped
    if worker.error is not None:
        result.failure = f"{type(worker.error).__name__}: {worker.error}"
        result.unwritten += backlog.abandon() + 1  # the one it failed on
    if isinstance(worker.error, BrokenPipeError):
        raise worker.error  # the reader of a tap's output left: the command's to handle
    return result


# nats-py queues each message it parses until the subscription's task hands
# it to `handle`; its default bounds (512 Ki messages, 128 MiB of payload)
# let that queue alone outgrow a small --backlog-mb several times over
# (issue #47). Ours follow the backlog: half of it in payload bytes (but
# room for two of the largest messages the server allows), and a message
# count that keeps the queue's own objects (about 400 bytes a message)
# under the backlog too, never so few that one read of the socket (up to
# 320 KiB: 18-byte messages, some 18,000 of them) would overflow it.
# Past either, nats-py drops the message and tells `_Session.error`: counted,
# said at the first, totalled in the summary.
PENDING_MSGS_PER_BYTE = 512
MIN_PENDING_MSGS = 32_768


def pending_limits(backlog_bytes: int, max_payload: int) -> tuple[int, int]:
    """nats-py's pending limits of a subscription.

    Args:
        backlog_bytes: The backlog's memory (--backlog-mb).
        max_payload: The server's max_payload, bytes.

    Returns:
        (messages, payload bytes).
    """
    return (
        max(backlog_bytes // PENDING_MSGS_PER_BYTE, MIN_PENDING_MSGS),
        max(backlog_bytes // 2, 2 * max(max_payload, 1)),
    )


# Signals that stop a tap or a recording cleanly (SIGHUP: the terminal went away).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Past this many messages still to write at the end, say so (it may take a while).
DRAIN_NOTICE = 10_000


# The worker's turn at the GIL while the reader has work (seconds), and the
# pause that hands it over (long enough for a waiting thread to wake: a bare
# sleep(0) can take the GIL back before it does).
WORKER_TURN = 0.001
WORKER_PAUSE = 0.00005


class _Worker(threading.Thread):
    """Takes messages from the backlog and processes them, in order, until it
    is closed and empty (or abandoned); stops at the first failure."""

    def __init__(
        self,
        backlog: Backlog,
        process: Callable[[Raw], None],
        on_failure: Callable[[], None],
        on_idle: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name="lbparse-live-writer", daemon=True)
        self.backlog = backlog
        self.process = process
        self.on_failure = on_failure
        self.on_idle = on_idle
        self.written = 0
        self.turns_given = 0  # pauses made for a reader that had work
        self.error: BaseException | None = None

    def run(self) -> None:
        seen = self.backlog.puts
        turn = time.monotonic()
        while True:
            item = self.backlog.get()
            if item is None:
                return
            try:
                self.process(item)
                if time.monotonic() - turn >= WORKER_TURN:
                    # The reader first: under a flood both threads want the
                    # GIL all the time and would share it half and half (the
                    # reader then takes ~65k msg/s on an idle machine, ~44k on
                    # a busy one, and nats-server slows the publisher to it).
                    # A reader that handed messages on since the last turn
                    # gets the GIL now, for up to a switch interval; being
                    # behind costs the backlog room, never a message.
                    if self.backlog.puts != seen:
                        seen = self.backlog.puts
                        time.sleep(WORKER_PAUSE)
                        self.turns_given += 1
                    turn = time.monotonic()
                if self.on_idle is not None and not self.backlog.pending():
                    self.on_idle()  # caught up
            except BaseException as exc:
                self.error = exc
                self.on_failure()
                return
            self.written += 1


async def _connect(nc: Any, url: str, options: ConnectOptions, session: _Session) -> None:
    errors = need("nats.errors")
    # nats-py keeps retrying a refused first connection despite
    # allow_reconnect=False: bound it ourselves.
    limit = options.timeout * 2 + 1
    kw = options.nats_kwargs(url, reconnect=session.reconnect_timeout > 0)
    connecting = asyncio.ensure_future(
        nc.connect(
            **kw,
            error_cb=session.error,
            disconnected_cb=session.disconnected,
            reconnected_cb=session.reconnected,
        )
    )
    refused = asyncio.ensure_future(session.refused.wait())
    try:
        await asyncio.wait(
            {connecting, refused}, timeout=limit, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        refused.cancel()
    if not connecting.done():
        connecting.cancel()
        await asyncio.gather(connecting, return_exceptions=True)
        await _close_quietly(nc)
        raise _not_connected(session, limit)
    try:
        connecting.result()
    except (errors.Error, ssl.SSLError, OSError) as exc:
        await _close_quietly(nc)
        raise NotConnected(
            "unreachable", f"cannot connect to {session.url}: {exc or type(exc).__name__}"
        ) from None
    except ValueError as exc:
        # asyncio's readline ("Separator is not found, and chunk exceed the
        # limit"): the first line, the server's INFO, never ended.
        await _close_quietly(nc)
        raise NotConnected(
            "unreachable",
            f"cannot connect to {session.url}: its first line (a NATS server's "
            f"INFO) does not end within what a NATS client reads ({exc}): is it a "
            "NATS server?",
        ) from None


def _not_connected(session: _Session, limit: float) -> NotConnected:
    """Why a first connection was given up: refused for good, refused, or silence."""
    why = session.refusal or session.last_error
    if session.refused.is_set():  # said as soon as the server said it
        return NotConnected("unreachable", f"cannot connect to {session.url}: {why}")
    if why:  # it answered, and refused (an error a retry might not have had)
        return NotConnected(
            "unreachable", f"cannot connect to {session.url} within {limit:g} s: {why}"
        )
    return NotConnected(
        "unreachable", f"no NATS server answered at {session.url} within {limit:g} s"
    )


def _nothing_listening(exc: BaseException) -> bool:
    """A TCP connection refused: nothing listens at that address. A host name
    of several addresses (localhost: ::1 and 127.0.0.1) that all refused is
    asyncio's one plain OSError joining their errors."""
    if isinstance(exc, ConnectionRefusedError):
        return True
    text = str(exc)
    return (
        type(exc) is OSError
        and text.startswith("Multiple exceptions: ")
        and text.count("[Errno ") == text.count(f"[Errno {errno.ECONNREFUSED}]")
    )


# The server's word for wrong or missing credentials (nats-py passes it on as
# the text of a plain Error while connecting): retrying cannot change it.
_FINAL_REFUSAL = "authorization violation"


async def _close_quietly(nc: Any) -> None:
    try:
        await nc.close()
    except Exception:  # already broken; the caller reports the real cause
        pass
