"""The shared real captures give back exactly their oracle's messages, in
order, on the publish side and on the delivery side."""

from __future__ import annotations

import json

import pytest
from support.shared import CAPTURES

from lbparse.capture import CaptureReader, Record

SHARED = CAPTURES
CASES = [(name, ext) for name in ("nats_1000", "nats_verbose20") for ext in ("pcap", "pcapng")]

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="shared captures not present")


def _oracle(name: str) -> list[dict]:
    return json.loads((SHARED / f"{name}.oracle.json").read_text())["messages"]


def _check(rec: Record, m: dict) -> None:
    assert rec.subject == m["subject"]
    assert rec.reply == m["reply"]
    assert rec.headers == m["headers"]
    hdr = bytes.fromhex(m["hdr_block_hex"]) if m["hdr_block_hex"] else None
    assert rec.header_block == hdr
    assert len(rec.payload) == m["payload_len"]
    assert rec.payload == bytes.fromhex(m["payload_hex"])
    assert (rec.envelope is None) != (rec.error is None)


@pytest.mark.parametrize("name,ext", CASES)
def test_oracle_publish_and_delivery(name: str, ext: str) -> None:
    oracle = _oracle(name)
    notices: list = []
    reader = CaptureReader(SHARED / f"{name}.{ext}", layout="v0", on_notice=notices.append)
    records = list(reader)
    assert notices == []
    pubs = [r for r in records if r.verb in ("PUB", "HPUB")]
    msgs = [r for r in records if r.verb in ("MSG", "HMSG")]
    assert len(pubs) == len(msgs) == len(oracle)
    for rec, m in zip(pubs, oracle):
        _check(rec, m)
        assert rec.verb == ("PUB" if m["headers"] is None else "HPUB")
        assert rec.sid is None and rec.direction == "client_to_server"
    for rec, m in zip(msgs, oracle):
        _check(rec, m)
        assert rec.verb == ("MSG" if m["headers"] is None else "HMSG")
        assert rec.sid == "1" and rec.direction == "server_to_client"
    # One publisher connection and one subscriber connection, to the server port.
    assert len({(r.src, r.dst) for r in pubs}) == 1
    assert len({(r.src, r.dst) for r in msgs}) == 1
    assert pubs[0].dst == msgs[0].src and pubs[0].dst.endswith(":14222")
    assert [r.ts for r in records] == sorted(r.ts for r in records)
    assert reader.stats.bytes_read == (SHARED / f"{name}.{ext}").stat().st_size


def test_pcap_and_pcapng_agree() -> None:
    a = list(CaptureReader(SHARED / "nats_1000.pcap", decode=False))
    b = list(CaptureReader(SHARED / "nats_1000.pcapng", decode=False))
    assert [(r.verb, r.subject, r.payload) for r in a] == [
        (r.verb, r.subject, r.payload) for r in b
    ]
    # Microsecond and nanosecond captures of the same traffic by two tools
    # (times in integer nanoseconds): the same moment within 10 ms, and the
    # pcapng's digits below the microsecond kept.
    assert abs(a[0].ts - b[0].ts) < 10_000_000
    assert all(r.ts % 1000 == 0 for r in a) and any(r.ts % 1000 for r in b)


def test_verbose_capture_counts_ok_replies() -> None:
    reader = CaptureReader(SHARED / "nats_verbose20.pcap")
    assert len(list(reader)) == 40
    assert reader.stats.controls["+OK"] > 20
    assert reader.stats.controls["INFO"] == 2


def test_subject_filter_and_verbs() -> None:
    reader = CaptureReader(
        SHARED / "nats_1000.pcap", subject="foo.bar", verbs=("MSG", "HMSG"), decode=False
    )
    recs = list(reader)
    expected = [m for m in _oracle("nats_1000") if m["subject"] == "foo.bar"]
    assert [r.payload.hex() for r in recs] == [m["payload_hex"] for m in expected]
