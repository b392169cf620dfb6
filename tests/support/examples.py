"""How many examples a property test draws.

`make test` (and CI) draws each test's full count. `make test-fast` sets
LBPARSE_TESTS=fast and draws a third of it (at least 10): the quick check
keeps every property and its pinned examples, with fewer random draws
(hypothesis' share of its time was a quarter). A test whose count does not
go through `examples` draws its full count in both.
"""

from __future__ import annotations

import os

FAST = os.environ.get("LBPARSE_TESTS") == "fast"


def examples(full: int) -> int:
    """`full` in a full run; a third of it, at least 10 (never more than
    `full`), in `make test-fast`."""
    return min(full, max(10, full // 3)) if FAST else full
