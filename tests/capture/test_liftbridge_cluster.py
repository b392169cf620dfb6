"""lbparse against a real Liftbridge v1.9.0 cluster: what it sends, message by message.

A real 3-node cluster (`liftbridge_short`, once per test run) is driven by
the real go-liftbridge client while its NATS traffic is captured; the
shared `samples/short.pcapng` is one such run kept (so the suite says
something where no cluster can start). On either capture:

- `lbparse capture` gives every NATS message once per direction, in
  order: the same messages an independent framer finds in tshark's TCP
  segments (support/nats.py);
- every envelope decodes as Liftbridge's own decoders decode it
  (`bin/lbtruth`): MsgType, payload JSON, and a ReplicationResponse's
  commit-log entries; every payload they refuse, lbparse refuses.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.cli import LBPARSE
from support.cluster import ClusterRun, lbtruth
from support.nats import messages as oracle_messages
from support.shared import LIFTBRIDGE

from lbparse.codec import jsonform

SAMPLE = LIFTBRIDGE / "samples" / "short.pcapng"


def lbparse_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run([*LBPARSE, *args], capture_output=True, timeout=600)
    if check and res.returncode != 0:
        raise AssertionError(
            f"lbparse {' '.join(args)} exited {res.returncode}:\n"
            f"{res.stderr.decode(errors='replace')[-3000:]}"
        )
    return res


def capture_records(path: Path, grpc_notices: bool = False) -> list[dict[str, Any]]:
    """`lbparse capture`'s records; `grpc_notices`: a capture holding the
    clients' gRPC calls, whose RST_STREAMs and calls cut by their connection
    are notices (status 1), and nothing else is."""
    res = lbparse_cli("capture", str(path), check=not grpc_notices)
    if grpc_notices:
        said = res.stderr.decode(errors="replace").splitlines()
        assert res.returncode in (0, 1) and all(
            ": grpc: " in x or "before the call does" in x for x in said
        ), said[:5]
    return [json.loads(line) for line in res.stdout.decode().splitlines()]


# Both slow: the records are `lbparse capture`'s, a process reading the
# whole capture (1.5 to 2.7 s in test-fast with Liftbridge's decoders).
@pytest.fixture(
    scope="module",
    params=[
        pytest.param("sample", marks=pytest.mark.slow),
        pytest.param("live", marks=pytest.mark.slow),
    ],
)
def capture(request: pytest.FixtureRequest) -> Path:
    """The shared sample run's capture, and a capture of a run made now."""
    if request.param == "sample":
        if not SAMPLE.exists():
            pytest.skip(f"shared material missing: {SAMPLE}")
        return SAMPLE
    run: ClusterRun = request.getfixturevalue("liftbridge_short")
    return run.capture


@pytest.fixture(scope="module")
def records(capture: Path) -> list[dict[str, Any]]:
    return capture_records(capture)


@pytest.fixture(scope="module")
def truths(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return lbtruth([base64.b64decode(r["payload"]) for r in records])


def payload(r: dict[str, Any]) -> bytes:
    return base64.b64decode(r["payload"])


@pytest.mark.slow
def test_every_nats_message_once_per_direction(
    capture: Path, records: list[dict[str, Any]]
) -> None:
    """The messages of each direction of each connection, in order, are those an
    independent framer finds in tshark's TCP segments: none lost, none twice."""
    want: dict[tuple[str, str], list[tuple]] = {}
    for m in oracle_messages(capture):
        want.setdefault((m.src, m.dst), []).append((m.verb, m.subject, m.data))
    got: dict[tuple[str, str], list[tuple]] = {}
    for r in records:
        # The oracle keeps a message's bytes whole; lbparse splits off the
        # header block: compare the payload as the end of those bytes.
        got.setdefault((r["src"], r["dst"]), []).append((r["verb"], r["subject"], payload(r)))
    assert set(got) == set(want)
    for key, msgs in want.items():
        mine = got[key]
        assert len(mine) == len(msgs), key
        for (verb, subject, data), (v, s, p) in zip(msgs, mine):
            assert (v, s) == (verb, subject) and data.endswith(p)
    # Both directions: what one client publishes, the server delivers on.
    verbs = Counter(r["verb"] for r in records)
    assert verbs["PUB"] > 1000 and verbs["MSG"] > 1000


def _entries(truth: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "crc_ok"} for m in truth["messages"]]


