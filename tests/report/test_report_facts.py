"""The report says what the capture says (issue #25, "facts, not guesses").

A connection's node comes first from its CONNECT line (Liftbridge names each
of a node's connections `LIFT.<namespace>.<node>.<role>`), then from what its
messages say; a name guessed from publish deliveries is labelled inferred and
never replaces a fact; a connection nothing names is "unknown". A leader
change dated by the first write of a new epoch on disk says so, and a page
with raft.db entries does not say "no metadata operation". Page and JSON
agree, checked name by name.

The capture below is made so that the old guess names the wrong node: node1's
streams connection receives publishes of orders/0 while node3 leads orders/0,
then answers a PropagatedRequest (the metadata leader's act). Guessed from the
deliveries it is node3's, and the metadata leader would be node3.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import capwriter as cw
from support.storage import short_data  # noqa: F401 (a fixture)

import lbparse
from lbparse.codec.commitlog import ReplicationResponse
from lbparse.report import build_model, render_html
from lbparse.report.inputs import ReadOptions

NS = "liftbridge-default"
T0 = 1_790_000_000.0
SERVER = ("127.0.0.1", 4222)
NODE1_STREAMS = ("127.0.0.1", 41001)  # CONNECT LIFT...node1.streams
NODE2_REPL = ("127.0.0.1", 41002)  # CONNECT LIFT...node2.replication
NODE3_REPL = ("127.0.0.1", 41003)  # no CONNECT seen: named by its ServerInfoResponse
GUESSED = ("127.0.0.1", 41004)  # no CONNECT, no message naming it: only deliveries
CLIENT = ("127.0.0.1", 41005)  # CONNECT of a client (not LIFT...): never a node


def _m(name: str, **fields: Any) -> bytes:
    return bytes(lbparse.encode(lbparse.message_class(name)(**fields)))


def _connect(name: str) -> bytes:
    return (
        b'CONNECT {"verbose":false,"pedantic":false,"name":"'
        + name.encode()
        + b'","lang":"go","version":"1.11.0","protocol":1,"headers":true}\r\nPING\r\n'
    )


def made_capture(path: Path) -> None:
    conns = {
        ep: cw.Conn(ep, SERVER) for ep in (NODE1_STREAMS, NODE2_REPL, NODE3_REPL, GUESSED, CLIENT)
    }
    frames: list[tuple[float, bytes]] = []
    t = T0

    def send(ep: tuple[str, int], side: str, data: bytes) -> None:
        nonlocal t
        t += 0.01
        frames.extend((t, cw.link(cw.ETHERNET, p)) for p in conns[ep].send(side, data))

    for conn in conns.values():
        t += 0.01
        frames.extend((t, cw.link(cw.ETHERNET, p)) for p in conn.handshake())
    send(NODE1_STREAMS, "c", _connect(f"LIFT.{NS}.node1.streams"))
    send(NODE2_REPL, "c", _connect(f"LIFT.{NS}.node2.replication"))
    send(CLIENT, "c", _connect("some-client"))
    send(NODE3_REPL, "c", cw.pub("_INBOX.info.1", _m("protocol.ServerInfoResponse", id="node3")))
    # node3 leads orders/0 at epoch 5: it answers node2's replication request
    send(
        NODE2_REPL,
        "c",
        cw.pub(
            f"{NS}.orders.0.replicate",
            _m("protocol.ReplicationRequest", replicaID="node2", offset=3, leaderEpoch=5),
            reply="_INBOX.r.1",
        ),
    )
    send(
        NODE3_REPL, "c", cw.pub("_INBOX.r.1", bytes(lbparse.encode(ReplicationResponse(5, 4, []))))
    )
    publish = _m(
        "proto.Message",
        stream="orders",
        partition=0,
        subject="orders",
        value=b"v",
        ackInbox="acks.x",
        correlationId="c1",
        ackPolicy=1,
    )
    # delivered to node1's streams connection (and to one nothing names)
    send(NODE1_STREAMS, "s", cw.msg("orders", 1, publish))
    send(GUESSED, "s", cw.msg("orders", 1, publish))
    send(CLIENT, "s", cw.msg("orders", 1, publish))
    # a subject addressed to node2, delivered to the client too (a wildcard subscriber)
    send(CLIENT, "s", cw.msg(f"{NS}.notify.node2", 2, b""))
    # node1's streams connection answers a PropagatedRequest: it is the metadata leader
    send(NODE1_STREAMS, "c", cw.pub("_INBOX.p.1", _m("protocol.PropagatedResponse")))
    cw.write_pcap(str(path), frames)


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("facts") / "made.pcap"
    made_capture(path)
    return path


@pytest.mark.parametrize("fast", [True, False], ids=["columns", "records"])
def test_connect_name_beats_the_delivery_guess(capture: Path, fast: bool) -> None:
    m = build_model([str(capture)], ReadOptions(fast=fast))["cluster"]
    n1, n2, n3, guessed = (f"{h}:{p}" for h, p in (NODE1_STREAMS, NODE2_REPL, NODE3_REPL, GUESSED))
    assert m["connections"] == {
        n1: f"LIFT.{NS}.node1.streams",
        n2: f"LIFT.{NS}.node2.replication",
        "127.0.0.1:41005": "some-client",
    }
    assert m["nodes"] == {n1: "node1", n2: "node2", n3: "node3", guessed: "node3"}
    assert m["node_sources"] == {
        n1: "CONNECT name",
        n2: "CONNECT name",
        n3: "messages",
        guessed: "inferred from publish deliveries",
    }
    (leader,) = m["metadata_leaders"]
    assert (leader["leader"], leader["leader_source"]) == ("node1", "CONNECT name")
    assert m["node_conflicts"] == [
        {"endpoint": "127.0.0.1:41005", "messages_say": "node2", "connect_name": "some-client"}
    ]


def test_an_endpoint_nothing_names_is_unknown(tmp_path: Path) -> None:
    """A metadata answer from a connection no CONNECT line and no message names."""
    conn = cw.Conn(("127.0.0.1", 41009), SERVER)
    frames = [(T0, cw.link(cw.ETHERNET, p)) for p in conn.handshake()]
    frames += [
        (T0 + 1, cw.link(cw.ETHERNET, p))
        for p in conn.send("c", cw.pub("_INBOX.p.1", _m("protocol.PropagatedResponse")))
    ]
    cw.write_pcap(str(tmp_path / "u.pcap"), frames)
    m = build_model([str(tmp_path / "u.pcap")])["cluster"]
    (leader,) = m["metadata_leaders"]
    assert leader["leader"] == "unknown (127.0.0.1:41009)"
    assert leader["leader_source"] == "unknown"
    assert m["nodes"] == {}


def _page_text(html: str) -> str:
    """The page's visible text (tables and notes), without the embedded model."""
    import re

    body = html.split("<script type='application/json'", 1)[0]
    body = body.split("</head>", 1)[1]
    return re.sub(r"(?:<[^>]+>)+", "|", body)


