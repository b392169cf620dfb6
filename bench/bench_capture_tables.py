"""The capture readers of the columnar core against dpkt's bare iteration (issue #24).

    python bench/bench_capture_tables.py [--rounds 5]     (part of `make bench`)

For each capture: the real ones beside the checkout
(../shared/liftbridge/samples/*.pcap*, ../shared/captures/*.pcap*) and one
of 200,000 small messages, one per packet (bench_capture.make_small,
written into a temporary directory and removed after), the CPU time of:

  dpkt                   dpkt.pcap.Reader / dpkt.pcapng.Reader: a loop over
                         every packet, nothing decoded (the floor of reading
                         a capture in Python)
  read_capture_tables    lbparse.read_capture_tables(path): framing, TCP,
                         NATS, every message decoded (layout auto, the
                         default), as narrow tables
  read_capture_arrow     the same rows as one wide batch
  read_capture_tables v0 the same with --layout v0 (no per-row evidence)

and decoded messages per CPU-second, and each reader's time against
dpkt's on the same file. Targets: read_capture_tables >= 1,000,000 decoded
messages/s on one core, and <= 0.5x dpkt's time.

One process pinned to one core; the readers take turns round after round.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from benchdoc import Section, interleaved, pin_one_core, spread  # noqa: E402

import lbparse  # noqa: E402

SHARED = Path(os.environ.get("LBPARSE_SHARED") or HERE.parent.parent / "shared")
SMALL = 200_000
MIN_SECONDS = 0.3  # a case is called again within a round until it took about this long


def real_captures() -> list[Path]:
    found = [
        *(SHARED / "liftbridge" / "samples").glob("*.pcap*"),
        *(SHARED / "captures").glob("*.pcap*"),
    ]
    return sorted(p for p in found if p.suffix in (".pcap", ".pcapng"))


def run_dpkt(path: Path) -> int:
    import dpkt

    n = 0
    with open(path, "rb") as f:
        reader = dpkt.pcapng.Reader(f) if path.suffix == ".pcapng" else dpkt.pcap.Reader(f)
        for _ts, _buf in reader:
            n += 1
    return n


def run_tables(path: Path, layout: str = "auto") -> int:
    return sum(t["messages"].num_rows for t in lbparse.read_capture_tables(path, layout))


def run_arrow(path: Path) -> int:
    return sum(b.num_rows for b in lbparse.read_capture_arrow(path))


def cases(path: Path) -> dict[str, Callable[[], Any]]:
    return {
        "dpkt": lambda: run_dpkt(path),
        "read_capture_tables": lambda: run_tables(path),
        "read_capture_arrow": lambda: run_arrow(path),
        "read_capture_tables v0": lambda: run_tables(path, "v0"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import bench_capture

    section = Section(
        "capture_tables",
        "Capture readers against dpkt's bare iteration",
        "python bench/bench_capture_tables.py (make bench)",
    )
    section.cpu = pin_one_core()
    tmp = Path(tempfile.mkdtemp(prefix="lbparse-bench-capture-tables-"))
    rows: list[list[Any]] = []
    try:
        small = tmp / "small-200k.pcap"
        bench_capture.make_small(str(small), SMALL)
        files = [(p, f"`{p.parent.name}/{p.name}`") for p in real_captures()]
        files.append((small, f"{SMALL:,} small messages, one per packet (generated)"))
        for path, label in files:
            samples, result = interleaved(cases(path), args.rounds, min_seconds=MIN_SECONDS)
            med = {k: statistics.median(v) for k, v in samples.items()}
            msgs, packets = result["read_capture_tables"], result["dpkt"]
            # read_capture_arrow is the C loop's raw view: an HTTP/2 connection's
            # bytes are NATS problem rows there, which the tables resolve (gRPC).
            if result["read_capture_arrow"] < msgs or result["read_capture_tables v0"] != msgs:
                raise SystemExit(f"{path}: the readers gave different row counts: {result}")
            ratio = med["read_capture_tables"] / med["dpkt"]
            per_round = [t / d for t, d in zip(samples["read_capture_tables"], samples["dpkt"])]
            rate = msgs / med["read_capture_tables"]
            print(
                f"{path.name}: {path.stat().st_size / 1e6:.1f} MB, {packets:,} packets, "
                f"{msgs:,} messages; dpkt {med['dpkt'] * 1e3:.1f} ms; tables "
                f"{med['read_capture_tables'] * 1e3:.1f} ms = {rate:,.0f} msgs/s, "
                f"{ratio:.2f}x dpkt; arrow {msgs / med['read_capture_arrow']:,.0f} msgs/s, "
                f"{med['read_capture_arrow'] / med['dpkt']:.2f}x; tables v0 "
                f"{msgs / med['read_capture_tables v0']:,.0f} msgs/s, "
                f"{med['read_capture_tables v0'] / med['dpkt']:.2f}x",
                flush=True,
            )
            rows.append(
                [
                    label,
                    f"{path.stat().st_size / 1e6:.1f}",
                    f"{packets:,}",
                    f"{msgs:,}",
                    f"{med['dpkt'] * 1e3:,.1f}",
                    f"{med['read_capture_tables'] * 1e3:,.1f}",
                    f"**{rate:,.0f}**",
                    f"**{ratio:.2f}x**",
                    spread(per_round),
                    f"{msgs / med['read_capture_arrow']:,.0f}",
                    f"{med['read_capture_arrow'] / med['dpkt']:.2f}x",
                    f"{msgs / med['read_capture_tables v0']:,.0f}",
                    f"{med['read_capture_tables v0'] / med['dpkt']:.2f}x",
                ]
            )
            name = f"{SMALL:,} small messages" if path == small else path.name
            section.target(
                f"read_capture_tables, {name}: messages/s", rate, ">=", 1_000_000, "{:,.0f}"
            )
            section.target(f"read_capture_tables, {name}: time", ratio, "<=", 0.5, "{:.2f}x dpkt")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    section.para(
        "Each capture read whole by each reader, in CPU time of the one process (pinned to one "
        "core, pyarrow's pools at one thread), the readers taking turns; a reader is called "
        f"again within a round until about {MIN_SECONDS} s (the median of those calls), "
        f"{args.rounds} rounds, the medians over the rounds below. dpkt: "
        "`dpkt.pcap.Reader`/`dpkt.pcapng.Reader` iterated over every packet, nothing decoded. "
        "`read_capture_tables` (layout auto, the default) decodes every message into narrow "
        "tables; `read_capture_arrow` gives the same rows as one wide batch; `v0`: "
        'read_capture_tables with `layout="v0"`. Messages/s are decoded rows (one per NATS '
        "message, or per problem in the input) per CPU-second; `x dpkt` is the time against "
        "dpkt's on the same file (0.5x: half its time). A capture of a few packets measures "
        "the per-call costs, not the reading."
    )
    section.table(
        [
            "capture",
            "MB",
            "packets",
            "messages",
            "dpkt ms",
            "tables ms",
            "tables msgs/s",
            "tables x dpkt",
            "per round",
            "arrow msgs/s",
            "arrow x dpkt",
            "tables v0 msgs/s",
            "v0 x dpkt",
        ],
        rows,
    )
    section.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
