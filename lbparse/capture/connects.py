"""What a NATS client says of itself: the `name` of its CONNECT line.

A client's first line to nats-server is `CONNECT {json}`; its `name` is
how the client calls the connection. Liftbridge names each of a node's
five connections `LIFT.<namespace>.<server id>.<role>` (roles: streams,
raft, replication, acks, publishes; Liftbridge v1.9.0), so a capture that
holds a connection's start says which node it belongs to: a fact, where
everything else the report learns of a connection's node is read from the
messages it carries, or inferred.

Liftbridge subjects take the namespace as one token (`<ns>.notify.<node>`),
so the namespace is the name's second token, the role its last, and the
server id what lies between (an id may hold dots).
"""

from __future__ import annotations

import json
from typing import NamedTuple

MAX_CONNECT_NAMES = 65536  # connections remembered by their name (a capture's start per client)
# CONNECT text the C capture loop hands over per reading (Reader.stats'
# connects), for remember() here; the Python reader remembers each line at once.
MAX_CONNECT_BYTES = 8 << 20
MAX_NAME = 256  # characters of a name kept
LIFT = "LIFT"


class LiftName(NamedTuple):
    """A Liftbridge connection's name, `LIFT.<namespace>.<node>.<role>`, split.

    Attributes:
        namespace: The Liftbridge namespace (the name's second token).
        node: The server id (what lies between; it may hold dots).
        role: The connection's role (streams, raft, replication, acks,
            publishes).
    """

    namespace: str
    node: str
    role: str


def connect_name(text: bytes) -> str | None:
    """The `name` of a CONNECT line's JSON, or None.

    Args:
        text: The CONNECT line after the verb (its JSON options).

    Returns:
        The name (at most MAX_NAME characters), or None when the text is not
        a JSON object or has no non-empty string `name`.
    """
    try:
        options = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the interpreter's depth
        return None
    name = options.get("name") if isinstance(options, dict) else None
    return name[:MAX_NAME] if isinstance(name, str) and name else None


def lift_name(name: str) -> LiftName | None:
    """`LIFT.<namespace>.<node>.<role>` split, or None for any other client's name.

    Args:
        name: A client's connection name (from `connect_name`).

    Returns:
        The name's parts as a LiftName, or None when it is not a Liftbridge
        name (fewer than four tokens, an empty token, or not starting LIFT).
    """
    tokens = name.split(".")
    if len(tokens) < 4 or tokens[0] != LIFT or not all(tokens):
        return None
    return LiftName(tokens[1], ".".join(tokens[2:-1]), tokens[-1])


def remember(names: dict[str, str], endpoint: str, text: bytes) -> None:
    """Set `names[endpoint]` to the CONNECT line's name, bounded in count.

    A port reused by a later connection gets its later name. A line without a
    name changes nothing.

    Args:
        names: Client endpoint to name; updated in place.
        endpoint: The client's endpoint, host:port.
        text: The CONNECT line after the verb.
    """
    name = connect_name(text)
    if name is not None:
        remember_name(names, endpoint, name)


def remember_name(names: dict[str, str], endpoint: str, name: str) -> None:
    """`remember`, of a name already read (merging two readings' names).

    A new endpoint is added only while `names` holds fewer than
    MAX_CONNECT_NAMES; a known one always takes the later name.

    Args:
        names: Client endpoint to name; updated in place.
        endpoint: The client's endpoint, host:port.
        name: The connection's name.
    """
    if endpoint in names or len(names) < MAX_CONNECT_NAMES:
        names[endpoint] = name
