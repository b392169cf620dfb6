"""Run the atheris targets, time-boxed, and say what they found.

    python fuzz/run.py --seconds 600                 # make fuzz SECONDS=600
    python fuzz/run.py --seconds 40 --ci             # make fuzz-ci
    python fuzz/run.py --seconds 120 --targets nats,capture
    python fuzz/run.py --seconds 5400 --weights decode=4,differential=4    # a long campaign
    python fuzz/run.py --seconds 600 --jobs 2        # two targets at once: half the wall time

The seconds are the whole campaign's, shared out equally among the targets;
each target is forked from a harness server (one a job; the C modules'
targets under clang have their own) that instrumented lbparse once: a
second or so to start, where a harness of its own took 9.5 s. Each target's line gives its
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
import json
import queue
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


class Server:
    """One `harness.py serve`: lbparse instrumented once, a campaign forked
    from it a request (the start took 9.5 s a target, 8 of them instrumenting)."""

    def __init__(self, log: Path, env: dict[str, str] | None = None) -> None:
        self._log = open(log, "w")
        # -P under `env` (the native targets'): its instrumented copy on
        # PYTHONPATH, not the checkout
        cmd = [
            sys.executable,
            *(["-P"] if env is not None else []),
            str(HERE / "harness.py"),
            "serve",
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=HERE.parent,
            env=env,
        )

    def run(self, target: str, args: list[str], log: Path, seconds: float) -> str:
        """The exit status of one campaign (its output in `log`), or `timeout`."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([str(log), seconds, target, *args]) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()  # the server bounds it by `seconds`
        if not answer:
            raise RuntimeError(
                f"fuzz: the harness server ended (exit {self.proc.wait()}); see {self._log.name}"
            )
        return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self._log.close()


def run_target(
    target: str, seconds: float, corpus: Path, artifacts: Path, log: Path, server: Server
) -> dict:
    """The target's campaign for `seconds`, forked from `server`, restarted after a crash."""
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + seconds
    execs, cov, crashes, starts = 0, 0, [], 0
    log.write_text("")
    while starts <= MAX_RESTARTS:
        left = deadline - time.monotonic()
        if left < 2:
            break
        starts += 1
        before = set(artifacts.iterdir())
        answer = server.run(
            target,
            [
                str(corpus),
                f"-max_total_time={int(left)}",
                f"-artifact_prefix={artifacts}/",
                *GUARDS,
            ],
            log,
            left + 60,
        )
        if answer == "timeout":
            # One input outlived the whole share (libFuzzer checks its time
            # between inputs): the harness was killed; the other targets still
            # run (this ended a campaign once).
            with open(log, "a") as out:
                out.write(f"\nrun.py: harness killed {int(left) + 60} s after it started\n")
            crashes.append("overran-its-time")
            break
        new = sorted(set(artifacts.iterdir()) - before)
        crashes += [p.name for p in new]
        if answer == "0" or not new:
            break
    text = log.read_text(errors="replace")
    for m in re.finditer(r"stat::number_of_executed_units:\s*(\d+)", text):
        execs += int(m.group(1))
    covs = re.findall(r"\bcov: (\d+)", text)
    cov = int(covs[-1]) if covs else 0
    return {
        "target": target,
        "seconds": round(seconds),
        "execs": execs,
        "coverage": cov,
        "corpus": sum(1 for _ in corpus.iterdir()),
        "crashes": crashes,
        "starts": starts,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60, help="the whole campaign (default 60)")
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma-separated subset")
    ap.add_argument("--ci", action="store_true", help="fresh temporary corpus, nothing kept")
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="targets run at once (default 1; each takes a core for its share)",
    )
    ap.add_argument(
        "--weights",
        default="",
        metavar="T=W,...",
        help="shares of the time by target (default equal), e.g. decode=4,batch=1: "
        "a long campaign gives the fast targets more of it",
    )
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
            print(
                "native targets: "
                + (
                    "C modules with libFuzzer coverage and ASan (build/fuzz-native)"
                    if native_env
                    else "no clang: the normal build, Python coverage only"
                ),
                flush=True,
            )
        logs = base if args.ci else HERE
        # The native targets run in their own environment (the instrumented
        # C build): servers of their own.
        native = {t for t in targets if t in NATIVE and native_env is not None}
        servers: dict[bool, queue.Queue[Server]] = {False: queue.Queue(), True: queue.Queue()}
        for kind, names in ((False, set(targets) - native), (True, native)):
            for i in range(min(args.jobs, len(names))):
                servers[kind].put(
                    Server(
                        logs / f"fuzz-server-{'native-' * kind}{i}.log",
                        native_env if kind else None,
                    )
                )

        def one(t: str) -> dict:
            share = max(args.seconds * weights[t] / total_weight, 3)
            server = servers[t in native].get()
            try:
                r = run_target(
                    t,
                    share,
                    base / "corpus" / t,
                    HERE / "artifacts" / t,
                    logs / f"fuzz-{t}.log",
                    server=server,
                )
            finally:
                servers[t in native].put(server)
            status = (
                f"{len(r['crashes'])} CRASHES: {', '.join(r['crashes'])}"
                if r["crashes"]
                else "no crash"
            )
            print(
                f"{t:<14} {r['seconds']:>5}s {r['execs']:>9} execs  cov {r['coverage']:>5}  "
                f"corpus {r['corpus']:>5}  {status}",
                flush=True,
            )
            return r

        # --jobs targets at once, one a core.
        try:
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                results = list(pool.map(one, targets))
        finally:
            for pool_of in servers.values():
                while not pool_of.empty():
                    pool_of.get().close()
        total = sum(r["execs"] for r in results)
        crashed = [r for r in results if r["crashes"]]
        print(
            f"fuzz: {len(targets)} targets, {total} executions, "
            f"{sum(len(r['crashes']) for r in crashed)} crash(es)"
            + (f"; artifacts in {HERE / 'artifacts'}" if crashed else "")
        )
        return 1 if crashed else 0
    finally:
        if args.ci:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
