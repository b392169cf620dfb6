"""gRPC's decoded costs held to named limits (issue #47, class 1): what a
small capture may make the reader build. Three captures, each a few MB at
most, once cost gigabytes: one gzip FetchMetadataResponse that decodes to
33M empty brokers (max_grpc_elements), an open PublishAsync of 40 gzip
messages of 60 MB each (max_grpc_inflate, and the kept messages counted by
what they decode to), and a 65 KB `:path` put once in HPACK's table and
named by thousands of open calls on several connections (max_grpc_headers,
max_open_calls). Each is read by `lbparse capture` (JSON Lines, --stats),
`capture --tables` and `report` under an address-space limit: it ends in
seconds with exit 1 and a limit notice naming the limit, and the ordinary
call after the hostile one is read."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hpack
import pytest
from support import capwriter as cw
from support.capwriter import SETTINGS, frame, grpc_message, request_headers

from lbparse.capture import CaptureReader, Notice, h2
from lbparse.capture.grpc import GrpcCall, GrpcMessage, element_count
from lbparse.codec.limits import Limits
from lbparse.columnar.grpctables import read_grpc
from lbparse_generated.proto import api_pb2

ROOT = Path(__file__).resolve().parents[2]
PREFACE = h2.PREFACE
# The address space each command is run in: the interpreter, numpy and
# pyarrow's reservations take about half of it.
ADDRESS_SPACE = 1536 << 20
# each run's bounds, the "under 1 GB and a few seconds": they take
# 0.5-3 s and 125-500 MiB here (the report's setup most), beside a full suite
SECONDS = 10
PEAK = 1 << 30


# -- the captures --------------------------------------------------------------------


def _frames(sid: int, data: bytes, end: bool = False) -> bytes:
    """`data` as DATA frames of at most 16 KiB (the default SETTINGS_MAX_FRAME_SIZE)."""
    step = h2.DEFAULT_MAX_FRAME
    pieces = [data[i : i + step] for i in range(0, len(data), step)] or [b""]
    return b"".join(
        frame(0, 1 if end and i == len(pieces) - 1 else 0, sid, p) for i, p in enumerate(pieces)
    )


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def _ordinary_call(ce: hpack.Encoder, se: hpack.Encoder, sid: int) -> tuple[bytes, bytes]:
    """A FetchCursor call, answered: what must still be read after the hostile one."""
    req = api_pb2.FetchCursorRequest(stream="after", partition=1, cursorId="c")
    client = frame(1, 4, sid, request_headers(ce, "FetchCursor")) + _frames(
        sid, grpc_message(req.SerializeToString()), end=True
    )
    server = (
        frame(1, 4, sid, se.encode([(":status", "200"), ("content-type", "application/grpc")]))
        + _frames(sid, grpc_message(api_pb2.FetchCursorResponse(offset=41).SerializeToString()))
        + frame(1, 5, sid, se.encode([("grpc-status", "0")]))
    )
    return client, server


def _write(path: Path, conns: list[tuple[list[bytes], list[bytes]]]) -> Path:
    """A capture of `conns` (each the client's pieces and the server's, sent
    alternately), one connection after the other, each from its own port."""
    pkts: list[bytes] = []
    for k, (client, server) in enumerate(conns):
        conn = cw.Conn(("127.0.0.1", 51000 + k), ("127.0.0.1", 9292))
        pkts += conn.handshake()
        for i in range(max(len(client), len(server))):
            if i < len(client):
                pkts += conn.send("c", client[i], 65000)
            if i < len(server):
                pkts += conn.send("s", server[i], 65000)
    cw.write_pcap(
        str(path), [(1.7e9 + i / 1e4, cw.link(cw.ETHERNET, p)) for i, p in enumerate(pkts)]
    )
    return path


def metadata_bomb(path: Path, brokers: int = 33_550_000) -> Path:
    """(a) One gzip FetchMetadataResponse of `brokers` empty brokers (two bytes
    each: 64 MB, under max_frame), then an ordinary call."""
    ce, se = hpack.Encoder(), hpack.Encoder()
    body = _gzip(b"\x0a\x00" * brokers)
    client = [
        PREFACE
        + SETTINGS
        + frame(1, 4, 1, request_headers(ce, "FetchMetadata"))
        + _frames(1, grpc_message(b""), end=True)
    ]
    server = [
        SETTINGS
        + frame(
            1,
            4,
            1,
            se.encode(
                [
                    (":status", "200"),
                    ("grpc-encoding", "gzip"),
                    ("content-type", "application/grpc"),
                ]
            ),
        )
        + _frames(1, grpc_message(body, 1))
        + frame(1, 5, 1, se.encode([("grpc-status", "0")]))
    ]
    after = _ordinary_call(ce, se, 3)
    return _write(path, [(client + [after[0]], server + [after[1]])])


def publish_bomb(path: Path, messages: int = 40, size: int = 60_000_000) -> Path:
    """(b) An open PublishAsync carrying `messages` gzip PublishRequests, each
    with a value of `size` zero bytes, then an ordinary call."""
    ce, se = hpack.Encoder(), hpack.Encoder()
    one = _gzip(api_pb2.PublishRequest(stream="s", value=bytes(size)).SerializeToString())
    client = [
        PREFACE
        + SETTINGS
        + frame(1, 4, 1, request_headers(ce, "PublishAsync", ("grpc-encoding", "gzip")))
    ]
    client += [_frames(1, grpc_message(one, 1)) for _ in range(messages)]
    server = [SETTINGS + frame(1, 4, 1, se.encode([(":status", "200")]))]
    server += [b""] * (len(client) - 1)
    after = _ordinary_call(ce, se, 3)
    return _write(path, [(client + [after[0]], server + [after[1]])])


def path_bomb(path: Path, connections: int = 6, calls: int = 4095, length: int = 65_000) -> Path:
    """(c) On each connection a `length`-byte :path put once in HPACK's
    dynamic table (the server allows a 64 KiB one), then named by `calls`
    open calls; an ordinary call after them on each connection."""
    conns = []
    for _ in range(connections):
        ce, se = hpack.Encoder(), hpack.Encoder()
        ce.header_table_size = h2.MAX_TABLE
        table = (1).to_bytes(2, "big") + h2.MAX_TABLE.to_bytes(4, "big")
        long_path = "/" + "p" * (length - 1)
        headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", long_path),
            ("content-type", "application/grpc"),
        ]
        first = ce.encode(headers)  # the long :path added to the table: 4 frames
        pieces = [
            first[i : i + h2.DEFAULT_MAX_FRAME] for i in range(0, len(first), h2.DEFAULT_MAX_FRAME)
        ]
        opens = frame(1, 0, 1, pieces[0]) + b"".join(
            frame(9, 4 if i == len(pieces) - 1 else 0, 1, p) for i, p in enumerate(pieces) if i
        )
        opens += b"".join(frame(1, 4, 2 * i + 1, ce.encode(headers)) for i in range(1, calls))
        after = _ordinary_call(ce, se, 2 * calls + 1)
        conns.append(
            ([PREFACE + SETTINGS, opens, after[0]], [frame(4, 0, 0, table), b"", after[1]])
        )
    return _write(path, conns)


CASES: dict[str, tuple[Callable[[Path], Path], set[str]]] = {
    "metadata": (metadata_bomb, {"max_grpc_elements"}),
    "publish": (publish_bomb, {"max_grpc_inflate"}),
    "path": (path_bomb, {"max_grpc_headers", "max_open_calls"}),
}


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bombs")
    return {name: make(folder / f"{name}.pcap") for name, (make, _) in CASES.items()}


# -- running lbparse in a bounded address space --------------------------------------

_BOUNDED = """
import resource, runpy, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
peak = sys.argv[1]
sys.argv = ["lbparse"] + sys.argv[2:]
try:
    runpy.run_module("lbparse", run_name="__main__", alter_sys=True)
