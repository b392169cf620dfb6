"""Publish -> Ack latency: each Publish paired with its Ack.

A Publish (proto.Message) that asks for an ack names an ack inbox and a
correlation id; the Ack (proto.Ack) the partition leader sends carries the
same two. The pair's latency is the capture time of the Ack minus that of
the Publish, each taken at its first sighting (the capture sees a message
once as the sender's PUB and again as each subscriber's MSG). Acks also
carry the server's own reception and commit timestamps, whose difference
(the commit time) needs no Publish at all.

Publishes are counted by AckPolicy; those with policy NONE or without an
ack inbox expect no ack. Publishes still waiting at the end, or pushed out
of the bounded table of waiting ones, are counted unacked (by the time bin
they were published in: a failover shows as a spike of them).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from lbparse.digits import ascii_int
from lbparse.report.histogram import Histogram
from lbparse.report.timebins import Counts, TimeAxis

# Publishes waiting for their Ack, and recently paired ids (whose MSG copies
# must not count again): bounded, oldest forgotten first.
MAX_PENDING = 200_000
MAX_RECENT = 200_000
POLICY_NAMES = {0: "LEADER", 1: "ALL", 2: "NONE"}  # proto.AckPolicy (spec/proto/api.proto)
ACK_ERRORS = {0: "OK", 1: "UNKNOWN", 2: "INCORRECT_OFFSET", 3: "TOO_LARGE", 4: "ENCRYPTION"}


def _policy_name(value: int | str) -> str:
    if isinstance(value, str):  # the columnar path's rows name their enums
        number = ascii_int(value)
        return value if number is None else _policy_name(number)
    return POLICY_NAMES.get(value, f"policy {value}")


class AckLatency:
    """Publish-to-ack latency: each Publish paired with its Ack, by ack policy.

    A publish is named by its ack inbox and correlationId; those waiting for
    their ack are kept up to MAX_PENDING, the oldest then counted unacked.
    Copies of a message already seen (its MSG deliveries) count once.

    Args:
        axis: The report's time axis; this registers with it to be rekeyed
            when its bins widen.
    """

    def __init__(self, axis: TimeAxis) -> None:
        self.axis = axis
        # Oldest out first: an OrderedDict pops its oldest entry in O(1) (a
        # dict's first key is found past every slot deleted before it).
        self.pending: OrderedDict[str, tuple[int, int, str]] = OrderedDict()  # (ns, bin, policy)
        self.recent: OrderedDict[str, None] = OrderedDict()
        self.latency: dict[str, Histogram] = {}  # by policy
        self.commit: dict[str, Histogram] = {}  # server commit - reception, by policy
        self.by_bin: dict[tuple[int, str], Histogram] = {}  # (bin of the publish, policy)
        axis.register(self)
        self.published = Counts(axis)  # publishes expecting an ack, by policy
        self.unacked = Counts(axis)  # of those, never acked (bin of the publish)
        self.acked = Counts(axis)  # acks paired, by policy
        self.publishes = 0
        self.no_ack_expected = 0
        self.duplicates = 0  # MSG copies of a Publish or an Ack already seen
        self.acks = 0
        self.acks_without_publish = 0
        self.ack_errors: dict[str, int] = {}
        self.evicted = 0

    def rekey(self, factor: int) -> None:
        """Move the per-bin state to bins `factor` times wider (the axis grew).

        Args:
            factor: How many old bins make one new bin.
        """
        old, self.by_bin = self.by_bin, {}
        for (i, policy), h in old.items():
            self._bin_hist(i // factor, policy).merge(h)
        self.pending = OrderedDict(
            (k, (ns, i // factor, p)) for k, (ns, i, p) in self.pending.items()
        )

    def _bin_hist(self, i: int, policy: str) -> Histogram:
        h = self.by_bin.get((i, policy))
        if h is None:
            h = self.by_bin[(i, policy)] = Histogram()
        return h

    def publish(self, ns: int, i: int, m: Any, payload: bytes) -> None:
        """A proto.Message seen at `ns` (bin `i`), whose envelope is `payload`.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            i: The time bin's index on the axis.
            m: The decoded Publish message (ackInbox, correlationId, ackPolicy).
            payload: The envelope's bytes (they name a message without an ack inbox).
        """
        inbox, cid = m.ackInbox, m.correlationId
        # Without an ack inbox nothing names the message: its copies are
        # told apart by their bytes (identical ones count once while remembered).
        key = inbox + "\0" + cid if inbox else f"#{hash(payload)}"
        if key in self.pending or key in self.recent:
            self.duplicates += 1
            return
        policy = _policy_name(m.ackPolicy)
        self.publishes += 1
        if not inbox or policy == "NONE":
            self.no_ack_expected += 1
            self._remember(key)
            return
        self.published.add(i, policy)
        self.pending[key] = (ns, i, policy)
        if len(self.pending) > MAX_PENDING:
            _, (_, oi, op) = self.pending.popitem(last=False)
            self.unacked.add(oi, op)
            self.evicted += 1

    def ack(self, ns: int, m: Any) -> None:
        """A proto.Ack seen at `ns`.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            m: The decoded Ack (ackInbox, correlationId, ackPolicy, ackError,
                reception and commit timestamps).
        """
        key = m.ackInbox + "\0" + m.correlationId
        if key in self.recent:
            self.duplicates += 1
            return
        self.acks += 1
        error = ACK_ERRORS.get(m.ackError, str(m.ackError))
        self.ack_errors[error] = self.ack_errors.get(error, 0) + 1
        policy = _policy_name(m.ackPolicy)
        rec, com = m.receptionTimestamp, m.commitTimestamp
        if rec > 0 and com >= rec:
            self._hist(self.commit, policy).add(com - rec)
        waiting = self.pending.pop(key, None)
        self._remember(key)
        if waiting is None:
            self.acks_without_publish += 1
            return
        pns, pi, ppolicy = waiting
        self._hist(self.latency, ppolicy).add(ns - pns)
        self._bin_hist(pi, ppolicy).add(ns - pns)
        self.acked.add(pi, ppolicy)

    def _remember(self, key: str) -> None:
        self.recent[key] = None
        if len(self.recent) > MAX_RECENT:
            self.recent.popitem(last=False)

    @staticmethod
    def _hist(table: dict[str, Histogram], policy: str) -> Histogram:
        h = table.get(policy)
        if h is None:
            h = table[policy] = Histogram()
        return h

    def model(self) -> dict[str, Any]:
        """The latency part of the report's data.

        Returns:
            A JSON-ready dict: counts (publishes, acked, unacked, acks, ack errors,
            copies skipped), latency and commit summaries by policy, the histogram
            and the latency, unacked and published counts over time.
        """
        unacked = Counts(self.axis)
        unacked.data = dict(self.unacked.data)
        for _, i, policy in self.pending.values():
            unacked.add(i, policy)
        over_time = []
        for (i, policy), h in sorted(self.by_bin.items()):
            row = {"t": self.axis.start_ms(i), "ack_policy": policy}
            row.update(h.summary_ms())
            over_time.append(row)
        histogram = [
            dict(ack_policy=p, **row)
            for p, h in sorted(self.latency.items())
            for row in h.bucket_rows()
        ]
        return {
            "publishes": self.publishes,
            "expecting_ack": sum(self.published.totals().values()),
            "no_ack_expected": self.no_ack_expected,
            "acked": sum(h.count for h in self.latency.values()),
            "unacked": sum(unacked.totals().values()),
            "unacked_by_policy": unacked.totals(),
            "acks": self.acks,
            "acks_without_publish": self.acks_without_publish,
            "ack_errors": dict(sorted(self.ack_errors.items())),
            "copies_skipped": self.duplicates,
            "summary": {p: h.summary_ms() for p, h in sorted(self.latency.items())},
            "commit_summary": {p: h.summary_ms() for p, h in sorted(self.commit.items())},
            "histogram": histogram,
            "over_time": over_time,
            "unacked_over_time": unacked.rows("ack_policy", "count"),
            "published_over_time": self.published.rows("ack_policy", "count"),
        }
