"""The report of a real cluster's `full` run (shared/liftbridge/run_cluster.sh full:
the metadata leader, then the leader of orders/0, SIGKILLed under a publishing
client and restarted) tells the story, checked through the --json numbers:

- each killed node's partitions change leader after its kill, and the
  metadata leader moves off the first victim;
- publishes stall around the kills: acks late by up to seconds (against a
  median of a millisecond or so), or never acked, and neither in the calm;
- NATS 503s, as many as the capture holds, naming the dead nodes' subjects
  (when the run sent requests to them: not every run does);
- the counts are those of `lbparse capture --stats`;

and the page renders in headless Chromium with every chart drawn.

The run comes from the session's `liftbridge_full` fixture (tests/conftest.py,
issue #12); LBPARSE_FULL_RUN=DIR reads a run made earlier instead.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.cluster import full_run
from support.testrun import once_a_run

from lbparse.capture import CaptureReader
from lbparse.report.cluster import is_no_responders

pytestmark = pytest.mark.slow

KILL = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) == SIGKILL (node\d) \(([^)]*)\)", re.M)
RESTART = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) == restarting (node\d)", re.M)
# A follower's own word that a partition's leader is gone and not yet replaced
# (Liftbridge v1.9.0 logs it every ~3 s until the controller names a new one).
NO_NEW_LEADER = re.compile(
    r'^time="\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d)" level=error msg="Leader '
    r"(\S+) for partition \[subject=[^,]*, stream=([^,]*), partition=(\d+)\] "
    r"exceeded max leader timeout",
    re.M,
)
# A node winning a Raft election, in its own log (hashicorp/raft's line, second resolution).
ELECTED = re.compile(
    r'^time="\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d)" level=info msg=" raft: '
    r"entering leader state",
    re.M,
)


def _ms(clock: str, near_ms: float) -> float:
    """run.log's local HH:MM:SS.mmm as ms since the epoch, on the day of `near_ms`."""
    day = datetime.datetime.fromtimestamp(near_ms / 1000)
    t = datetime.datetime.combine(day.date(), datetime.time.fromisoformat(clock))
    ms = t.timestamp() * 1000
    return ms + 86_400_000 if ms < near_ms - 43_200_000 else ms


def check_status(res: Any, model: dict[str, Any]) -> None:
    """The run's capture holds the clients' gRPC calls (CAPTURE_API=1): the
    streams they reset or left open when closing their connections are
    notes of normal client behaviour, not problems (`lbparse report` exits
    0): the run has no problem at all."""
    problems = model["problems"]
    assert res.returncode == 0 and problems["total"] == 0, (
        problems["by_kind"],
        res.stderr.decode(),
    )
    notes = problems["notes"]
    assert set(notes["by_kind"]) <= {"note:grpc", "note:incomplete"}, notes["by_kind"]
    assert all(
        "RST_STREAM" in x["message"] or "ends before the call does" in x["message"]
        for xs in notes["examples"].values()
        for x in xs
    ), notes["examples"]