finally:
    # VmHWM, not ru_maxrss: a child's ru_maxrss starts at its forking parent's.
    hwm = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM")]
    with open(peak, "w") as f:
        f.write(str(int(hwm[0]) * 1024))
"""


def run_bounded(
    tmp: Path, *args: str, limit: int = ADDRESS_SPACE
) -> tuple[int, str, str, float, int]:
    """(exit status, stdout, stderr, seconds, peak RSS in bytes) of `lbparse
    args` in an address space of `limit` bytes."""
    # One Arrow and BLAS thread: a pool sized by the cores reserves address
    # space per thread, and under RLIMIT_AS Arrow's acero waits forever for a
    # thread it could not start (report's tables; pyarrow's, not ours).
    env = dict(
        os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'generated'}", OMP_NUM_THREADS="1"
    )
    peak, out, err = tmp / "peak", tmp / "stdout", tmp / "stderr"
    start = time.monotonic()
    # Files, not pipes: a helper the command leaves running must not hold us.
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.run(
            [sys.executable, "-P", "-c", _BOUNDED.format(limit=limit), str(peak), *args],
            cwd=ROOT,
            env=env,
            stdout=o,
            stderr=e,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
    seconds = time.monotonic() - start
    return (
        proc.returncode,
        out.read_text(errors="replace"),
        err.read_text(errors="replace"),
        seconds,
        int(peak.read_text() or 0) if peak.exists() else -1,
    )


# -- each capture, each command ------------------------------------------------------

# report's page is drawn by vl_convert, whose V8 reserves 1 GiB of address
# space it never touches: report is given that much more.
REPORT_SPACE = ADDRESS_SPACE + (1 << 30)
COMMANDS = {
    "jsonl": ("capture", "--format", "jsonl"),
    "stats": ("capture", "--stats", "-o", os.devnull),
    "tables": ("capture", "--tables"),
    "tables_python": ("capture", "--tables"),  # LBPARSE_NATIVE=0: the Python reference
    "report": ("report",),
}


@pytest.mark.slow  # a command-line run per case over its hostile capture: seconds each
@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_capture_is_read_in_bounded_memory_and_time(
    bombs: dict[str, Path], tmp_path: Path, case: str, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 1 with a limit notice naming the limit, no traceback, in seconds
    and under 1 GiB; the call after the hostile one is read."""
    capture = str(bombs[case])
    args = [*COMMANDS[command]]
    if command == "tables_python":
        monkeypatch.setenv("LBPARSE_NATIVE", "0")
    if command.startswith("tables"):
        args.append(str(tmp_path / "tables"))
    elif command == "report":
        args += ["-o", str(tmp_path / "r.html"), "--json", str(tmp_path / "r.json")]
    rc, out, err, seconds, peak = run_bounded(
        tmp_path, *args, capture, limit=REPORT_SPACE if command == "report" else ADDRESS_SPACE
    )
    print(f"{case} {command}: rc {rc}, {seconds:.1f} s, peak RSS {peak >> 20} MiB")
    assert "Traceback" not in err and "MemoryError" not in err, err[-2000:]
    assert rc == 1, err[-2000:]
    assert seconds < SECONDS
    assert 0 < peak < PEAK
    names = CASES[case][1]
    said = err + (tmp_path / "r.json").read_text() if command == "report" else err
    assert any(f"({name})" in said for name in names), said[-2000:]
    if command == "jsonl":
        after = [line for line in out.splitlines() if '"after"' in line]
        assert any('"grpc": "message"' in line and "FetchCursorRequest" in line for line in after)
    elif command == "stats":
        assert "FetchCursor status 0" in err
    elif command.startswith("tables"):
        import pyarrow.parquet as pq

        calls = pq.read_table(tmp_path / "tables" / "grpc_calls").to_pylist()
        assert any(c["method"] == "FetchCursor" and c["grpc_status"] == 0 for c in calls)
        problems = pq.read_table(tmp_path / "tables" / "messages").to_pylist()
        assert any(
            p["error_kind"] == "input:limit" and any(f"({n})" in p["error_message"] for n in names)
            for p in problems
        )
    else:
        assert "FetchCursor" in (tmp_path / "r.json").read_text()


