"""`lbparse report` on real cluster captures against reading them (issue #45).

    python bench/bench_report_real.py [--rounds 5] [CAPTURE ...]   (part of `make bench`)

For each capture (default: the real cluster runs beside the checkout,
../shared/liftbridge/samples/*.pcapng; a fresh `run_cluster.sh full` run's
capture may be named), the CPU time of, taking turns round after round:

  read     lbparse.read_capture_tables(path): every message decoded into
           the narrow tables (the capture read)
  model    lbparse.report.build_model([path]): what `lbparse report --json`
           computes (the columnar path: the same C reading, then the
           aggregation)
  report   build_model, then render_html: the page `lbparse report` writes

Target: the report within 2x the capture read. One process pinned to one
core; imports and Altair's first chart paid before the first round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from benchdoc import Section, interleaved, pin_one_core, spread  # noqa: E402

import lbparse  # noqa: E402
from lbparse.report import build_model, render_html  # noqa: E402

SHARED = Path(os.environ.get("LBPARSE_SHARED") or HERE.parent.parent / "shared")
MIN_SECONDS = 0.5  # a case is called again within a round until it took about this long


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("captures", nargs="*", type=Path, help="captures (default: the samples)")
    args = ap.parse_args()
    captures = args.captures or sorted((SHARED / "liftbridge" / "samples").glob("*.pcapng"))
    if not captures:
        print(f"no captures: {SHARED / 'liftbridge' / 'samples'} holds none")
        return 0
    section = Section(
        "report_real",
        "lbparse report on real captures",
        "python bench/bench_report_real.py (make bench)",
    )
    section.cpu = pin_one_core()
    rows: list[list[Any]] = []
    for path in captures:
        p = str(path)
        cases = {
            "read": lambda p=p: sum(t["messages"].num_rows for t in lbparse.read_capture_tables(p)),
            "model": lambda p=p: build_model([p]),
            "report": lambda p=p: len(render_html(build_model([p]))),
        }
        samples, result = interleaved(cases, args.rounds, min_seconds=MIN_SECONDS)
        med = {k: statistics.median(v) for k, v in samples.items()}
        ratio = med["report"] / med["read"]
        per_round = [r / d for r, d in zip(samples["report"], samples["read"])]
        msgs = result["read"]
        print(
            f"{path.name}: {msgs:,} messages; read {med['read'] * 1e3:.1f} ms, model "
            f"{med['model'] * 1e3:.1f} ms, report {med['report'] * 1e3:.1f} ms "
            f"(page {result['report'] / 1e6:.2f} MB): report {ratio:.2f}x the read",
            flush=True,
        )
        rows.append(
            [
                f"`{path.name}`",
                f"{path.stat().st_size / 1e6:.1f}",
                f"{msgs:,}",
                f"{med['read'] * 1e3:,.1f}",
                f"{med['model'] * 1e3:,.1f}",
                f"{(med['report'] - med['model']) * 1e3:,.1f}",
                f"{med['report'] * 1e3:,.1f}",
                f"**{ratio:.2f}x**",
                spread(per_round),
                f"{result['report'] / 1e6:.2f}",
            ]
        )
        section.target(f"lbparse report, {path.name}: time", ratio, "<=", 2.0, "{:.2f}x the read")
    section.para(
        "Each capture read whole (`read_capture_tables`), made into the report's model "
        "(`build_model`, what `lbparse report --json` writes) and into the page "
        "(`build_model` and `render_html`, what `lbparse report` writes), in CPU time of the "
        "one process pinned to one core, the three taking turns; each is called again within "
        f"a round until about {MIN_SECONDS} s (the median of those calls), {args.rounds} "
        "rounds, medians below (ms). `render` is report less model. The process' start and "
        "imports (pyarrow's, vl-convert's) are not in these times."
    )
    section.table(
        [
            "capture",
            "MB",
            "messages",
            "read ms",
            "model ms",
            "render ms",
            "report ms",
            "report x read",
            "per round",
            "page MB",
        ],
        rows,
    )
    section.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
