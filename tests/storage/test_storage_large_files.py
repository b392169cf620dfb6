"""Multi-gigabyte segments (issue #47, class 9, items 2 and 3): a sparse
3 GB .log of zeros read in bounded memory, and one that cannot be mapped
under an address-space limit named in one line, never taken for an empty
file. Each run is a subprocess: its peak RSS and its limits are its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.storage import build_index, build_segment, messages

GB = 1 << 30
SIZE = 3 * GB
NAME = "00000000000000000000"

# Runs `lbparse ARGS` in this process after setting RLIMIT_AS (argv[1], bytes;
# 0: none) before lbparse is imported, then prints the peak RSS in KiB as
# the last line of stderr: VmHWM, this process image's own. Not ru_maxrss:
# subprocess spawns with vfork, and exec folds the parent's high-water mark
# into the child's ru_maxrss (the kernel's exec_mmap), so a pytest worker that
# had held 1 GB made this 3 GB read look like 1 GB.
RUNNER = """
import resource, runpy, sys
limit = int(sys.argv[1])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv = ["lbparse", *sys.argv[2:]]
code = 0
try:
    runpy.run_module("lbparse", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
finally:
    sys.stdout.flush()
    hwm = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")]
    print(f"maxrss {hwm[0]}", file=sys.stderr)
sys.exit(code)
"""


def _partition(tmp_path: Path) -> Path:
    """A partition whose .log is SIZE bytes of holes, with a 10-entry index
    (of other bytes: what a mapped-and-failed reading must not judge)."""
    part = tmp_path / "s" / "0"
    part.mkdir(parents=True)
    log = part / f"{NAME}.log"
    with open(log, "wb") as f:
        f.truncate(SIZE)
    if os.stat(log).st_blocks * 512 > 16 << 20:
        pytest.skip("this filesystem does not keep sparse files sparse")
    msgs = messages(10)
    (part / f"{NAME}.index").write_bytes(build_index(msgs, build_segment(msgs), 0))
    return part


def _run(limit: int, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    res = subprocess.run(
        [sys.executable, "-P", "-c", RUNNER, str(limit), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = res.stderr.splitlines()
    assert lines and lines[-1].startswith("maxrss "), res.stderr
    res.stderr = "\n".join(lines[:-1])
    return res, int(lines[-1].split()[1]) * 1024


# Beside other tests its peak RSS once read 0.8-1.2 GB, alone under 100 MB:
# that was the pytest worker's own peak, which ru_maxrss inherits (RUNNER
# above); test_the_peak_is_this_process_own holds the measure to its process.
@pytest.mark.slow
def test_a_sparse_3gb_segment_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """All zeros, 3 GB: read to the end (one `zeros` finding) with a peak RSS
    of at most 300 MB (before: 3.1 GB, every page of the map resident)."""
    part = _partition(tmp_path)
    res, rss = _run(0, "segments", "--format", "jsonl", str(part / f"{NAME}.log"))
    assert res.returncode == 1, res.stderr
    (line,) = res.stdout.splitlines()
    rec = json.loads(line)
    assert rec["error"] == "zeros" and rec["position"] == 0
    assert f"{SIZE} bytes of zeros" in rec["message"]
    assert rss < 300 << 20, f"peak RSS {rss >> 20} MiB"


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_the_peak_is_this_process_own() -> None:
    """The measure RUNNER prints is the child's own: a parent holding 400 MB
    does not lend the child its high-water mark (ru_maxrss did)."""
    ballast = bytearray(400 << 20)
    ballast[::4096] = b"x" * len(range(0, len(ballast), 4096))  # resident
    _, rss = _run(0, "--version")
    del ballast
    assert rss < 150 << 20, f"peak RSS {rss >> 20} MiB"


@pytest.fixture()
def limited(tmp_path: Path) -> tuple[Path, int]:
    """The partition, and an address-space limit its .log cannot be mapped under."""
    return _partition(tmp_path), SIZE


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_a_segment_that_cannot_be_mapped_is_one_line_naming_it(limited: tuple[Path, int]) -> None:
    part, limit = limited
    log = part / f"{NAME}.log"
    res, _ = _run(limit, "segments", str(part))
    assert res.returncode == 1
    assert "Traceback" not in res.stderr and "(no segments)" not in res.stdout
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"{log}: bad_file: cannot be mapped into memory")
    assert "3,221,225,472 bytes" in line and "ulimit -v" in line


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_verify_never_calls_an_unread_segment_empty(limited: tuple[Path, int]) -> None:
    """`--verify` said the index's 10 entries pointed past the end of a
    "0 bytes" .log: one finding, the .log's, and no other."""
    part, limit = limited
    log = part / f"{NAME}.log"
    res, _ = _run(limit, "segments", "--verify", "--format", "jsonl", str(part))
    assert res.returncode == 1, res.stderr
    found = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(f["file"], f["kind"]) for f in found] == [(str(log), "bad_file")], found
    assert "0 bytes" not in res.stdout and "Traceback" not in res.stderr
    assert res.stderr.strip().endswith("1 finding(s)")