# -- each limit, at small values -----------------------------------------------------


def _connection(flows: h2.Flows, port: int = 51000) -> tuple[h2.Side, h2.Side]:
    client, server = flows.pair(f"127.0.0.1:{port}", "127.0.0.1:9292")
    assert client.sniff(PREFACE, False) is client
    client.feed(PREFACE + SETTINGS)
    assert server.sniff(SETTINGS, False) is server
    server.feed(SETTINGS)
    return client, server


def _limits(flows: h2.Flows) -> list[str | None]:
    return [n.limit for n in flows.out if isinstance(n, Notice) and n.kind == "limit"]


def _messages(flows: h2.Flows) -> list[GrpcMessage]:
    return [m for m in flows.out if isinstance(m, GrpcMessage)]


def test_element_count_counts_what_the_runtime_makes() -> None:
    desc = api_pb2.FetchMetadataResponse.DESCRIPTOR
    msg = api_pb2.FetchMetadataResponse(brokers=[api_pb2.Broker(id="a", port=1)] * 3)
    assert element_count(msg.SerializeToString(), desc, 100) == 3 + 3 * 2
    publish = api_pb2.PublishRequest(stream="s", value=b"v" * 1000, headers={"a": b"1"})
    assert element_count(publish.SerializeToString(), publish.DESCRIPTOR, 100) == 2 + 1 + 2
    bomb = b"\x0a\x00" * 1_000_000
    start = time.process_time()
    assert element_count(bomb, desc, 1000) == 1001  # stops past the limit
    assert time.process_time() - start < 0.05
    assert element_count(b"\x0a\x05\x0a", desc, 100) == 1  # cut: the runtime refuses it


