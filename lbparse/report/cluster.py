"""The cluster: NATS 503s (no responders), the metadata leader, Raft elections and ops.

- A request to a subject nobody serves (a node that is down) is answered
  by the NATS server itself with a status message: `HMSG <reply inbox>`
  whose header block's first line is `NATS/1.0 503` and carries no
  headers. The request it answers is found by its reply inbox.
- The metadata (Raft) leader answers PropagatedRequests and
  RaftJoinRequests: the sender of a PropagatedResponse or RaftJoinResponse
  is the metadata leader at that time.
- The Raft transport (`<ns>.raft.metadata.<node>.request._INBOX...`) is
  decoded where lbparse.raft is there (`raft_events.RaftEvents`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from lbparse.report.nodes import NodeMap
from lbparse.report.timebins import MS, Counts, TimeAxis, exact_time

NO_RESPONDERS = b"NATS/1.0 503"
STATUS_503 = b"\r\nStatus: 503\r\n"
MAX_REPLIES = 200_000  # reply inbox -> request subject, oldest forgotten first
TOP_TARGETS = 12  # drawn one by one over time; the rest as "(other)"
MAX_TARGETS = 200  # distinct request subjects counted one by one
OTHER = "(other subjects)"
MAX_LEADER_SEGMENTS = 5000


def is_no_responders(header_block: bytes | None) -> bool:
    """Whether a header block is a NATS status message 503 (no responders).

    The status is on the header block's first line, or kept as a `Status: 503`
    header (recordings and the pipeline's output keep headers only).

    Args:
        header_block: An HMSG's header block, or None for a message without one.

    Returns:
        True if it says 503.
    """
    if header_block is None:
        return False
    if header_block.startswith(NO_RESPONDERS):
        return len(header_block) == len(NO_RESPONDERS) or header_block[len(NO_RESPONDERS)] in b" \r"
    return STATUS_503 in header_block


class Cluster:
    """The cluster's part of the model: 503s, the metadata leader, metadata ops.

    Args:
        axis: The report's time axis (503s and ops are counted per bin).
        nodes: The endpoint -> node map shared with the other parts.
    """

    def __init__(self, axis: TimeAxis, nodes: NodeMap) -> None:
        self.axis = axis
        self.nodes = nodes
        self.replies: OrderedDict[str, str] = OrderedDict()  # oldest out first
        self.no_responders = Counts(axis)
        self.no_responders_total = 0
        self.targets: dict[str, dict[str, Any]] = {}
        self.leader_segments: list[list[Any]] = []  # [endpoint, first_ns, last_ns, answers]
        self.ops = Counts(axis)  # metadata ops proposed, by op

    def request(self, reply: str, subject: str) -> None:
        """Remember which request subject a reply inbox answers.

        The table forgets its oldest entries beyond MAX_REPLIES.

        Args:
            reply: The request's reply inbox.
            subject: The subject it was sent to.
        """
        replies = self.replies
        if reply not in replies:
            replies[reply] = subject
            if len(replies) > MAX_REPLIES:
                replies.popitem(last=False)

    def status_503(self, ns: int, i: int, inbox: str) -> str:
        """Count a no-responders status delivered to `inbox`.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            i: The time bin's index on the axis.
            inbox: The reply inbox it was delivered to.

        Returns:
            The request subject it answers, or "(unknown request)".
        """
        target = self.replies.get(inbox, "(unknown request)")
        key = target if target in self.targets or len(self.targets) < MAX_TARGETS else OTHER
        info = self.targets.get(key)
        if info is None:
            info = self.targets[key] = {"subject": key, "count": 0, "first": ns / MS}
        info["count"] += 1
        info["last"] = ns / MS
        self.no_responders.add(i, key)
        self.no_responders_total += 1
        return target

    def metadata_answer(self, ns: int, endpoint: str) -> None:
        """A PropagatedResponse / RaftJoinResponse sent from `endpoint`.

        Its sender was the metadata leader at that time.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            endpoint: The sender's endpoint ("host:port").
        """
        segs = self.leader_segments
        if segs and segs[-1][0] == endpoint:
            segs[-1][2] = ns
            segs[-1][3] += 1
        elif len(segs) < MAX_LEADER_SEGMENTS:
            segs.append([endpoint, ns, ns, 1])

    def propagated(self, i: int, op: str) -> None:
        """Count a metadata op proposed (a PropagatedRequest).

        Args:
            i: The time bin's index on the axis.
            op: The op's name (protocol.Op, such as "SHRINK_ISR").
        """
        self.ops.add(i, op)

    def model(self) -> dict[str, Any]:
        """The cluster section's data.

        Returns:
            A JSON-ready dict: nodes and how each is known, connections, node
            conflicts, 503s (total, over time, by target), metadata_leaders (runs
            of answers by one leader) and propagated ops.
        """
        leaders: list[dict[str, Any]] = []
        for endpoint, first, last, answers in self.leader_segments:
            name = self.nodes.name(endpoint)
            if leaders and leaders[-1]["leader"] == name:
                leaders[-1]["end"] = last / MS
                leaders[-1].update(exact_time("end", last))
                leaders[-1]["answers"] += answers
            else:
                # start/end: its first and last answer, not its term's span
                # (report.leaders has that)
                leaders.append(
                    {
                        "leader": name,
                        "start": first / MS,
                        **exact_time("start", first),
                        "end": last / MS,
                        **exact_time("end", last),
                        "answers": answers,
                        "source": "metadata answers",
                        "leader_source": self.nodes.source(endpoint),
                    }
                )
        nodes = self.nodes
        return {
            "nodes": {e: n for e, n in sorted(nodes.by_endpoint.items())},
            # how each endpoint's node is known: "CONNECT name", "messages" (what its
            # messages say) or "inferred from publish deliveries"
            "node_sources": {e: nodes.how[e] for e in sorted(nodes.by_endpoint)},
            "connections": dict(sorted(nodes.connections.items())),  # endpoint -> CONNECT name
            "node_conflicts": nodes.conflicts,
            "node_names": nodes.nodes(),
            "no_responders_total": self.no_responders_total,
            "no_responders": self.no_responders.rows("target", "count", top=TOP_TARGETS),
            "no_responders_by_target": sorted(
                self.targets.values(), key=lambda d: (-d["count"], d["subject"])
            ),
            "metadata_leaders": leaders,
            "propagated_ops": self.ops.rows("op", "count"),
            "propagated_ops_total": self.ops.totals(),
        }


def check_leaders(leaders: list[dict[str, Any]], terms: list[dict[str, Any]]) -> None:
    """Set each metadata leader beside the Raft terms whose AppendEntries span its time.

    Each leader row gets `raft_leaders` (the leaders those terms name) and
    `agrees_with_raft` (None where no decoded term spans it). Two facts that
    disagree say so.

    Args:
        leaders: The model's cluster.metadata_leaders rows, changed in place.
        terms: The decoded Raft terms (cluster.raft.terms), with start/end/leader.
    """
    for seg in leaders:
        named = sorted(
            {t["leader"] for t in terms if t["start"] <= seg["end"] and seg["start"] <= t["end"]}
        )
        seg["raft_leaders"] = named
        seg["agrees_with_raft"] = (seg["leader"] in named) if named else None
