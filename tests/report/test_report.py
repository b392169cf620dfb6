"""lbparse report: the aggregation into the --json model, checked number by number
on made traffic and on real captures, and the page rendered from that model alone.

(The page in a real browser: test_report_browser.py; a real cluster's failovers:
test_report_cluster.py.)
"""

from __future__ import annotations

import json
import random
import re
import shlex
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli import LBPARSE
from support.examples import examples
from support.shared import LIFTBRIDGE, ROOT, shared_path

import lbparse
from lbparse.capture import CaptureReader, Record
from lbparse.capture.recordings import JsonlRecordWriter
from lbparse.capture.records import decode_into
from lbparse.codec.commitlog import ReplicationResponse
from lbparse.report import build_model, render_html
from lbparse.report.aggregate import Aggregator
from lbparse.report.histogram import Histogram, bucket_bounds, bucket_of
from lbparse.report.timebins import MAX_BINS, WIDTHS, Counts, TimeAxis, utc_text

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"
T0 = 1_790_000_000 * 10**9  # capture time, integer nanoseconds
SEC = 10**9
NS = "liftbridge-default"
CLIENT, SERVER = "127.0.0.1:40000", "127.0.0.1:4222"


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    res = subprocess.run([*LBPARSE, *args], capture_output=True, timeout=600)
    if check and res.returncode not in (0, 1):
        raise AssertionError(
            f"lbparse {' '.join(args)} exited {res.returncode}:\n"
            f"{res.stderr.decode(errors='replace')[-3000:]}"
        )
    return res


def sample_pcap() -> Path:
    return Path(str(resources.files("lbparse.examples").joinpath("sample.pcap")))


# -- made traffic ---------------------------------------------------------------


def msg(name: str, **fields: Any) -> Any:
    return lbparse.message_class(name)(**fields)


def rec(
    t: float,
    verb: str,
    subject: str,
    payload: bytes,
    src: str = CLIENT,
    dst: str = SERVER,
    reply: str | None = None,
    block: bytes | None = None,
) -> Record:
    sid = None if verb in ("PUB", "HPUB") else "1"
    if verb in ("MSG", "HMSG"):
        src, dst = dst, src
    r = Record.make(T0 + round(t * SEC), src, dst, verb, subject, reply, sid, block, payload)
    return decode_into(r, "v0")


def publish(t: float, cid: str, policy: int, verb: str = "PUB", inbox: str = "acks.x") -> Record:
    m = msg(
        "proto.Message",
        stream="orders",
        subject="orders",
        value=b"v",
        ackInbox=inbox,
        correlationId=cid,
        ackPolicy=policy,
    )
    return rec(t, verb, "orders", lbparse.encode(m))


def ack(t: float, cid: str, policy: int, verb: str = "PUB", error: int = 0) -> Record:
    m = msg(
        "proto.Ack",
        stream="orders",
        ackInbox="acks.x",
        correlationId=cid,
        ackPolicy=policy,
        receptionTimestamp=10**18,
        commitTimestamp=10**18 + 2_000_000,
        ackError=error,
    )
    return rec(t, verb, "acks.x", lbparse.encode(m), src="127.0.0.1:50001")


def model_of(records: list[Record]) -> dict[str, Any]:
    agg = Aggregator()
    for r in records:
        agg.add(r)
    return agg.model([], {})


def test_publish_and_ack_paired_once_by_inbox_and_correlation_id() -> None:
    m = model_of(
        [
            publish(0.000, "c1", 1),
            publish(0.0001, "c1", 1, verb="MSG"),  # ALL, and its delivery
            ack(0.005, "c1", 1),
            ack(0.0051, "c1", 1, verb="MSG"),  # its ack, and delivery
            publish(0.010, "c2", 0),  # LEADER, never acked
            publish(0.020, "c3", 2),  # NONE: no ack expected
            publish(0.030, "c4", 0, inbox=""),  # no inbox: no ack
            ack(0.040, "c9", 0, error=3),  # ack of an unseen publish
        ]
    )["latency"]
    assert (m["publishes"], m["expecting_ack"], m["no_ack_expected"]) == (4, 2, 2)
    assert (m["acked"], m["unacked"], m["unacked_by_policy"]) == (1, 1, {"LEADER": 1})
    assert (m["acks"], m["acks_without_publish"], m["copies_skipped"]) == (2, 1, 2)
    assert m["ack_errors"] == {"OK": 1, "TOO_LARGE": 1}
    s = m["summary"]["ALL"]
    assert s["count"] == 1 and s["min_ms"] == s["max_ms"] == pytest.approx(5.0, abs=0.01)
    assert 5.0 * 7 / 8 <= s["p50_ms"] <= 5.0 * 9 / 8
    assert m["commit_summary"]["ALL"]["max_ms"] == pytest.approx(2.0)
    assert sum(r["count"] for r in m["histogram"]) == 1
    assert [r["ack_policy"] for r in m["unacked_over_time"]] == ["LEADER"]


