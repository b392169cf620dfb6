"""support/growth.py's check itself: it fails a quadratic run, saying every
size's time, passes a linear one, and times again before it fails a linear
run slowed once by a busy machine, and counts no time the run spends
waiting (the growth tests lean on it)."""

from __future__ import annotations

import time

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
    assert_linear(lambda n: sum(range(n * 1000)), SIZES)  # 5 to 40 ms a run


def _burn(seconds: float) -> None:
    """Spend `seconds` of CPU time, as a run slowed by shared caches does."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_linear_run_slowed_in_its_first_rounds_is_timed_again_and_passes() -> None:
    """The last size's first rounds take more CPU (a busy sibling core):
    the first verdict is over the bound, the second timing is not."""
    calls = {n: 0 for n in SIZES}

    def run(n: int) -> None:
        calls[n] += 1
        sum(range(n * 1000))
        if n == SIZES[-1] and calls[n] <= 3:
            _burn(0.6)  # 0.6 s on a ~40 ms run: size^2.3 from the first rounds alone

    assert_linear(run, SIZES)
    assert calls == {SIZES[0]: 6, SIZES[1]: 0, SIZES[2]: 0, SIZES[-1]: 6}


def test_a_linear_run_slowed_for_three_verdicts_passes_on_the_fourth() -> None:
    """Three verdicts over the bound (nine slow rounds of the last size), the
    retries' last under it: passes, each end timed four times `rounds`."""
    calls = {n: 0 for n in SIZES}

    def run(n: int) -> None:
        calls[n] += 1
        sum(range(n * 1000))
        if n == SIZES[-1] and calls[n] <= 9:
            _burn(0.3)

    assert_linear(run, SIZES)
    assert calls == {SIZES[0]: 12, SIZES[1]: 0, SIZES[2]: 0, SIZES[-1]: 12}


def test_a_quadratic_run_is_timed_every_retry_then_fails() -> None:
    calls = {n: 0 for n in SIZES}

    def run(n: int) -> None:
        calls[n] += 1
        # Quadratic well above the noise: the first size ~3 ms, the last ~200.
        # n * n // 4 made the first 0.4 ms (raised to the 2 ms floor) and the
        # last ~50: a run with one draw a size passed as linear when the
        # first size's draw took 3 ms (the process's other threads' CPU
        # counts too), as a loaded `make test` saw.
        sum(range(n * n))

    with pytest.raises(AssertionError, match="worse than linear"):
        assert_linear(run, SIZES, rounds=1, retries=2)
    assert calls == {SIZES[0]: 3, SIZES[1]: 1, SIZES[2]: 1, SIZES[-1]: 3}


def test_time_waiting_for_a_core_is_not_counted() -> None:
    """Every run of the last size waits 0.3 s without working (preempted by
    another process, as a long run on a loaded machine is): no time of
    it counts, and one verdict is enough."""
    calls = {n: 0 for n in SIZES}

    def run(n: int) -> None:
        calls[n] += 1
        sum(range(n * 1000))
        if n == SIZES[-1]:
            time.sleep(0.3)

    assert_linear(run, SIZES)
    assert calls == {SIZES[0]: 3, SIZES[1]: 0, SIZES[2]: 0, SIZES[-1]: 3}
