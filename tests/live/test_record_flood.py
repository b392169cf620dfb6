"""`lbparse record` under a flood keeps its memory to the documented bound
(issue #47: 432 MB of RSS with --backlog-mb 64): a real nats-server on a
free loopback port, a publisher process writing PUB lines as fast as the
server takes them for 10 s, and the recorder's peak resident memory
(VmHWM) above what it held when it started listening at most
3 x --backlog-mb + 64 MiB (docs/pages/captures.md).

Parquet with 4 KB payloads is the case that grew: the writer held 4,096
rows whatever their size (and Arrow's first zoned timestamp imported pandas
mid-flood), and nats-py's own queue of parsed messages was bounded only by
its defaults (512 Ki messages, 128 MiB)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.system import status_mib
from test_live_reconnect import Server, Tool, server  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow

BACKLOG_MB = 8
BOUND_MB = 3 * BACKLOG_MB + 64  # the documented bound
FLOOD_SECONDS = 10

# Writes PUB lines in 64 KiB chunks until its time is up, then says how many.
PUBLISHER = r"""
import socket, sys, time
port, seconds, size = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
line = b"PUB load.x %d\r\n%s\r\n" % (size, b"x" * size)
chunk = line * max(1, 65536 // len(line))
per_chunk = max(1, 65536 // len(line))
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.recv(4096)
s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end:
    s.sendall(chunk)
    n += per_chunk
print(n)
"""


def _kill(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.mark.parametrize("size", [4000, 100])
def test_record_under_a_flood_keeps_to_its_memory_bound(
    server: Server, tmp_path: Path, size: int
) -> None:
    out = tmp_path / "flood.parquet"
    tool = Tool(
        "record",
        server.url,
        "load.>",
        "-o",
        str(out),
        "--reconnect-timeout",
        "0",
        "--backlog-mb",
        str(BACKLOG_MB),
    )
    publisher = None
    try:
        tool.wait_for("listening on")
        time.sleep(0.5)
        idle = status_mib(tool.proc.pid, "VmRSS")
        assert idle is not None
        publisher = subprocess.Popen(
            [sys.executable, "-c", PUBLISHER, str(server.port), str(FLOOD_SECONDS), str(size)],
            stdout=subprocess.PIPE,
        )
        published = int(publisher.communicate(timeout=FLOOD_SECONDS + 60)[0])
        time.sleep(1)  # what the server still held reaches the recorder
        peak = status_mib(tool.proc.pid, "VmHWM")
        assert peak is not None, "the recorder ended during the flood"
        # Stop; the backlog left is not what this test is about: a second
        # signal stops at once, and the summary counts what was not written.
        tool.proc.send_signal(signal.SIGINT)
        time.sleep(2)
        if tool.proc.poll() is None:
            tool.proc.send_signal(signal.SIGINT)
        code, _, err = tool.finish(timeout=120)
    finally:
        if publisher is not None:
            _kill(publisher)
        _kill(tool.proc)
    summary = [line for line in err.splitlines() if "messages" in line and " to " in line][-1]
    assert "by way of the spill file" in summary, (
        f"not a flood: the writer kept up ({published} published): {err}"
    )
    assert pq.ParquetFile(out).metadata.num_rows > 0, err
    assert code in (0, 1), err
    assert peak - idle <= BOUND_MB, (
        f"peak {peak} MiB, {peak - idle} MiB over the idle {idle} MiB; the bound for "
        f"--backlog-mb {BACKLOG_MB} is {BOUND_MB} MiB ({published} published): {summary}"
    )