def replication(
    t: float,
    follower: str,
    f_ep: str,
    leader_ep: str,
    part: int,
    offset: int,
    epoch: int,
    hw: int,
    reply: str,
) -> list[Record]:
    req = msg("protocol.ReplicationRequest", replicaID=follower, offset=offset, leaderEpoch=epoch)
    resp = ReplicationResponse(epoch, hw, [])
    return [
        rec(t, "PUB", f"{NS}.orders.{part}.replicate", lbparse.encode(req), src=f_ep, reply=reply),
        rec(t + 0.0005, "PUB", reply, lbparse.encode(resp), src=leader_ep),
    ]


def server_info(t: float, node: str, endpoint: str) -> Record:
    return rec(
        t,
        "PUB",
        "_INBOX.info.1",
        lbparse.encode(msg("protocol.ServerInfoResponse", id=node)),
        src=endpoint,
    )


def test_leader_epoch_and_change_from_replication_traffic() -> None:
    a, b, c = "127.0.0.1:41001", "127.0.0.1:41002", "127.0.0.1:41003"
    records = [server_info(0.0, "node1", b), server_info(0.0, "node3", c)]
    records += replication(1.0, "node2", a, b, 0, 7, 5, 10, "_INBOX.a.1")
    records += replication(2.0, "node2", a, b, 0, 10, 5, 10, "_INBOX.a.2")
    records += replication(9.0, "node2", a, c, 0, 10, 9, 14, "_INBOX.a.3")
    m = model_of(records)["partitions"]
    assert [(x["leader"], x["epoch"]) for x in m["leaders"]] == [("node1", 5), ("node3", 9)]
    (change,) = m["leader_changes"]
    assert (
        change["partition_key"],
        change["from_leader"],
        change["to_leader"],
        change["from_epoch"],
        change["to_epoch"],
    ) == ("orders/0", "node1", "node3", 5, 9)
    assert change["t"] == pytest.approx((T0 + 9_000_500_000) / 10**6, abs=0.01)
    assert change["t_ns"] == T0 + 9_000_500_000
    assert change["t_utc"] == "2026-09-21T14:13:29.000500000Z"
    assert [x["lag"] for x in m["lag"]] == [3, 0, 4]


def test_isr_changes_and_leader_reports_from_propagated_requests() -> None:
    shrink = msg(
        "protocol.PropagatedRequest",
        op=1,
        shrinkISROp=msg(
            "protocol.ShrinkISROp",
            stream="orders",
            partition=2,
            replicaToRemove="node1",
            leader="node2",
            leaderEpoch=16,
        ),
    )
    report = msg(
        "protocol.PropagatedRequest",
        op=2,
        reportLeaderOp=msg(
            "protocol.ReportLeaderOp",
            stream="orders",
            partition=2,
            replica="node1",
            leader="node2",
            leaderEpoch=16,
        ),
    )
    subject = f"{NS}.raft.metadata.propagate"
    m = model_of(
        [
            rec(1.0, "PUB", subject, lbparse.encode(shrink), src="127.0.0.1:41002"),
            rec(1.001, "MSG", subject, lbparse.encode(shrink)),  # the delivery: once
            rec(2.0, "PUB", subject, lbparse.encode(report), src="127.0.0.1:41001"),
        ]
    )
    events = m["partitions"]["isr_events"]
    assert [
        (e["op"], e["partition_key"], e["replica"], e["leader"], e["epoch"]) for e in events
    ] == [
        ("shrink_isr", "orders/2", "node1", "node2", 16),
        ("report_leader", "orders/2", "node1", "node2", 16),
    ]
    assert m["partitions"]["leaders"][0]["leader"] == "node2"
    assert m["cluster"]["nodes"] == {"127.0.0.1:41001": "node1", "127.0.0.1:41002": "node2"}
    assert m["cluster"]["propagated_ops_total"] == {"REPORT_LEADER": 1, "SHRINK_ISR": 1}


