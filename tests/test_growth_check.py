"""support/growth.py's check itself: it fails a quadratic run, saying every
size's time, and passes a linear one (the growth tests lean on it)."""

from __future__ import annotations

import pytest

from support.growth import assert_linear

SIZES = [400, 800, 1600, 3200]
pytestmark = pytest.mark.slow  # timed runs, as the growth tests it serves


def test_a_quadratic_run_fails_with_every_sizes_time() -> None:
    with pytest.raises(AssertionError) as failed:
        assert_linear(lambda n: sum(range(n * n)), SIZES)
    message = str(failed.value)
    assert message.startswith("time grows as size^"), message
    assert all(f"{n}: " in message for n in SIZES), message


def test_a_linear_run_passes() -> None:
    assert_linear(lambda n: sum(range(n * 3200)), SIZES)
