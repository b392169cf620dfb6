"""tests/support/cluster.py's own checks of a run, on logs made here: a
`full` run whose first SIGKILL hit a node that had already lost the
metadata leadership is made once more (FollowerKilled)."""

from __future__ import annotations

from pathlib import Path

from support.cluster import ClusterRun, _follower_killed


def _run(tmp_path: Path, kill_at: str, node1: list[tuple[str, str]]) -> ClusterRun:
    """A run whose script killed node1 at `kill_at`, node1's log saying
    (time, what) for each leadership change, as Liftbridge logs them."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "run.log").write_text(
        f"12:00:00.100 == start\n{kill_at}.250 == SIGKILL node1 (metadata leader)\n"
    )
    said = {
        "won": "Server became metadata leader, performing leader promotion actions",
        "lost": "Server lost metadata leadership, performing leader stepdown actions",
    }
    (logs / "node1.log").write_text(
        "".join(f'time="2026-11-28 {when}" level=info msg="{said[what]}"\n' for when, what in node1)
    )
    return ClusterRun("full", tmp_path, tmp_path / "c.pcap", tmp_path / "data", logs, 1, 2, 9.0)


def test_a_kill_of_the_leader_is_a_failover(tmp_path: Path) -> None:
    assert _follower_killed(_run(tmp_path, "12:00:40", [("12:00:05", "won")])) is None


def test_a_kill_of_a_node_that_had_lost_the_leadership_is_not(tmp_path: Path) -> None:
    said = _follower_killed(_run(tmp_path, "12:00:40", [("12:00:05", "won"), ("12:00:28", "lost")]))
    assert said == "node1, killed at 12:00:40, had lost the metadata leadership"


def test_what_a_node_said_after_the_kill_does_not_count(tmp_path: Path) -> None:
    """Lost after the kill (its restart), or won again: the kill was the leader's."""
    run = _run(tmp_path, "12:00:40", [("12:00:05", "won"), ("12:01:10", "lost")])
    assert _follower_killed(run) is None


def test_a_run_across_midnight(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    held = _run(tmp_path / "a", "00:00:10", [("23:59:50", "won"), ("00:01:00", "lost")])
    assert _follower_killed(held) is None
    lost = _run(tmp_path / "b", "00:00:10", [("23:59:50", "won"), ("23:59:58", "lost")])
    assert _follower_killed(lost) is not None
