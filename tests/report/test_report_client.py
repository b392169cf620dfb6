"""`lbparse report`'s client section (lbparse.report.client_calls): on the shared
api-short capture, the gRPC calls by method with their outcomes and
latency, PublishAsync's requests paired with their responses per
AckPolicy, error statuses, subscriptions with their message counts, all
equal to what the capture reader finds, on both the columnar and the
record path; no section for a NATS-only capture."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from support.api_short import grpc_items, report_models
from support.shared import LIFTBRIDGE

from lbparse.capture.grpc import GrpcCall, GrpcMessage
from lbparse.report import build_model, render_html
from lbparse.report.charts import CLIENT
from lbparse.report.client_calls import status_name

# The api-short report models (two readings, ~2 s) and pages: not in make test-fast
pytestmark = pytest.mark.slow

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"


@pytest.fixture(scope="module")
def items() -> list[Any]:
    return grpc_items()


@pytest.fixture(scope="module")
def models() -> dict[str, dict[str, Any]]:
    return report_models()


def test_the_client_section_counts_what_the_reader_finds(
    models: dict[str, dict[str, Any]], items: list[Any]
) -> None:
    calls = [i for i in items if isinstance(i, GrpcCall)]
    msgs = [i for i in items if isinstance(i, GrpcMessage)]
    client = models["columns"]["client"]
    assert client == models["records"]["client"]  # the C loop's path reads HTTP/2 again
    assert (client["calls"], client["messages"]) == (len(calls), len(msgs)) == (55, 287)
    by_method = {m["method"]: m for m in client["methods"]}
    assert {k: m["calls"] for k, m in by_method.items()} == Counter(c.method_name for c in calls)
    for name, m in by_method.items():
        assert m["outcomes"] == Counter(
            status_name(c.grpc_status, c.end) for c in calls if c.method_name == name
        )
        answered = [c for c in calls if c.method_name == name and c.first_response_ts]
        assert m["latency"]["count"] == len(answered)
    errors = Counter(
        f"{c.method_name}: {status_name(c.grpc_status, c.end)}"
        for c in calls
        if c.grpc_status not in (None, 0)
    )
    assert errors == {
        "FetchPartitionMetadata: FAILED_PRECONDITION": 5,
        "DeleteStream: NOT_FOUND": 1,
    }
    async_errors = sum(
        1 for m in msgs if m.type == "proto.PublishResponse" and "asyncError" in (m.message or {})
    )
    assert async_errors
    assert client["errors"] == {**errors, "PublishAsync: asyncError": async_errors}
    assert sum(r["count"] for r in client["errors_over_time"]) == sum(client["errors"].values())


def test_publish_async_is_paired_by_correlation_id_per_ack_policy(
    models: dict[str, dict[str, Any]], items: list[Any]
) -> None:
    msgs = [i for i in items if isinstance(i, GrpcMessage) and i.method == "PublishAsync"]
    requests = [m.message for m in msgs if m.direction == "client_to_server"]
    responses = [m.message for m in msgs if m.direction == "server_to_client"]
    pa_ = models["columns"]["client"]["publish_async"]
    by_policy = {p["ack_policy"]: p for p in pa_["by_policy"]}
    assert {p: v["requests"] for p, v in by_policy.items()} == Counter(
        (r or {}).get("ackPolicy", "LEADER") for r in requests
    )
    assert by_policy["NONE"]["answered"] == 0 and by_policy["ALL"]["answered"] > 0
    # every response of the capture found its request: none left on either side
    assert sum(p["answered"] for p in by_policy.values()) == len(responses) == 57
    assert pa_["unanswered"] == 0 and pa_["responses_without_request"] == 0
    for p in by_policy.values():
        assert p["latency"]["count"] == p["answered"]


def test_subscriptions_and_their_message_counts(
    models: dict[str, dict[str, Any]], items: list[Any]
) -> None:
    subs = [c for c in items if isinstance(c, GrpcCall) and c.method_name == "Subscribe"]
    got = models["columns"]["client"]["subscriptions"]
    assert len(got) == len(subs) == 4
    assert sorted((s["stream"], s["partition"], s["messages"]) for s in got) == sorted(
        (
            c.to_json_dict()["requests"][0]["stream"],
            c.to_json_dict()["requests"][0].get("partition", 0),
            c.counts["server_to_client"] - 1,
        )
        for c in subs
    )
    assert sum(s["messages"] for s in got) == 67


def test_the_page_has_the_client_section(models: dict[str, dict[str, Any]]) -> None:
    html = render_html(models["columns"])
    assert f"<h2>{CLIENT}</h2>" in html
    assert "55 calls, 287 gRPC messages" in html
    assert "FetchPartitionMetadata: FAILED_PRECONDITION" in html  # the errors chart's data


def test_a_nats_only_capture_has_no_client_section() -> None:
    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")
    model = build_model([str(SHORT)])
    assert model["client"] is None
    assert CLIENT not in render_html(model)
