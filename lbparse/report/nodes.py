"""Which Liftbridge node each NATS connection belongs to, learnt from traffic.

A capture shows connections as `host:port` endpoints; Liftbridge names its
nodes inside the messages. An endpoint is tied to a node when it sends a
ReplicationRequest (its `replicaID` is the sender), a ServerInfoResponse
(`id`) or a RaftJoinRequest (`nodeID`), or when it is delivered a message
on a subject addressed to one node (`<namespace>.notify.<node>`,
`<namespace>.raft.metadata.status.<node>`, the Raft transport's
`<namespace>.raft.metadata.<node>.accept|request...`), or when it sends a
ShrinkISR/ExpandISR (`leader`: the partition leader proposes them) or a
ReportLeader (`replica`) to the metadata leader. The first tie of an endpoint
holds (a restarted node gets new ports).

Subject shapes follow Liftbridge v1.9.0's server (server/partition.go,
server/metadata.go: `<namespace>.<stream>.<partition>.replicate|offset`).
"""

from __future__ import annotations

# Tokens after `<ns>.raft.metadata.` that are not node names.
RAFT_SUBJECT_WORDS = ("join", "info", "propagate", "status", "fetch", "bootstrap")
# Subjects a node's replication connection serves, by their last token.
PARTITION_SUFFIXES = ("replicate", "offset")


def partition_of_subject(subject: str) -> tuple[str, int] | None:
    """(stream, partition) of `<namespace>.<stream>.<partition>.replicate|offset`."""
    head, _, last = subject.rpartition(".")
    if last not in PARTITION_SUFFIXES:
        return None
    rest, _, part = head.rpartition(".")
    namespace, _, stream = rest.partition(".")
    if not part.isdigit() or not stream or not namespace:
        return None
    return stream, int(part)


def node_of_subject(subject: str) -> str | None:
    """The node a subject addresses: `<ns>.notify.<node>`, `<ns>.raft.metadata.status.<node>`."""
    tokens = subject.split(".", 5)
    if len(tokens) == 3 and tokens[1] == "notify":
        return tokens[2]
    if len(tokens) >= 5 and tokens[1] == "raft" and tokens[2] == "metadata":
        if tokens[3] == "status" and len(tokens) == 5:
            return tokens[4]
        if tokens[4] in ("accept", "request") and tokens[3] not in RAFT_SUBJECT_WORDS:
            return tokens[3]
    return None


class NodeMap:
    """endpoint -> node name."""

    def __init__(self) -> None:
        self.by_endpoint: dict[str, str] = {}

    def learn(self, endpoint: str, node: str) -> None:
        if node and endpoint not in self.by_endpoint:
            self.by_endpoint[endpoint] = node

    def name(self, endpoint: str) -> str:
        """The node of `endpoint`, or the endpoint itself when unknown."""
        return self.by_endpoint.get(endpoint, endpoint)

    def nodes(self) -> list[str]:
        return sorted(set(self.by_endpoint.values()))
