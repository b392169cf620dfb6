"""The native path against Liftbridge's own Go decoders and dpkt (issue #16's targets).

    python bench/bench_native.py [--pcap-gb 1.0] [--no-pipeline]   (part of `make bench`)

One run, each measurement interleaved with what it is compared to, one
core each (the pipeline part excepted, which runs local[1] then local[2]):

1. ns per envelope: `lbbench` (Liftbridge's decoders in Go,
   ../shared/liftbridge/bin/lbbench, over a file of hex envelopes) against
   `lbparse.decode_arrow`, on the real envelope mix of
   ../shared/liftbridge/samples/short.pcapng (every NATS payload of it that
   starts with the envelope magic). Target: <= 0.5x Go.
2. messages/s of `lbparse.read_capture_arrow` (framing and decoding, auto)
   and of the C capture loop alone (framing, record batches) on the real
   capture and on the 200,000-small-message capture of bench_capture.py,
   against dpkt's bare iteration of the same file. Targets: >= 1,000,000
   decoded messages/s, <= 0.5x dpkt's time.
3. the pipeline on a pcap of at least 1 GB (bench_spark.write_pcap) with
   local[1] and with local[2]: MB/s (target >= 100 MB/s on local[2]), and
   the ratio of the two (a big capture is cut into ranges: every core).

Medians of interleaved runs; ratios are what to read on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

import lbparse  # noqa: E402
from lbparse.capture import columnar  # noqa: E402

SHARED = Path(os.environ.get("LBPARSE_SHARED") or ROOT.parent / "shared")
SHORT = SHARED / "liftbridge" / "samples" / "short.pcapng"
LBBENCH = SHARED / "liftbridge" / "bin" / "lbbench"
ROUNDS = 7
MAGIC = bytes.fromhex("b90e43b4")


def envelope_mix(path: Path) -> list[bytes]:
    """Every NATS payload of the capture that starts with the envelope magic."""
    from lbparse.pipeline.schema import arrow_record_schema

    table = pa.Table.from_batches(list(columnar.NativeCapture(path).batches(arrow_record_schema())))
    payloads = table.column("payload").combine_chunks()
    payloads = payloads.filter(pc.is_valid(payloads))
    return [p for p in payloads.to_pylist() if p[:4] == MAGIC]


def lbbench_ns(hexfile: Path) -> float:
    out = subprocess.run([str(LBBENCH), str(hexfile), "5"], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    m = re.search(r"median (\d+(?:\.\d+)?)", out)
    if not m:
        raise RuntimeError(f"lbbench said: {out!r}")
    return float(m.group(1))


def best_of(fn: Callable[[], Any], n: int = 3) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def one_core() -> None:
    """Pin this process (and lbbench, its child) to one core."""
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    except (AttributeError, OSError):
        pass


def part_envelopes(tmp: Path) -> dict[str, float]:
    envs = envelope_mix(SHORT)
    hexfile = tmp / "envelopes.hex"
    hexfile.write_text("".join(e.hex() + "\n" for e in envs))
    arr = pa.array(envs, pa.binary())
    lbparse.decode_arrow(arr)  # warm: the decoder, its schema and columns
    go, ours = [], []
    for _ in range(ROUNDS):
        go.append(lbbench_ns(hexfile))
        ours.append(best_of(lambda: lbparse.decode_arrow(arr)) / len(envs) * 1e9)
    g, o = statistics.median(go), statistics.median(ours)
    print(f"1. envelopes of short.pcapng: {len(envs):,} ({sum(map(len, envs)) / 1e6:.2f} MB), "
          f"{ROUNDS} interleaved rounds")
    print(f"   lbbench (Go, Liftbridge's decoders)   {g:8.0f} ns/envelope")
    print(f"   lbparse.decode_arrow                   {o:8.0f} ns/envelope   "
          f"{o / g:.2f}x Go (target <= 0.50)")
    return {"go_ns": g, "decode_arrow_ns": o, "ratio": o / g}


def run_dpkt(path: Path) -> int:
    import dpkt

    n = 0
    with open(path, "rb") as f:
        reader = dpkt.pcapng.Reader(f) if path.suffix == ".pcapng" else dpkt.pcap.Reader(f)
        for _ts, _buf in reader:
            n += 1
    return n


def run_frames(path: Path) -> int:
    from lbparse.pipeline.schema import arrow_record_schema

    schema = arrow_record_schema()
    return sum(b.num_rows for b in columnar.NativeCapture(path).batches(schema))


def run_decoded(path: Path) -> int:
    return sum(b.num_rows for b in lbparse.read_capture_arrow(path))


def part_captures(tmp: Path) -> dict[str, dict[str, float]]:
    import bench_capture

    small = tmp / "small.pcap"
    bench_capture.make_small(str(small), 200_000)
    out = {}
    print("\n2. captures: messages/s (median of interleaved runs) and time against dpkt's "
          "bare iteration")
    for name, path in (("short.pcapng (real cluster)", SHORT), ("200,000 small messages", small)):
        cases = {"dpkt iteration": lambda p=path: run_dpkt(p),
                 "C loop, framing": lambda p=path: run_frames(p),
                 "read_capture_arrow": lambda p=path: run_decoded(p)}
        for fn in cases.values():
            fn()  # warm
        times: dict[str, list[float]] = {k: [] for k in cases}
        counts: dict[str, int] = {}
        for _ in range(ROUNDS):
            for k, fn in cases.items():
                t = time.perf_counter()
                counts[k] = fn()
                times[k].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        msgs = counts["read_capture_arrow"]
        print(f"   {name}: {counts['dpkt iteration']:,} packets, {msgs:,} rows, "
              f"{path.stat().st_size / 1e6:.1f} MB")
        for k in cases:
            rate = (counts[k] / med[k]) if k != "dpkt iteration" else counts[k] / med[k]
            unit = "packets/s" if k == "dpkt iteration" else "msgs/s"
            print(f"     {k:<20} {med[k] * 1000:9.1f} ms {rate:>13,.0f} {unit:<9} "
                  f"{med[k] / med['dpkt iteration']:6.2f}x dpkt")
        out[name] = {"decoded_per_s": msgs / med["read_capture_arrow"],
                     "frames_per_s": counts["C loop, framing"] / med["C loop, framing"],
                     "decoded_x_dpkt": med["read_capture_arrow"] / med["dpkt iteration"],
                     "frames_x_dpkt": med["C loop, framing"] / med["dpkt iteration"]}
    print("   targets: >= 1,000,000 decoded msgs/s per core; <= 0.50x dpkt's time")
    return out


def part_pipeline(tmp: Path, gb: float) -> dict[str, float]:
    import bench_spark

    from lbparse.pipeline.job import PipelineOptions, run
    from lbparse.pipeline.session import TEST_CONF, spark_session

    pool = bench_spark.envelope_pool(100_000)
    pcap = tmp / "big.pcap"
    t, messages = bench_spark.timed(lambda: bench_spark.write_pcap(pool, pcap, int(gb * 1e9)))
    size = pcap.stat().st_size
    print(f"\n3. pipeline on a {size / 1e9:.2f} GB pcap ({messages:,} messages), --layout auto")
    os.sched_setaffinity(0, os.sched_getaffinity(0) | set(range(os.cpu_count() or 1)))
    out = {}
    for master in ("local[1]", "local[2]"):
        spark = spark_session(master, conf=TEST_CONF)
        try:
            t, summary = bench_spark.timed(lambda: run(spark, PipelineOptions(
                inputs=(str(pcap),), out=str(tmp / "pipe"), overwrite=True)))
        finally:
            spark.stop()
        assert not summary.checks(), summary.checks()
        tt = summary.totals()
        out[master] = size / t / 1e6
        print(f"   {master}: {t:6.1f} s  {size / t / 1e6:7.1f} MB/s  {tt['rows'] / t:>11,.0f} rows/s"
              f"  (tasks: read {tt['read_seconds']:.1f} s, decode {tt['decode_seconds']:.1f} s, "
              f"write {tt['write_seconds']:.1f} s)")
    print(f"   local[2] / local[1]: {out['local[2]'] / out['local[1]']:.2f}x   "
          f"(target: >= 100 MB/s on local[2])")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pcap-gb", type=float, default=1.0)
    ap.add_argument("--no-pipeline", action="store_true", help="parts 1 and 2 only")
    args = ap.parse_args()
    if not columnar.available():
        print("bench_native: the C capture module is not built (setup.py); nothing to measure")
        return 0
    if not SHORT.exists() or not LBBENCH.exists():
        print(f"bench_native: {SHORT} or {LBBENCH} missing (shared/ beside the checkout)")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="lbparse-bench-native-"))
    try:
        one_core()
        part_envelopes(tmp)
        part_captures(tmp)
        if not args.no_pipeline:
            part_pipeline(tmp, args.pcap_gb)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
