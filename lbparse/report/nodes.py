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

Above all these, a connection's CONNECT line names it: Liftbridge's
`LIFT.<namespace>.<node>.<role>` (lbparse.capture.connects) is what the
node said of itself, and replaces whatever the messages suggested. Below
them, an endpoint that only received a partition's publishes is guessed to
be its leader's (`partitions.resolve_deliveries`): such a name is kept
apart as inferred (`how`), and never replaces a fact. An endpoint that
nothing names is "unknown" (`name`), never the guess of a name.

Subject shapes follow Liftbridge v1.9.0's server (server/partition.go,
server/metadata.go: `<namespace>.<stream>.<partition>.replicate|offset`).
"""

from __future__ import annotations

from lbparse.capture.connects import lift_name
from lbparse.digits import ascii_int

# Tokens after `<ns>.raft.metadata.` that are not node names.
RAFT_SUBJECT_WORDS = ("join", "info", "propagate", "status", "fetch", "bootstrap")
# Subjects a node's replication connection serves, by their last token.
PARTITION_SUFFIXES = ("replicate", "offset")


def partition_of_subject(subject: str) -> tuple[str, int] | None:
    """(stream, partition) of `<namespace>.<stream>.<partition>.replicate|offset`.

    Args:
        subject: A NATS subject.

    Returns:
        The stream's name and partition number, or None for any other subject.
    """
    head, _, last = subject.rpartition(".")
    if last not in PARTITION_SUFFIXES:
        return None
    rest, _, part = head.rpartition(".")
    namespace, _, stream = rest.partition(".")
    number = ascii_int(part, 2**31 - 1)  # a partition is an int32
    if number is None or not stream or not namespace:
        return None
    return stream, number


def node_of_subject(subject: str) -> str | None:
    """The node a subject addresses: `<ns>.notify.<node>`, `<ns>.raft.metadata.status.<node>`.

    Also `<ns>.raft.metadata.<node>.accept|request...` (the Raft transport).

    Args:
        subject: A NATS subject.

    Returns:
        The node's name, or None if the subject addresses no node.
    """
    tokens = subject.split(".", 5)
    if len(tokens) == 3 and tokens[1] == "notify":
        return tokens[2]
    if len(tokens) >= 5 and tokens[1] == "raft" and tokens[2] == "metadata":
        if tokens[3] == "status" and len(tokens) == 5:
            return tokens[4]
        if tokens[4] in ("accept", "request") and tokens[3] not in RAFT_SUBJECT_WORDS:
            return tokens[3]
    return None


# How an endpoint's node is known (`NodeMap.how`), most certain first.
CONNECT_NAME = "CONNECT name"
FROM_MESSAGES = "messages"  # what its messages say (above), e.g. a replicaID
# delivered a message on a subject addressed to one node: the node subscribes to
# it, but so does any wildcard subscriber (a tap on '>'), whose CONNECT says so
SUBSCRIBED = "delivered a subject naming its node"
INFERRED = "inferred from publish deliveries"
_RANK = {CONNECT_NAME: 0, FROM_MESSAGES: 1, SUBSCRIBED: 1, INFERRED: 2}
_FROM_TRAFFIC = (FROM_MESSAGES, SUBSCRIBED)
UNKNOWN = "unknown"
MAX_CONFLICTS = 20


def unknown(endpoint: str) -> str:
    """What the report calls the node of an endpoint that nothing names.

    Args:
        endpoint: The endpoint ("host:port").

    Returns:
        "unknown (ENDPOINT)".
    """
    return f"{UNKNOWN} ({endpoint})"


class NodeMap:
    """endpoint -> node name, and how each is known."""

    def __init__(self) -> None:
        self.by_endpoint: dict[str, str] = {}
        self.how: dict[str, str] = {}  # endpoint -> CONNECT_NAME, FROM_MESSAGES...
        self.connections: dict[str, str] = {}  # endpoint -> its CONNECT name, any client's
        self.conflicts: list[dict[str, str]] = []  # messages that named another node

    def learn(self, endpoint: str, node: str, how: str = FROM_MESSAGES) -> None:
        """`endpoint` is `node`'s, as `how` says.

        A more certain source replaces a less certain one; of equal ones the first
        holds. A CONNECT name that disagrees with the traffic is noted as a
        conflict (the CONNECT name holds).

        Args:
            endpoint: The connection's endpoint ("host:port").
            node: The node's name; empty is ignored.
            how: How it is known: CONNECT_NAME, FROM_MESSAGES, SUBSCRIBED or INFERRED.
        """
        had = self.how.get(endpoint)
        if had == how and self.by_endpoint[endpoint] == node or not node:
            return  # the common case: a node's replication requests, again and again
        if had is not None:
            other = self.by_endpoint[endpoint]
            if (
                other != node
                and CONNECT_NAME in (had, how)
                and (had in _FROM_TRAFFIC or how in _FROM_TRAFFIC)
            ):
                self._conflict(endpoint, other if how == CONNECT_NAME else node)
            if _RANK[had] <= _RANK[how]:
                return
        self.by_endpoint[endpoint] = node
        self.how[endpoint] = how

    def _conflict(self, endpoint: str, messages_say: str) -> None:
        """Its messages named another node than its CONNECT line: the CONNECT name holds."""
        if len(self.conflicts) < MAX_CONFLICTS:
            self.conflicts.append(
                {
                    "endpoint": endpoint,
                    "messages_say": messages_say,
                    "connect_name": self.connections.get(endpoint, ""),
                }
            )

    def connect(self, endpoint: str, name: str) -> None:
        """A CONNECT line from `endpoint` named its connection `name`.

        A Liftbridge node's name (lift_name) names the endpoint's node; any other
        client's name undoes what its deliveries suggested.

        Args:
            endpoint: The connection's endpoint ("host:port").
            name: The CONNECT line's name.
        """
        self.connections[endpoint] = name
        lift = lift_name(name)
        if lift is not None:
            self.learn(endpoint, lift.node, CONNECT_NAME)
        elif self.how.get(endpoint) in (SUBSCRIBED, INFERRED):
            # another client (a tap on '>' gets every node's subjects): not a node's
            self._conflict(endpoint, self.by_endpoint.pop(endpoint))
            del self.how[endpoint]

    def name(self, endpoint: str) -> str:
        """The node of `endpoint`, or `unknown(endpoint)` when nothing names it.

        Args:
            endpoint: The endpoint ("host:port").

        Returns:
            The node's name.
        """
        node = self.by_endpoint.get(endpoint)
        return unknown(endpoint) if node is None else node

    def source(self, endpoint: str) -> str:
        """How `endpoint`'s node is known: CONNECT_NAME, FROM_MESSAGES, INFERRED or UNKNOWN.

        Args:
            endpoint: The endpoint ("host:port").

        Returns:
            One of those constants (or SUBSCRIBED).
        """
        return self.how.get(endpoint, UNKNOWN)

    def nodes(self) -> list[str]:
        """The names of every node known, sorted.

        Returns:
            The node names, each once.
        """
        return sorted(set(self.by_endpoint.values()))