def test_page_and_json_agree_on_nodes_and_leaders(capture: Path) -> None:
    import html as h

    model = build_model([str(capture)])
    page = h.unescape(_page_text(render_html(model)))
    cl = model["cluster"]
    for endpoint, node in cl["nodes"].items():
        row = (
            f"|{endpoint}|{node}|{cl['node_sources'][endpoint]}|"
            f"{cl['connections'].get(endpoint, '—')}|"
        )
        assert row in page, row
    for x in cl["metadata_leaders"]:
        assert f"|{x['leader']}|{x['leader_source']}|{x['answers']}|" in page


def test_model_is_json(capture: Path) -> None:
    json.dumps(build_model([str(capture)]))


def test_a_change_dated_by_the_disk_says_it_is_inferred() -> None:
    """Leader epochs seen only in segments (their first write) make an inferred
    change; the same epoch seen on the wire is dated by the wire."""
    from lbparse.report.aggregate import Aggregator

    agg = Aggregator(raft=False)
    parts = agg.partitions
    t = int(T0 * 10**9)
    for epoch, first, leader in ((5, t, "node1"), (9, t + 10**10, "node2")):
        parts.name_epoch("orders", 0, epoch, leader)
        parts._observe("orders", 0, epoch, first, source="segments")
    (change,) = agg.model([], {})["partitions"]["leader_changes"]
    assert (change["to_leader"], change["time_source"], change["inferred"]) == (
        "node2",
        "segments",
        "inferred from data directories: first write in epoch 9",
    )
    page = _page_text(render_html(agg.model([], {})))
    assert "(inferred from data directories: first write in epoch 9)" in page
    parts._observe("orders", 0, 9, t + 9 * 10**9, named="node2", source="raft log")
    (change,) = agg.model([], {})["partitions"]["leader_changes"]
    assert (change["time_source"], change["inferred"]) == ("raft log", None)
    assert int(change["t_ns"]) == t + 9 * 10**9


def test_raft_db_entries_are_named_where_no_operation_stood(
    short_data: Path,
) -> None:
    model = build_model([str(short_data)])
    untimed = model["cluster"]["raft"]["log_ops_untimed"]
    assert untimed
    page = _page_text(render_html(model))
    assert "No metadata operation in this input" not in page
    assert f"raft.db holds {sum(untimed.values()):,} log entries without an append time" in page
