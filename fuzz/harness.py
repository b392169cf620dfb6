"""atheris harness: lbparse's hostile-input entry points, coverage-guided.

    python fuzz/harness.py TARGET [libFuzzer options] [CORPUS_DIR...]

TARGET is one of `TARGETS` (fuzz/targets.py), or `every`: all of them in
one process, the first byte of an input choosing which. Each runs an entry point of
tests/support/hostile.py (the same checks the hypothesis tests run) on the
fuzzer's bytes; an exception other than the documented EnvelopeError /
CaptureError, or a broken invariant (AssertionError), is a crash that
libFuzzer saves as an artifact. `fuzz/run.py` (make fuzz) runs every target
time-boxed with its seed corpus; run this directly to work on one target.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path

import os

if os.environ.get("LBPARSE_FUZZ_NATIVE"):
    # The C modules of a `fuzz/run.py --native` build call libFuzzer's
    # coverage hooks (-fsanitize=fuzzer-no-link), which atheris's libFuzzer
    # defines: its symbols must be global to be found when they load.
    sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL)

import atheris  # noqa: E402

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

with atheris.instrument_imports(include=["lbparse", "lbparse_generated", "support", "spark",
                                         "targets"]):
    import targets

# `every`: all of them in one process, the first byte choosing (targets.every)
TARGETS = {**targets.TARGETS, "every": targets.every}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: harness.py {{{','.join(TARGETS)}}} [libFuzzer options] [corpus...]")
    target = cmpguard.guarding(TARGETS[sys.argv.pop(1)])
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
