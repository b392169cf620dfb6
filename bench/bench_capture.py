"""Capture reader speed: packets and megabytes per second, next to dpkt.

Two captures are generated here (in a temporary directory): many small
messages, one PUB or MSG per packet (the worst case per packet), and large
messages spanning several 64 KiB loopback segments. For each, the median
of several runs of:

  dpkt     dpkt.pcap.Reader iteration alone (no decoding at all)
  frames   lbparse's CaptureReader, decode=False: link, IP, TCP
           reassembly, NATS framing, one Record per message
  decoded  the same, with every payload decoded as an envelope (v0)

and the ratio of each to dpkt's time. Target: frames >= 300,000 packets/s
on small messages, and within 3x of dpkt's plain iteration.
"""

from __future__ import annotations

import json
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdoc import Section, pin_one_core
from support.shared import CAPTURES

from lbparse.capture import HOT_MODULES, CaptureReader, compiled_modules

RUNS = 5
ROOT = Path(__file__).resolve().parent.parent


def _vector_payloads() -> list[bytes]:
    lines = (ROOT / "tests" / "data" / "vectors.jsonl").read_text().splitlines()
    vs = [json.loads(x) for x in lines if x]
    return [bytes.fromhex(v["hex"]) for v in vs if v["layout"] == "v0"][:50] or [b"x" * 64]


class PcapWriter:
    """Ethernet/IPv4/TCP frames of one loopback connection, both directions."""

    def __init__(self, path: str) -> None:
        self.f = open(path, "wb", buffering=1 << 20)
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        self.seq = {0: 1000, 1: 5000}
        self.ts = 1_700_000_000.0
        self.packets = 0

    def send(self, side: int, data: bytes) -> None:
        ports = (40000, 4222) if side == 0 else (4222, 40000)
        tcp = struct.pack(
            "!HHIIHHHH", ports[0], ports[1], self.seq[side], self.seq[1 - side], 0x5018, 65535, 0, 0
        )
        ip = struct.pack(
            "!BBHHHBBH4s4s",
            0x45,
            0,
            40 + len(data),
            0,
            0x4000,
            64,
            6,
            0,
            b"\x7f\0\0\x01",
            b"\x7f\0\0\x01",
        )
        frame = b"\0" * 12 + b"\x08\x00" + ip + tcp + data
        self.ts += 0.00001
        sec = int(self.ts)
        self.f.write(struct.pack("<IIII", sec, int((self.ts - sec) * 1e6), len(frame), len(frame)))
        self.f.write(frame)
        self.seq[side] = (self.seq[side] + len(data)) & 0xFFFFFFFF
        self.packets += 1

    def close(self) -> None:
        self.f.close()


