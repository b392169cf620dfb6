"""atheris harness: lbparse's hostile-input entry points, coverage-guided.

    python fuzz/harness.py TARGET [libFuzzer options] [CORPUS_DIR...]

TARGET is one of `TARGETS` (fuzz/targets.py), or `every`: all of them in
one process, the first byte of an input choosing which. Each runs an entry point of
tests/support/hostile.py (the same checks the hypothesis tests run) on the
fuzzer's bytes; an exception other than the documented EnvelopeError /
CaptureError, or a broken invariant (AssertionError), is a crash that
libFuzzer saves as an artifact. `fuzz/run.py` (make fuzz) runs every target
time-boxed with its seed corpus; run this directly to work on one target.

    python fuzz/harness.py serve

reads requests on stdin, one JSON line each: [LOG, SECONDS, TARGET, libFuzzer
options and corpus...], and runs each in a child forked from this process
(its output to LOG; killed past SECONDS), answering one line: the child's
exit status, or `timeout`. Instrumenting lbparse as it is imported takes
8 of the 9.5 s a harness takes to start: `fuzz/run.py` starts one server a
job and forks a campaign a target from it.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import time
from pathlib import Path

if os.environ.get("LBPARSE_FUZZ_NATIVE"):
    # The C modules of a `fuzz/run.py --native` build call libFuzzer's
    # coverage hooks (-fsanitize=fuzzer-no-link), which atheris's libFuzzer
    # defines: its symbols must be global to be found when they load.
    sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL)

import atheris

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # tests/support is the package `support`
sys.path.insert(0, str(ROOT / "fuzz"))

import cmpguard  # noqa: E402


class _CaptureSource(importlib.abc.MetaPathFinder):
    """lbparse.capture's modules from their .py source, even where setup.py
    compiled them: atheris instruments Python bytecode, and compiled code
    would leave the fuzzer blind inside the NATS parser and the reader."""

    def find_spec(self, name: str, path: object, target: object = None) -> object:
        if not name.startswith("lbparse.capture."):
            return None
        source = ROOT.joinpath(*name.split(".")).with_suffix(".py")
        return importlib.util.spec_from_file_location(name, source) if source.exists() else None


sys.meta_path.insert(0, _CaptureSource())

with atheris.instrument_imports(
    include=["lbparse", "lbparse_generated", "support", "spark", "targets"]
):
    import targets

# `every`: all of them in one process, the first byte choosing (targets.every)
TARGETS = {**targets.TARGETS, "every": targets.every}


def main() -> None:
    if len(sys.argv) == 2 and sys.argv[1] == "serve":
        serve()
        return
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(
            f"usage: harness.py {{{','.join(TARGETS)}}} [libFuzzer options] [corpus...]"
            "\n       harness.py serve"
        )
    fuzz(sys.argv[1], sys.argv[2:])


def fuzz(name: str, args: list[str]) -> None:
    """libFuzzer on target `name` (it exits the process when it is done)."""
    sys.argv = [sys.argv[0], *args]
    atheris.Setup(sys.argv, cmpguard.guarding(TARGETS[name]))
    atheris.Fuzz()


def serve() -> None:
    """Each request on stdin run in a fork of this (instrumented) process."""
    for line in sys.stdin:
        log, seconds, name, *args = json.loads(line)
        if name not in TARGETS:
            print(f"error: no target {name!r}", flush=True)
            continue
        print(_forked(log, float(seconds), name, args), flush=True)


def _forked(log: str, seconds: float, name: str, args: list[str]) -> str:
    """The exit status of `name` run in a child process, or `timeout`."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: its output to the log, then libFuzzer
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
            fuzz(name, args)
            os._exit(0)
        except BaseException:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
            os._exit(70)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # bounded by `seconds`
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return str(os.waitstatus_to_exitcode(status))
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "timeout"


if __name__ == "__main__":
    main()
