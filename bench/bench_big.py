"""The pipeline on a capture of at least 1 GB, on local[2]: MB/s (issue #24).

    make bench-big              (python bench/bench_big.py --run [--gb 1.0] [--rounds 2])

1. Writes a pcap of at least GB gigabytes into a temporary directory: one
   TCP connection on loopback, NATS PUB and MSG frames carrying the
   100,000 envelopes of bench_spark.envelope_pool (seeded: the same file
   at every run), in 65 kB segments, so frames are cut across segments.
2. Runs `lbparse pipeline PCAP -o OUT --master local[2]` ROUNDS times by
   the command's entry point in one Spark session (warmed up first on a
   small capture of the same kind): whatever tables the pipeline writes,
   timed whole; MB/s of the capture file (target: >= 100 MB/s).
3. Runs the same command once more as a user does, a fresh process
   (`python -m lbparse pipeline ...`), Spark's start included.
4. Removes the capture and the outputs, and writes its section of
   docs/pages/benchmarks.md.

Without --run (as `make bench` calls every bench/bench_*.py) it only says
how to run it: minutes, and ~3 GB of disk while it runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark import MASTER, envelope_pool, pipeline, session, timed, where, write_pcap
from benchdoc import Section


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true", help="run it (minutes, ~3 GB of disk)")
    ap.add_argument("--gb", type=float, default=1.0, help="the capture's size (default 1.0)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if not args.run:
        print("bench_big: skipped (minutes, ~3 GB of disk): run `make bench-big`")
        return 0
    section = Section(
        "big",
        "The pipeline on a 1 GB capture",
        f"make bench-big (python bench/bench_big.py --run --gb {args.gb} --rounds {args.rounds})",
    )
    work = Path(tempfile.mkdtemp(prefix="lbparse-bench-big-"))
    try:
        pool = envelope_pool(100_000)
        pcap, warm = work / "big.pcap", work / "warm.pcap"
        t, messages = timed(lambda: write_pcap(pool, pcap, int(args.gb * 1e9)))
        write_pcap(pool, warm, 20_000_000)
        size = pcap.stat().st_size
        print(
            f"pcap: {size / 1e9:.2f} GB, {messages:,} NATS messages (PUB and MSG), written "
            f"in {t:.1f} s",
            flush=True,
        )
        times: list[float] = []
        summary: dict = {}
        with session() as _spark:
            pipeline([str(warm)], work / "out")  # warm: the JVM, the Python workers
            for r in range(args.rounds):
                t, summary = timed(lambda: pipeline([str(pcap)], work / "out"))
                times.append(t)
                print(f"round {r + 1}: {t:.1f} s, {size / t / 1e6:.1f} MB/s", flush=True)
        rows = summary.get("totals", {}).get("rows", messages)
        shutil.rmtree(work / "out", ignore_errors=True)
        cmd = [
            sys.executable,
            "-P",
            "-m",
            "lbparse",
            "pipeline",
            str(pcap),
            "-o",
            str(work / "out"),
            "--master",
            MASTER,
            "--quiet",
        ]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        cold = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit status {done.returncode}\n{done.stderr}")
        cold_summary = json.loads((work / "out" / "summary.json").read_text())
        print(f"the command in a fresh process: {cold:.1f} s, {size / cold / 1e6:.1f} MB/s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median(times)
    section.target(
        f"lbparse pipeline, a {size / 1e9:.2f} GB pcap, {MASTER}",
        size / med / 1e6,
        ">=",
        100,
        "{:,.1f} MB/s",
    )
    section.para(
        f"A pcap of {size / 1e9:.2f} GB ({messages:,} NATS messages, PUB and MSG frames over "
        "one loopback TCP connection in 65 kB segments, carrying the 100,000 envelopes of "
        "`bench_spark.envelope_pool`: Publish 45%, Ack 40%, replication and other RPCs), "
        f"written for the run and removed after. `lbparse pipeline PCAP -o OUT --master "
        f"{MASTER}`, run by the command's entry point in one Spark session warmed up on a "
        f"20 MB capture ({args.rounds} runs, wall clock, median), then once as a fresh "
        "process, Spark's start included. Not pinned: two cores. MB/s are of the capture "
        "file."
    )
    section.table(
        ["", "seconds", "MB/s", "rows/s"],
        [
            [
                f"in a warm session, run {i + 1}",
                f"{t:.1f}",
                f"{size / t / 1e6:,.1f}",
                f"{rows / t:,.0f}",
            ]
            for i, t in enumerate(times)
        ]
        + [
            [
                "in a warm session, median",
                f"{med:.1f}",
                f"**{size / med / 1e6:,.1f}**",
                f"{rows / med:,.0f}",
            ],
            [
                "a fresh process (`python -m lbparse pipeline`)",
                f"{cold:.1f}",
                f"{size / cold / 1e6:,.1f}",
                f"{rows / cold:,.0f}",
            ],
        ],
    )
    section.para(
        f"Where the time went, as summary.json says (the tasks' own clocks): last warm "
        f"run: {where(summary, times[-1])}; the fresh process: "
        f"{where(cold_summary, cold)}."
    )
    section.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
