"""The report's metadata leaders: each term from the moment its leader won it
to the moment it lost it, with what each time is inferred from (issue #46,
item 5). The table used to give a leader's first and last *answer* as its
span: a leader that answered twice early and then led until it was killed
showed half a second of leadership.

- A made capture (three nodes on NATS, the Raft transport as hashicorp/raft
  writes it): node1 leads term 2, answers two PropagatedRequests early, and
  falls silent; node2 wins term 3. The times are the ones the capture was
  made with, and must be those of the chart's facts (`cluster.raft.terms`,
  `cluster.node_silences`) too.
- `report.leaders.leader_terms` on made facts: a term lost to the next
  term's winner, a leader still leading at the end, raft.db's votes and
  append times, and the answers alone (no Raft decoded).
- A real `full` run (two SIGKILLs): the killed metadata leader's term ends
  with its silence, just before the SIGKILL run.log records; the next
  leader's term starts with its first AppendEntries, in the second its own
  log says "entering leader state".
"""

from __future__ import annotations

import datetime
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import capwriter as cw
from support.wire import request, response

import lbparse
from lbparse.report import build_model, render_html
from lbparse.report.inputs import ReadOptions
from lbparse.report.leaders import leader_terms

NS = "liftbridge-default"
T0 = 1_790_000_000.0
SEC = 10**9
SERVER = ("127.0.0.1", 4222)
NODE = {"node1": ("127.0.0.1", 42001), "node2": ("127.0.0.1", 42002), "node3": ("127.0.0.1", 42003)}
INBOX = {"node1": "_INBOX.a1", "node2": "_INBOX.b2", "node3": "_INBOX.c3"}

# The made story, in seconds after T0.
VOTE_2 = 0.30  # node1 asks for votes in term 2
FIRST_AE_2 = 0.50  # node1's first AppendEntries of term 2 (then every 0.5 s)
LAST_AE_2 = 10.00  # its last
ANSWERS_1 = (1.00, 1.50)  # node1 answers two PropagatedRequests
LAST_1 = 10.20  # node1's last message: then silent to the end (killed)
VOTE_3 = 11.95  # node2 asks for votes in term 3
FIRST_AE_3 = 12.00  # node2's first AppendEntries of term 3 (then every 0.5 s)
LAST_AE_3 = 20.00
ANSWER_2 = 15.00
END = 20.002  # node3's reply to it: the capture's last message


def _m(name: str, **fields: Any) -> bytes:
    return bytes(lbparse.encode(lbparse.message_class(name)(**fields)))


def _connect(node: str) -> bytes:
    return (
        b'CONNECT {"verbose":false,"pedantic":false,"name":"LIFT.'
        + NS.encode()
        + b"."
        + node.encode()
        + b'.raft","lang":"go","version":"1.11.0","protocol":1}\r\n'
    )


def _append(term: int, leader: str, index: int) -> bytes:
    return request(
        0,
        Term=term,
        Leader=leader.encode(),
        PrevLogEntry=index,
        PrevLogTerm=term,
        LeaderCommitIndex=index,
        Entries=[],
    )


def _vote(term: int, candidate: str) -> bytes:
    return request(
        1,
        Term=term,
        Candidate=candidate.encode(),
        LastLogIndex=10,
        LastLogTerm=1,
        LeadershipTransfer=False,
    )


def made_capture(path: Path) -> None:
    conns = {n: cw.Conn(ep, SERVER) for n, ep in NODE.items()}
    events: list[tuple[float, str, bytes]] = []

    def to(peer: str) -> str:  # a Raft stream to `peer` (nats-on-a-log's subject)
        return f"{NS}.raft.metadata.{peer}.request.{INBOX[peer]}"

    def raft(t: float, sender: str, peer: str, data: bytes) -> None:
        events.append((t, sender, cw.pub(to(peer), data)))

    for n in NODE:
        events.append((0.01, n, _connect(n)))
    for peer in ("node2", "node3"):
        raft(VOTE_2, "node1", peer, _vote(2, "node1"))
        raft(VOTE_2 + 0.01, peer, "node1", response(Term=2, Peers=None, Granted=True))
    t, k = FIRST_AE_2, 0
    while t <= LAST_AE_2 + 1e-9:
        for peer in ("node2", "node3"):
            raft(t, "node1", peer, _append(2, "node1", 10 + k))
            raft(
                t + 0.002,
                peer,
                "node1",
                response(Term=2, LastLog=10 + k, Success=True, NoRetryBackoff=False),
            )
        t, k = round(t + 0.5, 3), k + 1
    for a in ANSWERS_1:
        events.append((a, "node1", cw.pub(f"_INBOX.p.{a}", _m("protocol.PropagatedResponse"))))
    events.append(
        (LAST_1, "node1", cw.pub("_INBOX.info.1", _m("protocol.ServerInfoResponse", id="node1")))
    )
    raft(VOTE_3, "node2", "node3", _vote(3, "node2"))
    raft(VOTE_3 + 0.01, "node3", "node2", response(Term=3, Peers=None, Granted=True))
    t, k = FIRST_AE_3, 0
    while t <= LAST_AE_3 + 1e-9:
        raft(t, "node2", "node3", _append(3, "node2", 40 + k))
        raft(
            t + 0.002,
            "node3",
            "node2",
            response(Term=3, LastLog=40 + k, Success=True, NoRetryBackoff=False),
        )
        t, k = round(t + 0.5, 3), k + 1
    events.append((ANSWER_2, "node2", cw.pub("_INBOX.p.2", _m("protocol.PropagatedResponse"))))
    frames = [(T0, cw.link(cw.ETHERNET, p)) for c in conns.values() for p in c.handshake()]
    for t, n, data in sorted(events, key=lambda e: e[0]):
        frames.extend((T0 + t, cw.link(cw.ETHERNET, p)) for p in conns[n].send("c", data))
    cw.write_pcap(str(path), frames)