def test_max_grpc_elements() -> None:
    flows = h2.Flows(64 << 20, limits=Limits(max_grpc_elements=1000))
    client, server = _connection(flows)
    ce, se = hpack.Encoder(), hpack.Encoder()
    client.feed(frame(1, 5, 1, request_headers(ce, "FetchMetadata")))
    body = b"\x0a\x00" * 1001
    server.feed(
        frame(1, 4, 1, se.encode([(":status", "200")]))
        + _frames(1, grpc_message(body))
        + _frames(1, grpc_message(body[:2000]))
        + frame(1, 5, 1, se.encode([("grpc-status", "0")]))
    )
    first, second = _messages(flows)
    assert first.message is None and "(max_grpc_elements)" in (first.error or "")
    assert second.message == {"brokers": [{}] * 1000}
    assert _limits(flows) == ["max_grpc_elements"]


def test_max_grpc_inflate_and_kept_messages_counted_decoded() -> None:
    """Gzip's gains are spent until the budget is gone; a message that would
    grow past it is not decompressed, said once; one that does not grow is
    still read. Kept messages count what they decode to."""
    flows = h2.Flows(64 << 20, limits=Limits(max_grpc_inflate=3 << 20))
    client, _ = _connection(flows)
    ce = hpack.Encoder()
    value = _gzip(api_pb2.PublishRequest(stream="s", value=bytes(1 << 20)).SerializeToString())
    small = _gzip(api_pb2.PublishRequest(stream="t").SerializeToString())
    client.feed(frame(1, 4, 1, request_headers(ce, "PublishAsync", ("grpc-encoding", "gzip"))))
    for body in [value] * 4 + [small]:
        client.feed(_frames(1, grpc_message(body, 1)))
    got = _messages(flows)
    assert [m.message is not None for m in got] == [True, True, True, False, True]
    assert "(max_grpc_inflate)" in (got[3].error or "")
    assert got[4].message == {"stream": "t"}
    assert _limits(flows) == ["max_grpc_inflate"]
    assert flows.budget.inflate_left < 1 << 20
    assert flows.kept_bytes > 3 << 20  # the decoded bytes, not gzip's few KB


def test_max_grpc_headers_and_max_open_calls() -> None:
    """A long :path named by many calls on several connections: kept within
    max_grpc_headers, then null (said once a connection); open calls past
    max_open_calls, of all connections, given up oldest first."""
    flows = h2.Flows(64 << 20, limits=Limits(max_grpc_headers=10_000, max_open_calls=6))
    long_path = "/" + "p" * 2999
    for k in range(3):
        client, _ = _connection(flows, 51000 + k)
        ce = hpack.Encoder()
        for sid in (1, 3, 5):
            client.feed(frame(1, 4, sid, ce.encode([(":method", "POST"), (":path", long_path)])))
    assert len(flows.calls) == 6
    dropped = [c for c in flows.out if isinstance(c, GrpcCall)]
    assert [(c.client, c.stream_id, c.end) for c in dropped] == [
        ("127.0.0.1:51000", 1, "dropped"),
        ("127.0.0.1:51000", 3, "dropped"),
        ("127.0.0.1:51000", 5, "dropped"),
    ]
    paths = [c.path for c in dropped] + [c.path for c in flows.calls]
    assert paths == [long_path] * 3 + [None] * 6
    assert flows.headers_left == 1000
    assert _limits(flows).count("max_open_calls") == 3
    assert _limits(flows).count("max_grpc_headers") == 2  # the second and third connection
    flows.close()
    assert flows.calls == {}


