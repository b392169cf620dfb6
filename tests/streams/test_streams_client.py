"""lbparse.streams.client without a cluster: the generated stubs of api.proto's
`service API`, the servers option, and a server that is not there (a closed
loopback port: a one-line error within the timeout, never a hang).
The reads themselves are tested against a real cluster in
tests/spark/test_streams_source.py."""

from __future__ import annotations

import time

import pytest

grpc = pytest.importorskip("grpc")

from support.net import free_port  # noqa: E402

from lbparse.streams.client import StreamsClient, StreamsError, parse_servers, subject_matches  # noqa: E402
from lbparse_generated.proto import api_pb2, api_pb2_grpc  # noqa: E402


def test_the_stub_has_every_rpc_of_the_service() -> None:
    """make generate's gRPC stubs: one callable per RPC of spec/proto/api.proto,
    unary or streaming as the service says."""
    service = api_pb2.DESCRIPTOR.services_by_name["API"]
    stub = api_pb2_grpc.APIStub(grpc.insecure_channel("127.0.0.1:1"))
    kinds = {
        "UnaryUnary": (False, False),
        "UnaryStream": (False, True),
        "StreamUnary": (True, False),
        "StreamStream": (True, True),
    }
    found = {}
    for method in service.methods:
        kind = (
            type(getattr(stub, method.name)).__name__.replace("_", "").replace("MultiCallable", "")
        )
        found[method.name] = kinds[kind]
    assert len(found) == 16
    assert found["Subscribe"] == (False, True) and found["PublishAsync"] == (True, True)
    assert found == {m.name: (m.client_streaming, m.server_streaming) for m in service.methods}


def test_servers_are_host_port_pairs() -> None:
    assert parse_servers(" 127.0.0.1:9292, 127.0.0.1:9293 ") == ["127.0.0.1:9292", "127.0.0.1:9293"]
    for bad in ("", "127.0.0.1", "127.0.0.1:x,"):
        with pytest.raises(StreamsError):
            parse_servers(bad)


@pytest.mark.slow  # over half a second: not in make test-fast
def test_an_unreachable_server_is_one_line_within_the_timeout() -> None:
    port = free_port()  # nothing listens there
    start = time.monotonic()
    with (
        StreamsClient([f"127.0.0.1:{port}"], timeout=2.0) as client,
        pytest.raises(StreamsError) as err,
    ):
        client.partitions(["orders"])
    assert time.monotonic() - start < 10
    text = str(err.value)
    assert "\n" not in text and text.startswith("no Liftbridge server answered FetchMetadata")
    assert f"127.0.0.1:{port}: UNAVAILABLE" in text


@pytest.mark.parametrize(
    "pattern,subject,matches",
    [
        ("lb.orders", "lb.orders", True),
        ("lb.orders", "lb.orders.x", False),
        ("lb.*.orders", "lb.eu.orders", True),
        ("lb.*.orders", "lb.eu.x.orders", False),
        ("lb.*", "lb", False),
        ("lb.>", "lb.eu.audit.log", True),
        ("lb.>", "lb", False),
        ("*", "orders", True),
        ("*", "a.b", False),
        (">", "a.b", True),
        ("lb.e*", "lb.eu", False),  # a wildcard is a whole token, as NATS has it
    ],
)
def test_a_subject_pattern_is_a_nats_wildcard(pattern: str, subject: str, matches: bool) -> None:
    assert subject_matches(pattern, subject) is matches
