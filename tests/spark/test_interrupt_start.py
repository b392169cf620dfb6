"""`lbparse pipeline` interrupted in its first instants (#46: interrupted
anywhere, one line): while Python imports lbparse and reads the arguments,
before the command's own handling is in place, SIGINT and SIGTERM end the
run with status 130 and one line, never a traceback, and nothing written.
(Before the interpreter catches the signal at all, it is the kernel's: a
process killed while Python itself starts is no run of lbparse.)"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support.cli import LBPARSE
from support.shared import LIFTBRIDGE

DELAYS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.45)


def _catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler of its own for `signum` (/proc: SigCgt)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(x for x in status.splitlines() if x.startswith("SigCgt:")).split()[1], 16)
    return bool(caught >> (signum - 1) & 1)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_in_the_first_instants_is_one_line(signum: int, tmp_path: Path) -> None:
    capture = LIFTBRIDGE / "samples" / "short.pcapng"
    if not capture.is_file():
        pytest.skip(f"shared material missing: {capture}")
    for i, delay in enumerate(DELAYS):
        out = tmp_path / f"out{i}"
        proc = subprocess.Popen([*LBPARSE, "pipeline", str(capture), "-o", str(out),
                                 "--test-conf"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            # from the moment lbparse's __main__ runs (it catches SIGTERM first
            # thing): before, the interpreter itself is starting (site, encodings)
            for _ in range(2000):
                if _catches(proc.pid, signal.SIGTERM) or proc.poll() is not None:
                    break
                time.sleep(0.001)
            time.sleep(delay)
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        text = err.decode()
        assert proc.returncode == 130, (delay, proc.returncode, text[-2000:])
        lines = [x for x in text.splitlines() if x.strip()]
        assert lines and all(x.startswith("lbparse") for x in lines), (delay, text[-2000:])
        assert "interrupted" in lines[-1] and "Traceback" not in text, (delay, text[-2000:])
        assert not out.exists() or not any(out.iterdir()), delay