def test_a_real_api_capture_reads_as_before() -> None:
    from support.api_short import reading

    items, notices, _ = reading()
    assert len([c for c in items if isinstance(c, GrpcCall)]) == 55
    assert len([m for m in items if isinstance(m, GrpcMessage)]) == 287
    assert not [n for n in notices if n.kind == "limit"]
    assert not [m for m in items if isinstance(m, GrpcMessage) and m.error]


@pytest.mark.slow  # command-line runs: seconds
@pytest.mark.parametrize(
    "command",
    [
        ["capture", "-o", os.devnull],
        ["report", "--json", "TABLES", "-q"],
        ["capture", "--tables", "TABLES"],
    ],
)
def test_the_options_reach_the_grpc_reading(command: list[str], tmp_path: Path) -> None:
    """--max-open-calls (as every gRPC limit) is what the reading of the calls
    uses, in the record path, the report's and the tables': api-short holds
    more than 2 calls open at once (a Subscribe and PublishAsync streams)."""
    from support.cli import run_cli
    from support.shared import shared_path

    path = shared_path("liftbridge", "samples", "api-short.pcapng")
    args = [str(tmp_path / "t") if a == "TABLES" else a for a in command]
    done = run_cli(command[0], str(path), *args[1:], "--max-open-calls", "2", timeout=300)
    err = done.stderr.decode()
    assert "Traceback" not in err, err[-2000:]
    said = err + ((tmp_path / "t").read_text() if command[0] == "report" else "")
    assert done.returncode == 1 and "max_open_calls" in said, err[-2000:]
    again = [str(tmp_path / "u") if a == "TABLES" else a for a in command]
    done = run_cli(command[0], str(path), *again[1:], timeout=300)
    assert done.returncode == 0 and "max_open_calls" not in done.stderr.decode()


def _goaway_storm(open_calls: int, goaways: int, shuffled: bool) -> tuple[float, h2.Flows]:
    """CPU seconds of `goaways` GOAWAY frames (last stream past every call)
    on a connection with `open_calls` calls open, opened in order or not."""
    import random

    flows = h2.Flows(64 << 20)
    client, server = _connection(flows)
    enc = hpack.Encoder()
    sids = [2 * i + 1 for i in range(open_calls)]
    if shuffled:  # a hostile client: stream ids out of order
        random.Random(47).shuffle(sids)
    client.feed(b"".join(frame(1, 4, sid, request_headers(enc, "Subscribe")) for sid in sids))
    storm = frame(7, 0, 0, (2**31 - 1).to_bytes(4, "big") + bytes(4)) * goaways
    t = time.process_time()
    server.feed(storm)
    return time.process_time() - t, flows


@pytest.mark.slow  # over half a second: not in make test-fast
@pytest.mark.parametrize("shuffled", [False, True], ids=["in_order", "out_of_order"])
def test_a_goaway_storm_costs_nothing_per_open_call(shuffled: bool) -> None:
    """GOAWAY cost grew with the calls open (the review: 4,096 open calls, 200k
    GOAWAYs, 40 s): each GOAWAY now finds the calls past its last stream by
    bisection, and a storm is said a bounded number of times."""
    few, flows_few = _goaway_storm(64, 20_000, shuffled)
    many, flows = _goaway_storm(4_000, 20_000, shuffled)
    assert many < 3 * few + 0.5, (few, many)
    said = [n for n in flows.out if isinstance(n, Notice) and "GOAWAY" in n.message]
    assert len(said) == h2.MAX_GOAWAYS_SAID and all(n.info for n in said)
    # a GOAWAY below open streams still ends them, in any order of opening
    _, flows = _goaway_storm(100, 0, shuffled)
    conn = next(iter(flows.calls.values()))
    conn.goaway(conn.client.peer, 99, 0, b"")  # type: ignore[union-attr]
    ended = sorted(c.stream_id for c in flows.out if isinstance(c, GrpcCall))
    assert ended == list(range(101, 200, 2)) and sorted(conn.calls) == list(range(1, 100, 2))
    assert conn.sids == sorted(conn.calls)


# -- a reading that keeps no message: the same, without the JSON -----------------------


