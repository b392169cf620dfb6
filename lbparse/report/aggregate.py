"""One streaming pass from records to the report's data (the `--json` model).

`Aggregator.add(record)` takes each record once, in time order per input,
and keeps only bounded state: counts per time bin (`timebins`), latency
histograms, tables of waiting requests that forget their oldest entries.
`Aggregator.model(...)` returns the data behind every chart as plain JSON
types; the HTML is rendered from that alone (`render.render_html`).
"""

from __future__ import annotations

from typing import Any

from lbparse.capture.records import NO_TIME
from lbparse.codec.flatbuf import FlatTable
from lbparse.report.client_calls import ClientCalls
from lbparse.report.cluster import Cluster, check_leaders, is_no_responders
from lbparse.report.failovers import Activity, failover_windows, lookups_model
from lbparse.report.latency import AckLatency
from lbparse.report.leaders import leader_terms
from lbparse.report.nodes import SUBSCRIBED, NodeMap, node_of_subject, partition_of_subject
from lbparse.report.partitions import Partitions
from lbparse.report.problems import Problems
from lbparse.report.raft_events import RaftEvents, is_transport_subject
from lbparse.report.storage import Storage
from lbparse.report.timebins import MS, Counts, S, TimeAxis, exact_time
from lbparse.textform import NO_MSG_TYPE
from lbparse.version import __version__
from lbparse_generated.fb_schema import TABLES

SCHEMA_VERSION = 1
MAX_STREAMS = 200
OTHER_STREAMS = "(other streams)"
MAX_TOP_SUBJECTS = 25
TOP_KEYS = 12  # streams (by messages) drawn one by one over time; the rest as "(other)"
PUBLISHING_VERBS = ("PUB", "HPUB")
# protocol.Op (spec/proto/internal.proto), by number: PropagatedRequest.op
_OPS: dict[int, str] = {}


def _op_name(m: Any) -> str:
    number = m.op
    if isinstance(number, str):  # the columnar path's rows name their enums
        return number
    name = _OPS.get(number)
    if name is None:
        value = m.DESCRIPTOR.fields_by_name["op"].enum_type.values_by_number.get(number)
        name = _OPS[number] = value.name if value is not None else f"Op({number})"
    return name


class FlatFields:
    """A FlatBuffers table read as the handlers read a protobuf message.

    The FlatBuffers layouts' Publish and Ack are read as the handlers read the
    protobuf message of the same MsgType: fields as attributes, one absent (or
    that only the protobuf message has, such as ackError) as its zero, byte
    vectors (correlationId) as text, since the protobuf messages have strings
    there.

    Args:
        table: The decoded FlatBuffers table; its type_name names its layout in
            the generated schema (TABLES).
    """

    __slots__ = ("_fields", "_zeros")

    def __init__(self, table: FlatTable) -> None:
        self._fields = table.fields
        self._zeros = {
            name: "" if ftype in ("string", "[ubyte]") else 0
            for _, name, ftype in TABLES[table.type_name]
        }

    def __getattr__(self, name: str) -> Any:
        value = self._fields.get(name)
        if value is None:
            return self._zeros.get(name, 0)
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return value


def handler_view(message: Any) -> Any:
    """What a handler reads of a decoded payload: FlatBuffers tables as FlatFields.

    Args:
        message: A decoded envelope's payload (a protobuf message or a FlatTable).

    Returns:
        The message itself, or a FlatFields view of it if it is a FlatTable.
    """
    return FlatFields(message) if isinstance(message, FlatTable) else message


