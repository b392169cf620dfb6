"""One verdict per file (#46): `capture`, `capture --tables`, `report` (from the
capture by both its paths, and from the pipeline's output) and `pipeline`
give the same problem count and the same exit status for the same file.

A problem is data lost or unreadable; normal client and capture behaviour (a
Subscribe the client cancelled, a call cut by the capture's end) is a *note*:
counted and shown everywhere, never a problem. The files: the shared real
captures (api-short.pcapng holds 5 RST_STREAM CANCELs and 5 calls open at the
end), api-short with two of a gRPC connection's segments dropped
(`editcap`): two TCP gaps, and HTTP/2 frames lost at each, and a crafted
hostile one (issue #47): gRPC trailers whose grpc-status is no status code,
beside a NATS client whose first segment is `P`.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import hpack
import pytest
from support import capwriter as cw
from support.api_short import API_SHORT, with_gaps
from support.cli import run_cli
from support.shared import LIFTBRIDGE, SHARED

from lbparse.capture.h2 import PREFACE
from lbparse.columnar.sources import SourceOptions
from lbparse.pipeline.job import PipelineOptions, run
from lbparse.report import build_model
from lbparse.report.inputs import ReadOptions

pytest.importorskip("altair")

FILES = (
    "api-short.pcapng",
    "gap.pcapng",
    "short.pcapng",
    "nats_1000.pcap",
    "nats_verbose20.pcapng",
    "hostile.pcap",
)
# grpc-status values that are no status code (issue #47's class 2: each once
# aborted a file, a run or the pipeline's job)
BAD_STATUSES = ("\u00b2", "9" * 5000, "99999999999")
NOTES = re.compile(r": (\d+) notes? of normal client or capture behaviour")


def _hostile(path: Path) -> Path:
    """Five unary calls whose trailers carry 0, BAD_STATUSES and 5 as
    grpc-status, and a NATS client whose first segment is `P` (then `ING`
    and two PUBs): one problem a bad status, every message read."""
    ce, se = hpack.Encoder(), hpack.Encoder()
    grpc = cw.Conn(("127.0.0.1", 51000), ("127.0.0.1", 9292))
    client, server = PREFACE + cw.SETTINGS, cw.SETTINGS
    for i, status in enumerate(["0", *BAD_STATUSES, "5"]):
        sid = 2 * i + 1
        client += cw.frame(1, 4, sid, cw.request_headers(ce, "FetchCursor"))
        client += cw.frame(0, 1, sid, cw.grpc_message(b"\x0a\x01s"))
        server += cw.frame(1, 5, sid, se.encode([(":status", "200"), ("grpc-status", status)]))
    pkts = grpc.handshake() + grpc.send("c", client) + grpc.send("s", server)
    nats = cw.Conn(("127.0.0.1", 40000), ("127.0.0.1", 4222))
    pkts += nats.handshake() + nats.send("s", b'INFO {"server_id":"x"}\r\n')
    pkts += nats.send("c", b"P") + nats.send("c", b"ING\r\n") + nats.send("s", b"PONG\r\n")
    pkts += nats.send("c", b"PUB orders 2\r\nhi\r\nPUB orders 3\r\nyes\r\n")
    pkts += [grpc.fin("c"), grpc.fin("s"), nats.fin("c"), nats.fin("s")]
    cw.write_pcap(
        str(path), [(1.7e9 + i / 1e3, cw.link(cw.ETHERNET, p)) for i, p in enumerate(pkts)]
    )
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    gap = with_gaps(tmp_path_factory.mktemp("verdict") / "gap.pcapng")
    return {
        "hostile.pcap": _hostile(gap.parent / "hostile.pcap"),
        "api-short.pcapng": API_SHORT,
        "gap.pcapng": gap,
        "short.pcapng": LIFTBRIDGE / "samples" / "short.pcapng",
        "nats_1000.pcap": SHARED / "captures" / "nats_1000.pcap",
        "nats_verbose20.pcapng": SHARED / "captures" / "nats_verbose20.pcapng",
    }


def _said(stderr: str, path: Path) -> tuple[int, int]:
    """(problem lines, notes) that `lbparse capture` said of `path`."""
    problems = notes = 0
    for line in stderr.splitlines():
        if f": {path}: " not in line and f": {path.name}: " not in line:
            continue
        m = NOTES.search(line)
        if m:
            notes += int(m.group(1))
        else:
            problems += 1
    return problems, notes


def _notices(model: dict[str, Any]) -> tuple[int, int]:
    """(the reader's problems, notes) in a report model; envelopes that do not
    decode (error:*) are the data's, not the reading's."""
    p = model["problems"]
    return (sum(n for k, n in p["by_kind"].items() if k.startswith("notice:")), p["notes"]["total"])


def _verdict(name: str, path: Path, spark: Any, d: Path) -> dict[str, tuple[int, int, int]]:
    """Per way of reading `path`: (exit status, problems, notes)."""
    got: dict[str, tuple[int, int, int]] = {}
    done = run_cli("capture", str(path), "-o", str(d / f"{name}.jsonl"))
    got["capture"] = (done.returncode, *_said(done.stderr.decode(), path))
    tables = d / f"{name}.tables"
    done = run_cli("capture", str(path), "--tables", str(tables))
    got["capture --tables"] = (done.returncode, *_said(done.stderr.decode(), path))
    model = d / f"{name}.json"
    done = run_cli("report", str(path), "-o", str(d / f"{name}.html"), "--json", str(model))
    got["report"] = (done.returncode, *_notices(json.loads(model.read_text())))
    records = build_model([str(path)], ReadOptions(fast=False))
    got["report (records)"] = (got["report"][0], *_notices(records))
    pipe = d / f"{name}.pipeline"
    summary = run(
        spark,
        PipelineOptions(inputs=(str(path),), out=str(pipe), source=SourceOptions(batch_rows=4096)),
    )
    totals = summary.totals()
    got["pipeline"] = (
        int(summary.outcome == "problems"),
        totals["problems"],
        sum(totals["notes"].values()),
    )
    model = d / f"{name}.pipeline.json"
    done = run_cli("report", str(pipe), "-o", str(d / f"{name}.p.html"), "--json", str(model))
    got["report of the pipeline"] = (done.returncode, *_notices(json.loads(model.read_text())))
    return got


# The tests of `verdicts` on one worker: the fixture is a module's, so each
# worker that ran one of them made it again (CI: 16 s of setup twice).
ONE_WORKER = pytest.mark.xdist_group("one-verdict")


@pytest.fixture(scope="module")
def verdicts(
    inputs: dict[str, Path], spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, tuple[int, int, int]]]:
    """Per file, per way of reading it: (exit status, problems, notes)."""
    d = tmp_path_factory.mktemp("verdicts")
    return {name: _verdict(name, path, spark, d) for name, path in inputs.items()}


@pytest.mark.slow
@ONE_WORKER
@pytest.mark.parametrize("name", FILES)
def test_every_reading_gives_one_verdict(
    verdicts: dict[str, dict[str, tuple[int, int, int]]], name: str
) -> None:
    got = verdicts[name]
    assert len(set(got.values())) == 1, got


@pytest.mark.slow
@ONE_WORKER
def test_normal_client_behaviour_is_a_note_not_a_problem(
    verdicts: dict[str, dict[str, tuple[int, int, int]]], inputs: dict[str, Path]
) -> None:
    # tshark counts api-short's RST_STREAMs (the client cancelling Subscribes)
    rst = subprocess.run(
        [
            "tshark",
            "-r",
            str(inputs["api-short.pcapng"]),
            "-Y",
            "http2.type == 3",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-d",
            "tcp.port==29392-29394,http2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    resets = len(rst.stdout.split())
    assert resets > 0
    rc, problems, notes = verdicts["api-short.pcapng"]["capture"]
    assert (rc, problems) == (0, 0)
    # each reset, and each call still open when its connection ended, is a note
    assert notes > resets


@pytest.mark.slow
@ONE_WORKER
def test_data_lost_in_a_grpc_connection_is_a_problem_everywhere(
    verdicts: dict[str, dict[str, tuple[int, int, int]]],
) -> None:
    rc, problems, notes = verdicts["gap.pcapng"]["capture --tables"]
    # two TCP gaps, and the HTTP/2 frames lost at each: said by every reading
    assert (rc, problems) == (1, 4)
    assert notes == verdicts["api-short.pcapng"]["capture"][2]


@pytest.mark.slow
def test_a_fresh_full_run_gets_one_verdict(
    request: pytest.FixtureRequest, spark: Any, tmp_path: Path
) -> None:
    """A fresh `run_cluster.sh full` (its clients' gRPC captured, two nodes
    killed): every reading gives its capture the same verdict, and a normal
    run's cancelled and cut calls are notes, not problems."""
    from support.cluster import full_run

    capture, _, _ = full_run(request)
    got = _verdict("full", capture, spark, tmp_path)
    assert len(set(got.values())) == 1, got
    rc, problems, notes = got["capture"]
    assert (rc, problems) == (0, 0) and notes > 0, got


@pytest.mark.slow
@ONE_WORKER
def test_a_header_value_that_is_no_status_costs_one_problem_everywhere(
    verdicts: dict[str, dict[str, tuple[int, int, int]]],
) -> None:
    """Each bad grpc-status is one problem (a null and a notice) in every
    reading (test_every_reading_gives_one_verdict), the pipeline's job too,
    which one such value once failed whole (rc 3)."""
    assert verdicts["hostile.pcap"]["pipeline"] == (1, len(BAD_STATUSES), 0)
