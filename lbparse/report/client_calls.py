"""The client's side: Liftbridge's gRPC API as a capture holds it.

`ClientCalls.add(item)` takes the capture reader's gRPC records
(lbparse.capture.grpc: GrpcMessage as each message completes, GrpcCall as
each call ends) and keeps bounded state:

- per method, the calls, how they ended (a grpc-status, or how they ended
  without one) and the client-visible latency: request to first response;
- PublishAsync: each PublishRequest paired with the PublishResponse of the
  same call and correlationId, the latency per ackPolicy (a request without
  one is LEADER, protobuf's default); requests with NONE expect no response;
- error statuses over time: calls that ended with a grpc-status other than
  OK, and PublishAsync's asyncErrors (a call that ended without a status,
  a stream the client cancelled or cut, is counted in its method's outcomes);
- subscriptions: each Subscribe call, its stream and partition, the server
  it was made to and the messages it delivered (the first, empty message is
  the server's "subscribed", not counted);
- each Publish/PublishAsync/PublishToSubject request and its response, for
  `join` (report.publish_join) to meet the NATS Publish and Ack of the same
  message, which the Aggregator gives it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from lbparse.capture.grpc import CLIENT_TO_SERVER, METHODS, SERVER_TO_CLIENT, GrpcCall, GrpcMessage
from lbparse.report.failovers import LOOKUP_METHODS, Lookups
from lbparse.report.histogram import Histogram
from lbparse.report.latency import MAX_PENDING
from lbparse.report.publish_join import PublishJoin
from lbparse.report.timebins import Counts, TimeAxis, exact_time

# gRPC's status codes (grpc/grpc doc/statuscodes.md), by number.
STATUS_NAMES = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)
DEFAULT_POLICY = "LEADER"  # proto.AckPolicy's zero: absent from canonical JSON
MAX_SUBSCRIPTIONS = 1000  # listed one by one; the rest counted
UNKNOWN_METHOD = "(unknown method)"
PUBLISH_METHODS = ("PublishAsync", "Publish", "PublishToSubject")  # joined to NATS


def status_name(code: int | None, end: str | None) -> str:
    """A call's outcome: its grpc-status's name, or how it ended without one.

    Args:
        code: The call's grpc-status code, or None if it ended without one.
        end: How the call ended (GrpcCall.end), said when there is no status.

    Returns:
        The status's name ("OK", "UNAVAILABLE"...), "status N" for a code beyond
        the known ones, or "no status (END)".
    """
    if code is None:
        return f"no status ({end})"
    return STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else f"status {code}"


class _Method:
    __slots__ = ("calls", "outcomes", "latency")

    def __init__(self) -> None:
        self.calls = 0
        self.outcomes: dict[str, int] = {}
        self.latency = Histogram()


def _call_of(row: dict[str, Any], request: dict[str, Any] | None) -> GrpcCall:
    """A grpc_calls row as the GrpcCall it was made of (its first request, if any)."""
    c = GrpcCall(row["client"], row["server"], row["stream_id"])
    c.path, c.method = row["path"], METHODS.get(row["path"] or "")
    c.request_ts, c.first_response_ts = row["request_ts_ns"], row["first_response_ts_ns"]
    c.trailers_ts, c.end_ts = row["trailers_ts_ns"], row["end_ts_ns"]
    c.http_status, c.grpc_status, c.grpc_message = (
        row["http_status"],
        row["grpc_status"],
        row["grpc_message"],
    )
    c.end, c.rst_code = row["end"], row["rst_stream_error"]
    c.counts = {CLIENT_TO_SERVER: row["request_count"], SERVER_TO_CLIENT: row["response_count"]}
    if request is not None:
        c.messages[CLIENT_TO_SERVER].append(request)
    return c


class ClientCalls:
    """The client section: the gRPC API's calls and messages (lbparse.capture.grpc).

    Per method: calls, outcomes and latency; PublishAsync's requests joined to
    their responses by correlationId (the oldest waiting ones forgotten first);
    subscriptions; metadata lookups (report.failovers).

    Args:
        axis: The report's time axis (error statuses are counted per bin).
    """

    def __init__(self, axis: TimeAxis) -> None:
        self.axis = axis
        self.methods: dict[str, _Method] = {}
        self.errors = Counts(axis)  # "method: outcome", by the bin the call ended in
        self.messages = 0
        # PublishRequests waiting for their response: (client, server, stream id,
        # correlationId) -> (ns, policy), the oldest forgotten first.
        self.pending: OrderedDict[tuple[str, str, int, str], tuple[int, str]] = OrderedDict()
        self.requests: dict[str, int] = {}
        self.answered: dict[str, Histogram] = {}
        self.async_errors = 0
        self.responses_without_request = 0
        self.subscriptions: list[dict[str, Any]] = []
        self.more_subscriptions = 0
        # each publish joined to its NATS Publish and Ack (fed by the Aggregator)
        self.join = PublishJoin()
        # FetchMetadata and FetchPartitionMetadata, placed against the
        # failovers when the model is made (report.failovers)
        self.lookups = Lookups()

    @property
    def calls(self) -> int:
        """How many calls were seen, over all methods."""
        return sum(m.calls for m in self.methods.values())

    def add(self, item: Any) -> None:
        """Take one item of the gRPC reader: a message or a finished call.

        Args:
            item: A GrpcMessage or GrpcCall; anything else is ignored.
        """
        if isinstance(item, GrpcMessage):
            self._message(item)
        elif isinstance(item, GrpcCall):
            self._call(item)

    def add_tables(
        self, calls: list[dict[str, Any]], messages: list[dict[str, Any]]
    ) -> list[tuple[str, str]]:
        """Take the rows of the gRPC tables as the records they were made of.

        The tables are lbparse.columnar.grpctables' (the pipeline's output):
        messages are taken in time order, then each call with its Subscribe request.

        Args:
            calls: The grpc_calls rows.
            messages: The grpc_messages rows.

        Returns:
            (where, why) of each message row whose message_json is not JSON
            (the message is then taken as undecoded, its call read on).
        """
        first: dict[tuple[str, int], dict[str, Any]] = {}
        bad: list[tuple[str, str]] = []
        for r in sorted(messages, key=lambda r: (r["ts_ns"] or 0, r["message_seq"])):
            body = None
            if r["message_json"] is not None:
                try:
                    body = json.loads(r["message_json"])
                except (ValueError, RecursionError) as exc:  # nested past Python's stack
                    why = (
                        "nested too deep"
                        if isinstance(exc, RecursionError)
                        else " ".join(str(exc).split())[:80]
                    )
                    bad.append((f"{r['source']} position {r['position']}", why))
            self._message(
                GrpcMessage(
                    r["ts_ns"],
                    r["src"],
                    r["dst"],
                    r["direction"],
                    r["stream_id"],
                    r["method"],
                    r["type"],
                    r["index"],
                    r["compressed"],
                    r["length"],
                    body,
                    r["error"],
                )
            )
            if r["direction"] == CLIENT_TO_SERVER and r["index"] == 0:
                first[(r["source"], r["position"])] = body or {}
        for r in sorted(calls, key=lambda r: (r["end_ts_ns"] or 0, r["position"])):
            self._call(_call_of(r, first.get((r["source"], r["position"]))))
        return bad

    def _message(self, m: GrpcMessage) -> None:
        self.messages += 1
        if m.method not in PUBLISH_METHODS or m.message is None or m.ts is None:
            return
        to_server = m.direction == CLIENT_TO_SERVER
        client, server = (m.src, m.dst) if to_server else (m.dst, m.src)
        body = m.message
        if to_server:
            self.join.request(m.ts, m.method, body, (client, server, m.stream_id))
        else:
            self.join.response(m.ts, m.method, body, (client, server, m.stream_id))
        if m.method != "PublishAsync":
            return
        if to_server:
            policy = str(body.get("ackPolicy", DEFAULT_POLICY))
            self.requests[policy] = self.requests.get(policy, 0) + 1
            if policy != "NONE":
                self.pending[(client, server, m.stream_id, str(body.get("correlationId", "")))] = (
                    m.ts,
                    policy,
                )
                if len(self.pending) > MAX_PENDING:
                    self.pending.popitem(last=False)
            return
        if "asyncError" in body:
            self.async_errors += 1
            self.errors.add(self.axis.index(m.ts), "PublishAsync: asyncError")
        cid = body.get("correlationId") or body.get("ack", {}).get("correlationId", "")
        waiting = self.pending.pop((client, server, m.stream_id, str(cid)), None)
        if waiting is None:
            self.responses_without_request += 1
            return
        ns, policy = waiting
        h = self.answered.get(policy)
        if h is None:
            h = self.answered[policy] = Histogram()
        h.add(m.ts - ns)

    def _call(self, c: GrpcCall) -> None:
        name = c.method_name or UNKNOWN_METHOD
        method = self.methods.get(name)
        if method is None:
            method = self.methods[name] = _Method()
        method.calls += 1
        outcome = status_name(c.grpc_status, c.end)
        method.outcomes[outcome] = method.outcomes.get(outcome, 0) + 1
        if c.request_ts is not None and c.first_response_ts is not None:
            method.latency.add(c.first_response_ts - c.request_ts)
        # A stream the client cancels or closes ends without a status: normal
        # for Subscribe, so not an error here (its outcome says how it ended).
        end = c.end_ts if c.end_ts is not None else c.request_ts
        if c.grpc_status not in (None, 0) and end is not None:
            self.errors.add(self.axis.index(end), f"{name}: {outcome}")
        if name == "Subscribe":
            self._subscription(c, outcome)
        elif name in LOOKUP_METHODS:
            self.lookups.add(name, c.server, c.request_ts, c.first_response_ts, c.end_ts, outcome)

    def _subscription(self, c: GrpcCall, outcome: str) -> None:
        if len(self.subscriptions) >= MAX_SUBSCRIPTIONS:
            self.more_subscriptions += 1
            return
        requests = c.messages[CLIENT_TO_SERVER]
        request = requests[0] if requests and requests[0] is not None else {}
        delivered = c.counts["server_to_client"]
        self.subscriptions.append(
            {
                "stream": request.get("stream"),
                "partition": int(request.get("partition", 0)),
                "server": c.server,
                "client": c.client,
                # The first message is the server's empty "subscribed".
                "messages": max(delivered - 1, 0),
                "outcome": outcome,
                **exact_time("start", c.request_ts),
                **exact_time("end", c.end_ts),
                "duration_s": None
                if c.request_ts is None or c.end_ts is None
                else round((c.end_ts - c.request_ts) / 1e9, 3),
            }
        )

    def model(self) -> dict[str, Any] | None:
        """The client section's data; None when the inputs held no gRPC call.

        Returns:
            A JSON-ready dict (calls, messages, methods, publish_async, errors,
            errors_over_time, publish_join, subscriptions, bin_ms), or None.
        """
        if not self.methods:
            return None
        methods = [
            {
                "method": name,
                "calls": m.calls,
                "outcomes": dict(sorted(m.outcomes.items())),
                "latency": m.latency.summary_ms(),
            }
            for name, m in sorted(self.methods.items())
        ]
        policies = sorted(set(self.requests) | set(self.answered))
        return {
            "calls": self.calls,
            "messages": self.messages,
            "methods": methods,
            "publish_async": {
                "requests": sum(self.requests.values()),
                "by_policy": [
                    {"ack_policy": p, "requests": self.requests.get(p, 0), **self._answered(p)}
                    for p in policies
                ],
                "unanswered": len(self.pending),
                "async_errors": self.async_errors,
                "responses_without_request": self.responses_without_request,
            },
            "errors": self.errors.totals(),
            "errors_over_time": self.errors.rows("error", "count"),
            "publish_join": self.join.model(),
            "subscriptions": self.subscriptions,
            "more_subscriptions": self.more_subscriptions,
            "bin_ms": self.axis.width_s * 1000 if self.axis.width_s else None,
        }

    def _answered(self, policy: str) -> dict[str, Any]:
        h = self.answered.get(policy)
        return {"answered": 0 if h is None else h.count, "latency": (h or Histogram()).summary_ms()}


__all__ = ["ClientCalls", "STATUS_NAMES", "status_name"]
