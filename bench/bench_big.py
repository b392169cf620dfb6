"""The pipeline on ~1 GB of real traffic, on local[2]: MB/s, and every table N times (issue #45).

    make bench-big     (python bench/bench_big.py --run [--mb 1000] [--rounds 2] [--capture P])

1. Makes the capture from a real one: ../shared/liftbridge/samples/short.pcapng
   (a real 3-node cluster: replication, idle header-only
   ReplicationResponses, the metadata Raft group's transport, publishes and
   acks), converted to pcap by `editcap -F pcap`, then repeated by
   ../shared/bench/scale_capture.py to about MB megabytes: COPIES copies, each
   on its own loopback addresses, 100 s after the one before it.
2. Runs `lbparse pipeline` on the single capture and on the scaled one, by
   the command's entry point in one Spark session (the single run warms it
   up), ROUNDS times on the scaled one: wall clock, the median; MB/s of the
   capture file.
3. Checks the tables: each must hold exactly COPIES times the single
   capture's rows, and the scaled run must write the same tables (target:
   every table).
4. Runs the same command once more as a user does, a fresh process
   (`python -m lbparse pipeline ...`), Spark's start included: the target
   (>= 100 MB/s) is this run's; the warm session's beside it.
5. Removes what it made, and writes its section of docs/pages/benchmarks.md.

Without --run (as `make bench` calls every bench/bench_*.py) it only says
how to run it: minutes, and ~3 GB of disk while it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_spark import MASTER, pipeline, session, timed, where  # noqa: E402
from benchdoc import Section  # noqa: E402

SHARED = Path(os.environ.get("LBPARSE_SHARED") or HERE.parent.parent / "shared")
REAL = SHARED / "liftbridge" / "samples" / "short.pcapng"
SCALE = SHARED / "bench" / "scale_capture.py"
PCAP_HEADER = 24  # a pcap file's global header: what the copies do not repeat


def tables(summary: dict[str, Any]) -> dict[str, int]:
    """Rows by table, as the run's summary.json says."""
    return {name: t["rows"] for name, t in summary.get("tables", {}).items()}