@pytest.mark.parametrize("block", [b"NATS/1.0 503\r\n\r\n", b"NATS/1.0\r\nStatus: 503\r\n\r\n"])
def test_no_responders_counted_by_the_request_they_answer(block: bytes) -> None:
    req = msg("protocol.ReplicationRequest", replicaID="node2")
    subject = f"{NS}.orders.0.replicate"
    records = [
        rec(1.0, "PUB", subject, lbparse.encode(req), reply="_INBOX.z.1"),
        rec(1.001, "HMSG", "_INBOX.z.1", b"", block=block),
        rec(1.002, "HMSG", "_INBOX.z.9", b"", block=b"NATS/1.0 404\r\n\r\n"),
    ]
    m = model_of(records)["cluster"]
    assert m["no_responders_total"] == 1
    assert [(t["subject"], t["count"]) for t in m["no_responders_by_target"]] == [(subject, 1)]


# -- bounded state ---------------------------------------------------------------


def test_utc_text_is_exact_to_the_nanosecond() -> None:
    assert utc_text(0) == "1970-01-01T00:00:00.000000000Z"
    assert utc_text(T0 + 123_456_789) == "2026-09-21T14:13:20.123456789Z"
    assert utc_text(-1) == "1969-12-31T23:59:59.999999999Z"
    assert utc_text(None) is None


