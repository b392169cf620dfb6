"""`lbparse record` under a flood from a real nats-server: what it takes in, what it writes.

    python bench/bench_live.py [--rounds 3] [--messages 100000]   (part of `make bench`)

A nats-server that keeps at most 4 MB for a slow client (`max_pending`,
as in tests/live/test_live_hardening.py) and a publisher writing PUB lines
of real envelopes (proto.Message, 60-byte values, CRC) as fast as the
server takes them. nats-server slows a publisher to what its subscribers
read, so the publisher's rate is the recorder's intake: the rate its
network reader hands messages to the backlog. The recorder is `lbparse
record SERVER 'load.>' -o FILE.parquet --count N` (layout auto, the
default), in two forms, taking turns round after round:

  reader first   as shipped: the worker that decodes and writes pauses
                 after each millisecond in which the reader had messages
                 to hand on (lbparse.live.subscriber._Worker)
  shared         the worker never pauses (its turn made endless): the two
                 threads share the GIL as Python shares it

Measured: the intake (messages/s over the flood), and the writing (messages
/s from the first PUB until the recorder exits with all N written). Not
pinned: the recorder, nats-server and the publisher on the machine's
cores, as a user runs them. No target: issue #19's test asks for 50,000/s
taken in without a loss.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchdoc import Section, spread

import lbparse

NATS_SERVER = "nats-server"
CONFIG = 'max_pending: 4MB\nwrite_deadline: "2s"\n'
# The recorder's command line, its worker's turn made endless for `shared`.
RECORD = """\
import sys
from lbparse.live import subscriber
if sys.argv[1] == "shared":
    subscriber.WORKER_TURN = float("inf")
from lbparse.cli import main
sys.exit(main(sys.argv[2:]))
"""
FORMS = ("reader first", "shared")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_accepting(port: int, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(200):  # 10 s at most
        if proc.poll() is not None:
            raise RuntimeError(f"nats-server exited with status {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nats-server is not listening on port {port} after 10 s")


def _lines(n: int) -> list[bytes]:
    """The flood: PUB lines of n envelopes, in chunks of 2,000."""
    Message = lbparse.message_class("proto.Message")
    lines = []
    for i in range(n):
        p = lbparse.encode(
            Message(stream="load", subject="load.x", key=b"k%d" % i, value=b"v" * 60, offset=i),
            crc=True,
        )
        lines.append(b"PUB load.x %d\r\n%s\r\n" % (len(p), p))
    return [b"".join(lines[i : i + 2000]) for i in range(0, n, 2000)]


def _flood(port: int, chunks: list[bytes]) -> float:
    """Publish the chunks; the seconds until the server has them all (its PONG)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.recv(4096)  # INFO
        s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
        t = time.perf_counter()
        for chunk in chunks:
            s.sendall(chunk)
        s.sendall(b"PING\r\n")
        got = b""
        while b"PONG" not in got:  # bounded by the socket's timeout
            data = s.recv(4096)
            if not data:
                raise RuntimeError("the server closed the publisher's connection")
            got += data
        return time.perf_counter() - t


def one_run(form: str, chunks: list[bytes], n: int, tmp: Path) -> tuple[float, float]:
    """One recorder of one flood: (intake, writing), messages a second."""
    port = _port()
    conf = tmp / "nats.conf"
    conf.write_text(f"listen: 127.0.0.1:{port}\n{CONFIG}")
    server = subprocess.Popen(
        [NATS_SERVER, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    out = tmp / "flood.parquet"
    out.unlink(missing_ok=True)
    recorder = None
    try:
        _wait_accepting(port, server)
        recorder = subprocess.Popen(
            [sys.executable, "-P", "-c", RECORD, form, "record", f"nats://127.0.0.1:{port}",
             "load.>", "-o", str(out), "--count", str(n), "--reconnect-timeout", "0"],
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert recorder.stderr is not None
        line = recorder.stderr.readline()  # bounded: the recorder's connect timeout
        if "listening on" not in line:
            raise RuntimeError(f"lbparse record did not start: {line}{recorder.stderr.read()}")
        start = time.perf_counter()
        flood = _flood(port, chunks)
        err = recorder.communicate(timeout=600)[1]
        wrote = time.perf_counter() - start
        if recorder.returncode != 0:
            raise RuntimeError(f"lbparse record exited {recorder.returncode}: {err}")
        if f"{n} messages to" not in err:
            raise RuntimeError(f"lbparse record did not write the {n} messages: {err}")
        return n / flood, n / wrote
    finally:
        for proc in (recorder, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=100_000)
    args = ap.parse_args()
    if shutil.which(NATS_SERVER) is None:
        print(f"no {NATS_SERVER} on PATH: `make install-system` installs it")
        return 0
    section = Section(
        "live",
        "lbparse record under a flood",
        "python bench/bench_live.py (make bench)",
    )
    n = args.messages
    chunks = _lines(n)
    intake: dict[str, list[float]] = {f: [] for f in FORMS}
    writing: dict[str, list[float]] = {f: [] for f in FORMS}
    with tempfile.TemporaryDirectory(prefix="lbparse-bench-live-") as d:
        for r in range(args.rounds):
            for form in FORMS if r % 2 == 0 else FORMS[::-1]:
                took, wrote = one_run(form, chunks, n, Path(d))
                intake[form].append(took)
                writing[form].append(wrote)
                print(f"round {r + 1} {form}: intake {took:,.0f}/s, writing {wrote:,.0f}/s")
    med = {f: statistics.median(intake[f]) for f in FORMS}
    rows = [
        [
            f,
            f"{med[f]:,.0f}",
            spread(intake[f], "{:,.0f}"),
            f"{statistics.median(writing[f]):,.0f}",
            f"{med[f] / med['shared']:.2f}x",
        ]
        for f in FORMS
    ]
    section.para(
        f"{n:,} envelopes (proto.Message, 60-byte values, CRC) published as fast as a "
        "nats-server keeping at most 4 MB for a slow client takes them, into `lbparse "
        "record -o FILE.parquet --count N` (layout auto); the server slows the publisher to "
        "what the recorder reads, so the publisher's rate is the recorder's intake. "
        f"{args.rounds} rounds, the two forms taking turns, medians (messages/s). `reader "
        "first`: as shipped, the writing worker pausing for the network reader while it has "
        "messages to hand on; `shared`: the worker never pausing. Writing: from the first "
        "PUB until the recorder exits with every message written. Not pinned."
    )
    section.table(["recorder", "intake /s", "per round", "writing /s", "intake x shared"], rows)
    section.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