def make_capture(real: Path, work: Path, mb: float) -> tuple[Path, Path, int]:
    """The real capture as pcap, and its scaled copy: (single, scaled, copies)."""
    single = work / "single.pcap"
    if real.suffix == ".pcapng":
        subprocess.run(["editcap", "-F", "pcap", str(real), str(single)], check=True)
    else:
        shutil.copyfile(real, single)
    scaled = work / "scaled.pcap"
    subprocess.run(
        [sys.executable, str(SCALE), str(single), str(scaled), "--mb", str(mb)], check=True
    )
    body = single.stat().st_size - PCAP_HEADER
    copies, rest = divmod(scaled.stat().st_size - PCAP_HEADER, body)
    if rest:
        raise SystemExit(f"{scaled}: not a whole number of copies of {single}")
    return single, scaled, copies


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true", help="run it (minutes, ~3 GB of disk)")
    ap.add_argument("--mb", type=float, default=1000, help="the capture's size (default 1000)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--capture", type=Path, default=REAL, help=f"the real capture ({REAL.name})")
    args = ap.parse_args()
    if not args.run:
        print("bench_big: skipped (minutes, ~3 GB of disk): run `make bench-big`")
        return 0
    for need in (args.capture, SCALE):
        if not need.exists():
            raise SystemExit(f"bench_big: {need} is not here")
    if shutil.which("editcap") is None:
        raise SystemExit("bench_big: editcap (Wireshark's) is not installed: `make install-system`")
    section = Section(
        "big",
        "The pipeline on 1 GB of real traffic",
        f"make bench-big (python bench/bench_big.py --run --mb {args.mb:g} --rounds {args.rounds})",
    )
    work = Path(tempfile.mkdtemp(prefix="lbparse-bench-big-"))
    try:
        t, (single, scaled, copies) = timed(lambda: make_capture(args.capture, work, args.mb))
        size = scaled.stat().st_size
        print(
            f"capture: {size / 1e9:.2f} GB, {copies} copies of {args.capture.name}, made in "
            f"{t:.1f} s",
            flush=True,
        )
        times: list[float] = []
        summary: dict[str, Any] = {}
        with session() as _spark:
            one = tables(pipeline([str(single)], work / "out"))  # also warms the session up
            for r in range(args.rounds):
                t, summary = timed(lambda: pipeline([str(scaled)], work / "out"))
                times.append(t)
                print(f"round {r + 1}: {t:.1f} s, {size / t / 1e6:.1f} MB/s", flush=True)
        many = tables(summary)
        rows = summary.get("totals", {}).get("rows", 0)
        shutil.rmtree(work / "out", ignore_errors=True)
        cmd = [sys.executable, "-P", "-m", "lbparse", "pipeline", str(scaled), "-o",
               str(work / "out"), "--master", MASTER, "--quiet"]  # fmt: skip
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        cold = time.perf_counter() - t0
        archived = class_archive_state(time.time() - cold)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit status {done.returncode}\n{done.stderr}")
        cold_summary = json.loads((work / "out" / "summary.json").read_text())
        print(f"the command in a fresh process: {cold:.1f} s, {size / cold / 1e6:.1f} MB/s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median(times)
    names = sorted(set(one) | set(many) | set(tables(cold_summary)))
    exact = [
        n for n in names if many.get(n) == copies * one.get(n, -1) == tables(cold_summary).get(n)
    ]
    # The target counts Spark's start: the fresh process, as a user runs it.
    section.target(
        f"lbparse pipeline, {size / 1e9:.2f} GB of real traffic ({args.capture.name} x "
        f"{copies}), {MASTER}, a fresh process (Spark's start included)",
        size / cold / 1e6,
        ">=",
        100,
        "{:,.1f} MB/s",
    )
    section.target(
        f"the same in a warm session (Spark started before, {args.rounds} runs' median)",
        size / med / 1e6,
        ">=",
        100,
        "{:,.1f} MB/s",
    )
    section.target(
        f"tables of the {size / 1e9:.2f} GB run that hold exactly {copies} x the single "
        f"capture's rows",
        len(exact),
        ">=",
        len(names),
        "{:,.0f}",
    )
    section.para(
        f"A pcap of {size / 1e9:.2f} GB made from the real cluster capture "
        f"`{args.capture.name}` ({single_size_mb(args.capture):.1f} MB; converted by `editcap "
        f"-F pcap`) by `../shared/bench/scale_capture.py`: {copies} copies, each on its own "
        "loopback addresses, 100 s apart: that many clusters' worth of the same real traffic "
        "(replication, idle header-only ReplicationResponses, the metadata Raft group's "
        "transport, publishes and acks), made for the run and removed after. `lbparse "
        f"pipeline PCAP -o OUT --master {MASTER}`, run by the command's entry point in one "
        "Spark session warmed up on the single capture "
        f"({args.rounds} run{'s' if args.rounds != 1 else ''}, wall clock, median), then once "
        "as a fresh process, Spark's "
        f"start included ({archived}). Not pinned: two cores. MB/s are of the capture file."
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
        ],  # fmt: skip
    )
    section.para(
        f"Every table against the single capture's (summary.json's rows; the warm run's and "
        f"the fresh process' alike): {len(exact)} of {len(names)} hold exactly {copies} "
        "times its rows."
    )
    section.table(
        ["table", "single capture", f"x {copies}", f"the {size / 1e9:.2f} GB run", ""],
        [
            [
                f"`{n}`",
                f"{one.get(n, 0):,}",
                f"{copies * one.get(n, 0):,}",
                f"{many.get(n, 0):,}",
                "exact" if n in exact else "**differs**",
            ]
            for n in names
        ],
    )
    section.para(
        f"Where the time went, as summary.json says (the tasks' own clocks): last warm "
        f"run: {where(summary, times[-1])}; the fresh process: "
        f"{where(cold_summary, cold)}."
    )
    section.write()
    return 0


def class_archive_state(since: float) -> str:
    """Whether the fresh process (started at `since`) had its JVM map Spark's
    class archive (lbparse.pipeline.class_archive), as a user's run after
    their first does: a start touches the archive it hands its JVM."""
    from lbparse.pipeline import class_archive
    from lbparse.pipeline.session import LOCAL_JVM_OPTIONS

    archive = class_archive.this_java(LOCAL_JVM_OPTIONS)
    if archive is None:
        return "Spark's class archive off"
    found = archive.whole()
    if found is None or found.stat().st_mtime < since:
        return "no class archive of Spark's yet: its JVM ran without"
    return "its JVM mapping Spark's class archive, written by an earlier local run"


def single_size_mb(path: Path) -> float:
    return path.stat().st_size / 1e6


if __name__ == "__main__":
    sys.exit(main())
