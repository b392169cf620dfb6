"""The report over the FlatBuffers layouts' Publish and Ack (issue #27): under
layout auto a FlatBuffers Ack crashed the report ('FlatTable' object has no
attribute 'ackInbox' when read from a recording, a None payload from a
capture); their fields are read as the protobuf message's of the same MsgType."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import capwriter as cw

import lbparse
from lbparse.capture import Record
from lbparse.capture.recordings import JsonlRecordWriter
from lbparse.codec.flatbuf import FlatTable
from lbparse.report import build_model
from lbparse.report.inputs import ReadOptions

T0 = 1_763_700_000
CLIENT, SERVER = "127.0.0.1:40000", "127.0.0.1:4222"


def _envelopes() -> tuple[bytes, bytes]:
    publish = FlatTable(
        "proto.PublishRequest",
        stream="orders",
        ackInbox="acks.x",
        correlationId=b"c1",
        ackPolicy=1,
        value=b"v",
    )
    ack = FlatTable(
        "proto.Ack", stream="orders", ackInbox="acks.x", correlationId=b"c1", ackPolicy=1, offset=3
    )
    return (
        lbparse.encode(publish, layout="flatbuffers"),
        lbparse.encode(ack, layout="flatbuffers"),
    )


def _capture(path: Path) -> str:
    publish, ack = _envelopes()
    conn = cw.Conn()
    packets = (
        conn.handshake()
        + conn.send("c", cw.pub("orders.sub", publish, reply="acks.x"))
        + conn.send("s", cw.msg("acks.x", 1, ack))
    )
    cw.write_pcap(
        str(path), [(T0 + i * 0.001, cw.link(cw.ETHERNET, p)) for i, p in enumerate(packets)]
    )
    return str(path)


def _recording(path: Path) -> str:
    publish, ack = _envelopes()
    w = JsonlRecordWriter(str(path))
    w.write(
        Record.make(T0 * 10**9, CLIENT, SERVER, "PUB", "orders.sub", "acks.x", None, None, publish)
    )
    w.write(Record.make(T0 * 10**9 + 10**6, SERVER, CLIENT, "MSG", "acks.x", None, "1", None, ack))
    w.close()
    return str(path)


@pytest.mark.parametrize("make", [_capture, _recording], ids=["capture", "recording"])
def test_a_flatbuffers_publish_and_ack_are_counted(tmp_path: Path, make: object) -> None:
    path = make(tmp_path / ("x.pcap" if make is _capture else "x.jsonl"))  # type: ignore[operator]
    model = build_model([path], ReadOptions(layout="auto"), raft=False)
    latency = model["latency"]
    assert (latency["publishes"], latency["acks"], latency["acked"]) == (1, 1, 1)
    assert latency["acks_without_publish"] == 0
    assert model["traffic"]["stream_totals"] == {"orders": 2}
