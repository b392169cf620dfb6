"""Partitions over time: leader and leader epoch, follower lag, ISR changes.

What the envelopes say, as Liftbridge v1.9.0 sends them:

- a follower's ReplicationRequest (`replicaID`, `offset`: the newest offset
  it has, `leaderEpoch`) goes to `<ns>.<stream>.<partition>.replicate`, and
  the leader answers on the request's reply inbox with a
  ReplicationResponse (leader epoch, high watermark). The answer's sender
  is the leader; its epoch is the leader epoch; HW minus the follower's
  offset is the follower's lag.
- PropagatedRequests to the metadata leader carry ShrinkISR/ExpandISR
  (stream, partition, replica, leader, leaderEpoch: sent by the leader)
  and ReportLeader (a follower saying the leader at that epoch is gone).
- the metadata Raft log, where decoded (lbparse.raft), carries the
  ChangeLeader/ShrinkISR/ExpandISR ops the controller committed.

A leader "segment" is a run of observations of one (partition, epoch);
the leader's name comes from the ops when they name it, else from the
responding connection's node (`nodes.NodeMap`); each leader says where its
name came from (`leader_source`). A segment seen only in data directories
(`storage`) begins at the first entry written in its epoch: a leader change
dated so is inferred, and says so (`time_source`, `inferred`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from lbparse.report.nodes import INFERRED, NodeMap, partition_of_subject
from lbparse.report.timebins import MS, Maxima, TimeAxis, exact_time

MAX_PARTITIONS = 1000
MAX_SEGMENTS = 2000  # per partition; past this, later epochs are counted only
MAX_REQUESTS = 100_000  # replication requests waiting for their response
MAX_EVENTS = 5000  # ISR changes and leader reports kept (counted beyond)
MAX_LAG_SERIES = 20
MAX_SHOWN = 40  # partitions whose leader timeline is in the model


@dataclass
class Segment:
    """One leader epoch of a partition as the inputs show it.

    Attributes:
        epoch: The leader epoch.
        first_ns: Its first observation, integer nanoseconds since the epoch.
        last_ns: Its last observation, integer nanoseconds since the epoch.
        endpoints: Responder endpoint -> how many replication responses it sent.
        named: The leader named by an op, or None.
        observations: How many observations it is made of.
        source: What first showed it ("replication", "propagated request",
            "raft.db", "segments"...).
        named_by: The source of the op that named it.
        first_source: The source of the observation dated first_ns.
    """

    epoch: int
    first_ns: int
    last_ns: int
    endpoints: dict[str, int] = field(default_factory=dict)  # responder -> responses
    named: str | None = None  # leader named by an op
    observations: int = 0
    source: str = "replication"
    named_by: str = ""  # the source of the op that named it
    first_source: str = ""  # the source of the observation dated first_ns


def time_source(seg: Segment) -> dict[str, Any]:
    """Where a leader change's time comes from.

    It is seen on the wire, or inferred from data directories (the first entry
    written in the new epoch, which comes after the change, by as long as the
    first publish took).

    Args:
        seg: The new epoch's segment.

    Returns:
        {"time_source": ..., "inferred": a sentence, or None when seen}.
    """
    if seg.first_source == "segments":
        return {
            "time_source": "segments",
            "inferred": f"inferred from data directories: first write in epoch {seg.epoch}",
        }
    return {"time_source": seg.first_source, "inferred": None}


class Partitions:
    """The partitions' part of the model: leaders by epoch, ISR events, replication lag.

    Built from replication requests and responses (the responder leads the
    epoch its response names) and from metadata ops (propagated requests, the
    Raft log, data directories).

    Args:
        axis: The report's time axis (lag is kept per bin).
        nodes: The endpoint -> node map, taught by replication requests.
    """

    def __init__(self, axis: TimeAxis, nodes: NodeMap) -> None:
        self.axis = axis
        self.nodes = nodes
        # reply -> (stream, p, follower, offset); oldest out first
        self.requests: OrderedDict[str, tuple[str, int, str, int]] = OrderedDict()
        self.segments: dict[tuple[str, int], list[Segment]] = {}
        self.lag = Maxima(axis)
        self.lag_keys: set[str] = set()
        self.events: list[dict[str, Any]] = []
        self._event_keys: set[tuple[Any, ...]] = set()
        self.events_dropped = 0
        self.responses = 0
        self.requests_seen = 0
        self.deliveries: dict[str, list[tuple[str, int, int]]] = {}  # endpoint -> publishes
        # (stream, partition, epoch) -> leader, from ops that carry no time (raft.db's
        # entries of hashicorp/raft before AppendedAt): they name the segments of that epoch
        self.epoch_names: dict[tuple[str, int, int], str] = {}

    def name_epoch(self, stream: str, part: int, epoch: int, leader: str) -> None:
        """A raft.db entry (no time) names the leader of an epoch.

        Args:
            stream: The stream's name.
            part: The partition number.
            epoch: The leader epoch.
            leader: The leader's node name (empty is ignored).
        """
        if leader and len(self.epoch_names) < MAX_PARTITIONS * 10:
            self.epoch_names[(stream, part, epoch)] = leader

    def delivery(self, endpoint: str, stream: str, part: int, ns: int) -> None:
        """A Publish of (stream, part) delivered to `endpoint`, whose node is not known yet.

        The partition's leader subscribes to its subject, so the endpoint is likely
        the leader's (`resolve_deliveries`).

        Args:
            endpoint: The endpoint it was delivered to.
            stream: The stream's name.
            part: The partition number.
            ns: When, in integer nanoseconds since the epoch.
        """
        seen = self.deliveries.get(endpoint)
        if seen is None:
            if len(self.deliveries) >= MAX_PARTITIONS:
                return
            seen = self.deliveries[endpoint] = []
        if len(seen) < 3:
            seen.append((stream, part, ns))

    def resolve_deliveries(self) -> None:
        """Name the endpoints that received publishes after the partition's leader then."""
        for endpoint, seen in self.deliveries.items():
            if endpoint in self.nodes.by_endpoint or endpoint in self.nodes.connections:
                continue  # named; or its CONNECT line says it is another client's
            for stream, part, ns in seen:
                segs = [s for s in self.segments.get((stream, part), ()) if s.first_ns <= ns]
                if not segs:
                    continue
                name, _ = self._leader_name(max(segs, key=lambda s: s.first_ns))
                if name in self.nodes.by_endpoint.values() or name == segs[-1].named:
                    self.nodes.learn(endpoint, name, INFERRED)
                    break

    # -- replication ---------------------------------------------------------

    def replication_request(self, rec: Any, m: Any, where: tuple[str, int] | None = None) -> None:
        """Take a follower's ReplicationRequest (its PUB; MSG copies are skipped).

        Args:
            rec: The capture record (verb, subject, src, reply).
            m: The decoded ReplicationRequest (replicaID, offset).
            where: The partition of the request's subject, when the caller has it
                (else read from the subject).
        """
        if rec.verb not in ("PUB", "HPUB"):
            return  # MSG copies: the PUB said it all
        if where is None:
            where = partition_of_subject(rec.subject)
        if where is None:
            return  # not a partition's replication subject
        self.requests_seen += 1
        self.nodes.learn(rec.src, m.replicaID)
        if rec.reply:
            self.requests[rec.reply] = (where[0], where[1], m.replicaID, m.offset)
            if len(self.requests) > MAX_REQUESTS:
                self.requests.popitem(last=False)

    def replication_response(self, rec: Any, ns: int, i: int, rr: Any) -> None:
        """Take a leader's ReplicationResponse, paired with its request by reply inbox.

        Args:
            rec: The capture record (verb, subject: the request's reply inbox, src).
            ns: When, in integer nanoseconds since the epoch.
            i: The time bin's index on the axis (for the lag series).
            rr: The decoded response (leader_epoch, high_watermark).
        """
        if rec.verb not in ("PUB", "HPUB"):
            return
        req = self.requests.pop(rec.subject, None)
        if req is None:
            return
        stream, part, follower, offset = req
        self.responses += 1
        self._observe(stream, part, rr.leader_epoch, ns, endpoint=rec.src)
        key = f"{stream}/{part} {follower}"
        if key in self.lag_keys or len(self.lag_keys) < MAX_LAG_SERIES:
            self.lag_keys.add(key)
            self.lag.add(i, key, max(0, rr.high_watermark - offset))

    def _observe(
        self,
        stream: str,
        part: int,
        epoch: int,
        ns: int,
        endpoint: str | None = None,
        named: str | None = None,
        source: str = "replication",
    ) -> None:
        segs = self.segments.get((stream, part))
        if segs is None:
            if len(self.segments) >= MAX_PARTITIONS:
                return
            segs = self.segments[(stream, part)] = []
        seg = segs[-1] if segs else None
        if seg is None or seg.epoch != epoch:
            seg = next((s for s in reversed(segs[-3:]) if s.epoch == epoch), None)
            if seg is None:
                if len(segs) >= MAX_SEGMENTS:
                    return
                seg = Segment(epoch, ns, ns, source=source, first_source=source)
                segs.append(seg)
        seg.last_ns = max(seg.last_ns, ns)
        if ns < seg.first_ns or (ns == seg.first_ns and seg.first_source == "segments"):
            seg.first_ns, seg.first_source = ns, source  # the wire's time before the disk's
        seg.observations += 1
        if endpoint is not None:
            seg.endpoints[endpoint] = seg.endpoints.get(endpoint, 0) + 1
        if named:
            seg.named, seg.named_by = named, source

    # -- metadata ops (propagated requests, the Raft log) ---------------------

    def isr_change(self, ns: int, op: str, m: Any, replica: str, source: str) -> None:
        """ShrinkISR / ExpandISR: `m` has stream, partition, leader, leaderEpoch.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            op: "shrink_isr" or "expand_isr".
            m: The op's message.
            replica: The replica removed or added.
            source: Where it was seen ("propagated request", "raft.db"...).
        """
        self._observe(m.stream, m.partition, m.leaderEpoch, ns, named=m.leader, source=source)
        self._event(ns, op, m.stream, m.partition, replica, m.leader, m.leaderEpoch, source)

    def leader_reported(self, ns: int, m: Any, source: str) -> None:
        """ReportLeader: replica `m.replica` says leader `m.leader` at epoch is gone.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            m: The op's message (stream, partition, replica, leader, leaderEpoch).
            source: Where it was seen.
        """
        self._event(
            ns, "report_leader", m.stream, m.partition, m.replica, m.leader, m.leaderEpoch, source
        )

    def leader_changed(
        self, ns: int, stream: str, part: int, leader: str, epoch: int | None, source: str
    ) -> None:
        """ChangeLeader committed (the Raft log); its index is the new leader epoch.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            stream: The stream's name.
            part: The partition number.
            leader: The new leader's node name.
            epoch: The new leader epoch, or None if unknown.
            source: Where it was seen.
        """
        if epoch is not None:
            self._observe(stream, part, epoch, ns, named=leader, source=source)
        self._event(ns, "change_leader", stream, part, leader, leader, epoch, source)

    def _event(
        self,
        ns: int,
        op: str,
        stream: str,
        part: int,
        replica: str,
        leader: str,
        epoch: int | None,
        source: str,
    ) -> None:
        key = (op, stream, part, replica, leader, epoch)
        if key in self._event_keys:
            return  # a copy: the same op delivered again, or in the Raft log too
        if len(self.events) >= MAX_EVENTS:
            self.events_dropped += 1
            return
        self._event_keys.add(key)
        self.events.append(
            {
                "t": ns / MS,
                "op": op,
                "stream": stream,
                "partition": part,
                "replica": replica,
                "leader": leader,
                "epoch": epoch,
                "source": source,
            }
        )

    # -- the model -------------------------------------------------------------

    def _leader_name(self, seg: Segment) -> tuple[str, str]:
        """The segment's leader, and where that name comes from: the op that named
        it, or the responding connection's node and how that is known."""
        if seg.named:
            return seg.named, seg.named_by
        if seg.endpoints:
            endpoint = max(seg.endpoints, key=lambda e: seg.endpoints[e])
            return self.nodes.name(endpoint), f"responder's node: {self.nodes.source(endpoint)}"
        return "unknown", "unknown"

    def model(self) -> dict[str, Any]:
        """The partitions section's data.

        Names the epochs raft.db named and the endpoints deliveries suggest first
        (resolve_deliveries).

        Returns:
            A JSON-ready dict: partitions, leaders (one row per epoch segment of
            the MAX_SHOWN partitions whose leadership moved most), leader_changes,
            isr_events, counts, and the lag series.
        """
        for (stream, part, epoch), leader in self.epoch_names.items():
            for seg in self.segments.get((stream, part), ()):
                if seg.epoch == epoch and not seg.named:
                    seg.named, seg.named_by = leader, "raft.db"
        self.resolve_deliveries()
        leaders, changes = [], []
        # The partitions whose leadership moved most are drawn; a page of a
        # thousand partitions' bars would show none of them.
        shown = sorted(self.segments, key=lambda k: (-len(self.segments[k]), k))[:MAX_SHOWN]
        for stream, part in sorted(shown):
            segs = self.segments[(stream, part)]
            prev: tuple[str, int] | None = None
            last_seen = 0
            for seg in sorted(segs, key=lambda s: s.first_ns):
                name, how = self._leader_name(seg)
                leaders.append(
                    {
                        "stream": stream,
                        "partition": part,
                        "partition_key": f"{stream}/{part}",
                        "leader": name,
                        "leader_source": how,
                        "epoch": seg.epoch,
                        "start": seg.first_ns / MS,
                        "end": seg.last_ns / MS,
                        "observations": seg.observations,
                    }
                )
                if prev is not None and (prev[0] != name or prev[1] != seg.epoch):
                    changes.append(
                        {
                            "t": seg.first_ns / MS,
                            **exact_time("t", seg.first_ns),
                            "stream": stream,
                            "partition": part,
                            "partition_key": f"{stream}/{part}",
                            "from_leader": prev[0],
                            "to_leader": name,
                            "to_leader_source": how,
                            "from_epoch": prev[1],
                            "to_epoch": seg.epoch,
                            "leader_changed": prev[0] != name,
                            # the old leader's last sign: a failover's start
                            "from_last_seen": last_seen / MS,
                            **time_source(seg),
                        }
                    )
                prev = (name, seg.epoch)
                last_seen = seg.last_ns
        events = sorted(self.events, key=lambda e: e["t"])
        for e in events:
            e["partition_key"] = f"{e['stream']}/{e['partition']}"
        return {
            "partitions": [f"{s}/{p}" for s, p in sorted(self.segments)],
            "partitions_shown": len(shown),
            "replication_requests": self.requests_seen,
            "replication_responses": self.responses,
            "leaders": leaders,
            "leader_changes": sorted(changes, key=lambda c: c["t"]),
            "isr_events": events,
            "isr_events_dropped": self.events_dropped,
            "lag": self.lag.rows("series", "lag"),
        }
