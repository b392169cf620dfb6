"""Live traffic: subscribe to a NATS server and make a `Record` of every
message as it arrives (nats-py).

`subscribe(url, subjects, on_record, ...)` runs until `count` messages,
`duration` seconds, SIGINT/SIGTERM, or the connection's end. Connection
options are named as the NATS command line names them (`ConnectOptions`).

nats-py hands callbacks parsed headers only, so an empty header block
would look like none and repeated keys would merge. To keep records
byte-exact, `_RawClient` keeps the raw header block nats-py parsed from
(nats-py 2.16 internals, hence the fallback to the parsed headers).
"""

from __future__ import annotations

import asyncio
import signal
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence
from urllib.parse import urlparse

from lbparse.capture.records import Record, build_header_block, decode_into


@dataclass
class ConnectOptions:
    """Credentials, TLS and timeouts, by their `nats` CLI names."""

    creds: str | None = None       # a .creds file (JWT and NKey seed)
    nkey: str | None = None        # an NKey seed file
    user: str | None = None
    password: str | None = None
    token: str | None = None
    tlscert: str | None = None
    tlskey: str | None = None
    tlsca: str | None = None
    tlsfirst: bool = False         # TLS handshake before the server's INFO
    timeout: float = 5.0           # connect timeout, seconds
    name: str = "lbparse"

    def nats_kwargs(self, url: str) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "servers": [url], "name": self.name, "connect_timeout": self.timeout,
            # A tap reports what it sees; reconnecting would hide the loss.
            "allow_reconnect": False, "max_reconnect_attempts": 0,
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


def _raw_client_class() -> type:
    from nats.aio.client import Client

    class _RawClient(Client):
        _lb_raw: bytes | None = None

        async def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes,
                               headers: bytes) -> None:
            # Called once per MSG/HMSG, in order, and it builds the Msg
            # before returning: the stash cannot be overtaken.
            self._lb_raw = headers or None
            await super()._process_msg(sid, subject, reply, data, headers)

        def _build_message(self, *args: Any, **kw: Any) -> Any:
            msg = super()._build_message(*args, **kw)
            msg._lb_raw_headers = self._lb_raw
            return msg

    return _RawClient


def _endpoints(nc: Any, url: str) -> tuple[str, str]:
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
    raw = getattr(msg, "_lb_raw_headers", None)
    if raw is None and msg.headers:
        raw = build_header_block(list(msg.headers.items()))
    sid = getattr(msg, "_sid", None)
    return Record.make(time.time_ns(), server, local, "HMSG" if raw is not None else "MSG",
                       msg.subject, msg.reply or None, None if sid is None else str(sid), raw,
                       msg.data)


async def subscribe(url: str, subjects: Sequence[str], on_record: Callable[[Record], None], *,
                    options: ConnectOptions | None = None, layout: str | None = None,
                    count: int | None = None, duration: float | None = None,
                    on_ready: Callable[[], None] | None = None) -> int:
    """Subscribe to `subjects` and call `on_record` for each message, decoded
    as `layout` (None: not decoded). Returns the number of messages."""
    options = options or ConnectOptions()
    nc = _raw_client_class()()
    await _connect(nc, url, options)
    server, local = _endpoints(nc, url)
    done = asyncio.Event()
    seen = 0

    async def handle(msg: Any) -> None:
        nonlocal seen
        if done.is_set():
            return
        rec = message_record(msg, server, local)
        if layout is not None:
            decode_into(rec, layout)
        seen += 1
        on_record(rec)
        if count is not None and seen >= count:
            done.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, done.set)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    try:
        for subject in subjects:
            await nc.subscribe(subject, cb=handle)
        # The server has the subscriptions once it answered our PING.
        await nc.flush(timeout=options.timeout)
        if on_ready is not None:
            on_ready()
        if count is None or seen < count:
            closed = asyncio.ensure_future(_wait_closed(nc))
            waiter = asyncio.ensure_future(done.wait())
            try:
                await asyncio.wait({waiter, closed}, timeout=duration,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                closed.cancel()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass
        if not nc.is_closed:
            await nc.close()
    return seen


async def _connect(nc: Any, url: str, options: ConnectOptions) -> None:
    import nats.errors

    # nats-py keeps retrying a refused first connection despite
    # allow_reconnect=False: bound it ourselves.
    limit = options.timeout * 2 + 1
    try:
        await asyncio.wait_for(nc.connect(**options.nats_kwargs(url), error_cb=_quiet), limit)
    except asyncio.TimeoutError:
        await _close_quietly(nc)
        raise OSError(f"no NATS server answered at {url} within {limit:g} s") from None
    except (nats.errors.Error, ssl.SSLError) as exc:
        await _close_quietly(nc)
        raise OSError(f"cannot connect to {url}: {exc or type(exc).__name__}") from None


async def _close_quietly(nc: Any) -> None:
    try:
        await nc.close()
    except Exception:  # already broken; the caller reports the real cause
        pass


async def _wait_closed(nc: Any) -> None:
    # nats-py offers a closed callback only at connect; polling is simpler
    # and the tap is idle anyway.
    while not nc.is_closed:
        await asyncio.sleep(0.2)


async def _quiet(exc: Exception) -> None:
    # Connection errors surface from connect() or as the end of the tap;
    # nats-py would otherwise also log each one.
    return None
