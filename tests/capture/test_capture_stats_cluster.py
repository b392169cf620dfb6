"""`lbparse capture --stats` on a real cluster's capture: a screenful, and
every count still there.

The shared short run (three Liftbridge nodes, 7,538 messages) printed 1,221
lines: one per reply inbox and Raft request subject. Folded, the subject rows
must still add up to the messages, section by section the same totals as
`--all` (which shows every subject as it is); the 503s are checked against
the bytes tshark shows and the requests lbparse's own JSON records give;
the connections against the CONNECT lines tshark shows.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter

import pytest
from support.cli import run_cli
from support.shared import LIFTBRIDGE, needs_shared

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"
pytestmark = needs_shared("liftbridge", "samples", "short.pcapng")

HEAD = re.compile(r"^messages (\d+)  packets \d+")


def _sections(text: str) -> dict[str, dict[str, int]]:
    """Section title (without its note) -> {row: count}; the rows left out
    (`... N more rows`) are one row."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if HEAD.match(x))
    out: dict[str, dict[str, int]] = {}
    title = ""
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            title = line.split(" (")[0].rstrip(":")
            out[title] = {}
        else:
            key, n = line.strip().rsplit(None, 1)
            out[title][key] = int(n)
    return out


def _stats(*args: str) -> tuple[str, dict[str, dict[str, int]], int]:
    res = run_cli("capture", str(SHORT), "-q", "--stats", *args, timeout=300)
    assert res.returncode == 0, res.stderr
    text = res.stderr.decode()
    head = next(m for m in map(HEAD.match, text.splitlines()) if m)
    return text, _sections(text), int(head.group(1))


def _tshark_payloads() -> list[bytes]:
    """Every TCP segment's payload, as tshark reads the file (no lbparse)."""
    out = subprocess.run(
        ["tshark", "-r", str(SHORT), "-Y", "tcp.len > 0", "-T", "fields", "-e", "tcp.payload"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    return [bytes.fromhex(x.replace(":", "")) for x in out.split()]


@pytest.fixture(scope="module")
def folded() -> tuple[str, dict[str, dict[str, int]], int]:
    return _stats()


@pytest.fixture(scope="module")
def unfolded() -> tuple[str, dict[str, dict[str, int]], int]:
    return _stats("--all")


@pytest.mark.slow
def test_a_screenful_with_every_count(folded: tuple, unfolded: tuple) -> None:
    text, sections, messages = folded
    all_text, all_sections, all_messages = unfolded
    assert messages == all_messages == 7538
    assert len(text.splitlines()) < 100 < 1000 < len(all_text.splitlines())
    subjects = sections["per subject"]
    assert len(subjects) <= 21 and any(k.startswith("... ") for k in subjects)
    assert sum(subjects.values()) == sum(all_sections["per subject"].values()) == messages
    assert not any(k.startswith("... ") for k in all_sections["per subject"])
    # Inboxes and per-node Raft RPC subjects folded, each row saying for how many
    assert re.fullmatch(r"_INBOX\.>  \(\d+ subjects\)", max(subjects, key=subjects.get))
    inboxes = sum(n for k, n in all_sections["per subject"].items() if k.startswith("_INBOX."))
    assert subjects[next(k for k in subjects if k.startswith("_INBOX.>"))] == inboxes
    raft1 = "liftbridge-default.raft.metadata.node1.request._INBOX.>"
    assert sum(n for k, n in subjects.items() if k.startswith(raft1)) == sum(
        n
        for k, n in all_sections["per subject"].items()
        if k.startswith("liftbridge-default.raft.metadata.node1.request._INBOX.")
    )
    orders = [k for k in subjects if k.startswith("liftbridge-default.orders.*.replicate")]
    assert orders and subjects[orders[0]] == sum(
        n
        for k, n in all_sections["per subject"].items()
        if re.fullmatch(r"liftbridge-default\.orders\.\d+\.replicate", k)
    )
    # Every other section: the same totals folded or not
    for title, rows in all_sections.items():
        assert sum(sections[title].values()) == sum(rows.values()), title
    assert "None" not in text and "(none)" in sections["per MsgType"]


@pytest.mark.slow
def test_top_n(folded: tuple) -> None:
    text, sections, _ = _stats("--top", "3")
    for title, rows in sections.items():
        assert len(rows) <= 4, title
        assert sum(rows.values()) == sum(folded[1][title].values()), title
    assert "... 31 more rows (--all shows every row)" in text  # per subject: 34 rows
    res = run_cli("capture", str(SHORT), "-q", "--stats", "--top", "0")
    assert res.returncode == 2 and b"--top" in res.stderr


@pytest.mark.slow
def test_503s_per_request_subject(folded: tuple) -> None:
    """The 503s: as many as the capture's bytes hold `NATS/1.0 503` lines, each
    counted under the subject pattern of the request whose inbox it came to."""
    on_wire = sum(p.count(b"NATS/1.0 503\r\n") for p in _tshark_payloads())
    statuses = folded[1]["NATS status messages"]
    assert on_wire == sum(statuses.values()) == 28
    # The requests, from lbparse's per-message JSON: reply inbox -> subject
    res = run_cli("capture", str(SHORT), timeout=300)
    recs = [json.loads(x) for x in res.stdout.splitlines()]
    asked = {r["reply"]: r["subject"] for r in recs if r["verb"] in ("PUB", "HPUB") and r["reply"]}
    targets = Counter(
        re.sub(r"\.\d+\.(replicate|offset)$", r".*.\1", asked[r["subject"]])
        for r in recs
        if r["headers"] and r["headers"][0] == ["Status", "503"]
    )
    assert statuses == {f"503 no responders to {k}": n for k, n in targets.items()}


@pytest.mark.slow
def test_connections_by_connect_name(folded: tuple) -> None:
    names = [
        json.loads(p.split(b"CONNECT ", 1)[1].split(b"\r\n", 1)[0]).get("name")
        for p in _tshark_payloads()
        if p.startswith(b"CONNECT ")
    ]
    assert len(names) == 16 and all(names)
    rows = folded[1]["connections by CONNECT name"]
    assert sorted(k.split()[0] for k in rows) == sorted(names)
    assert sum(rows.values()) == folded[2]  # every message has its client's connection
