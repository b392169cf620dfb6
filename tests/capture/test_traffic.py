"""Liftbridge's non-envelope traffic named and decoded (issue #12): lbparse.capture.traffic.

On the real cluster's capture every message of the metadata Raft group is
named (transport stream requests and responses, the accept handshake and
its reply) and every stream message decoded; crafted messages cover what
the short run does not send (bootstrap probe, stream close, a handshake to
a node that is down, bytes that are not what their subject carries). The
records, their JSON Lines and Parquet and the table show it.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import islice
from pathlib import Path

import msgpack
import pytest
from support.reading import sample_records
from support.shared import LIFTBRIDGE

from lbparse.capture import CaptureReader
from lbparse.capture.recordings import record_writer
from lbparse.capture.records import Record
from lbparse.capture.traffic import TrafficReader, subject_kind
from lbparse.raft import SUBJECTS

SAMPLE = LIFTBRIDGE / "samples" / "short.pcapng"
NS = "liftbridge-default.raft.metadata"
INBOX = f"{NS}.node2.request._INBOX.abc"


def _sample() -> Path:
    if not SAMPLE.exists():
        pytest.skip(f"shared material missing: {SAMPLE}")
    return SAMPLE


def test_every_spec_subject_is_named() -> None:
    examples = {
        "{ns}.raft.metadata.{node}.request.{inbox}": (INBOX, "raft_stream", {"node": "node2"}),
        "{ns}.raft.metadata.{node}.accept": (
            f"{NS}.node3.accept",
            "raft_accept",
            {"node": "node3"},
        ),
        "{ns}.raft.metadata.bootstrap": (f"{NS}.bootstrap", "bootstrap_probe", {}),
        "{ns}.raft.metadata.bootstrap.reply": (f"{NS}.bootstrap.reply", "bootstrap_probe", {}),
        "{ns}.{stream}.{partition}.replicate": (
            "liftbridge-default.orders.0.replicate",
            "envelope",
            {},
        ),
    }
    for pattern, kind, _ in SUBJECTS:
        if pattern in examples:
            subject, want, tokens = examples[pattern]
            got = subject_kind(subject)
            assert got is not None and got[0] == want == kind
            assert {k: v for k, v in got[2].items() if k != "ns"} == tokens | (
                {"inbox": "_INBOX.abc"} if kind == "raft_stream" else {}
            )
    assert subject_kind("orders") is None


def test_the_real_clusters_raft_traffic_is_all_named_and_decoded() -> None:
    kinds: Counter[str] = Counter()
    rpcs: Counter[tuple[str, str]] = Counter()
    for rec in sample_records(SAMPLE.name):
        t = rec.traffic
        if ".raft.metadata." in rec.subject and (
            rec.envelope is None or rec.envelope.layout == "plain"
        ):
            assert t is not None, rec.subject  # none of it left unnamed
        if t is None:
            continue
        assert t.error is None and not t.detail.get("skipped"), (rec.subject, t.to_json_dict())
        kinds[t.kind] += 1
        for r in t.rpcs:
            rpcs[(r.role, r.rpc)] += 1
    assert kinds == {
        "raft_request": 1208,
        "raft_response": 1208,
        "raft_accept": 8,
        "raft_accept_reply": 8,
    }
    assert rpcs[("request", "RequestVote")] == 4 and rpcs[("request", "AppendEntries")] == 1204


def test_handshakes_tell_which_way_each_stream_flows() -> None:
    reader = TrafficReader()
    for rec in CaptureReader(str(_sample()), decode=False):
        reader.read(rec.src, rec.dst, rec.subject, rec.reply, rec.payload, rec.header_block)
    assert len(reader.roles) == 8  # 4 dials: each side's inbox
    for (_, _, subject), dec in reader.streams.items():
        assert dec.role == reader.roles[subject]  # what the bytes said, the handshake said


def _pack(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=False)


def test_crafted_traffic() -> None:
    r = TrafficReader()
    vote = bytes([1]) + _pack(
        {
            "ProtocolVersion": 3,
            "Term": 4,
            "Candidate": b"node1",
            "LastLogIndex": 9,
            "LastLogTerm": 3,
            "LeadershipTransfer": False,
        }
    )
    probe = r.read("a:1", "b:2", f"{NS}.bootstrap", f"{NS}.bootstrap.reply", b"node1")
    assert probe is not None and (probe.kind, probe.node) == ("bootstrap_probe", "node1")
    accept = r.read(
        "a:1",
        "b:2",
        f"{NS}.node2.accept",
        "_INBOX.r1",
        json.dumps({"id": "node1", "inbox": f"{NS}.node1.request._INBOX.x"}).encode(),
    )
    assert accept is not None and accept.detail["id"] == "node1"
    down = r.read("b:2", "a:1", "_INBOX.r1", None, b"", b"NATS/1.0 503\r\n\r\n")
    assert down is not None and (down.kind, down.detail) == ("raft_accept_reply", {"status": "503"})
    first = r.read("a:1", "b:2", INBOX, None, vote[:10])
    assert first is not None and first.kind == "raft_request" and first.detail["pending"] == 10
    rest = r.read("a:1", "b:2", INBOX, None, vote[10:])
    assert rest is not None and [x.rpc for x in rest.rpcs] == ["RequestVote"]
    assert "RequestVote term 4 node1" in rest.summary()
    close = r.read("a:1", "b:2", INBOX, None, b"")
    assert close is not None and close.kind == "raft_stream_close"
    mid = r.read("a:1", "b:2", INBOX, None, vote[5:])  # a new stream, read from its middle
    assert mid is not None and mid.detail["skipped"] == len(vote) - 5 and not mid.rpcs
    bad = r.read("a:1", "b:2", f"{NS}.node2.accept", None, b"{not json")
    assert bad is not None and bad.error is not None
    assert r.read("a:1", "b:2", "orders", None, b"hello") is None


@pytest.mark.parametrize("ext", ["jsonl", "parquet"])
def test_records_json_and_parquet_carry_it(tmp_path: Path, ext: str) -> None:
    # the first six: the capture is not read past them
    recs = list(islice((r for r in CaptureReader(str(_sample())) if r.traffic is not None), 6))
    d = recs[0].to_json_dict()
    assert d["liftbridge"]["kind"] == recs[0].traffic.kind
    path = tmp_path / f"r.{ext}"
    with record_writer(str(path)) as w:
        for r in recs:
            w.write(r)
    if ext == "jsonl":
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert [x["liftbridge"]["kind"] for x in lines] == [r.traffic.kind for r in recs]
    else:
        import pyarrow.parquet as pq

        got = pq.read_table(path).column("liftbridge_json").to_pylist()
        assert [json.loads(x)["kind"] for x in got] == [r.traffic.kind for r in recs]
    # Read back, the bytes are decoded again: the same traffic.
    again = [r.traffic.to_json_dict() for r in CaptureReader(str(path))]
    assert [a["kind"] for a in again] == [r.traffic.kind for r in recs]


def test_a_record_made_by_hand_has_none() -> None:
    rec = Record.make(10**9, "a:1", "b:2", "PUB", "x", None, None, None, b"")
    assert rec.traffic is None and "liftbridge" not in rec.to_json_dict()


def test_any_bytes_on_any_liftbridge_subject_give_traffic_or_none() -> None:
    """Hostile bytes: never an exception (deep JSON, cut msgpack, anything)."""
    import random

    rnd = random.Random(7)
    r = TrafficReader()
    subjects = [INBOX, f"{NS}.node2.accept", f"{NS}.bootstrap", "_INBOX.r1", "_INBOX.zz"]
    r.read("a:1", "b:2", f"{NS}.node2.accept", "_INBOX.r1", b'{"id": "n", "inbox": "x"}')
    payloads = [
        b"[" * 100_000,
        b'{"inbox": ' + b"[" * 50_000,
        b"\x00\x87",
        b"\xa0\xde\xff",
        b"\xff" * 40,
        b'{"inbox": "' + INBOX.encode() + b'"}',
    ]
    payloads += [bytes(rnd.randrange(256) for _ in range(rnd.randrange(60))) for _ in range(300)]
    for p in payloads:
        for s in subjects:
            t = r.read("a:1", "b:2", s, None, p)
            assert t is None or t.kind in (
                "raft_request",
                "raft_response",
                "raft_stream",
                "raft_stream_close",
                "raft_accept",
                "raft_accept_reply",
                "bootstrap_probe",
            )
            if t is not None:
                json.dumps(t.to_json_dict())


def test_inert_subjects_are_read_as_nothing_and_leave_no_trace() -> None:
    """`TrafficReader.inert` (the columns skip a message on such a subject):
    on the real cluster's capture, every message on an inert subject is read
    as None and leaves the reader as it was, and the envelopes' metadata
    subjects are inert while every subject `read` reads is not."""
    reader = TrafficReader()
    inert = Counter()
    for rec in sample_records(SAMPLE.name):
        before = (len(reader.streams), len(reader.roles), len(reader.accept_replies))
        t = reader.read(rec.src, rec.dst, rec.subject, rec.reply, rec.payload, rec.header_block)
        if TrafficReader.inert(rec.subject):
            inert[rec.subject.split(".")[3]] += 1
            assert t is None, rec.subject
            after = (len(reader.streams), len(reader.roles), len(reader.accept_replies))
            assert after == before, rec.subject
    # the metadata group's envelope subjects (status, info, propagate, fetch...)
    assert sum(inert.values()) > 50 and len(inert) >= 3, inert
    assert not TrafficReader.inert(INBOX) and not TrafficReader.inert(f"{NS}.node2.accept")
    assert not TrafficReader.inert("_INBOX.r1") and not TrafficReader.inert("orders")
    assert TrafficReader.inert(f"{NS}.no.such.kind.here")
