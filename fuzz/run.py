"""Run the atheris targets, time-boxed, and say what they found.

    python fuzz/run.py --seconds 600                 # make fuzz SECONDS=600
    python fuzz/run.py --seconds 40 --ci             # make fuzz-ci
    python fuzz/run.py --seconds 120 --targets nats,capture
    python fuzz/run.py --seconds 5400 --weights decode=4,differential=4    # a long campaign
    python fuzz/run.py --seconds 600 --jobs 2        # two targets at once: half the wall time

The seconds are the whole campaign's, shared out equally among the targets
(each also takes a few seconds to start); each target's line gives its
executions, coverage and corpus, and the last line the total. The targets
of the C modules (`native_capture`, `decode_arrow`) run against a build of
them with libFuzzer's coverage and AddressSanitizer when clang is there
(tools/sanitize.py makes it, in build/fuzz-native). Each target's corpus lives in
fuzz/corpus/<target> (seeded by build_corpus.py, grown by the fuzzer, never
committed; --ci uses a fresh temporary one), its crashes in
fuzz/artifacts/<target>/. A target that crashes is restarted for the time
it has left, at most MAX_RESTARTS times, so that one finding does not hide
the next. Exit status 1 when anything crashed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tools"))

import build_corpus  # noqa: E402
import sanitize  # noqa: E402

sys.path.insert(0, str(HERE.parent / "tests"))  # targets import tests/support

from targets import NATIVE, SEEDS, TARGETS  # noqa: E402

MAX_RESTARTS = 5
# libFuzzer's own guards: one input may take 10 s and the process 2 GiB.
GUARDS = ["-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1"]


def run_target(target: str, seconds: float, corpus: Path, artifacts: Path, log: Path,
               env: dict[str, str] | None = None) -> dict:
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + seconds
    execs, cov, crashes, starts = 0, 0, [], 0
    with open(log, "w") as out:
        while starts <= MAX_RESTARTS:
            left = deadline - time.monotonic()
            if left < 2:
                break
            starts += 1
            before = set(artifacts.iterdir())
            cmd = [sys.executable, str(HERE / "harness.py"), target, str(corpus),
                   f"-max_total_time={int(left)}", f"-artifact_prefix={artifacts}/", *GUARDS]
            if env is not None:
                cmd.insert(1, "-P")  # the instrumented copy on PYTHONPATH, not the checkout
            try:
                proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT,
                                      timeout=left + 60, cwd=HERE.parent, env=env)
            except subprocess.TimeoutExpired:
                # One input outlived the whole share (libFuzzer checks its
                # time between inputs): subprocess.run killed the harness;
                # the other targets still run (this ended a campaign once).
                out.write(f"\nrun.py: harness killed {int(left) + 60} s after it started\n")
                out.flush()
                crashes.append("overran-its-time")
                break
            new = sorted(set(artifacts.iterdir()) - before)
            crashes += [p.name for p in new]
            if proc.returncode == 0 or not new:
                break
    text = log.read_text(errors="replace")
    for m in re.finditer(r"stat::number_of_executed_units:\s*(\d+)", text):
        execs += int(m.group(1))
    covs = re.findall(r"\bcov: (\d+)", text)
    cov = int(covs[-1]) if covs else 0
    return {"target": target, "seconds": round(seconds), "execs": execs, "coverage": cov,
            "corpus": sum(1 for _ in corpus.iterdir()), "crashes": crashes, "starts": starts}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60, help="the whole campaign (default 60)")
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma-separated subset")
    ap.add_argument("--ci", action="store_true", help="fresh temporary corpus, nothing kept")
    ap.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="targets run at once (default 1; each takes a core for its share)")
    ap.add_argument("--weights", default="", metavar="T=W,...",
                    help="shares of the time by target (default equal), e.g. decode=4,batch=1: "
                    "a long campaign gives the fast targets more of it")
    args = ap.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        ap.error(f"unknown targets {', '.join(sorted(unknown))}; known: {', '.join(TARGETS)}")
    base = Path(tempfile.mkdtemp(prefix="lbparse-fuzz-")) if args.ci else HERE
    try:
        build_corpus.build(base / "corpus")
        for t, seeds in SEEDS.items():
            if not (base / "corpus" / t).exists():
                shutil.copytree(base / "corpus" / seeds, base / "corpus" / t)
        weights = {t: 1.0 for t in targets}
        for item in filter(None, args.weights.split(",")):
            name, _, w = item.partition("=")
            if name not in weights:
                ap.error(f"--weights names {name!r}, not one of the targets run")
            weights[name] = float(w)
        total_weight = sum(weights.values())
        native_env = sanitize.fuzz_environment() if set(targets) & set(NATIVE) else None
        if set(targets) & set(NATIVE):
            print("native targets: " + ("C modules with libFuzzer coverage and ASan "
                                        "(build/fuzz-native)" if native_env else
                                        "no clang: the normal build, Python coverage only"),
                  flush=True)
        def one(t: str) -> dict:
            share = max(args.seconds * weights[t] / total_weight, 3)
            r = run_target(t, share, base / "corpus" / t, HERE / "artifacts" / t,
                           base / f"fuzz-{t}.log" if args.ci else HERE / f"fuzz-{t}.log",
                           native_env if t in NATIVE else None)
            status = f"{len(r['crashes'])} CRASHES: {', '.join(r['crashes'])}" if r["crashes"] \
                else "no crash"
            print(f"{t:<14} {r['seconds']:>5}s {r['execs']:>9} execs  cov {r['coverage']:>5}  "
                  f"corpus {r['corpus']:>5}  {status}", flush=True)
            return r

        # Each target is its own process (harness.py): --jobs of them at once, one a core.
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(one, targets))
        total = sum(r["execs"] for r in results)
        crashed = [r for r in results if r["crashes"]]
        print(f"fuzz: {len(targets)} targets, {total} executions, "
              f"{sum(len(r['crashes']) for r in crashed)} crash(es)"
              + (f"; artifacts in {HERE / 'artifacts'}" if crashed else ""))
        return 1 if crashed else 0
    finally:
        if args.ci:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