class Aggregator:
    """The one streaming pass from records to the report's data.

    Keeps bounded state only (counts per time bin, latency histograms, tables
    of waiting requests that forget their oldest entries); `model()` returns
    the data behind every chart.

    Args:
        raft: Whether to decode the Raft transport's messages (report.raft_events);
            False leaves the model's cluster.raft as "not asked for".
    """

    def __init__(self, raft: bool = True) -> None:
        self.axis = TimeAxis()
        self.nodes = NodeMap()
        self.by_type = Counts(self.axis)
        self.by_stream = Counts(self.axis)
        self.volume = Counts(self.axis)  # payload bytes by direction
        self.latency = AckLatency(self.axis)
        self.partitions = Partitions(self.axis, self.nodes)
        self.cluster = Cluster(self.axis, self.nodes)
        self.problems = Problems(self.axis)
        self.client = ClientCalls(self.axis)  # the gRPC API (report.client_calls)
        self.streams: set[str] = set()
        self.raft: Any = None
        self.raft_missing = "not asked for"
        if raft:
            self.raft = RaftEvents(self.axis, self.partitions)
            self.raft_missing = ""
        self._feed_msg_raft = True  # until a PUB is seen: a recording holds only MSGs
        self._partition_cache: dict[str, tuple[str, int] | None] = {}
        self._replies = self.cluster.replies
        self._handlers = {
            "Publish": self._on_publish,
            "Ack": self._on_ack,
            "ReplicationResponse": self._on_replication_response,
            "ReplicationRequest": self._on_replication_request,
            "PartitionNotification": self._on_stream_field,
            "PartitionStatusRequest": self._on_stream_field,
            "LeaderEpochOffsetRequest": self._on_request_subject,
            "LeaderEpochOffsetResponse": self._on_reply_subject,
        }
        self.messages = 0
        self.bytes = 0
        self._storage: Storage | None = None
        self.activity = Activity()  # each connection's span: when nodes went silent

    # -- records ----------------------------------------------------------------

    def add(self, rec: Any) -> None:
        """Take one record into the counts, tables and histograms.

        The hot path: one call per message, in time order per input. A record whose
        time is NO_TIME is counted (messages, bytes) but placed on no time bin.

        Args:
            rec: A capture record (lbparse.capture.records fields: ts in integer
                nanoseconds since the epoch, verb, subject, reply, src, dst,
                payload, header_block, envelope, error).
        """
        # The hot path: one call per message, a million times for a large
        # capture. Counters are updated in their dicts directly and the
        # time bin is computed inline unless the axis must grow.
        ns: int = rec.ts  # integer nanoseconds since the epoch (fields.RECORD's ts)
        if ns == NO_TIME:  # a recording's time that did not fit (its bad_record said):
            self.messages += 1  # counted, on no time axis (not in 1677)
            self.bytes += len(rec.payload)
            return
        axis = self.axis
        i = ns // axis.width
        if not axis.lo <= i <= axis.hi:
            i = axis.index(ns)
        elif ns > axis.last_ns:  # type: ignore[operator]
            axis.last_ns = ns
        elif ns < axis.first_ns:  # type: ignore[operator]
            axis.first_ns = ns
        payload = rec.payload
        size = len(payload)
        self.messages += 1
        self.bytes += size
        verb = rec.verb
        publishing = verb in PUBLISHING_VERBS
        data = self.volume.data
        key = (i, "client_to_server" if publishing else "server_to_client")
        data[key] = data.get(key, 0) + size
        spans = self.activity.spans
        endpoint = rec.src if publishing else rec.dst
        span = spans.get(endpoint)
        if span is not None and span[0] <= ns:
            if ns > span[1]:
                span[1] = ns
        else:
            self.activity.see_span(endpoint, ns, ns)
        reply = rec.reply
        if reply and reply not in self._replies:  # its delivery names the same request
            self.cluster.request(reply, rec.subject)
        if not publishing:
            dst = rec.dst
            if dst not in self.nodes.by_endpoint:
                node = node_of_subject(rec.subject)  # delivered on a subject naming its node
                if node is not None:
                    self.nodes.learn(dst, node, SUBSCRIBED)
        env = rec.envelope
        stream = None
        if env is not None:
            name = env.msg_type_name
            if name is None:
                name = NO_MSG_TYPE
                if self.raft is not None:
                    self._raft_feed(rec, ns, i, payload)
            else:
                handler = self._handlers.get(name)
                if handler is not None:
                    stream = handler(rec, ns, i, handler_view(env.message), payload)
                elif publishing:
                    self._typed_rest(rec, ns, i, name, env.message)
        elif rec.error is not None:
            name = "(error)"
            self.problems.error(ns, i, rec)
        else:
            name = "(not decoded)"
        data = self.by_type.data
        key = (i, name)
        data[key] = data.get(key, 0) + 1
        if stream:
            if stream not in self.streams:
                if len(self.streams) >= MAX_STREAMS:
                    stream = OTHER_STREAMS
                self.streams.add(stream)
            data = self.by_stream.data
            key = (i, stream)
            data[key] = data.get(key, 0) + 1
        if verb == "HMSG" and is_no_responders(rec.header_block):
            self.cluster.status_503(ns, i, rec.subject)

    def _raft_feed(self, rec: Any, ns: int, i: int, payload: bytes) -> None:
        subject = rec.subject
        if not is_transport_subject(subject):
            return
        if rec.verb in PUBLISHING_VERBS:
            self._feed_msg_raft = False
            self.raft.feed(ns, i, (rec.src, subject), payload, sender=rec.src)
        elif self._feed_msg_raft:
            self.raft.feed(ns, i, (rec.dst, subject), payload)

    def _partition(self, subject: str | None) -> tuple[str, int] | None:
        """partition_of_subject, remembered: a few subjects recur all the time."""
        if subject is None:
            return None
        cache = self._partition_cache
        where = cache.get(subject, False)
        if where is False:
            if len(cache) > 10_000:
                cache.clear()
            where = cache[subject] = partition_of_subject(subject)
        return where  # type: ignore[return-value]

    # Handlers of decoded envelopes: the stream the message concerns, if any.

    def _on_publish(self, rec: Any, ns: int, i: int, m: Any, payload: bytes) -> str | None:
        self.latency.publish(ns, i, m, payload)
        self.client.join.nats_publish(ns, m, rec.subject)
        if rec.verb not in PUBLISHING_VERBS and rec.dst not in self.nodes.by_endpoint:
            self.partitions.delivery(rec.dst, m.stream, m.partition, ns)
        return str(m.stream)

    def _on_ack(self, rec: Any, ns: int, i: int, m: Any, payload: bytes) -> str | None:
        self.latency.ack(ns, m)
        self.client.join.nats_ack(ns, m)
        return str(m.stream)

    def _on_replication_response(
        self, rec: Any, ns: int, i: int, m: Any, payload: bytes
    ) -> str | None:
        where = self._partition(self.cluster.replies.get(rec.subject))
        self.partitions.replication_response(rec, ns, i, m)
        return where[0] if where else None

    def _on_replication_request(
        self, rec: Any, ns: int, i: int, m: Any, payload: bytes
    ) -> str | None:
        where = self._partition(rec.subject)
        self.partitions.replication_request(rec, m, where)
        return where[0] if where else None

    def _on_stream_field(self, rec: Any, ns: int, i: int, m: Any, payload: bytes) -> str | None:
        return str(m.stream)

    def _on_request_subject(self, rec: Any, ns: int, i: int, m: Any, payload: bytes) -> str | None:
        where = self._partition(rec.subject)
        return where[0] if where else None

    def _on_reply_subject(self, rec: Any, ns: int, i: int, m: Any, payload: bytes) -> str | None:
        where = self._partition(self.cluster.replies.get(rec.subject))
        return where[0] if where else None

    def _typed_rest(self, rec: Any, ns: int, i: int, name: str, m: Any) -> None:
        """The sender's PUB of the other envelopes (their deliveries say no more)."""
        if name == "ServerInfoResponse":
            self.nodes.learn(rec.src, m.id)
        elif name == "RaftJoinRequest":
            self.nodes.learn(rec.src, m.nodeID)
        elif name in ("PropagatedResponse", "RaftJoinResponse"):
            self.cluster.metadata_answer(ns, rec.src)
        elif name == "PropagatedRequest":
            self._propagated(ns, i, m, rec.src)

    def _propagated(self, ns: int, i: int, m: Any, sender: str) -> None:
        op = _op_name(m)
        self.cluster.propagated(i, op)
        if op == "SHRINK_ISR":
            o = m.shrinkISROp
            self.nodes.learn(sender, o.leader)
            self.partitions.isr_change(ns, "shrink_isr", o, o.replicaToRemove, "propagated request")
        elif op == "EXPAND_ISR":
            o = m.expandISROp
            self.nodes.learn(sender, o.leader)
            self.partitions.isr_change(ns, "expand_isr", o, o.replicaToAdd, "propagated request")
        elif op == "REPORT_LEADER":
            self.nodes.learn(sender, m.reportLeaderOp.replica)
            self.partitions.leader_reported(ns, m.reportLeaderOp, "propagated request")

    def connect_names(self, names: dict[str, str]) -> None:
        """Record the CONNECT names of an input's connections.

        These are facts that name their nodes over anything the messages suggested.

        Args:
            names: Endpoint ("host:port") -> the name its CONNECT gave.
        """
        for endpoint, name in names.items():
            self.nodes.connect(endpoint, name)

    def storage(self) -> Storage:
        """The data directories' part (report.storage.Storage), made when first asked for.

        Returns:
            The Storage collector shared by every data directory of this report.
        """
        if self._storage is None:
            self._storage = Storage(self.axis, self.partitions, self.raft, self.problems)
        return self._storage

    def notice(self, kind: str, ns: int | None, where: str, message: str) -> None:
        """Record a problem notice (shown in the report's problems).

        Args:
            kind: The notice's kind (a short token, such as "truncated").
            ns: When, in integer nanoseconds since the epoch, or None if unknown.
            where: The input and place it concerns.
            message: The notice's text.
        """
        self.problems.notice(kind, ns, where, message)

    def note(self, kind: str, ns: int | None, where: str, message: str) -> None:
        """An information notice (lbparse.capture.Notice.info): shown, not a problem.

        Args:
            kind: The notice's kind (a short token).
            ns: When, in integer nanoseconds since the epoch, or None if unknown.
            where: The input and place it concerns.
            message: The notice's text.
        """
        self.problems.note(kind, ns, where, message)

    # -- the model ----------------------------------------------------------------

    def traffic_model(self) -> dict[str, Any]:
        """The traffic section of the model: messages and bytes per time bin.

        Returns:
            A JSON-ready dict: by_msg_type, by_stream (top streams, the rest as
            "(other)"), bytes (per direction, bytes per second), msg_type_totals and
            stream_totals (most first).
        """
        width = self.axis.width_s

        def rate(i: int, key: str, n: int) -> dict[str, Any]:
            return {"rate": round(n / width, 3)}

        return {
            "by_msg_type": self.by_type.rows("msg_type", "count", rate),
            "by_stream": self.by_stream.rows("stream", "count", rate, top=TOP_KEYS),
            "bytes": self.volume.rows(
                "direction", "bytes", lambda i, k, n: {"bytes_per_s": round(n / width, 1)}
            ),
            "msg_type_totals": dict(
                sorted(self.by_type.totals().items(), key=lambda kv: (-kv[1], kv[0]))
            ),
            "stream_totals": dict(
                sorted(self.by_stream.totals().items(), key=lambda kv: (-kv[1], kv[0]))
            ),
        }

    def model(self, inputs: list[dict[str, Any]], stats: dict[str, Any]) -> dict[str, Any]:
        """The report's data: plain JSON values only.

        Args:
            inputs: One summary dict per input read (InputSummary.to_json_dict()).
            stats: The reading's totals; its "per_subject" counts are replaced by the
                number of subjects and the top MAX_TOP_SUBJECTS of them.

        Returns:
            The whole model (the `--json` output): report, inputs, totals, traffic,
            latency, partitions, cluster, problems, client and storage sections.
        """
        first, last = self.axis.first_ns, self.axis.last_ns
        totals = dict(stats)
        subjects = totals.pop("per_subject", {})
        totals["subjects"] = len(subjects)
        totals["top_subjects"] = dict(list(subjects.items())[:MAX_TOP_SUBJECTS])
        totals["payload_bytes"] = self.bytes
        storage = self._storage.model() if self._storage is not None else None
        partitions = self.partitions.model()  # first: it names more endpoints
        cluster = self.cluster.model()
        cluster["raft"] = (
            self.raft.model()
            if self.raft is not None
            else {"decoded": False, "why": self.raft_missing}
        )
        check_leaders(cluster["metadata_leaders"], cluster["raft"].get("terms", []))
        cluster["node_silences"] = self.activity.silences(self.nodes, last)
        cluster["leader_terms"] = leader_terms(
            cluster, storage["raft_dbs"] if storage is not None else [], last
        )
        client = self.client.model()
        if client is not None:
            client["metadata_lookups"] = lookups_model(
                self.client.lookups,
                failover_windows(partitions, cluster, None if last is None else last / MS),
            )
        return {
            "report": {
                "schema": SCHEMA_VERSION,
                "generator": f"lbparse {__version__}",
                "first": None if first is None else first / MS,
                "last": None if last is None else last / MS,
                **exact_time("first", first),
                **exact_time("last", last),
                "duration_s": None if first is None or last is None else (last - first) / S,
                "bin_s": self.axis.width_s,
            },
            "inputs": inputs,
            "totals": totals,
            "traffic": self.traffic_model(),
            "latency": self.latency.model(),
            "partitions": partitions,
            "cluster": cluster,
            "problems": self.problems.model(),
            "client": client,
            "storage": storage
            or {"replicas": [], "stored_by_stream": [], "raft_dbs": [], "findings": 0},
        }
