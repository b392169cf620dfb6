"""A closed pipe (`lbparse ... | head`) ends a command quietly."""

from __future__ import annotations

import os
import sys


def closed_pipe() -> int:
    """Call on BrokenPipeError: stdout points at nothing, so the interpreter's
    final flush stays quiet; the exit status is 0 (the reader left, no error)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
