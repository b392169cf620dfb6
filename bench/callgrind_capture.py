"""Instructions per packet of the capture hot path, counted by callgrind.

    python3 bench/callgrind_capture.py [PACKETS]

Times on a shared machine move by 2x within minutes; instruction counts do
not. This writes the small-message capture of bench_capture.py twice (N and
2N packets, one PUB or MSG each), reads each under `valgrind
--tool=callgrind` with `CaptureReader(decode=False)` (link, IP, TCP, NATS
framing, one Record per message), and prints the difference of the two
totals divided by the difference in packets: what one more packet costs,
start-up and imports cancelled out. Needs valgrind.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_capture import make_small

READ = """
import sys
from lbparse.capture import CaptureReader, compiled_modules
n = sum(1 for _ in CaptureReader(sys.argv[1], layout="v0", decode=False))
print(n, len(compiled_modules()))
"""


def instructions(path: str, out: str) -> tuple[int, str]:
    """Total instructions of reading `path` (callgrind's summary), and the output."""
    res = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-c",
            READ,
            path,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    text = Path(out).read_text()
    m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
    if m is None:
        raise RuntimeError(f"no totals in {out}")
    return int(m.group(1)), res.stdout.strip()


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory(prefix="lbparse-cg-") as tmp:
        counts = []
        for k in (n, 2 * n):
            path = os.path.join(tmp, f"small{k}.pcap")
            packets = make_small(path, k)
            total, said = instructions(path, os.path.join(tmp, f"cg{k}.out"))
            counts.append((packets, total))
            print(
                f"{packets:,} packets: {total:,} instructions (messages, compiled modules: {said})"
            )
    (p1, i1), (p2, i2) = counts
    print(f"{(i2 - i1) / (p2 - p1):,.0f} instructions a packet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