@pytest.fixture(scope="module")
def story(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    capture, log, data = full_run(request)
    # Made once a run, whichever worker asks first (the module's tests are
    # spread over both). Not an xdist_group: --dist loadgroup sends the largest
    # groups first, and the group would wait there for the `full` run (CI: 100 s).
    return once_a_run(tmp_path_factory, "report-story", lambda out: _story(capture, log, data, out))


def _story(capture: Path, log: Path, data: Path, out: Path) -> dict[str, Any]:
    from test_report import cli

    res = cli(
        "report", str(capture), "-o", str(out / "report.html"), "--json", str(out / "report.json")
    )
    model = json.loads((out / "report.json").read_text())
    check_status(res, model)
    text = log.read_text()
    first = model["report"]["first"]
    kills = [(_ms(c, first), node, why) for c, node, why in KILL.findall(text)]
    restarts = {node: _ms(c, first) for c, node in RESTART.findall(text)}
    assert len(kills) == 2, text
    # (partition key, dead leader) -> when the followers said it was not replaced yet
    leaderless: dict[tuple[str, str], list[float]] = {}
    elected: list[float] = []
    for node_log in sorted(log.parent.glob("node*.log")):
        text = node_log.read_text()
        for clock, leader, stream, p in NO_NEW_LEADER.findall(text):
            leaderless.setdefault((f"{stream}/{p}", leader), []).append(_ms(clock, first))
        elected += [_ms(clock, first) for clock in ELECTED.findall(text)]
    return {
        "model": model,
        "kills": kills,
        "restarts": restarts,
        "capture": capture,
        "page": out / "report.html",
        "data": data,
        "leaderless": leaderless,
        "elected": elected,
    }


def leader_at(model: dict[str, Any], key: str, t: float) -> str | None:
    segs = [
        s for s in model["partitions"]["leaders"] if s["partition_key"] == key and s["start"] <= t
    ]
    return max(segs, key=lambda s: s["start"])["leader"] if segs else None


def test_killed_leaders_partitions_change_leader(story: dict[str, Any]) -> None:
    model = story["model"]
    changes = model["partitions"]["leader_changes"]
    moved_any = False
    # partitions with a follower (a partition of one replica has nowhere to move)
    replicated = {row["series"].split()[0] for row in model["partitions"]["lag"]}
    for t, victim, _ in story["kills"]:
        led = [k for k in sorted(replicated) if leader_at(model, k, t) == victim]
        for key in led:
            after = [
                c
                for c in changes
                if c["partition_key"] == key
                and c["from_leader"] == victim
                and t <= c["t"] <= t + 30_000
            ]
            said = story["leaderless"].get((key, victim), [])
            if any(s >= t + 30_000 for s in said):
                # Liftbridge itself had not replaced the leader 30 s on (its
                # followers say so in their logs; seen once, 2026-11-26: the
                # controller's RPCs timed out): the report must not invent a change.
                assert not after, (key, victim, after)
                continue
            assert after and after[0]["to_leader"] != victim, (key, victim)
            assert after[0]["to_epoch"] > after[0]["from_epoch"]
            moved_any = True
    assert moved_any
    # the second victim was chosen as the leader of orders/0
    t, victim, why = story["kills"][1]
    assert "orders/0" in why and leader_at(model, "orders/0", t) == victim


def test_metadata_leader_moves_off_the_first_victim(story: dict[str, Any]) -> None:
    model = story["model"]
    t, victim, why = story["kills"][0]
    assert "metadata leader" in why
    raft = model["cluster"]["raft"]
    leaders = (
        raft["terms"]
        if raft.get("decoded") and raft["terms"]
        else model["cluster"]["metadata_leaders"]
    )
    # until the victim is back (it may be elected again afterwards)
    back = story["restarts"][victim]
    after = [seg for seg in leaders if t < seg["start"] < back]
    assert after and all(seg["leader"] != victim for seg in after), leaders
    if raft.get("decoded"):
        assert any(t < e["t"] < t + 30_000 and e["candidate"] != victim for e in raft["elections"])


def _near_a_kill(story: dict[str, Any], t: float) -> bool:
    return any(k - 5_000 <= t <= k + 20_000 for k, _, _ in story["kills"])


def _leaderless(story: dict[str, Any], t: float) -> bool:
    """Whether a partition had no leader at `t`, by its followers' logs (from
    their first word to their last, and the client's 4 s ack timeout)."""
    return any(min(said) - 5_000 <= t <= max(said) + 5_000 for said in story["leaderless"].values())


def test_the_failovers_stall_publishes_around_the_kills(story: dict[str, Any]) -> None:
    """A publish caught by a kill either waits for its ack (late by hundreds
    of ms to seconds: a new leader took it) or never has one (the leader died
    with it in flight; the client gave up after its 4 s), or, made through
    the killed node's API, stalls the client. Runs show one or more
    (2026-11-26: a run with no ack over 100 ms, its stalled publish
    unacked). All are the report's numbers; no unacked publish in the calm."""
    model = story["model"]
    rows = model["latency"]["over_time"]
    median = model["latency"]["summary"]["ALL"]["p50_ms"]
    near = [r["max_ms"] for r in rows if _near_a_kill(story, r["t"])]
    calm = [r["max_ms"] for r in rows if not _near_a_kill(story, r["t"])]
    unacked = model["latency"]["unacked_over_time"]
    unacked_near = sum(r["count"] for r in unacked if _near_a_kill(story, r["t"]))
    # A publish to a partition left without a leader (by Liftbridge's own
    # logs) is not the calm either: it cannot be acked until one is named.
    unacked_calm = sum(
        r["count"]
        for r in unacked
        if not _near_a_kill(story, r["t"]) and not _leaderless(story, r["t"])
    )
    # How long a failover stalls publishes is the cluster's timing (466 ms
    # to several seconds seen on this machine): a late ack is judged against
    # the run's own latencies, with a floor far above a healthy ack (~1 ms).
    late = (
        bool(near)
        and max(near) >= 100
        and max(near) >= 20 * median
        and max(near) > 5 * sorted(calm)[len(calm) // 2]
    )
    # A publish made through the killed node's own API never reaches NATS
    # (seen 2026-11-26: no late or missing ack at all): the client's side
    # (CAPTURE_API=1) then shows it, an answer that never came or a client
    # that stops publishing (paced every ~150 ms) for a second or more.
    join = ((model.get("client") or {}).get("publish_join") or {}).get("messages", [])
    unanswered = [
        m
        for m in join
        if _near_a_kill(story, m["request"])
        and m["ack_policy"] != "NONE"
        and m["to_response_ms"] is None
    ]
    times = sorted(m["request"] for m in join)
    paused = [
        b - a
        for a, b in zip(times, times[1:])
        if any(k - 1_000 <= a <= k + 20_000 for k, _, _ in story["kills"])
    ]
    client_stalled = bool(unanswered) or max(paused, default=0) >= 1_000
    assert late or unacked_near or client_stalled, (
        max(near, default=None),
        median,
        unacked,
        max(paused, default=None),
    )
    assert unacked_calm == 0, unacked
    assert sum(r["count"] for r in unacked) == model["latency"]["unacked"]


def test_each_killed_node_is_silent_until_its_restart(story: dict[str, Any]) -> None:
    """The report's node silences (no connection of the node sends or is
    delivered anything) start at each SIGKILL and end after its restart; no
    other node falls silent before the capture's end."""
    silences = story["model"]["cluster"]["node_silences"]
    for t, victim, _ in story["kills"]:
        back = story["restarts"][victim]
        assert [
            s
            for s in silences
            if s["node"] == victim
            and abs(s["start"] - t) <= 2_000
            and s["end"] is not None
            and back <= s["end"] <= back + 30_000
        ], (victim, t, back, silences)
    victims = {v for _, v, _ in story["kills"]}
    assert all(s["node"] in victims or s["end"] is None for s in silences), silences


def test_metadata_lookups_wait_while_a_failed_node_is_down(story: dict[str, Any]) -> None:
    """The client's FetchMetadata/FetchPartitionMetadata calls, placed against
    the failovers: every one is placed; each failover is one of the kills', or
    an election the nodes' logs show (a loaded machine can stall a leader's
    heartbeats: seen once, 32 s after the second kill); lookups during a
    failover or while its failed node is down wait for hundreds of ms to
    seconds (3-5 s seen), those in the calm a few ms."""
    client = story["model"]["client"]
    ml = client["metadata_lookups"]
    calls = {m["method"]: m["calls"] for m in client["methods"]}
    assert len(ml["lookups"]) == sum(calls.get(m, 0) for m in ml["methods"]) > 0
    groups = {g["when"]: g for g in ml["groups"]}
    assert sum(g["lookups"] for g in groups.values()) == len(ml["lookups"])
    kills = [t for t, _, _ in story["kills"]]
    after_kill = [
        f for f in ml["failovers"] if any(k - 10_000 <= f["start"] <= k + 30_000 for k in kills)
    ]
    # the logs' clock is whole seconds: an election in [start - 3 s, end + 3 s]
    elected = [
        f
        for f in ml["failovers"]
        if any(
            f["start"] - 3_000 <= e <= (f["end"] or f["start"]) + 3_000 for e in story["elected"]
        )
    ]
    assert after_kill and all(f in after_kill or f in elected for f in ml["failovers"]), (
        ml["failovers"],
        story["elected"],
    )
    waited = [
        r["latency_ms"]
        for r in ml["lookups"]
        if r["when"] != "calm" and r["latency_ms"] is not None
    ]
    calm = groups["calm"]["latency"]["p50_ms"]
    assert waited and max(waited) >= 500 and calm is not None and calm < 50, (waited, calm)


def test_503s_are_the_captures_and_name_the_dead_nodes(story: dict[str, Any]) -> None:
    model = story["model"]
    in_capture = sum(
        1
        for r in CaptureReader(story["capture"], decode=False)
        if r.verb == "HMSG" and is_no_responders(r.header_block)
    )
    assert model["cluster"]["no_responders_total"] == in_capture
    assert sum(r["count"] for r in model["cluster"]["no_responders"]) == in_capture
    if not in_capture:
        # Whether a request meets a dead node's subject is timing: some runs
        # send none (then there is nothing to name, and the count above is 0).
        return
    for t, victim, _ in story["kills"]:
        back = story["restarts"][victim]
        assert any(
            f".{victim}." in x["subject"] and x["first"] <= back + 5_000 and x["last"] >= t
            for x in model["cluster"]["no_responders_by_target"]
        ), victim


def test_counts_match_capture_stats(story: dict[str, Any]) -> None:
    from test_report import stats_of

    stats, totals = stats_of(story["capture"]), story["model"]["totals"]
    for key in ("messages", "packets", "bytes_read", "gaps"):
        assert totals[key] == stats[key]
    assert totals["per_msg_type"] == stats["per MsgType"]
    assert totals["per_verb"] == stats["per verb"]


def test_full_run_page_renders_in_chromium(story: dict[str, Any]) -> None:
    from test_report_browser import check_page

    from lbparse.report.browser import chromium

    if chromium() is None:
        pytest.skip("Chromium is not installed (make install-system)")
    check_page(story["page"], story["model"])


def _chained(change: tuple[Any, ...], wire: set[tuple[Any, ...]]) -> bool:
    """Whether the wire's changes lead from `change`'s (leader, epoch) to its
    (leader, epoch) in the same partition, one change or several in a row."""
    key, leader, target, epoch, last = change
    steps = {(c[1], c[3]): (c[2], c[4]) for c in wire if c[0] == key}
    at = (leader, epoch)
    for _ in range(len(steps)):  # bounded: each step is taken at most once
        if at not in steps:
            return False
        at = steps[at]
        if at == (target, last):
            return True
    return False


def test_data_directories_show_the_same_failover(story: dict[str, Any]) -> None:
    """The nodes' data directories (segments: the epoch each message was written
    in; raft.db: ChangeLeader and the other ops) give the leader changes the
    capture gives, and the same Raft log operations."""
    from lbparse.report import build_model

    disk = build_model([str(story["data"])])
    wire = story["model"]

    def changes(m: dict[str, Any]) -> set[tuple[Any, ...]]:
        return {
            (c["partition_key"], c["from_leader"], c["to_leader"], c["from_epoch"], c["to_epoch"])
            for c in m["partitions"]["leader_changes"]
        }

    # A change is on disk once a message was stored in the new epoch, so the
    # disk skips an epoch nothing was written in (orders/2 went 16 -> 48 -> 50
    # on the wire of one run and 16 -> 50 on disk): every change there is a
    # chain of changes the wire shows, from its leader and epoch to its
    # leader and epoch; and the victim's orders/0 is among them (the run
    # publishes to it afterwards).
    wire_changes = changes(wire)
    for change in changes(disk):
        assert _chained(change, wire_changes), (change, sorted(wire_changes))
    t, victim, _ = story["kills"][1]
    assert any(c[0] == "orders/0" and c[1] == victim for c in changes(disk)), changes(disk)
    if wire["cluster"]["raft"].get("decoded"):
        assert disk["cluster"]["raft"]["log_ops_total"] == wire["cluster"]["raft"]["log_ops_total"]
