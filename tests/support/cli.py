"""The `lbparse` command line as a real process, from the lbparse under test.

`python -P -m lbparse`: -P keeps the current directory off sys.path, so the
process imports lbparse from where this test process does (the installed
wheel in CI, the checkout only through PYTHONPATH or an editable install),
whatever directory it runs in. tests/project/test_install.py holds the two equal.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

LBPARSE = [sys.executable, "-P", "-m", "lbparse"]


def run_cli(
    *args: str, stdin: bytes | None = None, timeout: float = 60, **kwargs: Any
) -> subprocess.CompletedProcess[bytes]:
    """Run `lbparse ARGS...` to the end; its output as bytes."""
    return subprocess.run(
        [*LBPARSE, *args], input=stdin, capture_output=True, timeout=timeout, **kwargs
    )
