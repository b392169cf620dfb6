"""support.examples: the full count in a full run, a third in test-fast."""

from __future__ import annotations

import importlib

import pytest

from support import examples as module


@pytest.mark.parametrize(
    "fast,full,drawn",
    [(False, 300, 300), (False, 5, 5), (True, 300, 100), (True, 25, 10), (True, 5, 5)],
)
def test_the_count_follows_the_run(
    monkeypatch: pytest.MonkeyPatch, fast: bool, full: int, drawn: int
) -> None:
    if fast:
        monkeypatch.setenv("LBPARSE_TESTS", "fast")
    else:
        monkeypatch.delenv("LBPARSE_TESTS", raising=False)
    try:
        assert importlib.reload(module).examples(full) == drawn
    finally:
        monkeypatch.undo()
        importlib.reload(module)
