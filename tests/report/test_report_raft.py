"""The report's Raft part reads heartbeats as rows (lbparse.report.raft_events).

`RaftEvents` feeds each transport message to `StreamDecoder.feed_plain`: a
message the C reader reads whole in one call (heartbeats, votes, their
responses: most of an idle cluster's traffic) comes as a few fields a RPC,
one with log entries as RPC objects, their commands whole. Its reference is
`feed`, every RPC an object (`plain` False): the same model, elections,
terms, log operations and node names, on real clusters' captures and on
hostile streams (tests/raft's, where the C reader leaves RPCs to Python).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
from support.shared import LIFTBRIDGE
from support.wire import APPEND, RESPONSES, SNAPSHOT, VOTE, request

from lbparse.raft import transport
from lbparse.report import build_model
from lbparse.report.aggregate import Aggregator
from lbparse.report.raft_events import RaftEvents

SUBJECT = "liftbridge-default.raft.metadata.node1.request._INBOX.abc"
# An AppendEntries request without entries; support.wire's APPEND has a
# ChangeLeader command and a no-op, its VOTE is a RequestVote.
HEARTBEAT = request(
    0, Term=5, Leader=b"node2", PrevLogEntry=40, PrevLogTerm=4, Entries=None, LeaderCommitIndex=40
)
VOTE_RESPONSE = RESPONSES[1]


def _model_both_ways(
    monkeypatch: pytest.MonkeyPatch, make: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What `make()` gives with heartbeats as rows, and with every RPC an object."""
    models = []
    for plain in (True, False):
        monkeypatch.setattr(RaftEvents, "plain", plain)
        models.append(make())
    return models[0], models[1]


@pytest.mark.slow  # three captures' models, twice
def test_real_captures_give_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [
        str(LIFTBRIDGE / "samples" / "short.pcapng"),
        str(LIFTBRIDGE / "samples" / "api-short.pcapng"),
        str(resources.files("lbparse.examples").joinpath("sample.pcap")),
    ]
    for path in paths:
        rows, objects = _model_both_ways(monkeypatch, lambda p=path: build_model([p]))
        assert rows == objects, path
        raft = rows["cluster"]["raft"]
        if "sample" not in path:  # a real 3-node run: its elections and terms
            assert raft["transport_messages"] > 1000 and raft["terms"], path


@pytest.mark.skipif(transport._NATIVE_READER is None, reason="the C reader is not built")
def test_heartbeats_come_as_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the objects path against itself: a heartbeat gives rows, an
    AppendEntries with log entries objects."""
    seen: list[tuple[int, int]] = []
    real = transport.StreamDecoder.feed_plain

    def spy(self: Any, payload: bytes) -> Any:
        chunk, rows = real(self, payload)
        seen.append((len(rows), len(chunk.rpcs)))
        return chunk, rows

    monkeypatch.setattr(transport.StreamDecoder, "feed_plain", spy)
    agg = Aggregator()
    for k, payload in enumerate([HEARTBEAT, HEARTBEAT + HEARTBEAT, APPEND]):
        agg.raft.feed(1_790_000_000_000_000_000 + k, 0, ("127.0.0.1:1", SUBJECT), payload)
    assert seen == [(1, 0), (2, 0), (0, 1)]


# Transport streams the C reader reads in part: hostile bytes among heartbeats.
STREAMS = [
    [HEARTBEAT, HEARTBEAT[:9], HEARTBEAT[9:], APPEND, VOTE, HEARTBEAT],
    [HEARTBEAT.replace(b"\xa4Term\x05", b"\xa4Term\xcf" + b"\xff" * 8), HEARTBEAT],  # 2**64 - 1
    [HEARTBEAT.replace(b"\xa4Term\x05", b"\xa4Term\xff"), HEARTBEAT],  # a negative term
    [HEARTBEAT.replace(b"\xa4Term\x05", b"\xa4Term\xd0\x05")],  # an int8 term
    [SNAPSHOT[:-4], b"\x00" * 3, SNAPSHOT, HEARTBEAT],
    [b"\xff" * 30, HEARTBEAT, b"", HEARTBEAT],  # garbage, then a closed stream
    [VOTE_RESPONSE, VOTE_RESPONSE[:5], VOTE_RESPONSE[5:]],
]


@pytest.mark.parametrize("messages", STREAMS, ids=range(len(STREAMS)))
def test_hostile_streams_give_the_same_model(
    monkeypatch: pytest.MonkeyPatch, messages: list[bytes]
) -> None:
    def make() -> dict[str, Any]:
        agg = Aggregator()
        for k, payload in enumerate(messages):
            agg.raft.feed(
                1_790_000_000_000_000_000 + k * 1000, 0, ("127.0.0.1:1", SUBJECT), payload,
                sender="127.0.0.1:1",
            )  # fmt: skip
        return {"raft": agg.raft.model(), "nodes": agg.partitions.nodes.by_endpoint}

    rows, objects = _model_both_ways(monkeypatch, make)
    assert rows == objects
