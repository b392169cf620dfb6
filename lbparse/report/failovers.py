"""Failovers, and the client's metadata lookups around them.

A failover is a window of the cluster's story in which a leader was gone:

- a partition's leader changed (`partitions.leader_changes`): from the old
  leader's last observation to the new leader's first;
- the metadata (Raft) leader changed: from the last AppendEntries of one
  term's leader to the first of the next leader's (`cluster.raft.terms`),
  or, without decoded Raft, between the answers of two different nodes
  (`cluster.metadata_leaders`).

Windows that overlap or come within MERGE_MS of each other are one failover.

A metadata lookup (FetchMetadata, FetchPartitionMetadata: `LOOKUP_METHODS`)
is `during` a failover when its call overlaps the window; `after` it when
it starts after the window, while a node that lost its leadership is still
silent (`Activity`: none of its NATS connections sends or is delivered
anything, until a restarted node connects anew); else `calm`. "After" is
there because the window closes when the new leader shows, and the failed
node may stay down for longer: in run_cluster.sh's `full` run, lookups
while a node is down take 3-5 s against a millisecond in the calm.
"""

from __future__ import annotations

from typing import Any

from lbparse.report.histogram import Histogram
from lbparse.report.nodes import NodeMap
from lbparse.report.timebins import MS, exact_time

LOOKUP_METHODS = ("FetchMetadata", "FetchPartitionMetadata")
MERGE_MS = 1_000.0
# A node is silent when none of its connections sends or is delivered anything
# for this long between its connections' spans (one connection that idles is
# one span: only a node that reconnects, or stops for good, is ever silent).
SILENT_MS = 1_000.0
MAX_ENDPOINTS = 10_000  # connections whose span is kept; the rest not followed
MAX_LOOKUPS = 20_000  # kept one by one (and drawn); the rest only counted
WHEN = ("during", "after", "calm")


class Activity:
    """Each connection's first and last message (sent or delivered).

    Kept by its client-side endpoint: fed a record at a time (the Aggregator
    updates `spans` inline) or a batch's per-endpoint extremes (`see_span`).
    """

    def __init__(self) -> None:
        self.spans: dict[str, list[int]] = {}

    def see_span(self, endpoint: str, first: int, last: int) -> None:
        """Widen an endpoint's span to cover [first, last].

        Endpoints beyond MAX_ENDPOINTS are not followed.

        Args:
            endpoint: The connection's client-side endpoint ("host:port").
            first: Its earliest message time seen, integer nanoseconds since the epoch.
            last: Its latest message time seen, integer nanoseconds since the epoch.
        """
        span = self.spans.get(endpoint)
        if span is None:
            if len(self.spans) < MAX_ENDPOINTS:
                self.spans[endpoint] = [first, last]
            return
        if first < span[0]:
            span[0] = first
        if last > span[1]:
            span[1] = last

    def silences(self, nodes: NodeMap, end_ns: int | None) -> list[dict[str, Any]]:
        """Each node's silences.

        A silence is a gap of over SILENT_MS in the union of its connections'
        spans, or from its last message to the capture's end.

        Args:
            nodes: Which node each endpoint is (endpoints of no known node are skipped).
            end_ns: The capture's end in integer nanoseconds, or None to leave out
                the trailing silences.

        Returns:
            One dict per silence (node, start, end, seconds; end None when it lasts
            to the end of the capture), by start time.
        """
        by_node: dict[str, list[list[int]]] = {}
        for endpoint, span in self.spans.items():
            node = nodes.by_endpoint.get(endpoint)
            if node is not None:
                by_node.setdefault(node, []).append(span)
        out = []
        for node, spans in sorted(by_node.items()):
            spans.sort()
            reach = spans[0][1]
            for first, last in spans[1:]:
                if (first - reach) / 1e6 > SILENT_MS:
                    out.append(_silence(node, reach, first))
                reach = max(reach, last)
            if end_ns is not None and (end_ns - reach) / 1e6 > SILENT_MS:
                out.append(_silence(node, reach, None))
        return sorted(out, key=lambda x: (x["start"], x["node"]))


def _silence(node: str, start: int, end: int | None) -> dict[str, Any]:
    """A silence: `end` None when it lasts to the end of the capture."""
    return {
        "node": node,
        "start": start / MS,
        **exact_time("start", start),
        "end": None if end is None else end / MS,
        **exact_time("end", end),
        "seconds": None if end is None else round((end - start) / 1e9, 3),
    }