def test_each_bin_width_divides_the_next() -> None:
    assert all(b % a == 0 for a, b in zip(WIDTHS, WIDTHS[1:]))


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(0, 10**16), min_size=1, max_size=400), st.integers(2, 50))
def test_time_bins_widen_keeping_every_count(times: list[int], max_bins: int) -> None:
    axis = TimeAxis(max_bins=max_bins)
    counts = Counts(axis)
    for k, t in enumerate(times):
        counts.add(axis.index(10**18 + t), f"k{k % 3}")
    assert sum(counts.data.values()) == len(times)
    assert axis.hi - axis.lo < max_bins or axis.width == WIDTHS[-1]
    for (i, _), _n in counts.data.items():
        assert axis.lo <= i <= axis.hi
    # each time falls in the bin it was counted in, at the final width
    assert {i for i, _ in counts.data} == {(10**18 + t) // axis.width for t in times}


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(1, 10**12), min_size=1, max_size=300), st.floats(0.01, 1.0))
def test_histogram_quantile_is_the_exact_one_within_its_bucket(values: list[int], q: float) -> None:
    h = Histogram()
    for v in values:
        h.add(v)
    exact = sorted(values)[max(1, -(-int(q * 10**6) * len(values) // 10**6)) - 1]
    est = h.quantile(q)
    assert est is not None
    lo, hi = bucket_bounds(bucket_of(exact))
    assert lo <= est < hi or est in (h.min, h.max)


def test_histogram_buckets_hold_their_values() -> None:
    rng = random.Random(7)
    for ns in list(range(300)) + [rng.randrange(1, 10**14) for _ in range(20000)]:
        lo, hi = bucket_bounds(bucket_of(ns))
        assert lo <= ns < hi and (hi - lo) * 8 <= max(lo, 8)


@pytest.mark.slow
def test_page_stays_small_whatever_the_input(tmp_path: Path) -> None:
    """Ten days of traffic on 600 streams: the bins widen, the streams beyond
    the largest are drawn together, the page stays a few MB."""
    path = tmp_path / "long.jsonl"
    w = JsonlRecordWriter(str(path))
    rng = random.Random(3)
    for k in range(30000):
        m = msg(
            "proto.Message",
            stream=f"s{k % 600}",
            ackInbox="acks.x",
            correlationId=f"c{k}",
            ackPolicy=k % 3,
        )
        t = rng.uniform(0, 10 * 86400)
        w.write(
            Record.make(
                T0 + round(t * SEC),
                CLIENT,
                SERVER,
                "PUB",
                f"s{k % 600}",
                None,
                None,
                None,
                lbparse.encode(m),
            )
        )
    w.close()
    model = build_model([str(path)])
    page = render_html(model)
    assert len(page) < 3_000_000
    assert len(json.dumps(model)) < 2_000_000
    streams = {r["stream"] for r in model["traffic"]["by_stream"]}
    assert len(streams) == 13 and "(other)" in streams
    bins = {r["t"] for r in model["traffic"]["by_msg_type"]}
    assert len(bins) <= MAX_BINS and model["report"]["bin_s"] >= 10 * 86400 / MAX_BINS
    assert model["latency"]["unacked"] == 20000  # the LEADER and ALL ones (not NONE): no acks


# -- real captures, through the command ------------------------------------------


def stats_of(path: Path) -> dict[str, Any]:
    """`lbparse capture -q --stats`, parsed back from its text."""
    text = cli("capture", str(path), "-q", "--stats").stderr.decode()
    head = re.search(r"^messages (\d+)  packets (\d+)  bytes read (\d+)  gaps (\d+)", text, re.M)
    assert head, text
    text = text[head.start() :]  # notices come first
    out: dict[str, Any] = dict(
        zip(("messages", "packets", "bytes_read", "gaps"), map(int, head.groups()))
    )
    section = None
    for line in text.splitlines()[1:]:
        if not line.startswith("  "):
            section = line.rstrip(":")
            out[section] = {}
        else:
            key, n = line.strip().rsplit(None, 1)
            out[section][key] = int(n)
    return out


@pytest.fixture(params=["bundled sample", "shared short run"])
def capture(request: pytest.FixtureRequest) -> Path:
    if request.param == "bundled sample":
        return sample_pcap()
    if not SHORT.exists():
        pytest.skip(f"shared material missing: {SHORT}")
    return SHORT


@pytest.mark.slow
def test_report_counts_are_the_capture_stats_and_the_page_is_rendered_from_the_json(
    capture: Path, tmp_path: Path
) -> None:
    page, data = tmp_path / "r.html", tmp_path / "r.json"
    res = cli("report", str(capture), "-o", str(page), "--json", str(data))
    assert res.returncode == 0, res.stderr
    model = json.loads(data.read_text())
    stats = stats_of(capture)
    totals = model["totals"]
    for key in ("messages", "packets", "bytes_read", "gaps"):
        assert totals[key] == stats[key], key
    assert totals["per_verb"] == stats["per verb"]
    assert totals["per_layout"] == stats["per layout"]
    assert totals["per_msg_type"] == stats["per MsgType"]
    assert totals["errors"] == stats.get("errors by kind", {})
    # every message is in the rate chart's data once, and in no other bin
    assert sum(r["count"] for r in model["traffic"]["by_msg_type"]) == stats["messages"]
    assert sum(r["bytes"] for r in model["traffic"]["bytes"]) == totals["payload_bytes"]
    errors = sum(stats.get("errors by kind", {}).values())
    assert model["problems"]["by_kind"] == {
        f"error:{k}": n for k, n in stats.get("errors by kind", {}).items()
    }
    assert model["problems"]["total"] == errors
    # exact times: nanoseconds as decimal strings (lbparse's JSON convention), shown as UTC
    times = [r.ts for r in CaptureReader(str(capture))]
    rep = model["report"]
    assert (rep["first_ns"], rep["last_ns"]) == (str(min(times)), str(max(times)))
    assert rep["first_utc"] == utc_text(min(times)) and rep["first_utc"].endswith("Z")
    assert rep["first_utc"][:-1].replace("T", " ") + " UTC" in page.read_text()
    # the page is the model's rendering, and nothing else
    assert render_html(json.loads(data.read_text())) == page.read_text()


@pytest.mark.slow
def test_the_page_loads_nothing_from_anywhere(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    cli("report", str(sample_pcap()), "-o", str(page), "-q")
    text = page.read_text()
    # the markup outside the inline scripts (whose strings may hold any text)
    markup = re.sub(r"<script\b[^>]*>.*?</script>", "<script></script>", text, flags=re.S | re.I)
    assert not re.search(r"<\w+[^>]+(src|href)\s*=", markup, re.I)
    assert markup.count("<script></script>") == 4  # runtimes, data, charts, glue: all inline
    assert "vegaEmbed" in text and "lbparse-report-data" in text


@pytest.mark.slow
def test_damaged_capture_is_reported_with_its_problems(tmp_path: Path) -> None:
    data = sample_pcap().read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) * 2 // 3])
    res = cli("report", str(cut), "--json", str(tmp_path / "r.json"), "-q")
    assert res.returncode == 1
    model = json.loads((tmp_path / "r.json").read_text())
    kinds = model["problems"]["by_kind"]
    assert any(k.startswith("notice:") for k in kinds), kinds
    assert all(model["problems"]["examples"][k] for k in kinds)
    assert model["totals"]["messages"] == stats_of(cut)["messages"] > 0


@pytest.mark.slow
def test_usage_errors_exit_2_without_a_traceback(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a capture at all")
    for args in ([str(tmp_path / "missing.pcap")], [str(tmp_path)], [str(junk)]):
        res = cli("report", *args, "-o", str(tmp_path / "r.html"), check=False)
        assert res.returncode == 2, args
        assert b"Traceback" not in res.stderr and res.stderr.startswith(b"lbparse report: ")


def test_waiting_tables_forget_their_oldest_and_count_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Publishes pushed out of the bounded table of waiting ones are unacked,
    counted in the bin they were sent in; the rest are still paired."""
    from lbparse.report import latency

    monkeypatch.setattr(latency, "MAX_PENDING", 10)
    records = [publish(k * 0.001, f"c{k}", 1) for k in range(25)]
    records += [ack(1.0, "c24", 1)]
    m = model_of(records)["latency"]
    assert (m["acked"], m["unacked"]) == (1, 24)
    assert sum(r["count"] for r in m["unacked_over_time"]) == 24


DATA_SHORT = LIFTBRIDGE / "samples" / "data-short.tar.gz"
LISTING = LIFTBRIDGE / "samples" / "data-short.listing.txt"


@pytest.fixture(scope="module")
def data_short(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not DATA_SHORT.exists() or not SHORT.exists():
        pytest.skip(f"shared material missing: {DATA_SHORT}")
    out = tmp_path_factory.mktemp("data-short")
    subprocess.run(["tar", "-xzf", str(DATA_SHORT), "-C", str(out)], check=True, timeout=120)
    return out / "data-short"


@pytest.mark.slow
def test_data_directories_say_what_their_files_hold(data_short: Path, tmp_path: Path) -> None:
    """Every replica's entries, offsets and high watermark as the independent
    listing of the shared sample counts them."""
    res = cli("report", str(data_short), "--json", str(tmp_path / "r.json"), "-q")
    assert res.returncode == 0, res.stderr
    model = json.loads((tmp_path / "r.json").read_text())
    listed: dict[tuple[str, str], dict[str, Any]] = {}
    for line in LISTING.read_text().splitlines():
        m = re.match(r"\./(node\d)/streams/([^/]+)/(\d+)/(\S+)\s+\d+ bytes\s+(.*)", line)
        if not m:
            continue
        node, stream, part, name, rest = m.groups()
        row = listed.setdefault((node, f"{stream}/{part}"), {"entries": 0})
        if name.endswith(".log"):
            n = re.match(r"(\d+) entries(?:, offsets (\d+)-(\d+))?", rest)
            assert n
            row["entries"] += int(n.group(1))
            if n.group(2):
                row["first_offset"], row["last_offset"] = int(n.group(2)), int(n.group(3))
        elif name == "replication-offset-checkpoint":
            row["hw"] = int(rest.split("content:")[1])
    got = {(r["node"], r["partition_key"]): r for r in model["storage"]["replicas"]}
    assert set(got) == set(listed)
    for key, want in listed.items():
        for field, value in want.items():
            assert got[key][field] == value, (key, field)
    assert model["inputs"][0]["stored_messages"] == sum(r["entries"] for r in listed.values())
    assert (
        sum(r["count"] for r in model["storage"]["stored_by_stream"])
        == model["inputs"][0]["stored_messages"]
    )
    assert {d["node"] for d in model["storage"]["raft_dbs"]} == {"node1", "node2", "node3"}


def test_data_directories_and_capture_of_one_run_agree(data_short: Path) -> None:
    """The same run seen on disk and on the wire: the same leaders and epochs,
    the same Raft log operations (the bootstrap configuration, written before
    any traffic, only on disk)."""
    disk, wire = build_model([str(data_short)]), build_model([str(SHORT)])
    on_disk = {(x["partition_key"], x["leader"], x["epoch"]) for x in disk["partitions"]["leaders"]}
    on_wire = {(x["partition_key"], x["leader"], x["epoch"]) for x in wire["partitions"]["leaders"]}
    assert on_disk and on_disk <= on_wire
    ops = dict(disk["cluster"]["raft"]["log_ops_total"])
    assert ops.pop("LogConfiguration") == 1
    assert ops == wire["cluster"]["raft"]["log_ops_total"]


@pytest.mark.slow
def test_json_to_a_closed_pipe_is_quiet() -> None:
    res = subprocess.run(
        f"{shlex.join(LBPARSE)} report {shlex.quote(str(sample_pcap()))} --json - -q | head -1",
        shell=True,
        capture_output=True,
        timeout=300,
    )
    assert res.stdout == b"{\n" and res.stderr == b""


@pytest.mark.slow
def test_damage_on_disk_is_a_problem_and_exit_1(data_short: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "data"
    shutil.copytree(data_short, copy)
    log = copy / "node1" / "streams" / "orders" / "0" / "00000000000000000000.log"
    raw = bytearray(log.read_bytes())
    raw[40:48] = b"\xff" * 8  # inside the first entry: its CRC cannot match
    log.write_bytes(bytes(raw))
    res = cli("report", str(copy), "--json", str(tmp_path / "r.json"), "-q")
    assert res.returncode == 1, res.stderr
    model = json.loads((tmp_path / "r.json").read_text())
    assert model["storage"]["findings"] >= 1
    kinds = [k for k in model["problems"]["by_kind"] if k.startswith("notice:storage:")]
    assert kinds and all(
        str(log) in x["where"] for k in kinds for x in model["problems"]["examples"][k]
    )


@pytest.mark.slow
def test_max_raft_db_reaches_the_data_directories_raft_db(data_short: Path, tmp_path: Path) -> None:
    """`--max-raft-db`, as `lbparse raft` takes it: each node's raft.db is read
    within it, the log past it counted and said (storage:limit problems: the
    log's, and the stable store's values past the budget; exit 1); at the
    default, the same run reads every entry."""
    small = cli(
        "report",
        str(data_short),
        "--max-raft-db",
        "2k",
        "--json",
        str(tmp_path / "small.json"),
        "-q",
    )
    whole = cli("report", str(data_short), "--json", str(tmp_path / "whole.json"), "-q")
    assert small.returncode == 1 and whole.returncode == 0, (small.stderr, whole.stderr)
    cut, full = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("small", "whole"))
    assert cut["problems"]["by_kind"].get("notice:storage:limit", 0) >= 3, cut["problems"]
    said = cut["problems"]["examples"]["notice:storage:limit"]
    assert any(
        "log key" in x["message"]
        and "--max-raft-db raises the limit" in x["message"]
        and x["where"].endswith("node1/raft/raft.db")
        for x in said
    ), said
    assert "notice:storage:limit" not in full["problems"]["by_kind"]
    entries = {
        n: {d["node"]: d["entries"] for d in m["storage"]["raft_dbs"]}
        for n, m in (("cut", cut), ("full", full))
    }
    assert all(entries["cut"][node] < n for node, n in entries["full"].items()), entries


# -- the columnar fast path against the record path ------------------------------

# What the columnar path does not count: NATS control lines (PING, SUB...), the
# packets that are not TCP over IP, the limits hit (the pipeline's reader keeps
# no count of them).
NOT_COUNTED_BY_COLUMNS = ("controls", "skipped_packets", "limits")


def both_paths(paths: list[str], layout: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    from lbparse.report.inputs import ReadOptions

    ref = build_model(paths, ReadOptions(layout=layout, fast=False))
    fast = build_model(paths, ReadOptions(layout=layout, fast=True))
    for model in (ref, fast):
        for key in NOT_COUNTED_BY_COLUMNS:
            model["totals"].pop(key)
        for i in model["inputs"]:
            i.pop("reader", None)
    return ref, fast


def made_cluster_capture(path: Path, n: int) -> None:
    """bench_report's capture: publishes, acks, replication with a leader change, 503s."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from bench_report import make_capture
    finally:
        sys.path.remove(str(ROOT / "bench"))
    make_capture(str(path), n)


@pytest.mark.slow
@pytest.mark.parametrize("layout", [None, "v0"])
def test_report_fast_path_equals_the_record_path(
    capture: Path, layout: str | None, tmp_path: Path
) -> None:
    ref, fast = both_paths([str(capture)], layout)
    assert fast == ref


@pytest.mark.slow
def test_report_fast_path_equals_the_record_path_with_grpc() -> None:
    """A capture of the clients' gRPC calls too (api-short): the C loop takes
    HTTP/2 for bytes that are not NATS; the fast path holds those rows until
    the gRPC reading names the connections, and says only what the record
    path says (HTTP/2's own notices, no NATS protocol problem)."""
    ref, fast = both_paths([str(shared_path("liftbridge", "samples", "api-short.pcapng"))], None)
    assert fast == ref
    assert "notice:protocol" not in fast["problems"]["by_kind"]
    assert fast["client"]["calls"] == 55 and fast["client"]["metadata_lookups"]["lookups"]


@pytest.mark.slow
def test_report_fast_path_equals_the_record_path_on_damage_and_made_traffic(tmp_path: Path) -> None:
    data = sample_pcap().read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) * 2 // 3])
    made = tmp_path / "made.pcap"
    made_cluster_capture(made, 6000)
    for paths in ([str(cut)], [str(made)], [str(made), str(sample_pcap())]):
        for layout in (None, "v0"):
            ref, fast = both_paths(paths, layout)
            assert ref["problems"]["total"] > 0 or paths != [str(cut)]
            assert ref["partitions"]["leader_changes"] or paths == [str(cut)]
            assert fast == ref, (paths, layout)


def test_report_reads_pcap_through_columns_by_default_with_auto() -> None:
    model = build_model([str(sample_pcap())])
    assert model["inputs"][0]["reader"] == "columns"


def test_report_reads_a_fixed_layout_through_records_by_default() -> None:
    """bench_report: for a fixed layout the record path is the faster, with
    the C capture loop (1.36x) as without it (1.42x)."""
    from lbparse.report.inputs import ReadOptions

    model = build_model([str(sample_pcap())], ReadOptions(layout="v0"))
    assert model["inputs"][0].get("reader", "records") == "records"  # columns say so


def test_report_fast_path_takes_each_rows_payload_from_its_table() -> None:
    """The fast path reads payloads from the narrow tables: each row of a MsgType
    gets its own, and a row its table lacks (a FlatBuffers Ack, in payload_json)
    gets none, not its neighbour's."""
    from lbparse.report.fast_path import _messages, _payload_rows

    ack = lbparse.message_class("proto.Ack")
    flat = lbparse.encode(
        lbparse.payload_from_json("Ack", {"stream": "fb", "offset": "42"}, layout="flatbuffers"),
        layout="flatbuffers",
        msg_type="Ack",
    )
    payloads = [
        lbparse.encode(ack(stream="s", offset=1)),
        flat,
        lbparse.encode(ack(stream="s", offset=2)),
        flat,
        lbparse.encode(ack(stream="s", offset=3)),
    ]
    tables = lbparse.decode_tables(payloads, "auto")
    batch = _messages(tables)
    assert batch.column("layout").to_pylist() == ["v0", "flatbuffers", "v0", "flatbuffers", "v0"]
    got = _payload_rows(batch, tables, "Ack", "proto.Ack").to_pylist()
    assert [None if g is None else g["offset"] for g in got] == [1, None, 2, None, 3]
