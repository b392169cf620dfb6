"""The client's publish joined to the cluster's story of the same message.

A client's PublishRequest (gRPC Publish or PublishAsync) names its stream
and a correlationId. The node that takes it puts a proto.Message on the
stream's subject over NATS with the same stream and correlationId, and the
partition leader answers with a proto.Ack carrying them again, with the
offset given to the message; the node then sends the client its
PublishResponse, whose ack holds that offset too. A PublishToSubject names
no correlationId: its response's ack names the ack inbox of the NATS
Publish and Ack, and is joined by that.

`PublishJoin` keeps each side, first sighting only (NATS shows a message as
the sender's PUB and again as each subscriber's MSG), in tables bounded by
MAX_KEPT that forget their oldest entries, and joins them when the model is
made: the two paths of the report feed the sides in different orders (the
columnar one reads all of NATS before the gRPC calls).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from lbparse.report.latency import ACK_ERRORS, _policy_name
from lbparse.report.timebins import MS, exact_time

MAX_KEPT = 200_000  # per side: client requests, NATS publishes, NATS acks
MAX_ROWS = 1000  # messages listed one by one in the model; the rest counted


class _Request:
    __slots__ = (
        "ts",
        "method",
        "stream",
        "policy",
        "client",
        "server",
        "subject",
        "response_ts",
        "response_offset",
        "async_error",
        "ack_inbox",
    )

    def __init__(
        self, ts: int, method: str, stream: str, policy: str, client: str, server: str
    ) -> None:
        self.ts, self.method, self.stream, self.policy = ts, method, stream, policy
        self.client, self.server = client, server
        self.subject: str | None = None  # PublishToSubject's
        self.ack_inbox: str | None = None  # the response's ack's: PublishToSubject's key
        self.response_ts: int | None = None
        self.response_offset: int | None = None
        self.async_error: str | None = None


def _remember(table: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """`value` under `key` unless a sighting is there already; the oldest forgotten."""
    if key in table:
        return
    table[key] = value
    if len(table) > MAX_KEPT:
        table.popitem(last=False)


def _earliest(table: OrderedDict[Any, Any], key: Any, seen: tuple[Any, ...]) -> None:
    """`seen` (its time first) under `key` unless an earlier sighting is there."""
    old = table.get(key)
    if old is None or seen[0] < old[0]:
        table[key] = seen
        if len(table) > MAX_KEPT:
            table.popitem(last=False)


def _ms(a: int | None, b: int | None) -> float | None:
    return None if a is None or b is None else round((b - a) / 1e6, 3)


class PublishJoin:
    """Each client publish joined to its NATS Publish and Ack.

    The client's side (gRPC PublishRequest / PublishToSubjectRequest and their
    responses) is joined by correlationId (PublishToSubject's by its call and
    then its ack inbox) to the earliest NATS Publish and Ack of that stream;
    each table forgets its oldest entries beyond MAX_KEPT.
    """

    def __init__(self) -> None:
        # by correlationId; PublishToSubject's (which has none) by its call
        self.requests: OrderedDict[str | tuple[str, str, int], _Request] = OrderedDict()
        # (stream, correlationId) -> (ns, NATS subject)
        self.publishes: OrderedDict[tuple[str, str], tuple[int, str]] = OrderedDict()
        # (stream, correlationId) -> (ns, offset, partition subject, policy, ack error)
        self.acks: OrderedDict[tuple[str, str], tuple[int, int, str, str, str]] = OrderedDict()
        # the same for the envelopes without a correlationId, by their ack inbox
        self.inbox_publishes: OrderedDict[str, tuple[int, str]] = OrderedDict()
        self.inbox_acks: OrderedDict[str, tuple[int, int, str, str, str]] = OrderedDict()

    # -- the client's side (gRPC messages) ---------------------------------------

    def request(
        self, ts: int, method: str, body: dict[str, Any], call: tuple[str, str, int]
    ) -> None:
        """A PublishRequest (by its correlationId) or a PublishToSubjectRequest (by its call).

        A unary call's response is its only one, so the call names it.

        Args:
            ts: When it was sent, integer nanoseconds since the epoch.
            method: The gRPC method ("Publish", "PublishAsync", "PublishToSubject").
            body: The request as canonical protobuf JSON.
            call: The call: (client endpoint, server endpoint, HTTP/2 stream id).
        """
        cid = str(body.get("correlationId", ""))
        key: str | tuple[str, str, int] = call if method == "PublishToSubject" else cid
        if key:
            r = _Request(
                ts,
                method,
                str(body.get("stream", "")),
                str(body.get("ackPolicy", "LEADER")),
                call[0],
                call[1],
            )
            if method == "PublishToSubject":
                r.subject = str(body.get("subject", ""))
            _remember(self.requests, key, r)

    def response(
        self, ts: int, method: str, body: dict[str, Any], call: tuple[str, str, int]
    ) -> None:
        """A publish's response: its time, offset or asyncError (the first one counts).

        Args:
            ts: When it came, integer nanoseconds since the epoch.
            method: The gRPC method it answers.
            body: The response as canonical protobuf JSON.
            call: The call: (client endpoint, server endpoint, HTTP/2 stream id).
        """
        ack = body.get("ack") or {}
        cid = str(body.get("correlationId") or ack.get("correlationId", ""))
        r = self.requests.get(call if method == "PublishToSubject" else cid)
        if r is None or r.response_ts is not None:
            return
        r.response_ts = ts
        if method == "PublishToSubject":
            r.stream, r.ack_inbox = str(ack.get("stream", "")), ack.get("ackInbox")
        error = body.get("asyncError")
        if error is not None:
            r.async_error = str(error.get("message") or error.get("code") or "asyncError")
        elif ack:
            # canonical JSON: offset 0 is absent, an int64 is a decimal string
            r.response_offset = int(ack.get("offset", 0))

    # -- the cluster's side (NATS envelopes) -------------------------------------

    def nats_publish(self, ns: int, m: Any, subject: str | None) -> None:
        """A NATS Publish envelope, kept if it is its message's earliest sighting.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            m: The decoded Publish (stream, correlationId, ackInbox).
            subject: The NATS subject it was sent on, or None.
        """
        cid = str(m.correlationId or "")
        if cid:
            _earliest(self.publishes, (str(m.stream), cid), (ns, subject or ""))
        elif m.ackInbox:
            _earliest(self.inbox_publishes, str(m.ackInbox), (ns, subject or ""))

    def nats_ack(self, ns: int, m: Any) -> None:
        """A NATS Ack envelope, kept if it is its message's earliest sighting.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            m: The decoded Ack (stream, correlationId or ackInbox, offset,
                partitionSubject, ackPolicy, ackError).
        """
        cid = str(m.correlationId or "")
        if not cid and not m.ackInbox:
            return
        error = m.ackError if hasattr(m, "ackError") else 0
        error_name = error if isinstance(error, str) else ACK_ERRORS.get(error, str(error))
        seen = (
            ns,
            int(m.offset),
            str(m.partitionSubject),
            _policy_name(m.ackPolicy),
            str(error_name),
        )
        if cid:
            _earliest(self.acks, (str(m.stream), cid), seen)
        else:
            _earliest(self.inbox_acks, str(m.ackInbox), seen)

    # -- the join -------------------------------------------------------------

    def model(self) -> dict[str, Any] | None:
        """Per client publish its three times and offsets; None without a client publish.

        Returns:
            A JSON-ready dict of counts (client_publishes, found_on_nats,
            acked_on_nats, offsets_agree...) and the first MAX_ROWS messages, each
            with its request, NATS publish, NATS ack and response times; or None.
        """
        if not self.requests:
            return None
        rows: list[dict[str, Any]] = []
        counts = {
            "client_publishes": len(self.requests),
            "expecting_ack": 0,
            "found_on_nats": 0,
            "not_found_on_nats": 0,
            "acked_on_nats": 0,
            "ack_missing": 0,
            "offsets_agree": 0,
            "offsets_differ": 0,
        }
        # in request time order: the paths see the client's messages in different orders
        for key, r in sorted(self.requests.items(), key=lambda kv: (kv[1].ts, str(kv[0]))):
            row = self._row(key if isinstance(key, str) else None, r, counts)
            if len(rows) < MAX_ROWS:
                rows.append(row)
        return {**counts, "messages": rows, "more_messages": max(len(self.requests) - MAX_ROWS, 0)}

    def _row(self, cid: str | None, r: _Request, counts: dict[str, int]) -> dict[str, Any]:
        if cid is not None:
            publish, ack = self.publishes.get((r.stream, cid)), self.acks.get((r.stream, cid))
        else:
            inbox = r.ack_inbox or ""
            publish, ack = self.inbox_publishes.get(inbox), self.inbox_acks.get(inbox)
        expects = r.policy != "NONE"
        counts["expecting_ack"] += expects
        counts["found_on_nats" if publish or ack else "not_found_on_nats"] += 1
        if expects:
            counts["acked_on_nats" if ack else "ack_missing"] += 1
        offset = ack[1] if ack else None
        if ack and r.response_offset is not None:
            counts["offsets_agree" if offset == r.response_offset else "offsets_differ"] += 1
        p_ns = publish[0] if publish else None
        a_ns = ack[0] if ack else None
        return {
            "stream": r.stream,
            "correlation_id": cid,
            "method": r.method,
            "ack_policy": r.policy,
            "client": r.client,
            "server": r.server,
            "subject": r.subject,
            "ack_inbox": r.ack_inbox,
            "nats_subject": publish[1] if publish else None,
            "partition_subject": ack[2] if ack else None,
            "nats_ack_policy": ack[3] if ack else None,
            "ack_error": ack[4] if ack else None,
            "offset": offset,
            "response_offset": r.response_offset,
            "async_error": r.async_error,
            "request": r.ts / MS,  # milliseconds: the chart's time axis
            **exact_time("request", r.ts),
            **exact_time("nats_publish", p_ns),
            **exact_time("nats_ack", a_ns),
            **exact_time("response", r.response_ts),
            "to_nats_publish_ms": _ms(r.ts, p_ns),
            "to_nats_ack_ms": _ms(r.ts, a_ns),
            "to_response_ms": _ms(r.ts, r.response_ts),
        }


__all__ = ["MAX_KEPT", "MAX_ROWS", "PublishJoin"]
