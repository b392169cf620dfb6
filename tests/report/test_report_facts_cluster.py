"""On a real `full` run (two failovers), the report states facts and labels
what it infers (issue #25):

- every Liftbridge connection is named by its CONNECT line (read here by
  tshark, not by lbparse), with and without the Raft transport decoded;
- the metadata leaders agree with the nodes' own logs ("Server became
  metadata leader") and with the Raft terms;
- from data directories alone, leader changes are dated by the first write
  of their epoch and say so (page, JSON, terminal), after the wire's time;
  raft.db's entries are named where "no metadata operation" stood;
- the page and the JSON agree, name by name and row by row.

The run is the session's `liftbridge_full` fixture (LBPARSE_FULL_RUN=DIR reads
one made earlier), as test_report_cluster.py reads it.
"""

from __future__ import annotations

import datetime
import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.cluster import full_run
from support.testrun import once_a_run
from test_report import cli
from test_report_cluster import check_status

pytestmark = pytest.mark.slow

BECAME = re.compile(r'^time="([\d-]+ [\d:]+)" level=info msg="Server became metadata leader', re.M)


@pytest.fixture(scope="module")
def run(request: pytest.FixtureRequest) -> tuple[Path, Path, Path]:
    return full_run(request)


def report(tmp: Path, *args: str) -> tuple[dict[str, Any], str, str]:
    """(the JSON, the page's visible text, the terminal's lines) of `lbparse report ARGS`."""
    page_path, json_path = tmp / "r.html", tmp / "r.json"
    res = cli("report", *args, "-o", str(page_path), "--json", str(json_path))
    model = json.loads(json_path.read_text())
    check_status(res, model)
    page = page_path.read_text()
    body = page.split("</head>", 1)[1].split("<script type='application/json'", 1)[0]
    text = html.unescape(re.sub(r"(?:<[^>]+>)+", "|", body))
    return model, text, res.stderr.decode()


