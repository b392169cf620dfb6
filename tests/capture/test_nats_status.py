"""NATS status lines kept (issue #12): `NATS/1.0 503` is a Status header.

A header block may carry a status on its first line: `NATS/1.0 503` (no
responders: every request to a Liftbridge node that is down gets one),
`NATS/1.0 100 Idle Heartbeat` (JetStream). nats.go and nats.py give it to
applications as the headers `Status` and `Description`; so do lbparse's
records, their JSON Lines and Parquet, `tap` and `record`, and a record
file gives the header block back byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import LBPARSE
from support.net import free_port
from support.reading import sample_records

from lbparse.capture import CaptureReader
from lbparse.capture.recordings import record_writer
from lbparse.capture.records import Record, build_header_block, parse_headers

BLOCKS = [
    (b"NATS/1.0 503\r\n\r\n", [["Status", "503"]]),
    (b"NATS/1.0 404 No Messages\r\n\r\n", [["Status", "404"], ["Description", "No Messages"]]),
    (
        b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1016\r\n\r\n",
        [["Status", "100"], ["Description", "Idle Heartbeat"], ["Nats-Last-Consumer", "1016"]],
    ),
    (b"NATS/1.0\r\nA: b\r\n\r\n", [["A", "b"]]),
    (b"NATS/1.0\r\n\r\n", []),
]


@pytest.mark.parametrize("block,headers", BLOCKS)
def test_a_status_line_is_a_status_header_and_comes_back(block: bytes, headers: list) -> None:
    assert parse_headers(block) == headers
    assert build_header_block(headers) == block


def test_what_nats_py_makes_of_the_same_blocks() -> None:
    """nats.py's own header parser (the client the tap runs on) agrees."""
    from nats.aio.client import Client

    async def parse(block: bytes) -> dict:
        return dict(await Client()._process_headers(block) or {})

    for block, headers in BLOCKS:
        assert asyncio.run(parse(block)) == dict(headers)


@pytest.mark.parametrize("ext", ["jsonl", "parquet"])
def test_a_record_file_keeps_the_status_byte_for_byte(tmp_path: Path, ext: str) -> None:
    path = tmp_path / f"r.{ext}"
    with record_writer(str(path)) as w:
        for i, (block, _) in enumerate(BLOCKS):
            w.write(
                Record.make(
                    (1_763_700_000 + i) * 10**9,
                    "127.0.0.1:4222",
                    "127.0.0.1:5000",
                    "HMSG",
                    "_INBOX.x",
                    None,
                    "1",
                    block,
                    b"",
                )
            )
    recs = list(CaptureReader(str(path)))
    assert [r.header_block for r in recs] == [b for b, _ in BLOCKS]
    assert [r.headers for r in recs] == [h for _, h in BLOCKS]


@pytest.mark.slow  # over half a second: not in make test-fast
def test_every_503_of_a_real_cluster_keeps_its_status() -> None:
    """The sample run: 28 requests to a node that was not (yet) there."""
    recs = [r for r in sample_records("short.pcapng") if r.verb == "HMSG" and not r.payload]
    assert len(recs) == 28  # short.pcapng.txt: HMSG empty 28
    assert all(r.headers == [["Status", "503"]] for r in recs)
    assert all(r.to_json_dict()["headers"] == [["Status", "503"]] for r in recs)


# -- through a real nats-server: JetStream's idle heartbeats, tap and record ------------


def _tool(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*LBPARSE, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )


def _wait_ready(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    import select

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stderr], [], [], 0.2)
        if r and b"listening on" in proc.stderr.readline():  # type: ignore[union-attr]
            return
    raise AssertionError("the tool did not get ready")


async def _push_consumer_with_heartbeats(url: str) -> None:
    import nats
    from nats.js.api import ConsumerConfig

    nc = await nats.connect(url, allow_reconnect=False, connect_timeout=5)
    try:
        js = nc.jetstream()
        await js.add_stream(name="HB", subjects=["hb.data"])
        await js.add_consumer(
            "HB",
            ConsumerConfig(
                durable_name="tapme",
                deliver_subject="hb.deliver",
                idle_heartbeat=0.2,
                flow_control=True,
            ),
        )
    finally:
        await nc.close()


@pytest.mark.slow
def test_tap_and_record_show_a_servers_status_messages(tmp_path: Path) -> None:
    from support.net import NATS_SERVER, wait_accepting
    from support.net import stop_process as _stop

    if not os.path.exists(NATS_SERVER):
        pytest.skip("nats-server is not installed")
    port = free_port()
    server = subprocess.Popen(
        [NATS_SERVER, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(tmp_path / "js")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"nats://127.0.0.1:{port}"
    tap = rec = None
    try:
        wait_accepting(port, server)
        out = tmp_path / "hb.jsonl"
        tap = _tool("tap", url, "hb.deliver", "--count", "3", "--duration", "30")
        rec = _tool("record", url, "hb.deliver", "--count", "3", "--duration", "30", "-o", str(out))
        _wait_ready(tap)
        _wait_ready(rec)
        asyncio.run(_push_consumer_with_heartbeats(url))
        tap_out, _ = tap.communicate(timeout=30)
        rec.communicate(timeout=30)
    finally:
        for p in (tap, rec):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=5)
        _stop(server)
    lines = [json.loads(x) for x in tap_out.splitlines()]
    assert len(lines) == 3
    for line in lines:
        assert line["verb"] == "HMSG"
        assert line["headers"][:2] == [["Status", "100"], ["Description", "Idle Heartbeat"]]
    recorded = list(CaptureReader(str(out)))
    assert len(recorded) == 3
    for r in recorded:
        assert r.header_block is not None
        assert r.header_block.startswith(b"NATS/1.0 100 Idle Heartbeat\r\n")
        assert r.headers[:2] == [["Status", "100"], ["Description", "Idle Heartbeat"]]
