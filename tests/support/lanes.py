"""`make test`'s waiting lane: a worker of its own for the tests that mostly wait.

A run on 2 cores left ~105 core-seconds idle (/proc/stat each second, the
tests' own start and end times beside it), a third of it in one window:
both workers in tests/live at once, each waiting for a server to be given
up on, a reconnect, a refusal retried. Those tests take ~45 s of a worker
and ~0.2 of a core. With `--waiting-lane` (pytest-xdist, `--dist
loadgroup`), the run starts one worker more than `-n` asks for; that worker
takes WAITING's tests while the others take the rest, then it stops: the
cores stay with the tests that use them (that window: 35 idle core-seconds
to 12). A test in WAITING that the other workers reach first (no other
work left) runs there as usual; a run without such tests stops the lane at
once.

The controller sees node ids only, so WAITING names tests by node id
prefix (a module, or a module's test); tests/support/test_lanes.py holds each to a
test that exists.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

# Node id prefixes of the tests that mostly wait (measured in a full run:
# their CPU, this worker's and its processes', over their wall time).
WAITING: tuple[str, ...] = (
    "tests/live/test_live_reconnect.py::",  # a server killed, back or never: 0.1-0.4 of a core
    "tests/live/test_live_gaps.py::",  # outages with offsets: 0.1
    "tests/live/test_live.py::test_a_server_that_accepts_and_stays_silent_is_given_up_in_one_line",
    "tests/live/test_live_hardening.py::test_a_refusal_is_said_though_later_retries_were_reset",
    "tests/live/test_live_hardening.py::test_messages_the_client_library_drops_are_counted_and_said",
    "tests/streams/test_streams_client.py::test_an_unreachable_server_is_one_line_within_the_timeout",
)
OPTION = "--waiting-lane"


def waits(scope: str) -> bool:
    """Whether a work unit (a node id, or an xdist_group's name) is WAITING's."""
    return scope.startswith(WAITING)


def addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        action="store_true",
        help="with -n and --dist loadgroup: one worker more, for the tests "
        "that mostly wait (tests/support/lanes.py)",
    )


def add_the_lane(config: pytest.Config) -> None:
    """One worker more than xdist's list (`-n N` or auto, made by its
    pytest_cmdline_main), before its session starts them (pytest_configure)."""
    if (
        _asked(config)
        and config.option.tx
        and config.getvalue("dist") == "loadgroup"
        and not hasattr(config, "workerinput")
    ):
        config.option.tx = [*config.option.tx, "popen"]


def _asked(config: pytest.Config) -> bool:
    return bool(config.getoption("waiting_lane", False))


def is_lane_worker(config: pytest.Config) -> bool:
    """This process is the lane (the last worker; LaneScheduling's choice too).
    A worker's own dist is "no"; xdist tells it `loadgroup`."""
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    return bool(
        _asked(config)
        and getattr(config.option, "loadgroup", False)
        and count
        and os.environ.get("PYTEST_XDIST_WORKER") == f"gw{int(count) - 1}"
    )


def scheduler(config: pytest.Config, log: Any) -> Any:
    """The scheduler for a run with the lane, else None (xdist's own)."""
    if not _asked(config) or config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class LaneScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """--dist loadgroup (groups whole, the largest first), and the last
        worker takes the WAITING units, each other worker the rest first."""

        lane: Any = None  # the last worker, chosen when the run is scheduled

        def schedule(self) -> None:
            if self.lane is None and len(self.nodes) > 1:  # a lane beside another worker
                self.lane = max(self.nodes, key=lambda n: int(n.gateway.id.lstrip("gw")))
            super().schedule()

        def _lane_done(self, node: Any) -> bool:
            """The lane with no WAITING unit left: stopped once its own are run."""
            if node is not self.lane or any(waits(scope) for scope in self.workqueue):
                return False
            if not node.shutting_down and not self._pending_of(self.assigned_work[node]):
                node.shutdown()
            return True

        def _assign_work_unit(self, node: Any) -> None:
            if self._lane_done(node):
                return
            mine = node is self.lane
            for scope in self.workqueue:  # the first of its own kind, else the first
                if waits(scope) == mine:
                    self.workqueue.move_to_end(scope, last=False)
                    break
            super()._assign_work_unit(node)

        def _reschedule(self, node: Any) -> None:
            if self.workqueue and self._lane_done(node):
                return
            super()._reschedule(node)

    return LaneScheduling(config, log)