def _mixed(path: Path) -> Path:
    """Ordinary calls, a FetchMetadataResponse past max_grpc_elements (1,000
    here), PublishAsync's gzip past max_grpc_inflate (3 MB here), messages
    that are not their type, a response whose request is not in the capture
    (its method unknown), and header blocks that cannot be decoded."""
    ce, se = hpack.Encoder(), hpack.Encoder()
    c1, s1 = _ordinary_call(ce, se, 1)
    body = b"\x0a\x00" * 1001
    c3 = frame(1, 5, 3, request_headers(ce, "FetchMetadata"))
    s3 = (
        frame(1, 4, 3, se.encode([(":status", "200")]))
        + _frames(3, grpc_message(body))
        + _frames(3, grpc_message(body[:2000]))
        + frame(1, 5, 3, se.encode([("grpc-status", "0")]))
    )
    value = _gzip(api_pb2.PublishRequest(stream="s", value=bytes(1 << 20)).SerializeToString())
    small = _gzip(api_pb2.PublishRequest(stream="t").SerializeToString())
    c5 = frame(1, 4, 5, request_headers(ce, "PublishAsync", ("grpc-encoding", "gzip"))) + b"".join(
        _frames(5, grpc_message(b, 1)) for b in [value] * 4 + [small]
    )
    c7 = frame(1, 4, 7, request_headers(ce, "FetchCursor")) + _frames(
        7, grpc_message(b"\xff\xff\xff"), end=True
    )
    s7 = frame(1, 4, 7, se.encode([(":status", "200")])) + _frames(
        7, grpc_message(b"\x08\x96\x01" + b"\x0a\x05ab"), end=False
    )
    # A second connection whose server side goes on with the first one's HPACK
    # table: its response headers are not decoded (a notice), its messages are.
    c9, s9 = _ordinary_call(hpack.Encoder(), se, 9)
    return _write(
        path,
        [([PREFACE + SETTINGS, c1, c3, c5, c7], [SETTINGS, s1, s3, s7]), ([PREFACE + c9], [s9])],
    )


def _blank(record: dict[str, Any]) -> dict[str, Any]:
    """A record's JSON with each decoded message as `{}` (grpc_json=False's)."""
    out = dict(record)
    if out["grpc"] == "message" and out.get("message") is not None:
        out["message"] = {}
    elif out["grpc"] == "call":
        for k in ("requests", "responses"):
            out[k] = [None if m is None else {} for m in out[k]]
    return out


def _records(path: Path, limits: Limits | None, as_json: bool) -> tuple[list[Any], list[str]]:
    items: list[Any] = []
    got: list[Notice] = []
    reader = CaptureReader(
        path,
        decode=False,
        limits=limits,
        on_grpc=items.append,
        grpc_json=as_json,
        on_notice=got.append,
    )
    for _ in reader:
        pass
    return [i.to_json_dict() for i in items], [str(n) for n in got]


@pytest.mark.parametrize("which", ["mixed", "api-short"])
def test_a_reading_without_json_is_the_reading_with_each_message_blank(
    which: str, tmp_path: Path
) -> None:
    """grpc_json=False (read_grpc without a callback: read_capture_arrow and
    the Spark data source's messages, which keep no message) skips each
    message's JSON only: every record, count, limit and notice is the same."""
    from support.api_short import API_SHORT, need_api_short

    if which == "api-short":
        need_api_short()
        path, limits = API_SHORT, None
    else:
        path = _mixed(tmp_path / "mixed.pcap")
        limits = Limits(max_grpc_elements=1000, max_grpc_inflate=3 << 20)
    full, said = _records(path, limits, True)
    blank, said_blank = _records(path, limits, False)
    assert said_blank == said
    assert blank == [_blank(r) for r in full]
    messages = [r for r in full if r["grpc"] == "message"]
    assert [r for r in messages if r.get("message")], "some message decoded to JSON"
    if which == "mixed":  # each limit said once, and messages that are not their type
        assert [
            sum(f"({k})" in n for n in said) for k in ("max_grpc_elements", "max_grpc_inflate")
        ] == [1, 1], said
        assert any("DecodeError" in (r.get("error") or "") for r in messages)


def test_read_grpc_without_a_callback_finds_what_it_finds_with_one(tmp_path: Path) -> None:
    path = str(_mixed(tmp_path / "mixed.pcap"))
    limits = Limits(max_grpc_elements=1000, max_grpc_inflate=3 << 20)
    items: list[Any] = []
    said: list[Notice] = []
    found = read_grpc(path, items.append, limits=limits, on_notice=said.append)
    said_alone: list[Notice] = []
    assert read_grpc(path, None, limits=limits, on_notice=said_alone.append) == found
    assert [str(n) for n in said_alone] == [str(n) for n in said] and said
    assert found and items
