"""`tap`/`record` count what they missed where the messages carry offsets (issue #25).

Liftbridge Acks carry stream, partition subject and offset: the offsets a
partition's acks skip across a lost connection are messages not received,
counted; only messages without offsets are estimated, and said to be. A real
nats-server is killed and restarted under the tool (test_live_reconnect's
harness); the acks are real Liftbridge Ack envelopes.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from test_live_reconnect import Server, Tool, server  # noqa: F401  (the fixture)

import lbparse
from lbparse.capture.records import Record, decode_into
from lbparse.live import LiveResult, Outage

SEC = 10**9


def ack(offset: int, part: str = "orders") -> bytes:
    return bytes(
        lbparse.encode(
            lbparse.message_class("proto.Ack")(
                stream="orders",
                partitionSubject=part,
                msgSubject=part,
                offset=offset,
                ackInbox="lb.acks",
                correlationId=f"c{offset}",
                ackPolicy=0,
            )
        )
    )


def received(ts: int, payload: bytes, subject: str = "lb.acks") -> Record:
    r = Record.make(
        ts, "127.0.0.1:4222", "127.0.0.1:50000", "MSG", subject, None, "1", None, payload
    )
    return decode_into(r, "auto")


def test_offsets_skipped_across_an_outage_are_counted() -> None:
    res = LiveResult()
    res.outages.append(Outage(lost_at=10 * SEC, reason="EOF", rate=100.0, back_at=12 * SEC))
    for ts, off, part in [
        (1, 0, "orders"),
        (2, 1, "orders"),
        (3, 0, "orders.1"),
        (13, 5, "orders"),
        (14, 1, "orders.1"),
        (15, 9, "orders"),
    ]:  # 6..8 skipped in calm: not the outage's
        res.gaps.see(received(ts * SEC, ack(off, part)), res.outages)
    assert res.gaps.missed() == 3  # offsets 2, 3, 4 of orders/0; none of orders.1
    text = res.summary()
    assert "3 acked messages not received (counted" in text
    assert "about" not in text


def test_without_offsets_the_estimate_is_said_to_be_one() -> None:
    res = LiveResult()
    res.outages.append(Outage(lost_at=10 * SEC, reason="EOF", rate=4.0, back_at=12 * SEC))
    res.gaps.see(received(1 * SEC, b"plain", subject="lb.x"), res.outages)
    text = res.summary()
    assert "about 8: an estimate at the rates seen before" in text


def publish(url: str, payloads: list[bytes], subject: str = "lb.acks") -> None:
    async def go() -> None:
        import nats

        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=5)
        try:
            for p in payloads:
                await nc.publish(subject, p)
            await nc.flush(timeout=5)
        finally:
            await nc.close()

    asyncio.run(go())


def lose(server: Server, tool: Tool) -> str:
    server.kill()
    tool.wait_for("lost at")
    time.sleep(1.0)
    server.start()
    back = tool.wait_for("reconnected")
    time.sleep(0.5)  # the subscription made again
    return back


@pytest.mark.slow
@pytest.mark.parametrize("skipped", [0, 3])
def test_record_counts_the_acks_it_missed(
    server: Server,
    tmp_path,
    skipped: int,
) -> None:
    out = tmp_path / "rec.jsonl"
    n_after = 5
    rec = Tool(
        "record",
        server.url,
        "lb.>",
        "-o",
        str(out),
        "--count",
        str(5 + n_after),
        "--reconnect-timeout",
        "30",
    )
    try:
        rec.wait_for("listening on")
        publish(server.url, [ack(i) for i in range(5)])
        time.sleep(0.5)
        back = lose(server, rec)
        publish(server.url, [ack(i) for i in range(5 + skipped, 5 + skipped + n_after)])
        rc, _, err = rec.finish()
    finally:
        rec.kill()
    assert "an estimate" in back  # said when it happens: nothing to count by yet
    lines = out.read_text().splitlines()
    assert len(lines) == 10
    summary = next(line for line in err.splitlines() if "10 messages; connection lost" in line)
    assert f"{skipped} acked messages not received (counted" in summary, summary
    assert not re.search(r"about \d+", summary), summary  # every message had an offset
    assert rc == 1


@pytest.mark.slow
def test_tap_estimates_only_what_has_no_offset(server: Server) -> None:
    tap = Tool("tap", server.url, "lb.>", "--count", "14", "--reconnect-timeout", "30")
    try:
        tap.wait_for("listening on")
        publish(server.url, [ack(i) for i in range(5)])
        publish(server.url, [b"plain"] * 2, subject="lb.x")
        time.sleep(0.5)
        lose(server, tap)
        publish(server.url, [ack(i) for i in range(7, 12)])
        publish(server.url, [b"plain"] * 2, subject="lb.x")
        rc, out, err = tap.finish()
    finally:
        tap.kill()
    assert len(out.splitlines()) == 14 and all(json.loads(x) for x in out.splitlines())
    assert "2 acked messages not received (counted" in err, err
    assert "messages without offsets: about" in err and "an estimate" in err
    assert rc == 1
