"""The metadata leader of each Raft term: from the moment it won the term to
the moment it lost it, and what each of the two times is inferred from.

The nodes answering PropagatedRequests (`cluster.metadata_leaders`) only say
when a leader happened to answer: a leader that answered twice in its first
second and then led for another ten looks, by its answers, as if it led for
half a second. The span of a term comes from the facts the Raft chart draws:

- won: the term's first AppendEntries in the Raft traffic (a new leader
  sends its heartbeats at once), or the first raft.db entry of the term
  where hashicorp/raft wrote an append time, or the leader's first answer
  to a PropagatedRequest or RaftJoinRequest after the previous term,
  whichever is earliest. The candidate's RequestVote (the election's start)
  and the votes the voters keep in raft.db (LastVoteTerm, LastVoteCand) are
  named beside it;
- lost: the leader's node falling silent (`node_silences`: none of its
  connections said or heard anything; killed or cut off from NATS) after its
  last AppendEntries of the term, or else the next term's win, or else the
  end of the input, the leader still leading.

Without decoded Raft terms (`--no-raft`, recordings without the transport)
the answers are the only facts: each run of one node's answers stands for a
term of unknown number, won at or before its first answer, and lost by the
same rules (its silence, the next node's first answer, the end).
"""

from __future__ import annotations

from typing import Any

from lbparse.report.timebins import MS, exact_time, utc_text


def _clock(ns: int) -> str:
    """HH:MM:SS.mmm (UTC) of `ns`, for the explanations."""
    text = utc_text(ns) or ""
    return text[11:23] if len(text) >= 23 else str(ns)


def _ns(row: dict[str, Any], key: str) -> int | None:
    v = row.get(key)
    return None if v is None else int(v)


def _silence_after(
    silences: list[dict[str, Any]], node: str, after_ns: int, before_ns: int | None
) -> dict[str, Any] | None:
    """The node's first silence starting at or after `after_ns` (its last act as
    leader) and before `before_ns` (the next leader's win), if any."""
    for s in silences:
        start = _ns(s, "start_ns")
        if (
            s["node"] == node
            and start is not None
            and start >= after_ns
            and (before_ns is None or start < before_ns)
        ):
            return s
    return None


def _lost(
    leader: str,
    last_act_ns: int,
    last_act: str,
    next_start: int | None,
    next_what: str,
    silences: list[dict[str, Any]],
    end_ns: int | None,
) -> tuple[int, str, str]:
    """(when, how it is known, kind) of a leader's loss of its term."""
    silent = _silence_after(silences, leader, last_act_ns, next_start)
    if silent is not None:
        how = (
            f"{leader}'s last message, then silent "
            + (
                f"{silent['seconds']:g} s"
                if silent["seconds"] is not None
                else "to the input's end"
            )
            + f" (killed or cut off); {last_act} at {_clock(last_act_ns)}"
        )
        return int(silent["start_ns"]), how, "silent"
    if next_start is not None:
        return next_start, next_what, "next term"
    end = max(end_ns if end_ns is not None else last_act_ns, last_act_ns)
    return (
        end,
        f"still leader at the input's end ({last_act} at {_clock(last_act_ns)})",
        "input end",
    )


def _row(
    leader: str, term: int | None, start: int, won: str, end: int, lost: str, kind: str
) -> dict[str, Any]:
    return {
        "leader": leader,
        "term": term,
        "start": start / MS,
        **exact_time("start", start),
        "won_from": won,
        "end": end / MS,
        **exact_time("end", end),
        "lost_from": lost,
        "lost_by": kind,
        "seconds": round((end - start) / 1e9, 3),
        "answers": 0,
    }


def _first_answer(
    answers: list[dict[str, Any]], leader: str, after_ns: int | None, before_ns: int
) -> int | None:
    """The leader's first answer after `after_ns` (the previous term's last
    AppendEntries) and before `before_ns`: it led by then."""
    for a in answers:
        start = _ns(a, "start_ns")
        if (
            a["leader"] == leader
            and start is not None
            and start < before_ns
            and (after_ns is None or start > after_ns)
        ):
            return start
    return None


