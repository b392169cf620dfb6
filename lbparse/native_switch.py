"""One switch for every C module of lbparse: LBPARSE_NATIVE.

Each C module (the capture loop, the batch decoder's kernels and struct
reader, the Raft transport's reader) is optional: setup.py builds it where
a compiler is, and its Python reference runs where it is not. Setting
LBPARSE_NATIVE=0 in the environment turns every one off at once; it is
read at each choice, not at import, so that a test can hold a C module
equal to its reference in one process by turning the switch off and on.
Each module's `available()` asks here (tests/base/test_native_switch.py
keeps it the one place that reads the variable).
"""

from __future__ import annotations

import os

__all__ = ["SWITCH", "native_enabled"]

SWITCH = "LBPARSE_NATIVE"


def native_enabled() -> bool:
    """Whether the environment lets lbparse use its C modules.

    Returns:
        False when LBPARSE_NATIVE is "0"; True otherwise (unset included).
    """
    return os.environ.get(SWITCH, "1") != "0"
