"""`lbparse report`'s join of the client's publish to the cluster's story of
the same message (lbparse.report.publish_join): on the shared api-short
capture, each Publish/PublishAsync PublishRequest beside the NATS Publish
the node put on the stream's subject and the partition leader's Ack (same
stream and correlationId) and the PublishResponse, checked against a join
made here by hand from the capture reader's own records; the same on the
columnar and the record path; in `--json` and in the page."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from support.api_short import API_SHORT, report_models
from support.cli import run_cli

from lbparse.capture import CaptureReader
from lbparse.capture.grpc import GrpcMessage
from lbparse.columnar.grpctables import grpc_tables
from lbparse.columnar.tables import GRPC_CALLS, GRPC_MESSAGES
from lbparse.report import render_html
from lbparse.report.aggregate import Aggregator

# The api-short report models (two readings, ~2 s) and pages: not in make test-fast
pytestmark = pytest.mark.slow

PUBLISH_METHODS = ("Publish", "PublishAsync", "PublishToSubject")


class HandJoin:
    """The capture read once: client publishes by correlationId, and the first
    sighting of each NATS Publish and Ack by (stream, correlationId)."""

    def __init__(self, path: Path) -> None:
        grpc: list[Any] = []
        self.publishes: dict[tuple[str, str], int] = {}
        self.acks: dict[tuple[str, str], tuple[int, int]] = {}
        self.inbox_acks: dict[str, tuple[int, int]] = {}  # Acks without a correlationId
        for rec in CaptureReader(path, on_grpc=grpc.append):
            env = rec.envelope
            if env is None or env.msg_type_name not in ("Publish", "Ack"):
                continue
            m = env.message
            if not m.correlationId:
                if env.msg_type_name == "Ack":
                    self.inbox_acks.setdefault(m.ackInbox, (rec.ts, m.offset))
                continue
            key = (m.stream, m.correlationId)
            if env.msg_type_name == "Publish":
                self.publishes.setdefault(key, rec.ts)
            else:
                self.acks.setdefault(key, (rec.ts, m.offset))
        msgs = [
            g
            for g in grpc
            if isinstance(g, GrpcMessage) and g.method in PUBLISH_METHODS and g.message is not None
        ]
        self.requests = {
            g.message["correlationId"]: g
            for g in msgs
            if g.direction == "client_to_server" and g.method != "PublishToSubject"
        }
        self.responses: dict[str, GrpcMessage] = {}
        for g in msgs:
            if g.direction == "server_to_client" and g.method != "PublishToSubject":
                assert g.message is not None
                self.responses.setdefault(g.message["correlationId"], g)
        # PublishToSubject's request and response, paired by their call
        calls: dict[tuple[str, str, int], list[GrpcMessage]] = {}
        for g in msgs:
            if g.method == "PublishToSubject":
                client = g.src if g.direction == "client_to_server" else g.dst
                calls.setdefault((client, g.stream_id), []).append(g)
        self.to_subject = list(calls.values())


@pytest.fixture(scope="module")
def hand() -> HandJoin:
    if not API_SHORT.is_file():
        pytest.skip(f"shared material missing: {API_SHORT}")
    return HandJoin(API_SHORT)


@pytest.fixture(scope="module")
def models() -> dict[str, dict[str, Any]]:
    return report_models()


def test_every_acked_client_publish_finds_its_nats_ack_with_the_same_offset(
    models: dict[str, dict[str, Any]], hand: HandJoin
) -> None:
    join = models["columns"]["client"]["publish_join"]
    assert join == models["records"]["client"]["publish_join"]  # both paths, the same join
    rows = {r["correlation_id"]: r for r in join["messages"] if r["correlation_id"]}
    assert set(rows) == set(hand.requests) and len(rows) == 71
    checked = 0
    for cid, req in hand.requests.items():
        body, row = req.message or {}, rows[cid]
        stream, policy = body["stream"], body.get("ackPolicy", "LEADER")
        response = hand.responses.get(cid)
        assert (row["stream"], row["ack_policy"]) == (stream, policy)
        assert int(row["request_ns"]) == req.ts
        publish, ack = hand.publishes.get((stream, cid)), hand.acks.get((stream, cid))
        assert row["nats_publish_ns"] == publish  # Int64: an int here, a string in --json
        assert row["nats_ack_ns"] == (None if ack is None else ack[0])
        assert row["response_ns"] == (None if response is None else response.ts)
        if policy == "NONE":
            assert ack is None and response is None and publish is not None
            continue
        assert response is not None and response.message is not None
        if "asyncError" in response.message:
            continue  # refused: e.g. a readonly partition, which may never reach NATS
        # the client's answer and the cluster's Ack name the same offset
        offset = int(response.message["ack"].get("offset", 0))
        assert ack is not None and ack[1] == offset == row["offset"] == row["response_offset"]
        assert req.ts < publish < ack[0] < response.ts  # type: ignore[operator]
        checked += 1
    assert checked == 51
    found = sum(
        1
        for cid, r in hand.requests.items()
        if (r.message or {})["stream"]
        and ((r.message or {})["stream"], cid) in hand.publishes.keys() | hand.acks.keys()
    )
    # PublishToSubject: no correlationId; its response's ack names the NATS Ack's inbox
    to_subject = [r for r in join["messages"] if r["method"] == "PublishToSubject"]
    assert len(to_subject) == len(hand.to_subject) == 4
    for (req, resp), row in zip(sorted(hand.to_subject, key=lambda c: c[0].ts or 0), to_subject):
        assert req.message is not None and resp.message is not None
        ack = hand.inbox_acks[resp.message["ack"]["ackInbox"]]
        assert (row["subject"], row["request_ns"], row["nats_ack_ns"], row["response_ns"]) == (
            req.message["subject"],
            req.ts,
            ack[0],
            resp.ts,
        )
        assert (
            row["offset"] == ack[1] == int(resp.message["ack"]["offset"]) == row["response_offset"]
        )
    assert (
        (join["client_publishes"], join["found_on_nats"], join["not_found_on_nats"])
        == (len(hand.requests) + 4, found + 4, len(hand.requests) - found)
        == (75, 74, 1)
    )
    assert (join["offsets_agree"], join["offsets_differ"]) == (checked + 4, 0)
    expecting = [
        c
        for c, r in hand.requests.items()
        if (r.message or {}).get("ackPolicy", "LEADER") != "NONE"
    ]
    assert join["expecting_ack"] == len(expecting) + 4 == 61
    assert (
        join["acked_on_nats"]
        == sum(1 for c in expecting if (rows[c]["stream"], c) in hand.acks) + 4
        == 60
    )


@pytest.mark.slow  # over half a second: not in make test-fast
def test_the_join_is_in_the_json_and_the_page(tmp_path: Path, hand: HandJoin) -> None:
    page, data = tmp_path / "r.html", tmp_path / "r.json"
    res = run_cli("report", str(API_SHORT), "-o", str(page), "--json", str(data), "-q", timeout=120)
    # 0: the capture's cancelled and cut calls are notes, not problems
    assert res.returncode == 0, res.stderr
    join = json.loads(data.read_text())["client"]["publish_join"]
    cid = next(
        c
        for c, r in hand.requests.items()
        if r.message
        and r.message.get("ackPolicy") == "ALL"
        and (r.message["stream"], c) in hand.acks
    )
    row = next(r for r in join["messages"] if r["correlation_id"] == cid)
    assert row["offset"] == hand.acks[(row["stream"], cid)][1]
    assert row["nats_ack_ns"] == str(hand.acks[(row["stream"], cid)][0])  # exact, as text
    html = page.read_text()
    assert "Client publishes joined to the cluster's NATS Publish and Ack" in html
    assert "75 client publishes: 74 found on NATS, 1 not" in html
    assert cid in html
    assert "data-chart='client_publish_join'" in html  # drawn: the model has its rows


def test_the_page_from_the_model_alone_shows_the_join(models: dict[str, dict[str, Any]]) -> None:
    html = render_html(models["records"])
    assert "60 of the 61 expecting an ack acked on NATS" in html
    assert "55 agree, 0 differ" in html
    assert "(to subject orders.2)" in html


@pytest.mark.slow  # a headless Chromium, about 3 s
def test_the_join_chart_draws_its_points_in_chromium(
    models: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    from lbparse.report.browser import chromium, look

    if chromium() is None:
        pytest.skip("Chromium is not installed (make install-system)")
    Image = pytest.importorskip("PIL.Image", reason="pillow is not installed")
    page = tmp_path / "report.html"
    page.write_text(render_html(models["columns"]))
    seen = look(page)
    assert seen.rendered == "ok", seen.rendered
    assert seen.errors == []
    chart = next(c for c in seen.charts if c["id"] == "client_publish_join")
    assert chart["marks"] >= 1 and chart["width"] > 300, chart
    # the points: pixels of colour (the axes and labels are grey), of more than one step
    img = (
        Image.open(io.BytesIO(seen.png))
        .convert("RGB")
        .crop(
            (
                int(chart["x"]),
                int(chart["y"]),
                int(chart["x"] + chart["width"]),
                int(chart["y"] + chart["height"]),
            )
        )
    )
    coloured = [p for p in img.get_flattened_data() if max(p) - min(p) > 80]
    hues = {max(range(3), key=lambda c: p[c]) for p in coloured}
    assert len(coloured) > 200 and len(hues) >= 2, (len(coloured), hues)


def test_the_pipelines_grpc_tables_give_the_same_join(models: dict[str, dict[str, Any]]) -> None:
    """`lbparse report` on a pipeline's output reads the client's side back from
    its grpc_calls and grpc_messages tables (ClientCalls.add_tables), the NATS
    side from its rows: here the same tables, made without Spark."""
    agg = Aggregator()
    for rec in CaptureReader(API_SHORT):
        agg.add(rec)
    tables: dict[str, list[dict[str, Any]]] = {GRPC_CALLS: [], GRPC_MESSAGES: []}
    for batch in grpc_tables(str(API_SHORT)):
        for name in tables:
            if name in batch:
                tables[name] += batch[name].to_pylist()
    agg.client.add_tables(tables[GRPC_CALLS], tables[GRPC_MESSAGES])
    assert agg.client.join.model() == models["records"]["client"]["publish_join"]


def test_the_join_does_not_depend_on_the_order_the_client_side_comes_in(
    models: dict[str, dict[str, Any]],
) -> None:
    """The paths see the client's messages in different orders (as each call's
    messages complete, or sorted by time from the tables): the requests given
    newest first, then the responses, make the same join, rows in request time order."""
    agg = Aggregator()
    grpc: list[Any] = []
    for rec in CaptureReader(API_SHORT, on_grpc=grpc.append):
        agg.add(rec)
    msgs = [g for g in grpc if isinstance(g, GrpcMessage)]
    for g in sorted(
        (g for g in msgs if g.direction == "client_to_server"), key=lambda g: -(g.ts or 0)
    ):
        agg.client.add(g)
    for g in msgs:
        if g.direction == "server_to_client":
            agg.client.add(g)
    join = agg.client.join.model()
    assert join == models["records"]["client"]["publish_join"]
    assert join is not None and len(join["messages"]) == 75
