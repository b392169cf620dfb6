"""gRPC over cleartext HTTP/2 in captures (lbparse.capture.h2, grpc): the
shared capture of a real Liftbridge cluster's client traffic
(`CAPTURE_API=1 run_cluster.sh`, api-short.pcapng), compared with the real
tshark's own HTTP/2 and gRPC dissection of the same file; and calls made
here with the real `hpack` encoder, on ports no one registers for gRPC,
to hold the records' fields, gzip, other encodings, trailers-only
responses and RST_STREAM/GOAWAY."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import hpack
import pytest
from support import capwriter as cw
from support.api_short import reading as api_short_reading
from support.capwriter import (
    SETTINGS,
    frame,
    grpc_message,
    h2c_capture,
    request_headers,
    unary_capture,
)
from support.shared import LIFTBRIDGE, shared_path

from lbparse.capture import CaptureReader, Notice
from lbparse.capture.grpc import METHODS, GrpcCall, GrpcMessage
from lbparse.columnar.grpctables import grpc_tables
from lbparse_generated.proto import api_pb2

ROOT = Path(__file__).resolve().parents[2]
API_PORTS = (29392, 29393, 29394)


def read(path: Path | str) -> tuple[list[Any], list[Notice], int]:
    items: list[Any] = []
    notices: list[Notice] = []
    nats = sum(1 for _ in CaptureReader(path, on_grpc=items.append, on_notice=notices.append))
    return items, notices, nats


def calls_of(items: list[Any]) -> list[GrpcCall]:
    return [i for i in items if isinstance(i, GrpcCall)]


def messages_of(items: list[Any]) -> list[GrpcMessage]:
    return [i for i in items if isinstance(i, GrpcMessage)]


@pytest.fixture(scope="module")
def api_short() -> tuple[list[Any], list[Notice], int]:
    return api_short_reading()


# -- the shared capture -------------------------------------------------------------


def test_every_call_of_the_api_capture_is_read(
    api_short: tuple[list[Any], list[Notice], int],
) -> None:
    items, notices, _ = api_short
    calls = calls_of(items)
    assert calls, "no gRPC call found"
    # The API's bytes are no longer "not NATS": no protocol notice is left.
    assert not [n for n in notices if n.kind == "protocol"], notices
    for call in calls:
        assert call.path in METHODS and call.method is not None, call.to_json_dict()
        assert call.request_ts is not None and call.end_ts is not None
        assert call.request_ts <= call.end_ts
        if call.end == "trailers":  # answered: status, first response and trailers timed
            assert call.grpc_status is not None and call.http_status == "200"
            assert call.request_ts <= call.first_response_ts <= call.trailers_ts  # type: ignore[operator]
        else:  # the client cancelled a stream, or closed its connection first: said
            assert call.end in ("rst_stream", "closed", "capture_end")
            assert call.method.client_streaming or call.method.server_streaming
    ended = Counter(c.end for c in calls if c.end != "trailers")
    said = Counter(
        "rst_stream"
        if "RST_STREAM" in n.message
        else "closed"
        if "the connection ends" in n.message
        else "capture_end"
        for n in notices
        if n.kind in ("grpc", "incomplete")
    )
    assert ended == said


def test_each_calls_messages_are_its_records(
    api_short: tuple[list[Any], list[Notice], int],
) -> None:
    items, _, _ = api_short
    per_call: dict[tuple[str, int], Counter[str]] = {}
    for m in messages_of(items):
        assert m.error is None, m.to_json_dict()
        client = m.src if m.direction == "client_to_server" else m.dst
        per_call.setdefault((client, m.stream_id), Counter())[m.direction] += 1
    for call in calls_of(items):
        got = per_call.pop((call.client, call.stream_id), Counter())
        assert got["client_to_server"] == call.counts["client_to_server"]
        assert got["server_to_client"] == call.counts["server_to_client"]
        method = call.method
        assert method is not None
        if not method.client_streaming:
            assert call.counts["client_to_server"] == 1
        if not method.server_streaming and call.end == "trailers":
            assert call.counts["server_to_client"] == (1 if call.grpc_status == 0 else 0)
        d = call.to_json_dict()
        assert len(d["requests"]) == call.counts["client_to_server"]
        assert len(d["responses"]) == call.counts["server_to_client"]
    assert not per_call  # no message outside a call


def test_subscribe_and_publish_async_streams(
    api_short: tuple[list[Any], list[Notice], int],
) -> None:
    """Subscribe's server stream is its sequence of Messages (the first an
    empty one: the server's "subscribed"), PublishAsync's two streams
    their PublishRequests and PublishResponses, paired by correlation id."""
    items, _, _ = api_short
    calls = calls_of(items)
    subs = [c for c in calls if c.method_name == "Subscribe"]
    assert subs and all(c.counts["server_to_client"] > 1 for c in subs)
    for c in subs:
        first, *rest = c.to_json_dict()["responses"]
        assert first == {}
        assert all(m["stream"] == c.to_json_dict()["requests"][0]["stream"] for m in rest)
    pubs = [c for c in calls if c.method_name == "PublishAsync"]
    assert pubs
    sent = {m["correlationId"] for c in pubs for m in c.to_json_dict()["requests"]}
    acked = {
        m["correlationId"]
        for c in pubs
        for m in c.to_json_dict()["responses"]
        if "correlationId" in m
    }
    assert acked and acked <= sent


def _tshark(capture: Path, *fields: str, ports: Any = API_PORTS) -> list[list[str]]:
    decode = [a for p in ports for a in ("-d", f"tcp.port=={p},http2")]
    out = subprocess.run(
        [
            "tshark",
            "-n",
            "-r",
            str(capture),
            *decode,
            "-o",
            f'uat:protobuf_search_paths:"{ROOT / "spec" / "proto"}","TRUE"',
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-E",
            "aggregator=|",
            *(a for f in fields for a in ("-e", f)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    columns: list[list[str]] = [[] for _ in fields]
    for line in out.splitlines():
        for i, value in enumerate(line.split("\t")):
            columns[i] += [v for v in value.split("|") if v]
    return columns


@pytest.mark.slow
def test_the_api_capture_agrees_with_tshark(api_short: tuple[list[Any], list[Notice], int]) -> None:
    """tshark, told the API's ports and spec/proto, finds as many calls of
    each method, as many gRPC messages, and as many (non-empty) messages
    of each request and response type."""
    items, _, _ = api_short
    paths, lengths, names = _tshark(
        shared_path("liftbridge", "samples", "api-short.pcapng"),
        "http2.headers.path",
        "grpc.message_length",
        "protobuf.message.name",
    )
    assert Counter(c.path for c in calls_of(items)) == Counter(paths)
    msgs = messages_of(items)
    assert len(msgs) == len(lengths)
    assert sorted(m.length for m in msgs) == sorted(int(n) for n in lengths)
    ours = Counter(m.type for m in msgs if m.length)
    theirs = Counter(names)
    assert ours and {t: theirs[t] for t in ours} == ours


# -- a fresh run of the real cluster, its API captured ------------------------------


@pytest.fixture(scope="module")
def api_run(liftbridge_short_api: Any) -> Any:
    """A `short` run of the real cluster with CAPTURE_API=1 (conftest's: its
    own, the session's `short` run captures NATS only)."""
    return liftbridge_short_api


def client_stats(log: str) -> Counter[str]:
    """The counts lbclient prints at the end of each phase, summed:
    `... [phase] done in 12.3s: k=v k=v ...` (a `short` run has one phase,
    a `full` run five)."""
    stats: Counter[str] = Counter()
    for line in log.splitlines():
        if " done in " in line:
            stats.update(
                {k: int(v) for k, v in (kv.split("=") for kv in line.split(": ", 1)[1].split())}
            )
    return stats


def check_calls_against_client_log(run: Any) -> None:
    """Every call the client says it made, in the capture, with its outcome."""
    items, notices, nats = read(run.capture)
    log = run.log("client.log")
    stats = client_stats(log)
    assert nats and not [n.to_json_dict() for n in notices if n.kind == "protocol"]
    msgs = messages_of(items)
    bad = [m.to_json_dict() for m in msgs if m.error is not None]
    assert msgs and not bad, (len(bad), bad[:3], [n.to_json_dict() for n in notices][:10])
    ok = Counter(c.method_name for c in calls_of(items) if c.grpc_status == 0)
    assert ok["CreateStream"] == stats["create_stream"]
    assert ok["PublishToSubject"] == stats["pts_ok"]
    # go-liftbridge publishes on PublishAsync streams, Publish too: every
    # publish the client made is a PublishRequest there, every ack it got a
    # PublishResponse with an ack.
    # Its admin step's publishes (to paused and readonly partitions) are
    # logged, not counted: one line each, ": <nil>" or "resumed it" when acked.
    admin = [
        x for x in log.splitlines() if "] publish to paused " in x or "] publish to readonly " in x
    ]
    admin_ok = [x for x in admin if "resumed it" in x or ": <nil>" in x]
    acks = sum(v for k, v in stats.items() if k.startswith("ack_"))  # per AckPolicy
    published = [m for m in msgs if m.type == "proto.PublishRequest"]
    answers = [m.message or {} for m in msgs if m.type == "proto.PublishResponse"]
    # A publish the server answered was on the wire. One counted when gRPC
    # took it (AckPolicy NONE: `sent_none`; an async one whose ack then
    # failed: `async_err`) sat in the client's HTTP/2 buffer first, and a
    # node killed under it loses it (grpc-go #2159): only a run that kills
    # nodes may lose those, and only on a stream the kill cut.
    answered_sends = (
        acks
        + len(admin)
        + sum(stats[k] for k in ("async_ack", "occ_ok", "occ_err", "too_large_err"))
    )
    buffered = stats["sent_none"] + stats["async_err"]
    made = answered_sends + buffered
    # A publish that failed to send (a node killed under it) may or may not
    # have reached the wire before the connection broke.
    failed = stats["async_send_err"] + stats["publish_err"]
    assert len(published) <= made + failed, (len(published), made, failed)
    lost = made - len(published)
    if run.mode == "short":
        assert lost <= 0, (len(published), made, failed)
    else:
        cut = [n for n in notices if n.kind == "incomplete"]
        assert lost <= buffered and (lost <= 0 or cut), (lost, buffered, len(cut))
    # ... and one the client gave up on may still be answered, after it stopped waiting.
    acked = acks + stats["async_ack"] + stats["occ_ok"] + len(admin_ok)
    answered = len([a for a in answers if "asyncError" not in a])
    assert acked <= answered <= acked + failed, (answered, acked, failed)
    assert len([a for a in answers if "asyncError" in a]) == stats["occ_err"] + stats[
        "too_large_err"
    ] + len(admin) - len(admin_ok)


@pytest.mark.slow
def test_a_fresh_runs_calls_agree_with_what_its_client_did(api_run: Any) -> None:
    check_calls_against_client_log(api_run)


@pytest.mark.slow
def test_the_full_runs_calls_agree_with_what_its_client_did(liftbridge_full: Any) -> None:
    """Two failovers under the client: publishes broken by a kill, lookups
    that wait; still every call the client counts is in the capture."""
    check_calls_against_client_log(liftbridge_full)


@pytest.mark.slow
def test_the_full_run_agrees_with_tshark(liftbridge_full: Any) -> None:
    """tshark, told the run's API ports, finds as many calls of each method
    and as many gRPC messages, of the same lengths."""
    items, _, _ = read(liftbridge_full.capture)
    ports = range(liftbridge_full.lb_port, liftbridge_full.lb_port + 3)
    paths, lengths = _tshark(
        liftbridge_full.capture, "http2.headers.path", "grpc.message_length", ports=ports
    )
    assert Counter(c.path for c in calls_of(items)) == Counter(paths)
    msgs = messages_of(items)
    assert sorted(m.length for m in msgs) == sorted(int(n) for n in lengths)


# -- calls made here ----------------------------------------------------------------


@pytest.mark.parametrize("mss", [None, 7])
def test_unary_calls_on_any_port(tmp_path: Path, mss: int | None) -> None:
    """On port 7001, in whole segments or 7-byte ones: the gzip-compressed
    request decoded, the second call's path from the dynamic table, a
    trailers-only response's status and percent-encoded message."""
    items, notices, nats = read(unary_capture(tmp_path, mss))
    assert nats == 0 and notices == []
    first, second = calls_of(items)
    assert first.to_json_dict() | {
        "ts": None,
        "request_ts": None,
        "first_response_ts": None,
        "trailers_ts": None,
    } == {
        "grpc": "call",
        "ts": None,
        "client": "127.0.0.1:51000",
        "server": "127.0.0.1:7001",
        "stream_id": 1,
        "method": "FetchCursor",
        "path": "/proto.API/FetchCursor",
        "request_ts": None,
        "first_response_ts": None,
        "trailers_ts": None,
        "http_status": "200",
        "grpc_status": 0,
        "grpc_message": "",
        "end": "trailers",
        "request_count": 1,
        "response_count": 1,
        "requests": [{"stream": "orders", "partition": 2, "cursorId": "c1"}],
        "responses": [{"offset": "41"}],
    }
    assert first.request_ts < first.first_response_ts <= first.trailers_ts  # type: ignore[operator]
    assert (second.method_name, second.grpc_status, second.grpc_message, second.end) == (
        "FetchCursor",
        5,
        "no such stream: orders\n",
        "trailers",
    )
    assert second.first_response_ts == second.trailers_ts
    req = messages_of(items)[0]
    assert (req.compressed, req.type, req.message) == (
        True,
        "proto.FetchCursorRequest",
        {"stream": "orders", "partition": 2, "cursorId": "c1"},
    )


def test_without_on_grpc_http2_stays_a_protocol_notice(tmp_path: Path) -> None:
    notices: list[Notice] = []
    assert list(CaptureReader(unary_capture(tmp_path), on_notice=notices.append)) == []
    assert {n.kind for n in notices} == {"protocol"}


def test_other_encodings_are_named_and_the_rest_read(tmp_path: Path) -> None:
    ce, se = hpack.Encoder(), hpack.Encoder()
    body = api_pb2.FetchCursorRequest(stream="x").SerializeToString()
    client = [
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + SETTINGS
        + frame(1, 4, 1, request_headers(ce, "FetchCursor", ("grpc-encoding", "snappy")))
        + frame(0, 1, 1, grpc_message(b"\xff" + body, 1))
    ]
    server = [
        frame(1, 4, 1, se.encode([(":status", "200")]))
        + frame(0, 0, 1, grpc_message(api_pb2.FetchCursorResponse(offset=3).SerializeToString()))
        + frame(1, 5, 1, se.encode([("grpc-status", "0")]))
    ]
    items, _, _ = read(h2c_capture(tmp_path / "snappy.pcap", client, server))
    req, resp = messages_of(items)
    assert req.message is None and "'snappy'" in (req.error or "")
    assert resp.message == {"offset": "3"}


def test_rst_stream_goaway_and_a_half_captured_call(tmp_path: Path) -> None:
    """A capture that starts mid-connection (no handshake, no preface: the
    server's response to a request it does not hold), a PublishAsync reset
    by the client, a GOAWAY: each said, each call a record, nothing lost."""
    ce, se = hpack.Encoder(), hpack.Encoder()
    pub = api_pb2.PublishRequest(stream="s", correlationId="k1").SerializeToString()
    client = [
        frame(1, 4, 5, request_headers(ce, "PublishAsync")) + frame(0, 0, 5, grpc_message(pub)),
        frame(3, 0, 5, (8).to_bytes(4, "big")),
    ]
    server = [
        frame(1, 4, 3, se.encode([(":status", "200")]))
        + frame(0, 0, 3, grpc_message(api_pb2.FetchMetadataResponse().SerializeToString()))
        + frame(1, 5, 3, se.encode([("grpc-status", "0")])),
        frame(7, 0, 0, (5).to_bytes(4, "big") + (0).to_bytes(4, "big") + b"bye"),
    ]
    items, notices, _ = read(h2c_capture(tmp_path / "mid.pcap", client, server, handshake=False))
    calls = {c.stream_id: c for c in calls_of(items)}
    assert calls[3].end == "trailers" and calls[3].method is None
    assert calls[3].counts["server_to_client"] == 1
    assert calls[5].end == "rst_stream" and calls[5].rst_code == 8
    assert calls[5].to_json_dict()["requests"] == [{"stream": "s", "correlationId": "k1"}]
    said = " | ".join(n.message for n in notices)
    for words in (
        "HPACK state unknown",
        "stream 3: a response whose request",
        "RST_STREAM CANCEL on stream 5",
        "GOAWAY NO_ERROR, last stream 5",
    ):
        assert words in said


def test_a_reset_calls_late_answer_is_its_own(tmp_path: Path) -> None:
    """The client cancels a FetchMetadata (RST_STREAM) as the node's answer is
    on its way, as a real `full` run's client once did: the answer's frames
    are the reset call's (RFC 9113, 5.4.2), its message decoded as its
    response, no call of their own and no "response whose request the
    capture does not hold"."""
    ce, se = hpack.Encoder(), hpack.Encoder()
    answer = api_pb2.FetchMetadataResponse(
        brokers=[api_pb2.Broker(id="node1", host="127.0.0.1", port=9292)]
    ).SerializeToString()
    client = [
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + SETTINGS
        + frame(1, 4, 5, request_headers(ce, "FetchMetadata"))
        + frame(0, 1, 5, grpc_message(b"")),
        frame(3, 0, 5, (8).to_bytes(4, "big")),
    ]
    server = [
        SETTINGS,
        frame(1, 4, 5, se.encode([(":status", "200")]))
        + frame(0, 0, 5, grpc_message(answer))
        + frame(1, 5, 5, se.encode([("grpc-status", "0")])),
    ]
    capture = h2c_capture(tmp_path / "late.pcap", client, server)
    items, notices, _ = read(capture)
    (call,) = calls_of(items)
    assert (call.method_name, call.end, call.rst_code) == ("FetchMetadata", "rst_stream", 8)
    late = messages_of(items)[-1]
    assert late.to_json_dict() | {"ts": None} == {
        "grpc": "message",
        "ts": None,
        "src": "127.0.0.1:7001",
        "dst": "127.0.0.1:51000",
        "direction": "server_to_client",
        "stream_id": 5,
        "method": "FetchMetadata",
        "type": "proto.FetchMetadataResponse",
        "index": 0,
        "compressed": False,
        "length": len(answer),
        "late": True,
        "message": {"brokers": [{"id": "node1", "host": "127.0.0.1", "port": 9292}]},
    }
    # In the tables, the late message joins its call's row, after its request.
    (tables,) = grpc_tables(str(capture))
    calls, msgs = (tables[t].to_pylist() for t in ("grpc_calls", "grpc_messages"))
    assert [(c["position"], c["end"]) for c in calls] == [(0, "rst_stream")]
    assert [(m["position"], m["message_seq"], m["direction"]) for m in msgs] == [
        (0, 0, "client_to_server"),
        (0, 1, "server_to_client"),
    ]
    assert [n.message for n in notices] == [
        "RST_STREAM CANCEL on stream 5 (FetchMetadata)",
        "stream 5 (FetchMetadata): frames after its RST_STREAM, sent before the reset "
        "reached the peer: read as the reset call's",
    ]


@pytest.mark.parametrize("fin", [True, False])
def test_a_call_open_when_its_connection_or_the_capture_ends(tmp_path: Path, fin: bool) -> None:
    enc = hpack.Encoder()
    client = [
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + SETTINGS
        + frame(1, 4, 1, request_headers(enc, "Subscribe"))
        + frame(0, 1, 1, grpc_message(api_pb2.SubscribeRequest(stream="s").SerializeToString()))
    ]
    server = [SETTINGS + frame(1, 4, 1, enc.encode([(":status", "200")]))]
    items, notices, _ = read(h2c_capture(tmp_path / "open.pcap", client, server, fin=fin))
    (call,) = calls_of(items)
    assert call.end == ("closed" if fin else "capture_end")
    (n,) = notices
    assert n.kind == "incomplete" and ("connection" if fin else "capture") in n.message


def test_nats_caught_inside_a_binary_payload_stays_nats(tmp_path: Path) -> None:
    """A NATS connection whose capture starts inside a payload that begins
    like an HTTP/2 frame header (a DATA frame of 16 bytes, cut): without
    the handshake, only whole frames make a direction HTTP/2."""
    conn = cw.Conn(("127.0.0.1", 51000), ("127.0.0.1", 4222))
    pkts = conn.send("s", b"\x00\x00\x10\x00\x00\x00\x00\x00\x01abcde")
    pkts += conn.send("s", b"\r\n" + cw.msg("a.b", 1, b"hello"))
    path = tmp_path / "mid-nats.pcap"
    cw.write_pcap(str(path), [(1.7e9 + i, cw.link(cw.ETHERNET, p)) for i, p in enumerate(pkts)])
    items: list[Any] = []
    recs = list(CaptureReader(path, layout="plain", on_grpc=items.append))
    assert [(r.verb, r.subject, r.payload) for r in recs] == [("MSG", "a.b", b"hello")]
    assert items == []


def test_a_live_http2_connection_is_not_forgotten_past_max_flows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_FLOWS connections the reader forgets idle ones; an HTTP/2
    connection between calls is not idle: its HPACK tables would be lost
    (the next call's :path is a reference into them)."""
    from lbparse.capture import reader

    monkeypatch.setattr(reader, "MAX_FLOWS", 4)
    ce, se = hpack.Encoder(), hpack.Encoder()
    req = grpc_message(api_pb2.FetchCursorRequest(stream="s").SerializeToString())
    h2c = cw.Conn(("127.0.0.1", 51000), ("127.0.0.1", 7001))
    pkts = h2c.handshake()
    pkts += h2c.send("c", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SETTINGS)
    pkts += h2c.send("s", SETTINGS)
    for sid in (1, 3):
        pkts += h2c.send(
            "c", frame(1, 4, sid, request_headers(ce, "FetchCursor")) + frame(0, 1, sid, req)
        )
        pkts += h2c.send(
            "s", frame(1, 5, sid, se.encode([(":status", "200"), ("grpc-status", "0")]))
        )
        for port in range(20):  # connections enough to make the reader forget idle ones
            nats = cw.Conn(("127.0.0.1", 40000 + sid * 100 + port), ("127.0.0.1", 4222))
            pkts += nats.handshake() + nats.send("c", cw.pub("a", b"x"))
    path = tmp_path / "many.pcap"
    cw.write_pcap(
        str(path), [(1.7e9 + i / 1e3, cw.link(cw.ETHERNET, p)) for i, p in enumerate(pkts)]
    )
    items, notices, nats_count = read(path)
    assert nats_count == 40 and notices == []
    assert [c.method_name for c in calls_of(items)] == ["FetchCursor", "FetchCursor"]


@pytest.mark.slow  # over half a second: not in make test-fast
def test_nats_flows_read_the_same_with_on_grpc() -> None:
    """HTTP/2's sniff takes no NATS connection of the real cluster capture."""
    path = LIFTBRIDGE / "samples" / "short.pcapng"
    if not path.exists():
        pytest.skip(f"{path} not there")
    plain = [r.to_json_dict() for r in CaptureReader(path)]
    items: list[Any] = []
    with_grpc = [r.to_json_dict() for r in CaptureReader(path, on_grpc=items.append)]
    assert with_grpc == plain and items == []


@pytest.mark.slow  # over half a second: not in make test-fast
def test_the_clis_output_reads_back_as_its_nats_records(tmp_path: Path) -> None:
    """lbparse capture's JSON Lines, gRPC records among them, read back:
    the NATS records again, the gRPC lines skipped, nothing reported."""
    capture = shared_path("liftbridge", "samples", "api-short.pcapng")
    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'generated'}"}
    out = tmp_path / "api.jsonl"
    run = [sys.executable, "-P", "-m", "lbparse", "capture"]
    subprocess.run(run + [str(capture), "-o", str(out)], env=env, timeout=300, capture_output=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    nats = [d for d in lines if "grpc" not in d]
    assert nats and len(nats) < len(lines)
    again = subprocess.run(run + [str(out)], env=env, timeout=300, capture_output=True, text=True)
    assert again.returncode == 0 and again.stderr == ""
    assert [json.loads(line) for line in again.stdout.splitlines()] == nats


@pytest.mark.slow  # over half a second: not in make test-fast
def test_the_clis_stats_count_calls_by_method_and_status(
    api_short: tuple[list[Any], list[Notice], int],
) -> None:
    capture = shared_path("liftbridge", "samples", "api-short.pcapng")
    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'generated'}"}
    out = subprocess.run(
        [sys.executable, "-P", "-m", "lbparse", "capture", str(capture), "-q", "--stats", "--all"],
        env=env,
        timeout=300,
        capture_output=True,
        text=True,
    ).stderr.splitlines()
    rows = out[out.index("gRPC calls (by method and grpc-status, or how they ended):") + 1 :]
    got = {
        line.rsplit(None, 1)[0].strip(): int(line.rsplit(None, 1)[1])
        for line in rows
        if line.startswith("  ")
    }
    want = Counter(
        f"{c.method_name} "
        + (f"status {c.grpc_status}" if c.grpc_status is not None else str(c.end))
        for c in calls_of(api_short[0])
    )
    assert got == want


@pytest.mark.slow  # over half a second: not in make test-fast
def test_the_cli_shows_calls_and_messages_among_the_records(tmp_path: Path) -> None:
    path = unary_capture(tmp_path)
    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'generated'}"}
    run = [sys.executable, "-P", "-m", "lbparse", "capture", str(path)]
    out = subprocess.run(run, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["grpc"], r["stream_id"]) for r in rows] == [
        ("message", 1),
        ("message", 1),
        ("call", 1),
        ("message", 3),
        ("call", 3),
    ]
    assert rows[2]["ts"] == rows[2]["trailers_ts"] and isinstance(rows[2]["ts"], str)
    table = subprocess.run(
        run + ["--format", "table"], capture_output=True, text=True, env=env, timeout=120
    ).stdout.splitlines()
    assert [line.split()[4] for line in table] == ["GRPC", "GRPC", "CALL", "GRPC", "CALL"]
    assert "status=5" in table[-1] and "FetchCursor" in table[-1]


@pytest.mark.slow  # over half a second: not in make test-fast
def test_a_call_without_a_status_says_so_in_the_table(tmp_path: Path) -> None:
    """A call the capture cuts before its trailers has no grpc-status: the table
    says `no status`, never Python's `status=None`."""
    ce = hpack.Encoder()
    req = api_pb2.FetchCursorRequest(stream="orders").SerializeToString()
    client = [
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + SETTINGS
        + frame(1, 4, 1, request_headers(ce, "FetchCursor"))
        + frame(0, 1, 1, grpc_message(req))
    ]
    path = h2c_capture(tmp_path / "cut.pcap", client, [SETTINGS], fin=True)
    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'generated'}"}
    out = subprocess.run(
        [sys.executable, "-P", "-m", "lbparse", "capture", str(path), "--format", "table"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    calls = [line for line in out.stdout.splitlines() if " CALL " in line]
    assert len(calls) == 1 and "FetchCursor" in calls[0], out.stdout
    assert " no status " in calls[0] and "None" not in out.stdout
