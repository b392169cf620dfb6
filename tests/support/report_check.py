"""The report's aggregation on fuzzer bytes (issue #27): the payloads published
and delivered on a few subjects, read by both of the report's paths, the
capture's columns (report/fast_path.py) and records one by one
(Aggregator.add, the path of recordings): no exception, the same counts by
MsgType and by stream, the same acks, and the streams within MAX_STREAMS."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from lbparse.capture import Record
from lbparse.capture.records import decode_into
from lbparse.report import build_model
from lbparse.report.aggregate import MAX_STREAMS, Aggregator
from lbparse.report.inputs import ReadOptions
from support import capwriter as cw
from support.hostile import split_payloads

T0 = 1_763_700_000
CLIENT, SERVER = ("127.0.0.1", 40000), ("127.0.0.1", 4222)
SUBJECTS = ("orders.eu", "acks.x", "_INBOX.r", "lb.raft.t", "s")


def _frames(payloads: list[bytes]) -> list[tuple[str, str, bytes]]:
    """(verb, subject, payload): even ones published, odd ones delivered."""
    return [
        ("PUB" if k % 2 == 0 else "MSG", SUBJECTS[(k // 2) % len(SUBJECTS)], p)
        for k, p in enumerate(payloads)
    ]


def _capture(frames: list[tuple[str, str, bytes]], path: Path) -> None:
    conn = cw.Conn(client=CLIENT, server=SERVER)
    packets = conn.handshake()
    for verb, subject, payload in frames:
        packets += (
            conn.send("c", cw.pub(subject, payload))
            if verb == "PUB"
            else conn.send("s", cw.msg(subject, 1, payload))
        )
    cw.write_pcap(
        str(path), [(T0 + i * 0.001, cw.link(cw.ETHERNET, p)) for i, p in enumerate(packets)]
    )


def _one_by_one(frames: list[tuple[str, str, bytes]], packets_before: int) -> dict[str, Any]:
    """The model of the same messages added record by record (their capture times
    as the capture's: one packet each, after the handshake's three)."""
    agg = Aggregator(raft=False)
    client, server = "{}:{}".format(*CLIENT), "{}:{}".format(*SERVER)
    for k, (verb, subject, payload) in enumerate(frames):
        ts = round((T0 + (packets_before + k) * 0.001) * 1e9)
        src, dst, sid = (client, server, None) if verb == "PUB" else (server, client, "1")
        agg.add(
            decode_into(Record.make(ts, src, dst, verb, subject, None, sid, None, payload), "auto")
        )
    return agg.model([], {})


def _counts(model: dict[str, Any]) -> dict[str, Any]:
    traffic, latency = model["traffic"], model["latency"]
    return {
        "streams": traffic["stream_totals"],
        "types": traffic["msg_type_totals"],
        "acks": (
            latency["publishes"],
            latency["acks"],
            latency["acked"],
            latency["acks_without_publish"],
        ),
    }


def check_report(data: bytes) -> None:
    frames = _frames(split_payloads(data))
    if not frames:
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.pcap"
        _capture(frames, path)
        columns = build_model([str(path)], ReadOptions(layout="auto"), raft=False)
    assert columns["totals"]["messages"] == len(frames), columns["totals"]
    assert len(columns["traffic"]["stream_totals"]) <= MAX_STREAMS + 1
    by_record = _one_by_one(frames, 3)
    assert _counts(columns) == _counts(by_record), (_counts(columns), _counts(by_record))
