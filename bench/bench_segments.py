"""Reading segments: lbparse against Liftbridge's own reader, per byte, side by side.

Liftbridge's reader is `lbtruth segment FILE` (shared/liftbridge/bin/lbtruth:
v1.9.0's commitlog.SerializedMessage over the file, each entry written as
JSON). lbparse reads the same file three ways: `read_segment` in this
process (every entry a CommitLogEntry: header, CRC checked, key, value,
headers), the same with its C loop switched off (the pure-Python path), and
`lbparse segments --format jsonl` as a command, JSON on a pipe like
lbtruth's. The file is a segment of real entries (those of the shared
`short` run's orders/0, their offsets renumbered) grown to SIZE MB.

Runs are interleaved, REPEATS of each, medians; the ratios to lbtruth are
what to read on a shared machine. Target: read_segment at least as fast as
lbtruth per byte (ratio <= 1.0).

    python bench/bench_segments.py [SIZE_MB]     (default 32)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchdoc import Section, pin_one_core

from lbparse.storage import read_segment, read_segment_bytes
from lbparse.storage import segment as seg_mod
from lbparse.storage.formats import CURRENT

REPEATS = 5
SHARED = Path(os.environ.get("LBPARSE_SHARED") or Path(__file__).resolve().parents[2] / "shared")
LBTRUTH = SHARED / "liftbridge" / "bin" / "lbtruth"
SAMPLE = SHARED / "liftbridge" / "samples" / "data-short.tar.gz"
SAMPLE_LOG = "data-short/node1/streams/orders/0/00000000000000000000.log"


def real_entries() -> list[bytes]:
    """The entries of a real segment, each as its bytes."""
    with tarfile.open(SAMPLE) as tar:
        member = tar.extractfile(SAMPLE_LOG)
        assert member is not None
        data = member.read()
    reading = read_segment_bytes(data)
    return [data[p : p + CURRENT.header_len + (e.size or 0)] for p, e in reading]


def grow(entries: list[bytes], size: int) -> bytes:
    """Real entries repeated to `size` bytes, offsets renumbered (the header
    struct is the spec's)."""
    out = bytearray()
    offset = 0
    head = CURRENT.header
    i_off = CURRENT.header_fields.index("offset")
    while len(out) < size:
        for raw in entries:
            fields = list(head.unpack_from(raw))
            fields[i_off] = offset
            out += head.pack(*fields) + raw[head.size :]
            offset += 1
    return bytes(out)


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - t
    del result
    return elapsed


def run_quiet(cmd: list[str]) -> None:
    res = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if res.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {res.stderr.decode()[-300:]}")


def python_only(path: str) -> object:
    native, seg_mod._native = seg_mod._native, None
    try:
        return read_segment(path)
    finally:
        seg_mod._native = native


def main() -> int:
    if not LBTRUTH.is_file() or not SAMPLE.is_file():
        print(f"skipped: needs {LBTRUTH} and {SAMPLE} (set LBPARSE_SHARED)")
        return 0
    size = int(float(sys.argv[1]) * 1e6) if len(sys.argv) > 1 else 32_000_000
    section = Section(
        "segments",
        "Reading segments against Liftbridge's own reader",
        "python bench/bench_segments.py (make bench)",
    )
    section.cpu = pin_one_core()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "00000000000000000000.log")
        data = grow(real_entries(), size)
        Path(path).write_bytes(data)
        n = len(read_segment(path))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        cases: dict[str, Callable[[], object]] = {
            "lbtruth segment (Go, JSON out)": lambda: run_quiet([str(LBTRUTH), "segment", path]),
            "lbparse read_segment": lambda: read_segment(path),
            "lbparse read_segment, pure Python": lambda: python_only(path),
            "lbparse segments --format jsonl": lambda: subprocess.run(
                [sys.executable, "-m", "lbparse", "segments", "--format", "jsonl", path],
                stdout=subprocess.DEVNULL,
                env=env,
                check=True,
            ),
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(REPEATS):
            for name, fn in cases.items():
                samples[name].append(timed(fn))
    med = {name: statistics.median(s) for name, s in samples.items()}
    base = med["lbtruth segment (Go, JSON out)"]
    native = seg_mod._native
    loop = f"built, CRC {native.implementation()}" if native is not None else "not built"
    print(
        f"\nsegment of {len(data) / 1e6:.1f} MB, {n:,} real entries "
        f"({len(data) / n:.0f} bytes each), median of {REPEATS} interleaved runs "
        f"(C loop: {loop})"
    )
    print(f"  {'reader':<38} {'time':>8} {'MB/s':>8} {'us/entry':>9} {'vs lbtruth':>11}")
    for name, t in med.items():
        print(
            f"  {name:<38} {t:>7.2f}s {len(data) / 1e6 / t:>8.1f} {t / n * 1e6:>9.2f} "
            f"{t / base:>10.2f}x"
        )
    ratio = med["lbparse read_segment"] / base
    verdict = "meets" if ratio <= 1.0 else "MISSES"
    print(
        f"  read_segment / lbtruth = {ratio:.2f} ({verdict} the target: at least as fast per byte)"
    )
    section.target("read_segment, a segment of real entries", ratio, "<=", 1.0, "{:.2f}x lbtruth")
    section.para(
        f"A segment of real entries (the shared `short` run's orders/0, offsets renumbered) "
        f"grown to {len(data) / 1e6:.1f} MB, {n:,} entries ({len(data) / n:.0f} bytes each). "
        "`lbtruth segment` is Liftbridge v1.9.0's `commitlog.SerializedMessage` over the file, "
        "each entry written as JSON; `read_segment` makes every entry an object, CRC checked "
        f"(C loop: {loop}). Wall clock, everything pinned to one core (the commands too), "
        f"{REPEATS} interleaved runs, medians."
    )
    section.table(
        ["reader", "seconds", "MB/s", "us an entry", "x lbtruth"],
        [
            [
                name,
                f"{t:.2f}",
                f"{len(data) / 1e6 / t:,.1f}",
                f"{t / n * 1e6:.2f}",
                f"{t / base:.2f}x",
            ]
            for name, t in med.items()
        ],
    )
    section.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