def _term_rows(
    raft: dict[str, Any],
    silences: list[dict[str, Any]],
    answers: list[dict[str, Any]],
    raft_dbs: list[dict[str, Any]],
    end_ns: int | None,
) -> list[dict[str, Any]]:
    terms = [t for t in raft.get("terms") or [] if t.get("start_ns") is not None]
    db_first = {
        int(d["term"]): int(d["first_ns"])
        for d in raft.get("db_term_first") or []
        if d.get("first_ns") is not None
    }
    votes: dict[tuple[int, str], list[str]] = {}
    for d in raft_dbs:
        term, cand = d.get("stable", {}).get("LastVoteTerm"), d.get("last_vote_candidate")
        if term is not None and cand:
            votes.setdefault((int(term), cand), []).append(d["node"])
    starts: list[tuple[int, str]] = []
    for k, t in enumerate(terms):
        number, leader, first = int(t["term"]), t["leader"], int(t["start_ns"])
        won = f"first AppendEntries of term {number}"
        db = db_first.get(number)
        if db is not None and db < first:
            first, won = db, f"first raft.db entry of term {number} (its append time)"
        # A leader's answer is an act only the leader does: one before the
        # term's first AppendEntries (a lone node's win, heartbeats only once
        # a follower joins) dates the win closer.
        answered = _first_answer(answers, leader, int(terms[k - 1]["end_ns"]) if k else None, first)
        if answered is not None:
            first, won = (
                answered,
                (
                    f"its first answer as metadata leader, before the first "
                    f"AppendEntries of term {number}"
                ),
            )
        asked = [
            e
            for e in raft.get("elections") or []
            if e["term"] == number and e["candidate"] == leader
        ]
        if asked:
            t_ns = _ns(asked[0], "t_ns")
            won += "; its RequestVote" if t_ns is None else f"; its RequestVote at {_clock(t_ns)}"
        else:
            won += "; its election is not in the input: won at or before this"
        voters = votes.get((number, leader))
        if voters:
            won += f"; raft.db: {', '.join(sorted(voters))} voted for it"
        starts.append((first, won))
    rows = []
    for k, t in enumerate(terms):
        start, won = starts[k]
        nxt = terms[k + 1] if k + 1 < len(terms) else None
        next_start = starts[k + 1][0] if nxt is not None else None
        next_what = "" if nxt is None else f"term {nxt['term']} won by {nxt['leader']}"
        last = int(t["end_ns"])
        end, lost, kind = _lost(
            t["leader"],
            last,
            f"its last AppendEntries of term {t['term']}",
            next_start,
            next_what,
            silences,
            end_ns,
        )
        rows.append(_row(t["leader"], int(t["term"]), start, won, max(end, start), lost, kind))
    return rows


def _answer_rows(
    answers: list[dict[str, Any]], silences: list[dict[str, Any]], end_ns: int | None
) -> list[dict[str, Any]]:
    runs = [a for a in answers if a.get("start_ns") is not None]
    rows = []
    for k, a in enumerate(runs):
        start, last = int(a["start_ns"]), int(a["end_ns"])
        nxt = runs[k + 1] if k + 1 < len(runs) else None
        next_start = None if nxt is None else int(nxt["start_ns"])
        next_what = "" if nxt is None else f"{nxt['leader']}'s first answer (next leader)"
        end, lost, kind = _lost(
            a["leader"], last, "its last answer", next_start, next_what, silences, end_ns
        )
        rows.append(
            _row(
                a["leader"],
                None,
                start,
                "its first answer to a PropagatedRequest or RaftJoinRequest (no Raft "
                "term decoded: won at or before it)",
                max(end, start),
                lost,
                kind,
            )
        )
    return rows


def leader_terms(
    cluster: dict[str, Any], raft_dbs: list[dict[str, Any]], end_ns: int | None
) -> list[dict[str, Any]]:
    """One row per (leader, term), in time order.

    Each row has `start`/`end` (ms, and exact `*_ns`, `*_utc`), `won_from` and
    `lost_from` (what each is inferred from), `lost_by` ("silent", "next term",
    "input end"), and the `answers` the leader's node sent to
    PropagatedRequests and RaftJoinRequests in the span. Without decoded Raft
    terms the rows are made from the runs of metadata answers.

    Args:
        cluster: The report model's part with `raft`, `node_silences` and
            `metadata_leaders`.
        raft_dbs: The data directories' raft.db summaries (storage.raft_dbs).
        end_ns: The input's last time, integer nanoseconds, or None.

    Returns:
        The rows, as dicts, in time order.
    """
    silences = cluster.get("node_silences") or []
    answers = cluster.get("metadata_leaders") or []
    raft = cluster.get("raft") or {}
    rows = (
        _term_rows(raft, silences, answers, raft_dbs, end_ns)
        if raft.get("terms")
        else _answer_rows(answers, silences, end_ns)
    )
    for a in answers:  # each run of answers counted once: in its node's first row it overlaps
        for row in rows:
            if (
                row["leader"] == a["leader"]
                and a["start"] <= row["end"]
                and a["end"] >= row["start"]
            ):
                row["answers"] += a["answers"]
                break
    return rows


__all__ = ["leader_terms"]