class Lookups:
    """The client's metadata lookups as calls end: bounded, in arrival order."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.more = 0

    def add(
        self,
        method: str,
        server: str,
        start_ns: int | None,
        answer_ns: int | None,
        end_ns: int | None,
        outcome: str,
    ) -> None:
        """Keep one metadata lookup (FetchMetadata / FetchPartitionMetadata) as its call ends.

        A call seen only from its end (no start time) is dropped; beyond MAX_LOOKUPS
        lookups are only counted (`more`).

        Args:
            method: The gRPC method's name.
            server: The server's endpoint.
            start_ns: When the request was sent (integer nanoseconds), or None.
            answer_ns: When the first response came, or None if none did.
            end_ns: When the call ended, or None.
            outcome: The call's outcome (client.status_name).
        """
        if start_ns is None:
            return  # a call seen only from its end: no time to place it by
        if len(self.rows) >= MAX_LOOKUPS:
            self.more += 1
            return
        last = max(t for t in (start_ns, answer_ns, end_ns) if t is not None)
        self.rows.append(
            {
                "t": start_ns / MS,
                **exact_time("t", start_ns),
                "end": last / MS,
                "method": method,
                "server": server,
                "outcome": outcome,
                "latency_ms": None if answer_ns is None else round((answer_ns - start_ns) / 1e6, 3),
            }
        )


_Window = tuple[float, float, str, str]  # start, end (ms), what changed, the old leader


def _partition_windows(changes: list[dict[str, Any]]) -> list[_Window]:
    out = []
    for c in changes:
        if c.get("from_last_seen") is None or not c.get("leader_changed"):
            continue  # an epoch that moved under the same leader is no failover
        out.append(
            (
                c["from_last_seen"],
                c["t"],
                f"{c['partition_key']}: {c['from_leader']} -> {c['to_leader']}",
                c["from_leader"],
            )
        )
    return out


def _metadata_windows(cluster: dict[str, Any]) -> list[_Window]:
    raft = cluster.get("raft") or {}
    runs = raft.get("terms") or cluster.get("metadata_leaders") or []
    out = []
    for before, after in zip(runs, runs[1:]):
        if before["leader"] != after["leader"]:
            out.append(
                (
                    before["end"],
                    after["start"],
                    f"metadata leader: {before['leader']} -> {after['leader']}",
                    before["leader"],
                )
            )
    return out


def _after_end(
    start: float, node: str, silences: list[dict[str, Any]], last: float
) -> float | None:
    """When the old leader `node`, silent from about `start`, spoke again."""
    for s in silences:
        if (
            s["node"] == node
            and s["start"] <= start + MERGE_MS
            and (s["end"] is None or s["end"] >= start)
        ):
            return last if s["end"] is None else s["end"]
    return None


def failover_windows(
    partitions: dict[str, Any], cluster: dict[str, Any], last_ms: float | None
) -> list[dict[str, Any]]:
    """The failovers of a report's model, merged, in time order.

    Each has its window, what changed, and how long its old leaders stayed
    silent (`after_end`, None when none of them went silent).

    Args:
        partitions: The model's partitions section (its leader_changes).
        cluster: The model's cluster section (metadata leaders, node_silences).
        last_ms: The capture's end in epoch milliseconds, or None (a silence
            to the end then ends with its window).

    Returns:
        One dict per merged failover: start, end (epoch ms), changes, after_end.
    """
    silences = cluster.get("node_silences", [])
    found = sorted(
        _partition_windows(partitions.get("leader_changes", [])) + _metadata_windows(cluster)
    )
    merged: list[dict[str, Any]] = []
    for start, end, what, old in found:
        start, end = min(start, end), max(start, end)
        after = _after_end(start, old, silences, last_ms if last_ms is not None else end)
        if merged and start <= merged[-1]["end"] + MERGE_MS:
            last = merged[-1]
            last["end"] = max(last["end"], end)
            if what not in last["changes"]:
                last["changes"].append(what)
            if after is not None:
                last["after_end"] = max(last["after_end"] or after, after)
        else:
            merged.append({"start": start, "end": end, "changes": [what], "after_end": after})
    return merged


def _when(row: dict[str, Any], windows: list[dict[str, Any]]) -> int | None:
    """(index of the failover, "during"/"after") for a lookup, None in the calm."""
    for k, w in enumerate(windows):
        if row["t"] <= w["end"] and row["end"] >= w["start"]:
            row["when"], row["failover"] = "during", k
            return k
    for k, w in enumerate(windows):
        if w["after_end"] is not None and w["end"] < row["t"] <= w["after_end"]:
            row["when"], row["failover"] = "after", k
            return k
    row["when"], row["failover"] = "calm", None
    return None


def _group() -> dict[str, Any]:
    return {"lookups": 0, "failed": 0, "latency": Histogram()}


def _count(group: dict[str, Any], row: dict[str, Any]) -> None:
    group["lookups"] += 1
    group["failed"] += row["outcome"] != "OK"
    if row["latency_ms"] is not None:
        group["latency"].add(int(row["latency_ms"] * 1e6))


def _summary(group: dict[str, Any]) -> dict[str, Any]:
    return {
        "lookups": group["lookups"],
        "failed": group["failed"],
        "latency": group["latency"].summary_ms(),
    }


def lookups_model(lookups: Lookups, windows: list[dict[str, Any]]) -> dict[str, Any]:
    """The lookups placed against the failovers.

    Args:
        lookups: The client's metadata lookups.
        windows: The failovers, as failover_windows returns them.

    Returns:
        A JSON-ready dict: each failover's lookups (during and after), the three
        groups' (during, after, calm) counts and latency, and each lookup.
    """
    per = [{"during": _group(), "after": _group()} for _ in windows]
    groups = {w: _group() for w in WHEN}
    for row in lookups.rows:
        k = _when(row, windows)
        _count(groups[row["when"]], row)
        if k is not None:
            _count(per[k][row["when"]], row)
    failovers = [
        {**w, "during": _summary(p["during"]), "after": _summary(p["after"])}
        for w, p in zip(windows, per)
    ]
    return {
        "methods": list(LOOKUP_METHODS),
        "failovers": failovers,
        "groups": [{"when": w, **_summary(g)} for w, g in groups.items()],
        "lookups": lookups.rows,
        "more_lookups": lookups.more,
    }


__all__ = ["Activity", "LOOKUP_METHODS", "Lookups", "failover_windows", "lookups_model"]
