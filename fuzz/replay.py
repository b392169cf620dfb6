"""Run fuzz targets once over a corpus, without the fuzzer: a regression run.

    python fuzz/replay.py [--native] [--targets a,b] [DIR ...]

Builds the seed corpus (fuzz/build_corpus.py) in a temporary directory and
calls each target (fuzz/targets.py) on every seed, then on every file of
the DIRs given (a campaign's fuzz/corpus/<target>, its artifacts). With
--native, the targets whose bytes reach the C modules only: what `make
sanitize` runs under AddressSanitizer and UndefinedBehaviorSanitizer. Exit
status 1 when any input fails a check or raises.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

import build_corpus  # noqa: E402
import targets  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--native", action="store_true", help="only the targets of the C modules")
    ap.add_argument("--targets", default="", help="comma-separated subset")
    ap.add_argument("dirs", nargs="*", type=Path, help="more inputs (files or directories)")
    args = ap.parse_args()
    names = [t for t in args.targets.split(",") if t] or (
        list(targets.NATIVE) if args.native else list(targets.TARGETS)
    )
    unknown = set(names) - set(targets.TARGETS)
    if unknown:
        ap.error(f"unknown targets {', '.join(sorted(unknown))}")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        build_corpus.build(Path(tmp))
        for name in names:
            seeds = Path(tmp) / targets.SEEDS.get(name, name)
            inputs = sorted(seeds.iterdir())
            for d in args.dirs:
                inputs += sorted(d.rglob("*")) if d.is_dir() else [d]
            t0 = time.perf_counter()
            bad = 0
            for path in inputs:
                if not path.is_file():
                    continue
                try:
                    targets.TARGETS[name](path.read_bytes())
                except Exception:
                    bad += 1
                    print(f"{name}: {path}: FAILED", file=sys.stderr)
                    traceback.print_exc()
            failed += bad
            print(
                f"{name:<16} {len(inputs):>5} inputs  {bad} failed  "
                f"{time.perf_counter() - t0:.1f}s",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