# lbparse's JSON writes 64-bit integers as decimal strings (lbparse.codec.jsonform),
# lbtruth (Go's encoding/json) as numbers: compared as the integers they are.
_INT64_ENTRY = ("offset", "timestamp", "leader_epoch")


def _read_int64(d: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {k: jsonform.int64(v) if k in names else v for k, v in d.items()}


def test_every_envelope_decodes_as_liftbridge_decodes_it(
    records: list[dict[str, Any]], truths: list[dict[str, Any]]
) -> None:
    kinds: Counter[str] = Counter()
    for r, truth in zip(records, truths, strict=True):
        env, err = r.get("envelope"), r.get("error")
        where = f"{r['verb']} {r['subject']} {payload(r)[:40].hex()}"
        if not truth.get("envelope"):
            # Not an envelope for Liftbridge: never a v0 envelope for lbparse.
            assert err is not None or env["layout"] != "v0", where
            kinds["not an envelope"] += 1
            continue
        if "error" in truth:
            assert err is not None or env["layout"] != "v0", where
            kinds["refused"] += 1
            continue
        assert env is not None, (where, err)
        assert (env["layout"], env["msg_type"], env["msg_type_name"]) == (
            "v0",
            truth["msg_type"],
            truth["msg_type_name"],
        ), where
        if truth["msg_type_name"] == "ReplicationResponse":
            pj = env["payload_json"]
            assert (jsonform.int64(pj["leader_epoch"]), jsonform.int64(pj["high_watermark"])) == (
                truth["leader_epoch"],
                truth["high_watermark"],
            ), where
            assert [_read_int64(m, _INT64_ENTRY) for m in env["commitlog_messages"]] == _entries(
                truth
            ), where
            assert all(m["crc_ok"] for m in truth["messages"])
        else:
            assert env["payload_json"] == truth["payload_json"], where
        kinds[truth["msg_type_name"]] += 1
        # auto with the capture's context (issue #12): no envelope of today's
        # Liftbridge stays ambiguous; a Publish (alone: v0 or legacy) says why.
        assert not env.get("ambiguous"), where
        if truth["msg_type_name"] == "Publish":
            assert env["confidence"] in (0.8, 0.9), where
            last = env["reasons"][-1]
            assert (
                last.startswith("context: ")
                and "carried MsgTypes only it has" in last
                and last.endswith(": v0")
            ), where
    # A real cluster's traffic: every kind it sends was seen and compared.
    assert kinds["ReplicationResponse"] > 500 and kinds["Publish"] > 50
    assert kinds["Ack"] > 50 and kinds["not an envelope"] > 1000
    assert len([k for k in kinds if k not in ("not an envelope", "refused")]) >= 12
    # (a full run has more of every kind: held by the same function)


@pytest.mark.slow
def test_the_sample_capture_holds_its_recorded_facts() -> None:
    """samples/short.pcapng.json was counted by a parser independent of lbparse."""
    if not SAMPLE.exists():
        pytest.skip(f"shared material missing: {SAMPLE}")
    facts = json.loads(SAMPLE.with_name("short.pcapng.json").read_text())
    records = capture_records(SAMPLE)
    verbs = Counter(r["verb"] for r in records)
    assert {v: verbs[v] for v in ("PUB", "MSG", "HMSG")} == {
        v: facts["ops"][v] for v in ("PUB", "MSG", "HMSG")
    }
    rr = [
        r
        for r in records
        if r["verb"] == "PUB"
        and (r.get("envelope") or {}).get("msg_type_name") == "ReplicationResponse"
    ]
    header_only = [r for r in rr if not r["envelope"]["commitlog_messages"]]
    assert (len(rr), len(header_only)) == (1049, 897)  # short.pcapng.facts.txt
    carried = sum(len(r["envelope"]["commitlog_messages"]) for r in rr)
    assert carried == 182


# -- lbparse tap on the real cluster ---------------------------------------------


@pytest.mark.slow
def test_tap_on_the_real_cluster_sees_what_the_capture_saw(liftbridge_short: ClusterRun) -> None:
    """`lbparse tap nats://… '>'` ran beside the cluster from its NATS server's
    start: it printed every message the server delivered to it, as the capture
    shows them, decoded alike (envelopes, Raft traffic), and when the script
    stopped the server it said so and gave up (exit 1: messages may be missing)."""
    run = liftbridge_short
    assert run.tap_out is not None and run.tap_err is not None, "the tap did not start"
    tapped = [json.loads(x) for x in run.tap_out.read_text().splitlines()]
    err = run.tap_err.read_text()
    assert run.tap_rc == 1, err
    assert "lost at" in err and "did not come back within 5 s: giving up" in err
    local = {r["dst"] for r in tapped}
    assert len(local) == 1  # one connection, never lost until the end
    seen = [
        r
        for r in capture_records(run.capture)
        if r["dst"] in local and r["verb"] in ("MSG", "HMSG")
    ]
    assert len(tapped) == len(seen) > 2000
    for t, c in zip(tapped, seen):
        assert (t["subject"], t["payload"], t["headers"], t["reply"]) == (
            c["subject"],
            c["payload"],
            c["headers"],
            c["reply"],
        )
        te, ce = t.get("envelope") or {}, c.get("envelope") or {}
        assert (
            te.get("layout"),
            te.get("msg_type_name"),
            te.get("payload_json"),
            t.get("error"),
        ) == (ce.get("layout"), ce.get("msg_type_name"), ce.get("payload_json"), c.get("error"))
        assert (t.get("liftbridge") or {}).get("rpcs") == (c.get("liftbridge") or {}).get("rpcs")
    kinds = Counter((t.get("liftbridge") or {}).get("kind") for t in tapped)
    assert kinds["raft_request"] > 100 and kinds["raft_response"] > 100
    # Every publish made after the tap's first message reached it.
    first = jsonform.int64(tapped[0]["ts"])  # nanoseconds (a decimal string in JSON)
    published = Counter(
        (r["subject"], r["payload"])
        for r in capture_records(run.capture)
        if r["verb"] in ("PUB", "HPUB")
        and jsonform.int64(r["ts"]) > first + 500_000_000
        and r["src"] not in local
    )
    got = Counter((t["subject"], t["payload"]) for t in tapped)
    assert published and not published - got


# -- the full run: two failovers -------------------------------------------------


@pytest.mark.slow
def test_the_failovers_of_a_full_run_show_in_the_decoded_raft_traffic(
    liftbridge_full: ClusterRun,
) -> None:
    """Two failovers (the metadata leader, then a partition leader, SIGKILLed and
    restarted): elections as RequestVote RPCs, in more than one term, and the
    metadata log's ChangeLeader, ShrinkISR and ExpandISR operations."""
    records = [
        r for r in capture_records(liftbridge_full.capture, grpc_notices=True) if "grpc" not in r
    ]  # its gRPC calls are test_grpc_capture's
    votes: set[int] = set()
    ops: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for r in records:
        lb = r.get("liftbridge")
        if not lb:
            continue
        kinds[lb["kind"]] += 1
        for rpc in lb.get("rpcs", []):
            if rpc["role"] == "request" and rpc["rpc"] == "RequestVote":
                votes.add(jsonform.int64(rpc["fields"]["Term"]))  # uint64: a string
            for e in rpc.get("entries", []):
                if "command" in e:
                    ops[e["command"]["name"]] += 1
    assert len(votes) >= 2, votes
    assert ops["ChangeLeader"] and ops["ShrinkISR"] and ops["ExpandISR"], ops
    assert kinds["raft_accept"] and kinds["raft_accept_reply"] and kinds["bootstrap_probe"]
    truths = lbtruth([payload(r) for r in records])
    test_every_envelope_decodes_as_liftbridge_decodes_it(records, truths)
