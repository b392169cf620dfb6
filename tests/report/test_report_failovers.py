"""report.failovers on made-up facts: node silences from connection spans,
failover windows from leader changes, lookups placed against them. The real
cluster's run is tests/report/test_report_cluster.py's."""

from __future__ import annotations

from typing import Any

from lbparse.report.failovers import (
    MAX_ENDPOINTS,
    Activity,
    Lookups,
    failover_windows,
    lookups_model,
)
from lbparse.report.nodes import CONNECT_NAME, NodeMap

S = 1_000_000_000  # ns


def nodes(**endpoints: str) -> NodeMap:
    m = NodeMap()
    for endpoint, node in endpoints.items():
        m.learn(endpoint.replace("_", ":"), node, CONNECT_NAME)
    return m


def test_a_node_is_silent_between_its_connections_and_after_its_last() -> None:
    a = Activity()
    a.see_span("e:1", 0, 10 * S)
    a.see_span("e:2", 2 * S, 12 * S)  # overlaps: no silence between them
    a.see_span("e:3", 20 * S, 30 * S)  # 8 s after the node's last: a silence
    a.see_span("f:1", 0, 5 * S)  # node b: silent from 5 s to the end
    a.see_span("g:1", 0, 1 * S)  # not a node: never silent
    silences = a.silences(nodes(e_1="a", e_2="a", e_3="a", f_1="b"), 30 * S)
    assert [(s["node"], s["start"], s["end"]) for s in silences] == [
        ("b", 5_000.0, None),
        ("a", 12_000.0, 20_000.0),
    ]
    assert silences[1]["seconds"] == 8.0


def test_a_short_pause_and_an_out_of_order_time_are_no_silence() -> None:
    a = Activity()
    a.see_span("e:1", 5 * S, 10 * S)
    a.see_span("e:1", 1 * S, 1 * S)  # earlier than its first: widens the span
    a.see_span("e:2", 10 * S + S // 2, 11 * S)  # half a second later: not silent
    assert a.spans["e:1"] == [1 * S, 10 * S]
    assert a.silences(nodes(e_1="a", e_2="a"), 11 * S) == []


def test_spans_kept_are_bounded() -> None:
    a = Activity()
    for k in range(MAX_ENDPOINTS + 5):
        a.see_span(f"e:{k}", k, k)
    assert len(a.spans) == MAX_ENDPOINTS


def _change(
    key: str, old: str, new: str, last_seen: float, t: float, changed: bool = True
) -> dict[str, Any]:
    return {
        "partition_key": key,
        "from_leader": old,
        "to_leader": new,
        "from_last_seen": last_seen,
        "t": t,
        "leader_changed": changed,
    }


def test_failovers_merge_and_last_while_the_old_leader_is_silent() -> None:
    partitions = {
        "leader_changes": [
            _change("s/0", "n1", "n2", 10_000.0, 12_000.0),
            _change("s/1", "n1", "n3", 10_100.0, 12_500.0),  # the same failover
            _change("s/2", "n2", "n2", 40_000.0, 40_500.0, False),  # an epoch, no failover
            _change("s/0", "n2", "n3", 50_000.0, 51_000.0),
        ]
    }  # n2 never went silent
    cluster = {
        "raft": {
            "terms": [
                {"leader": "n1", "start": 0.0, "end": 10_050.0},
                {"leader": "n3", "start": 11_000.0, "end": 60_000.0},
            ]
        },
        "node_silences": [{"node": "n1", "start": 10_000.0, "end": 30_000.0}],
    }
    windows = failover_windows(partitions, cluster, 60_000.0)
    assert [(w["start"], w["end"], w["after_end"]) for w in windows] == [
        (10_000.0, 12_500.0, 30_000.0),
        (50_000.0, 51_000.0, None),
    ]
    assert windows[0]["changes"] == ["s/0: n1 -> n2", "metadata leader: n1 -> n3", "s/1: n1 -> n3"]


def test_lookups_are_placed_during_after_or_in_the_calm() -> None:
    windows = [{"start": 10_000.0, "end": 12_000.0, "changes": ["x"], "after_end": 30_000.0}]
    lookups = Lookups()
    ms = 1_000_000
    lookups.add("FetchMetadata", "s:1", 9_000 * ms, 14_000 * ms, 14_000 * ms, "OK")  # overlaps
    lookups.add("FetchMetadata", "s:1", 20_000 * ms, 23_000 * ms, 23_000 * ms, "OK")  # after
    lookups.add(
        "FetchPartitionMetadata", "s:2", 40_000 * ms, None, 41_000 * ms, "FAILED_PRECONDITION"
    )  # calm
    lookups.add("FetchMetadata", "s:1", None, None, 1, "OK")  # no start: not placed
    model = lookups_model(lookups, windows)
    assert [r["when"] for r in model["lookups"]] == ["during", "after", "calm"]
    groups = {g["when"]: g for g in model["groups"]}
    assert groups["during"]["latency"]["max_ms"] == 5000.0
    assert groups["calm"]["failed"] == 1 and groups["calm"]["latency"]["count"] == 0
    (f,) = model["failovers"]
    assert f["during"]["lookups"] == 1 and f["after"]["lookups"] == 1