def at(seconds: float) -> int:
    """The made capture's time `seconds` after T0, in ns (as the capture holds it: µs)."""
    return round((T0 + seconds) * 1e6) * 1000


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("leaders") / "made.pcap"
    made_capture(path)
    return path


def page_text(page: str) -> str:
    """The page's visible text, cells separated by |, without the embedded model."""
    body = page.split("</head>", 1)[1].split("<script type='application/json'", 1)[0]
    return html.unescape(re.sub(r"(?:<[^>]+>)+", "|", body))


def when(ns: int | str) -> str:
    """An exact time as the page writes it."""
    return (
        datetime.datetime.fromtimestamp(int(ns) // SEC, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        + f".{int(ns) % SEC:09d} UTC"
    )


def clock(ns: int) -> str:
    return datetime.datetime.fromtimestamp(ns / SEC, datetime.UTC).strftime("%H:%M:%S.%f")[:12]


@pytest.mark.parametrize("fast", [True, False], ids=["columns", "records"])
def test_a_silent_leader_leads_until_its_silence_and_the_next_from_its_win(
    capture: Path, fast: bool
) -> None:
    cl = build_model([str(capture)], ReadOptions(fast=fast))["cluster"]
    # the chart's facts are the made ones
    terms = {t["term"]: t for t in cl["raft"]["terms"]}
    assert {k: (t["leader"], int(t["start_ns"]), int(t["end_ns"])) for k, t in terms.items()} == {
        2: ("node1", at(FIRST_AE_2), at(LAST_AE_2)),
        3: ("node2", at(FIRST_AE_3), at(LAST_AE_3)),
    }
    (silence,) = cl["node_silences"]
    assert (silence["node"], int(silence["start_ns"]), silence["end"]) == (
        "node1",
        at(LAST_1),
        None,
    )
    # by its answers node1 led 1.0 -> 1.5 s: the old table's span
    first_answers = cl["metadata_leaders"][0]
    assert (
        first_answers["leader"],
        int(first_answers["start_ns"]),
        int(first_answers["end_ns"]),
    ) == ("node1", at(ANSWERS_1[0]), at(ANSWERS_1[-1]))

    one, two = cl["leader_terms"]
    assert (one["leader"], one["term"]) == ("node1", 2)
    assert int(one["start_ns"]) == at(FIRST_AE_2)
    assert int(one["end_ns"]) == int(silence["start_ns"]) == at(LAST_1)
    assert (
        one["won_from"] == f"first AppendEntries of term 2; its RequestVote at {clock(at(VOTE_2))}"
    )
    assert one["lost_from"] == (
        f"node1's last message, then silent to the input's end (killed "
        f"or cut off); its last AppendEntries of term 2 at "
        f"{clock(at(LAST_AE_2))}"
    )
    assert (one["lost_by"], one["answers"]) == ("silent", 2)
    assert (two["leader"], two["term"], two["lost_by"], two["answers"]) == (
        "node2",
        3,
        "input end",
        1,
    )
    assert int(two["start_ns"]) == at(FIRST_AE_3)
    assert (
        two["won_from"] == f"first AppendEntries of term 3; its RequestVote at {clock(at(VOTE_3))}"
    )
    assert int(two["end_ns"]) == at(END)
    assert two["lost_from"].startswith("still leader at the input's end")


def test_the_page_gives_each_term_its_span_and_what_it_is_inferred_from(capture: Path) -> None:
    model = build_model([str(capture)])
    page = page_text(render_html(model))
    assert "|Metadata leaders (each term, from its win to its loss)|" in page
    for x in model["cluster"]["leader_terms"]:
        row = (
            f"|{x['leader']}|{x['term']}|{when(x['start_ns'])}|{x['won_from']}|"
            f"{when(x['end_ns'])}|{x['lost_from']}|{x['seconds']}|{x['answers']}|"
        )
        assert row in page, row
    assert f"|node1|2|{when(at(FIRST_AE_2))}|" in page
    assert f"|{when(at(LAST_1))}|node1's last message, then silent" in page
    # the answers stay, named as what they are
    assert f"|{when(at(ANSWERS_1[0]))}|{when(at(ANSWERS_1[-1]))}|" in page
    assert "first and last answer, not the term" in page


def test_without_raft_the_answers_stand_for_the_terms(capture: Path) -> None:
    cl = build_model([str(capture)], raft=False)["cluster"]
    one, two = cl["leader_terms"]
    assert (one["leader"], one["term"], int(one["start_ns"]), int(one["end_ns"])) == (
        "node1",
        None,
        at(ANSWERS_1[0]),
        at(LAST_1),
    )
    assert one["won_from"].startswith("its first answer to a PropagatedRequest")
    assert "won at or before it" in one["won_from"]
    assert one["lost_by"] == "silent"
    assert (two["leader"], int(two["start_ns"]), int(two["end_ns"]), two["lost_by"]) == (
        "node2",
        at(ANSWER_2),
        at(END),
        "input end",
    )


# -- leader_terms on made facts ---------------------------------------------------


def _term(term: int, leader: str, first: int, last: int) -> dict[str, Any]:
    return {
        "term": term,
        "leader": leader,
        "start": first / 1e6,
        "end": last / 1e6,
        "start_ns": first,
        "end_ns": last,
    }


def _answers(leader: str, first: int, last: int, n: int) -> dict[str, Any]:
    return {
        "leader": leader,
        "start": first / 1e6,
        "end": last / 1e6,
        "start_ns": first,
        "end_ns": last,
        "answers": n,
    }


def test_a_term_lost_to_the_next_winner_ends_at_its_win() -> None:
    cluster = {
        "raft": {
            "terms": [_term(4, "n1", 10 * SEC, 29 * SEC), _term(6, "n2", 31 * SEC, 50 * SEC)],
            "elections": [{"term": 6, "candidate": "n2", "t_ns": 30 * SEC}],
        },
        "node_silences": [
            {"node": "n1", "start_ns": 40 * SEC, "end_ns": 45 * SEC, "seconds": 5.0}
        ],  # after n2 won: not n1's loss
        "metadata_leaders": [
            _answers("n1", 11 * SEC, 12 * SEC, 3),
            _answers("n2", 32 * SEC, 33 * SEC, 1),
        ],
    }
    one, two = leader_terms(cluster, [], 60 * SEC)
    assert (int(one["start_ns"]), int(one["end_ns"]), one["lost_by"]) == (
        10 * SEC,
        31 * SEC,
        "next term",
    )
    assert one["lost_from"] == "term 6 won by n2"
    assert one["won_from"] == (
        "first AppendEntries of term 4; its election is not in the input: won at or before this"
    )
    assert (int(two["start_ns"]), int(two["end_ns"]), two["lost_by"]) == (
        31 * SEC,
        60 * SEC,
        "input end",
    )
    assert (one["answers"], two["answers"]) == (3, 1)


def test_an_answer_or_a_raft_db_entry_before_the_first_append_entries_dates_the_win() -> None:
    cluster = {
        "raft": {
            "terms": [_term(2, "n1", 5 * SEC, 9 * SEC), _term(3, "n2", 20 * SEC, 30 * SEC)],
            "db_term_first": [{"term": 3, "first_ns": 19 * SEC}],
        },
        "metadata_leaders": [_answers("n1", 4 * SEC, 6 * SEC, 2)],
    }
    dbs = [
        {"node": "n3", "stable": {"LastVoteTerm": 3}, "last_vote_candidate": "n2"},
        {"node": "n2", "stable": {"LastVoteTerm": 3}, "last_vote_candidate": "n2"},
        {"node": "n1", "stable": {"LastVoteTerm": 2}, "last_vote_candidate": "n1"},
    ]
    one, two = leader_terms(cluster, dbs, 30 * SEC)
    assert int(one["start_ns"]) == 4 * SEC
    assert one["won_from"].startswith(
        "its first answer as metadata leader, before the first AppendEntries of term 2"
    )
    assert one["won_from"].endswith("; raft.db: n1 voted for it")
    assert int(two["start_ns"]) == 19 * SEC and int(one["end_ns"]) == 19 * SEC
    assert two["won_from"].startswith("first raft.db entry of term 3 (its append time)")
    assert two["won_from"].endswith("; raft.db: n2, n3 voted for it")


def test_no_leader_no_row() -> None:
    assert leader_terms({"raft": {"decoded": False}, "metadata_leaders": []}, [], None) == []


# -- a real cluster's `full` run ----------------------------------------------------

KILL = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) == SIGKILL (node\d) \(([^)]*)\)", re.M)
ELECTED = re.compile(
    r'^time="(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)" level=info msg=" raft: '
    r"entering leader state",
    re.M,
)


