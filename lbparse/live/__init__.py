"""Live traffic: `lbparse tap` and `lbparse record` against a NATS server
(nats-py, the live extra's; imported only when a session starts).

The front is what the command line uses: `subscribe(url, subjects,
on_record, ...)`, its options and its result. Behind it, one job each:

- subscriber: the subscription, reconnecting, each message made a `Record`;
- backlog: what lies between the network reader and the writer, spilled to
  disk past a bound (never blocks the reader, never drops);
- gaps: messages missed while the connection was lost, counted from
  Liftbridge's Ack offsets.
"""

from lbparse.live.subscriber import (
    DEFAULT_BACKLOG_BYTES,
    DEFAULT_RECONNECT_TIMEOUT,
    ConnectOptions,
    LiveResult,
    Outage,
    check_credentials,
    shown_url,
    subscribe,
)

__all__ = [
    "DEFAULT_BACKLOG_BYTES",
    "DEFAULT_RECONNECT_TIMEOUT",
    "ConnectOptions",
    "LiveResult",
    "Outage",
    "check_credentials",
    "shown_url",
    "subscribe",
]