def make_small(path: str, n: int) -> int:
    w = PcapWriter(path)
    payloads = _vector_payloads()
    for i in range(n // 2):
        p = payloads[i % len(payloads)]
        w.send(0, b"PUB lb.stream.%d  %d\r\n" % (i % 8, len(p)) + p + b"\r\n")
        w.send(1, b"MSG lb.stream.%d 1 %d\r\n" % (i % 8, len(p)) + p + b"\r\n")
    w.close()
    return w.packets


def make_large(path: str, n: int, size: int) -> int:
    w = PcapWriter(path)
    body = os.urandom(size)
    mss = 65495 - 12  # loopback MTU, as a tcpdump on lo shows
    for _ in range(n):
        frame = b"HPUB lb.big  12 %d\r\nNATS/1.0\r\n\r\n" % (size + 12) + body + b"\r\n"
        for k in range(0, len(frame), mss):
            w.send(0, frame[k : k + mss])
    w.close()
    return w.packets


def median_time(fn: Callable[[], int], runs: int = RUNS) -> tuple[float, int]:
    times, result = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def interleaved(
    cases: dict[str, Callable[[], int]], runs: int = RUNS
) -> dict[str, tuple[float, int]]:
    """Median seconds and result of each case, the cases taking turns run
    after run so that a noisy moment on a shared machine hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    result: dict[str, int] = {}
    for _ in range(runs):
        for name, fn in cases.items():
            t = time.perf_counter()
            result[name] = fn()
            times[name].append(time.perf_counter() - t)
    return {name: (statistics.median(ts), result[name]) for name, ts in times.items()}


def run_dpkt(path: str) -> int:
    import dpkt

    n = 0
    with open(path, "rb") as f:
        for _ts, _buf in dpkt.pcap.Reader(f):
            n += 1
    return n


def run_ours(path: str, decode: bool) -> int:
    n = 0
    for _rec in CaptureReader(path, layout="v0", decode=decode):
        n += 1
    return n


def bench(name: str, path: str, packets: int, section: Section | None = None) -> dict[str, float]:
    mb = os.path.getsize(path) / 1e6
    cases = {
        "dpkt iteration": lambda: run_dpkt(path),
        "lbparse frames": lambda: run_ours(path, False),
        "lbparse decoded": lambda: run_ours(path, True),
    }
    times = interleaved(cases)
    t_dpkt, t_frames, t_dec = (times[k][0] for k in cases)
    assert times["dpkt iteration"][1] == packets, (times["dpkt iteration"][1], packets)
    msgs = times["lbparse frames"][1]
    rows = [
        ("dpkt iteration", t_dpkt, None),
        ("lbparse frames", t_frames, msgs),
        ("lbparse decoded", t_dec, msgs),
    ]
    print(
        f"\n{name}: {packets:,} packets, {msgs:,} messages, {mb:.1f} MB "
        f"(median of {RUNS} interleaved runs)"
    )
    print(f"  {'':<16} {'seconds':>9} {'packets/s':>12} {'MB/s':>9} {'msgs/s':>11} {'x dpkt':>7}")
    for label, t, m in rows:
        print(
            f"  {label:<16} {t:9.4f} {packets / t:12,.0f} {mb / t:9.1f} "
            f"{(m or 0) / t:11,.0f} {t / t_dpkt:7.2f}"
        )
    if section is not None:
        section.lines += [f"{name}: {packets:,} packets, {msgs:,} messages, {mb:.1f} MB:", ""]
        section.table(
            ["reader", "seconds", "packets/s", "MB/s", "messages/s", "x dpkt"],
            [
                [
                    label,
                    f"{t:.4f}",
                    f"{packets / t:,.0f}",
                    f"{mb / t:,.1f}",
                    f"{(m or 0) / t:,.0f}" if m else "",
                    f"{t / t_dpkt:.2f}x",
                ]
                for label, t, m in rows
            ],
        )
    return {"pps": packets / t_frames, "ratio": t_frames / t_dpkt}


def main() -> int:
    small_n = int(os.environ.get("BENCH_SMALL_PACKETS", "200000"))
    section = Section(
        "capture",
        "The record path's capture reader against dpkt",
        "python bench/bench_capture.py (make bench)",
    )
    section.cpu = pin_one_core()
    compiled = compiled_modules()
    section.para(
        "`CaptureReader` (the record path: one Record per NATS message; "
        f"{len(compiled)} of its {len(HOT_MODULES)} hot modules compiled by mypyc) against "
        "dpkt's bare `dpkt.pcap.Reader` iteration of the same file, wall clock, the process "
        f"pinned to one core, {RUNS} interleaved runs, medians. `frames`: link, IP, TCP "
        "reassembly and NATS framing; `decoded`: each payload decoded as a v0 envelope too. "
        "The captures are generated in a temporary directory."
    )
    print(
        f"capture modules compiled (setup.py, mypyc): {len(compiled)} of {len(HOT_MODULES)}"
        + ("" if compiled else "; pure Python (LBPARSE_PURE_PYTHON, or no C compiler)")
    )
    with tempfile.TemporaryDirectory(prefix="lbparse-bench-") as tmp:
        small, large = os.path.join(tmp, "small.pcap"), os.path.join(tmp, "large.pcap")
        ps = make_small(small, small_n)
        pl = make_large(large, 300, 200_000)
        s = bench("small messages (one per packet)", small, ps, section)
        big = bench("large messages (200 kB, 4 segments each)", large, pl, section)
    print(
        f"\nsmall: {s['pps']:,.0f} packets/s (target >= 300,000), "
        f"{s['ratio']:.2f}x dpkt's time (target <= 3)"
    )
    print(f"large: {big['ratio']:.2f}x dpkt's time")
    section.target(
        "CaptureReader frames, small messages: packets/s", s["pps"], ">=", 300_000, "{:,.0f}"
    )
    section.target(
        "CaptureReader frames, small messages: time", s["ratio"], "<=", 3.0, "{:.2f}x dpkt"
    )
    shared = CAPTURES / "nats_1000.pcap"
    if shared.exists():
        t, n = median_time(lambda: run_ours(str(shared), False))
        td, _ = median_time(lambda: run_dpkt(str(shared)))
        print(
            f"shared nats_1000.pcap: {n} messages in {t * 1000:.1f} ms "
            f"({shared.stat().st_size / 1e6 / t:.0f} MB/s), {t / td:.2f}x dpkt's time"
        )
        section.para(
            f"The shared `nats_1000.pcap` ({n:,} messages, framing): "
            f"{t * 1000:.1f} ms, {shared.stat().st_size / 1e6 / t:,.0f} MB/s, "
            f"{t / td:.2f}x dpkt's time."
        )
    section.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
