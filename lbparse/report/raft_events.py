"""Raft elections and metadata ops from the Raft transport, where lbparse.raft decodes it.

Liftbridge's metadata Raft group talks over NATS (nats-on-a-log): each
direction of a Raft connection is a byte stream published to
`<ns>.raft.metadata.<node>.request._INBOX.<nuid>`, cut into NATS messages
(lbparse.raft.StreamDecoder reads one stream message by message). From it:

- RequestVote requests: an election (term, candidate); a candidate asks
  every peer, so an election is one (term, candidate);
- AppendEntries requests: the metadata leader of a term (heartbeats
  included), and the log entries it replicates: Liftbridge's RaftLog ops
  (ChangeLeader, ShrinkISR, ExpandISR, CreateStream...), each counted once
  by its log index (the leader sends it to every follower).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from lbparse.raft import StreamDecoder
from lbparse.report.partitions import Partitions
from lbparse.report.timebins import MS, Counts, TimeAxis, exact_time

MAX_STREAMS = 4096  # transport streams decoded at once
MAX_ENTRIES = 200_000  # log indexes remembered (entries counted once)
MAX_ELECTIONS = 5000
MAX_TERMS = 5000


def is_transport_subject(subject: str) -> bool:
    """Whether a subject is the Raft transport's: `<ns>.raft.metadata.<node>.request.<inbox...>`.

    Args:
        subject: A NATS subject.

    Returns:
        True for a transport subject.
    """
    tokens = subject.split(".", 6)
    return (
        len(tokens) >= 6
        and tokens[1] == "raft"
        and tokens[2] == "metadata"
        and tokens[4] == "request"
    )


class RaftEvents:
    """The metadata Raft group's transport, decoded: elections, terms, log ops.

    One stream decoder per transport connection (the oldest dropped beyond
    MAX_STREAMS); AppendEntries name each term's leader, RequestVotes the
    elections, log entries the metadata ops (given to the partitions).

    Args:
        axis: The report's time axis (ops and RPCs are counted per bin).
        partitions: The partitions' part, given the leaders and ISR changes the
            log's ops name (and its node map, taught by requests' ids).
    """

    # Heartbeats as rows (StreamDecoder.feed_plain); False: every RPC as an
    # object (`feed`), the reference tests/report/test_report_raft.py holds it to.
    plain = True

    def __init__(self, axis: TimeAxis, partitions: Partitions) -> None:
        self.axis = axis
        self.partitions = partitions
        self.decoders: OrderedDict[tuple[str, str], Any] = OrderedDict()  # oldest out first
        self.elections: list[dict[str, Any]] = []
        self._election_keys: set[tuple[int, str]] = set()
        self.terms: dict[int, dict[str, Any]] = {}  # term -> leader, first, last
        # term -> the earliest append time of its raft.db entries (hashicorp/raft's
        # AppendedAt, where written): a new leader's first entry marks its win
        self.db_term_first: dict[int, int] = {}
        self.entries: OrderedDict[int, None] = OrderedDict()
        self.ops = Counts(axis)
        self.untimed_ops: dict[str, int] = {}
        self.rpcs = Counts(axis)
        self.messages = 0
        self.errors = 0
        self.skipped_bytes = 0

    def feed(
        self, ns: int, i: int, key: tuple[str, str], payload: bytes, sender: str | None = None
    ) -> None:
        """Feed one transport message's bytes to its stream's decoder.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            i: The time bin's index on the axis.
            key: The transport stream: (endpoint, subject).
            payload: The message's bytes (a piece of the transport's byte stream).
            sender: The endpoint that published it (None for a delivery: a
                recording's MSG), whose node a request's id names.
        """
        dec = self.decoders.get(key)
        if dec is None:
            if len(self.decoders) >= MAX_STREAMS:
                self.decoders.popitem(last=False)
            dec = self.decoders[key] = StreamDecoder()
        self.messages += 1
        # A heartbeat's RPCs as rows, read in one C call; RPCs with log
        # entries (their commands are read whole) as objects.
        chunk, rows = dec.feed_plain(payload) if self.plain else (dec.feed(payload), [])
        if chunk.error is not None:
            self.errors += 1
        self.skipped_bytes += chunk.skipped
        if chunk.closed:
            del self.decoders[key]
        for row in rows:
            term = row["term"]
            # The row's uint64 term as a bigint (transport._bigint): negative
            # only above 2**63, the C reader refusing a negative encoding.
            if term is not None and term < 0:
                term += 1 << 64
            self._rpc(ns, i, sender, row["rpc"], row["role"], term, row["node"], ())
        for rpc in chunk.rpcs:
            self._rpc(ns, i, sender, rpc.rpc, rpc.role, rpc.term, rpc.node, rpc.entries)

    def _rpc(
        self,
        ns: int,
        i: int,
        sender: str | None,
        name: str,
        role: str,
        term: int | None,
        node: str | None,
        entries: Any,
    ) -> None:
        self.rpcs.add(i, f"{name} {role}")
        if role != "request":
            return
        if sender is not None and node:
            # a request's id (AppendEntries' leader, RequestVote's candidate)
            # is its sender's: the transport's requester sent it
            self.partitions.nodes.learn(sender, node)
        if name == "RequestVote" and term is not None and node:
            if (term, node) not in self._election_keys and len(self.elections) < MAX_ELECTIONS:
                self._election_keys.add((term, node))
                self.elections.append(
                    {"t": ns / MS, **exact_time("t", ns), "term": term, "candidate": node}
                )
        elif name == "AppendEntries" and term is not None and node:
            seen = self.terms.get(term)
            if seen is None:
                if len(self.terms) < MAX_TERMS:
                    self.terms[term] = {
                        "term": term,
                        "leader": node,
                        "start": ns / MS,
                        "end": ns / MS,
                        "append_entries": 1,
                        "first_ns": ns,
                        "last_ns": ns,
                    }
            else:
                if ns > seen["last_ns"]:
                    seen["end"], seen["last_ns"] = ns / MS, ns
                seen["append_entries"] += 1
            for entry in entries:
                self._entry(ns, i, entry)

    def db_entry_time(self, term: int, appended_at: int) -> None:
        """A raft.db entry of `term` appended at `appended_at` (ns).

        Args:
            term: The entry's Raft term.
            appended_at: Its AppendedAt, integer nanoseconds since the epoch.
        """
        first = self.db_term_first.get(term)
        if first is None or appended_at < first:
            if first is not None or len(self.db_term_first) < MAX_TERMS:
                self.db_term_first[term] = appended_at

    def untimed_entry(self, entry: Any) -> None:
        """A log entry without a time (raft.db before hashicorp/raft's AppendedAt).

        Counted once by index, and the leaders it names given to their epochs.

        Args:
            entry: The decoded log entry (index, type_name, command).
        """
        if entry.index in self.entries:
            return
        self.entries[entry.index] = None
        cmd = entry.command
        name = entry.type_name if cmd is None else (cmd.name or cmd.op)
        self.untimed_ops[name] = self.untimed_ops.get(name, 0) + 1
        if cmd is None:
            return
        m, parts = cmd.message, self.partitions
        if cmd.name == "CreateStream":
            for p in m.stream.partitions:
                parts.name_epoch(p.stream, p.id, p.leaderEpoch or entry.index, p.leader)
        elif cmd.name == "ChangeLeader":
            parts.name_epoch(m.stream, m.partition, entry.index, m.leader)
        elif cmd.name in ("ShrinkISR", "ExpandISR"):
            parts.name_epoch(m.stream, m.partition, m.leaderEpoch, m.leader)

    def _entry(self, ns: int, i: int, entry: Any) -> None:
        if entry.index in self.entries:
            return
        self.entries[entry.index] = None
        if len(self.entries) > MAX_ENTRIES:
            self.entries.popitem(last=False)
        cmd = entry.command
        if cmd is None:
            self.ops.add(i, entry.type_name)
            return
        self.ops.add(i, cmd.name or cmd.op)
        m = cmd.message
        if cmd.name == "CreateStream":
            for p in m.stream.partitions:  # the first leader of each partition; its
                # epoch is the entry's index (the op says 0: the FSM sets it on apply)
                self.partitions._observe(
                    p.stream,
                    p.id,
                    p.leaderEpoch or entry.index,
                    ns,
                    named=p.leader,
                    source="raft log",
                )
        elif cmd.name == "ChangeLeader":
            # Liftbridge's FSM makes the entry's log index the new leader epoch.
            self.partitions.leader_changed(
                ns, m.stream, m.partition, m.leader, entry.index, "raft log"
            )
        elif cmd.name == "ShrinkISR":
            self.partitions.isr_change(ns, "shrink_isr", m, m.replicaToRemove, "raft log")
        elif cmd.name == "ExpandISR":
            self.partitions.isr_change(ns, "expand_isr", m, m.replicaToAdd, "raft log")

    def model(self) -> dict[str, Any]:
        """The Raft part of the cluster section's data.

        Returns:
            A JSON-ready dict: decoded (True), transport counts, elections, terms,
            db_term_first, log ops (over time, totals, untimed) and RPCs over time.
        """
        return {
            "decoded": True,
            "transport_messages": self.messages,
            "transport_errors": self.errors,
            "skipped_bytes": self.skipped_bytes,
            "elections": sorted(self.elections, key=lambda e: e["t"]),
            "terms": [_term_model(self.terms[t]) for t in sorted(self.terms)],
            "db_term_first": [
                {"term": t, **exact_time("first", ns)}
                for t, ns in sorted(self.db_term_first.items())
            ],
            "log_ops": self.ops.rows("op", "count"),
            "log_ops_total": _sum(self.ops.totals(), self.untimed_ops),
            "log_ops_untimed": dict(sorted(self.untimed_ops.items())),
            "rpcs": self.rpcs.rows("rpc", "count"),
        }


def _term_model(t: dict[str, Any]) -> dict[str, Any]:
    """A term for the model: its exact first and last AppendEntries as the
    model's exact times (`start_ns`, `end_ns`), beside the chart's ms."""
    out = {k: v for k, v in t.items() if k not in ("first_ns", "last_ns")}
    out.update(exact_time("start", t["first_ns"]))
    out.update(exact_time("end", t["last_ns"]))
    return out


def _sum(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, n in b.items():
        out[k] = out.get(k, 0) + n
    return dict(sorted(out.items()))