@pytest.fixture(scope="module")
def full(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    from support.cluster import full_run
    from test_report import cli
    from test_report_cluster import _ms

    capture, log, _ = full_run(request)
    out = tmp_path_factory.mktemp("leaders-full")
    made = {}
    for name, extra in (("raft", []), ("no_raft", ["--no-raft"])):
        cli(
            "report",
            str(capture),
            *extra,
            "-o",
            str(out / f"{name}.html"),
            "--json",
            str(out / f"{name}.json"),
        )
        made[name] = (
            json.loads((out / f"{name}.json").read_text()),
            page_text((out / f"{name}.html").read_text()),
        )
    first = made["raft"][0]["report"]["first"]
    kills = [(_ms(c, first), node, why) for c, node, why in KILL.findall(log.read_text())]
    elected = []  # (the second a node's log says it won, node)
    for node_log in sorted(log.parent.glob("node*.log")):
        for stamp in ELECTED.findall(node_log.read_text(errors="replace")):
            t = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timestamp() * 1000
            elected.append((t, node_log.stem))
    return {"reports": made, "kills": kills, "elected": sorted(elected)}


@pytest.mark.slow
@pytest.mark.parametrize("which", ["raft", "no_raft"])
def test_the_killed_metadata_leader_leads_until_its_kill(full: dict[str, Any], which: str) -> None:
    model, page = full["reports"][which]
    cl = model["cluster"]
    ((kill_ms, victim, _),) = [k for k in full["kills"] if k[2] == "metadata leader"]
    rows = [r for r in cl["leader_terms"] if r["leader"] == victim and r["start"] < kill_ms]
    row = rows[-1]
    silence = [
        s for s in cl["node_silences"] if s["node"] == victim and abs(s["start"] - kill_ms) < 1000
    ][0]
    # its term ends with its silence, which the SIGKILL began (run.log's clock
    # is the capture's: the same machine)
    assert row["lost_by"] == "silent" and row["end_ns"] == silence["start_ns"]
    # run.log's stamp is taken before `kill` runs (`say` forks `date` and `tee`
    # first): on a loaded 2-core machine the shell can wait its turn while the
    # victim still sends (CI runs: 11.5 ms, 112.9 ms). The bound stays well
    # under the followers' heartbeat timeout (hashicorp/raft's default is a
    # second), which must pass before any other node even stands, so a term
    # ended by the next leader still fails.
    assert kill_ms - 1000 <= row["end"] <= kill_ms + 400, (row, kill_ms)
    after = [r for r in cl["leader_terms"] if r["start"] > row["start"]]
    assert after and row["end"] <= after[0]["start"], (row, after[:1])
    assert row["lost_from"].startswith(f"{victim}'s last message, then silent ")
    # ... long after its last answer (the old table's "to")
    answered = [
        a for a in cl["metadata_leaders"] if a["leader"] == victim and a["start"] <= kill_ms
    ]
    assert answered and row["end"] >= answered[-1]["end"]
    if which == "raft":
        term = [t for t in cl["raft"]["terms"] if t["term"] == row["term"]][0]
        assert term["leader"] == victim and term["end"] <= row["end"]
    assert f"|{when(row['end_ns'])}|{row['lost_from']}|" in page


@pytest.mark.slow
def test_the_next_leader_leads_from_its_win(full: dict[str, Any]) -> None:
    model, page = full["reports"]["raft"]
    cl = model["cluster"]
    kill_ms = [k[0] for k in full["kills"] if k[2] == "metadata leader"][0]
    after = [r for r in cl["leader_terms"] if r["start"] > kill_ms]
    assert after
    nxt = after[0]
    term = [t for t in cl["raft"]["terms"] if t["term"] == nxt["term"]][0]
    # when it won: its term's first AppendEntries (the chart's bar starts there),
    # in the second its own log says it entered the leader state
    assert nxt["start_ns"] == term["start_ns"]
    assert nxt["won_from"].startswith(
        f"first AppendEntries of term {nxt['term']}; its RequestVote at "
    )
    won = [t for t, node in full["elected"] if node == nxt["leader"] and t <= nxt["start"]]
    assert won and nxt["start"] - won[-1] < 1000, (nxt, full["elected"])
    # the killed leader's row ends before it: the cluster had no leader between
    before = [r for r in cl["leader_terms"] if r["start"] < kill_ms][-1]
    assert before["end"] < nxt["start"]
    assert f"|{nxt['leader']}|{nxt['term']}|{when(nxt['start_ns'])}|{nxt['won_from']}|" in page