@pytest.fixture(scope="module")
def reports(
    run: tuple[Path, Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[dict[str, Any], str, str]]:
    capture, _, data = run

    def make(out: Path) -> dict[str, tuple[dict[str, Any], str, str]]:
        made = {}
        for name, args in {
            "capture": [str(capture)],
            "no_raft": [str(capture), "--no-raft"],
            "data": [str(data)],
            "both": [str(capture), str(data)],
        }.items():
            (out / name).mkdir()
            made[name] = report(out / name, *args)
        return made

    # Once a run (four reports, ~7 s), whichever worker asks first: the
    # module's tests are spread over both.
    return once_a_run(tmp_path_factory, "report-facts", make)


def connect_names(capture: Path) -> dict[str, str]:
    """endpoint -> CONNECT name, as tshark reads the capture's CONNECT lines."""
    res = subprocess.run(
        [
            "tshark",
            "-r",
            str(capture),
            "-Y",
            'frame contains "CONNECT {"',
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-e",
            "tcp.srcport",
            "-e",
            "tcp.payload",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    out = {}
    for line in res.stdout.splitlines():
        host, port, payload = line.split("\t")
        text = bytes.fromhex(payload.replace(":", "")).decode(errors="replace")
        found = re.search(r"CONNECT (\{.*?\})\r\n", text)
        if found:
            name = json.loads(found.group(1)).get("name")
            if name:
                out[f"{host}:{port}"] = name
    return out


@pytest.mark.parametrize("which", ["capture", "no_raft"])
def test_every_liftbridge_connection_named_by_its_connect_name(
    run: tuple[Path, Path, Path], reports: dict[str, Any], which: str
) -> None:
    names = connect_names(run[0])
    lift = {e: n for e, n in names.items() if n.startswith("LIFT.")}
    assert len(lift) == 25  # 3 nodes x 5 connections, and 2 restarted nodes x 5
    cl = reports[which][0]["cluster"]
    assert cl["connections"] == names
    for endpoint, name in lift.items():
        assert cl["nodes"][endpoint] == name.split(".")[2], endpoint
        assert cl["node_sources"][endpoint] == "CONNECT name"
    # no node of this run is guessed: every named endpoint has its CONNECT line;
    # another client (the fixture's tap on '>') is delivered node subjects, and is no node
    assert set(cl["nodes"]) == set(lift)
    assert all(not c["connect_name"].startswith("LIFT.") for c in cl["node_conflicts"])


def log_leaders(logs: Path) -> list[tuple[float, str]]:
    """(ms since the epoch, node) of each "Server became metadata leader" in the nodes' logs
    (local time, to the second)."""
    out = []
    for log in sorted(logs.glob("node*.log")):
        for stamp in BECAME.findall(log.read_text(errors="replace")):
            t = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timestamp() * 1000
            out.append((t, log.stem))
    return sorted(out)


@pytest.mark.parametrize("which", ["capture", "no_raft"])
def test_metadata_leaders_agree_with_the_nodes_logs(
    run: tuple[Path, Path, Path], reports: dict[str, Any], which: str
) -> None:
    became = log_leaders(run[1].parent)
    assert len(became) >= 2, became  # the first leader, and the one after its kill
    leaders = reports[which][0]["cluster"]["metadata_leaders"]
    assert leaders
    for seg in leaders:
        # the log's second: the election happened within it; judge past it
        t = seg["end"]
        if any(abs(t - b) < 1000 for b, _ in became):
            continue
        by_log = [node for b, node in became if b <= t]
        assert by_log and seg["leader"] == by_log[-1], (seg, became)
        assert seg["leader_source"] == "CONNECT name"
        if which == "capture":
            assert seg["agrees_with_raft"] is True, seg


def test_data_directories_alone_say_their_times_are_inferred(reports: dict[str, Any]) -> None:
    model, page, terminal = reports["data"]
    changes = [c for c in model["partitions"]["leader_changes"] if c["leader_changed"]]
    assert changes
    for c in changes:
        label = f"inferred from data directories: first write in epoch {c['to_epoch']}"
        assert c["inferred"] == label and c["time_source"] == "segments"
        assert label in page
    assert (
        f"({len(changes)} dated by the first write of their epoch in data directories: "
        "inferred)" in terminal
    )
    # the same changes, seen on the wire, happened before their first write
    wire = {
        (c["partition_key"], c["to_epoch"]): c
        for c in reports["both"][0]["partitions"]["leader_changes"]
    }
    for c in changes:
        seen = wire.get((c["partition_key"], c["to_epoch"]))
        if seen is not None:
            assert seen["inferred"] is None and seen["time_source"] != "segments"
            assert int(seen["t_ns"]) <= int(c["t_ns"])


def test_raft_db_entries_are_not_called_no_operation(reports: dict[str, Any]) -> None:
    model, page, _ = reports["data"]
    untimed = model["cluster"]["raft"]["log_ops_untimed"]
    assert untimed and not model["cluster"]["raft"]["log_ops"]
    assert "No metadata operation in this input" not in page
    assert "raft.db keeps each node's current term and vote, not who led" in page
    assert f"raft.db holds {sum(untimed.values()):,} log entries without an append time" in page
    for d in model["storage"]["raft_dbs"]:
        assert f"{d['node']}: {d['entries']} log entries" in page


@pytest.mark.parametrize("which", ["capture", "no_raft", "data", "both"])
def test_page_and_json_agree(reports: dict[str, Any], which: str) -> None:
    model, page, _ = reports[which]
    cl = model["cluster"]
    for endpoint in sorted(set(cl["nodes"]) | set(cl["connections"])):
        row = (
            f"|{endpoint}|{cl['nodes'].get(endpoint, 'unknown')}|"
            f"{cl['node_sources'].get(endpoint, 'unknown')}|"
            f"{cl['connections'].get(endpoint, '—')}|"
        )
        assert row in page, row
    for x in cl["metadata_leaders"]:
        agrees = {True: "yes", False: "NO", None: "no term decoded"}[x["agrees_with_raft"]]
        row = (
            f"|{x['leader']}|{x['leader_source']}|{x['answers']:,}|"
            f"{', '.join(x['raft_leaders']) or '—'}|{agrees}|"
        )
        assert row in page, row
    for c in model["partitions"]["leader_changes"]:
        when = c["t_utc"].replace("T", " ").rstrip("Z") + " UTC"
        if c["inferred"]:
            when += f" ({c['inferred']})"
        row = (
            f"|{when}|{c['partition_key']}|{c['from_leader']}|{c['to_leader']}|"
            f"{c['from_epoch']} → {c['to_epoch']}|{c['to_leader_source']}|"
        )
        assert row in page, row
