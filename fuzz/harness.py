"""atheris harness: lbparse's hostile-input entry points, coverage-guided.

    python fuzz/harness.py TARGET [libFuzzer options] [CORPUS_DIR...]

TARGET is one of `TARGETS`. Each runs an entry point of
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

import atheris

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # tests/support is the package `support`


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

with atheris.instrument_imports(include=["lbparse", "lbparse_generated", "support"]):
    from support import hostile
    from lbparse.limits import Limits

# Small limits, so that the limit checks themselves get fuzzed: inputs are
# at most a few KiB.
TIGHT = Limits(max_payload=300, max_frame=400, max_depth=6, max_reassembly=2000)


def decode(data: bytes) -> None:
    hostile.check_decode(data)


def decode_limits(data: bytes) -> None:
    hostile.check_decode(data, limits=TIGHT)


def differential(data: bytes) -> None:
    hostile.check_differential(data)


def nats(data: bytes) -> None:
    # First byte: the segment size, so that the fuzzer also explores splits.
    if not data:
        return
    step = data[0] % 23 + 1
    stream = data[1:]
    hostile.check_nats(stream, list(range(step, len(stream), step)))
    hostile.check_nats(stream, list(range(step, len(stream), step)), max_frame=TIGHT.max_frame)


def capture(data: bytes) -> None:
    hostile.check_capture(data, layout="auto")
    hostile.check_capture(data, layout="v0", limits=TIGHT)


TARGETS = {f.__name__: f for f in (decode, decode_limits, differential, nats, capture)}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: harness.py {{{','.join(TARGETS)}}} [libFuzzer options] [corpus...]")
    target = TARGETS[sys.argv.pop(1)]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
