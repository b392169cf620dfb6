"""The client's gRPC calls in the tables (lbparse.columnar.grpctables):
`lbparse capture --tables` on the shared api-short capture writes
grpc_calls and grpc_messages holding exactly the calls and messages the
Python reader finds (55 and 287, as tshark counts them:
tests/capture/test_grpc_capture.py), read whole by pandas, DuckDB and
pyarrow.dataset, joined on the capture's keys; a NATS-only capture is not
read a second time."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import hpack
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from support import capwriter as cw
from support.api_short import API_SHORT, CALLS, MESSAGES, grpc_items, need_api_short, with_gaps
from support.cli import run_cli
from support.reading import concat_tables, reading_problems
from support.shared import LIFTBRIDGE

import lbparse
from lbparse.capture import CaptureReader
from lbparse.capture.grpc import GrpcCall, GrpcMessage
from lbparse.cli.status import OK
from lbparse.columnar import grpctables
from lbparse.columnar.tables import GRPC_CALLS, GRPC_MESSAGES, GRPC_TABLES, table_schema
from lbparse_generated.proto import api_pb2

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"


@pytest.fixture(scope="module")
def reader_items() -> list[Any]:
    return grpc_items()


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not API_SHORT.is_file():
        pytest.skip(f"shared material missing: {API_SHORT}")
    out = tmp_path_factory.mktemp("grpc-tables") / "out"
    done = run_cli("capture", str(API_SHORT), "--tables", str(out), timeout=300)
    # The NATS reading takes the HTTP/2 bytes for bytes that are not NATS:
    # those rows are held until the gRPC reading names its connections, and
    # are no problem then (how calls ended is grpc_calls' `end`).
    assert done.returncode == OK, done.stderr
    assert f"grpc_calls {CALLS}, grpc_messages {MESSAGES})" in done.stderr.decode()
    messages = ds.dataset(str(out / "messages")).to_table()
    assert (
        messages.filter(
            pc.starts_with(messages.column("error_kind"), "input:").fill_null(False)
        ).num_rows
        == 0
    )
    return out


@pytest.mark.slow  # the command line's run (the module's `written`)
def test_every_reader_reads_the_grpc_tables_whole(written: Path, reader_items: list[Any]) -> None:
    import duckdb
    import pandas as pd

    calls = [i for i in reader_items if isinstance(i, GrpcCall)]
    msgs = [i for i in reader_items if isinstance(i, GrpcMessage)]
    assert (len(calls), len(msgs)) == (CALLS, MESSAGES)
    for name, rows in ((GRPC_CALLS, CALLS), (GRPC_MESSAGES, MESSAGES)):
        d = written / name
        table = ds.dataset(str(d)).to_table()
        assert table.schema == table_schema(name)
        assert table.num_rows == rows
        assert len(pd.read_parquet(d)) == rows
        assert duckdb.sql(f"SELECT count(*) FROM '{d}/*.parquet'").fetchall() == [(rows,)]
    got = pd.read_parquet(written / GRPC_CALLS)
    assert Counter(got["method"]) == Counter(c.method_name for c in calls)
    assert Counter(
        zip(got["method"], got["grpc_status"].fillna(-1).astype(int), got["end"])
    ) == Counter(
        (c.method_name, -1 if c.grpc_status is None else c.grpc_status, c.end) for c in calls
    )
    assert got["request_count"].sum() + got["response_count"].sum() == MESSAGES
    assert (got["request_ts_ns"] <= got["end_ts_ns"]).all()
    assert (got["request_ts"].astype("int64") == got["request_ts_ns"] // 1000).all()


@pytest.mark.slow  # the command line's run (the module's `written`)
def test_messages_join_their_calls_on_the_keys(written: Path) -> None:
    import duckdb

    c, m = (f"'{written}/{t}/*.parquet'" for t in GRPC_TABLES)
    joined = duckdb.sql(
        f"SELECT c.position, c.method, c.stream_id, c.request_count, c.response_count, "
        f"count(*) FILTER (WHERE m.direction = 'client_to_server'), "
        f"count(*) FILTER (WHERE m.direction = 'server_to_client'), "
        f"bool_and(m.method IS NOT DISTINCT FROM c.method AND m.stream_id = c.stream_id), "
        f"max(m.message_seq) + 1 "
        f"FROM {c} c JOIN {m} m USING (source, position) GROUP BY ALL"
    ).fetchall()
    assert sum(r[5] + r[6] for r in joined) == MESSAGES
    for pos, method, _, requests, responses, sent, got, same, seqs in joined:
        assert (sent, got) == (requests, responses), (pos, method)
        assert same and seqs == sent + got, (pos, method)
    orphans = duckdb.sql(f"SELECT count(*) FROM {m} m ANTI JOIN {c} c USING (source, position)")
    assert orphans.fetchall() == [(0,)]


@pytest.mark.slow  # the command line's run (the module's `written`)
def test_message_rows_are_the_readers_messages(written: Path, reader_items: list[Any]) -> None:
    """Type, direction, size and canonical JSON of each message, as the reader made them."""
    rows = ds.dataset(str(written / GRPC_MESSAGES)).to_table().to_pylist()
    ours = Counter(
        (
            r["type"],
            r["direction"],
            r["length"],
            r["compressed"],
            json.dumps(json.loads(r["message_json"]), sort_keys=True),
        )
        for r in rows
    )
    theirs = Counter(
        (
            m.type,
            m.direction,
            m.length,
            m.compressed,
            json.dumps(m.to_json_dict()["message"], sort_keys=True),
        )
        for m in reader_items
        if isinstance(m, GrpcMessage)
    )
    assert ours == theirs
    assert {r["type"] for r in rows} >= {"proto.PublishRequest", "proto.PublishResponse"}


@pytest.mark.slow  # over half a second: not in make test-fast
def test_the_reference_reader_gives_the_same_grpc_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the C loop off (LBPARSE_NATIVE=0) the NATS reading is the
    Python reference's; its protocol rows call for the same gRPC reading."""
    if not API_SHORT.is_file():
        pytest.skip(f"shared material missing: {API_SHORT}")
    native = concat_tables(lbparse.read_capture_tables(API_SHORT))
    monkeypatch.setenv("LBPARSE_NATIVE", "0")
    reference = concat_tables(lbparse.read_capture_tables(API_SHORT))
    for name in GRPC_TABLES:
        assert native[name].num_rows and native[name].equals(reference[name]), name


def test_a_nats_only_capture_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """short.pcapng (NATS only) gives no problem row that may be HTTP/2, so the
    gRPC reading never starts: it costs nothing."""
    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a second reading of a NATS-only capture")

    monkeypatch.setattr(grpctables, "CaptureReader", refuse)
    tables = concat_tables(lbparse.read_capture_tables(SHORT))
    assert tables["messages"].num_rows == 7538
    assert not set(GRPC_TABLES) & set(tables)


def test_grpc_rows_number_calls_in_the_order_first_seen() -> None:
    """A call's messages carry its position before its own record comes; a
    stream id used again (a new connection on the same ports) is a new call."""
    rows = grpctables.GrpcRows("x.pcap")
    a, b = "10.0.0.1:5000", "10.0.0.2:9292"
    for stream in (1, 3, 1):
        rows.add(
            GrpcMessage(
                10,
                a,
                b,
                "client_to_server",
                stream,
                "FetchCursor",
                "proto.FetchCursorRequest",
                0,
                False,
                0,
                {},
                None,
            )
        )
        if stream == 1:
            call = GrpcCall(a, b, stream)
            call.end = "trailers"
            rows.add(call)
    tables = rows.flush()
    assert tables[GRPC_MESSAGES].select(["stream_id", "position", "message_seq"]).to_pylist() == [
        {"stream_id": 1, "position": 0, "message_seq": 0},
        {"stream_id": 3, "position": 1, "message_seq": 0},
        {"stream_id": 1, "position": 2, "message_seq": 0},
    ]
    assert tables[GRPC_CALLS].column("position").to_pylist() == [0, 2]
    assert tables[GRPC_CALLS].schema == table_schema(GRPC_CALLS)
    assert isinstance(tables[GRPC_CALLS], pa.Table) and not len(rows)


@pytest.mark.parametrize(
    "client",
    [
        b"PUB a.b 5\r\nhello\r\nPUB a.b 5",  # a control line the capture cuts
        b"\xb9\x0eC\xb4 not NATS\r\nPUB a 1\r\nx\r\n",  # bytes that are not a control line
    ],
)
def test_nats_problem_rows_do_not_call_for_a_second_reading(
    tmp_path: Path, client: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = cw.Conn()
    pkts = conn.handshake() + conn.send("c", client)
    path = tmp_path / "nats.pcap"
    cw.write_pcap(str(path), [(1.7e9 + i, cw.link(cw.ETHERNET, p)) for i, p in enumerate(pkts)])

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a second reading of a NATS-only capture")

    monkeypatch.setattr(grpctables, "CaptureReader", refuse)
    tables = concat_tables(lbparse.read_capture_tables(path))
    kinds = tables["messages"].column("error_kind").to_pylist()
    assert {"input:incomplete", "input:protocol"} & set(kinds), kinds
    assert not set(GRPC_TABLES) & set(tables)


def test_a_messages_json_has_its_map_entries_in_key_order() -> None:
    """A protobuf map's entries come in its hash table's order, which is not
    the same from one process to the next (the pipeline's workers made other
    JSON of the same PublishRequest than the driver): sorted, the same bytes
    make the same JSON."""
    from lbparse.capture.grpc import decode_message
    from lbparse_generated.proto import api_pb2

    keys = [f"h{i:02d}-{chr(122 - i)}" for i in range(24)][::-1]
    request = api_pb2.PublishRequest(stream="s", headers={k: b"v" for k in keys})
    message, error = decode_message(
        api_pb2.PublishRequest, 0, request.SerializeToString(), None, 1 << 20
    )
    assert error is None and message is not None
    assert list(message["headers"]) == sorted(keys)


def test_a_row_that_looks_like_http2_but_is_not_is_still_a_problem(tmp_path: Path) -> None:
    """Bytes starting as an HTTP/2 frame header on a NATS connection: the
    row is held for the gRPC reading, which finds no HTTP/2 there, and
    given back, last, with its own position."""
    conn = cw.Conn()
    pkts = conn.handshake() + conn.send(
        "c", b"\x00\x00\x00\x04\x00\x00\x00\x00\x00 junk\r\nPUB a 1\r\nx\r\nPUB b 1\r\ny\r\n"
    )
    path = tmp_path / "nats.pcap"
    cw.write_pcap(str(path), [(1.7e9 + i, cw.link(cw.ETHERNET, p)) for i, p in enumerate(pkts)])
    messages = concat_tables(lbparse.read_capture_tables(path))["messages"]
    kinds = messages.column("error_kind").to_pylist()
    assert kinds[-1] == "input:protocol" and kinds.count("input:protocol") == 1, kinds
    assert sorted(messages.column("position").to_pylist()) == list(range(messages.num_rows))
    assert messages.column("position")[-1].as_py() == 0  # read first, said last


@pytest.mark.slow  # two readings of each capture, and editcap
@pytest.mark.parametrize("case", ["api-short", "with gaps", "looks like HTTP/2"])
def test_the_wide_rows_give_the_tables_verdict(case: str, tmp_path: Path) -> None:
    """read_capture_arrow's rows are the tables' `messages` rows, problems
    included: an HTTP/2 connection's bytes were 18 false NATS problem rows of
    api-short there (the C loop reads NATS only), where the tables, the
    pipeline and the report had none; the HTTP/2 frames a gap lost are
    problem rows there too, and bytes that only looked like HTTP/2 stay one."""
    if case == "api-short":
        need_api_short()
        path = API_SHORT
    elif case == "with gaps":
        path = with_gaps(tmp_path / "gaps.pcapng")
    else:
        conn = cw.Conn()
        pkts = conn.handshake() + conn.send(
            "c", b"\x00\x00\x00\x04\x00\x00\x00\x00\x00 junk\r\nPUB a 1\r\nx\r\n"
        )
        path = tmp_path / "nats.pcap"
        cw.write_pcap(str(path), [(1.7e9 + i, cw.link(cw.ETHERNET, p)) for i, p in enumerate(pkts)])
    wide = pa.Table.from_batches(list(lbparse.read_capture_arrow(path, batch_rows=4096)))
    messages = concat_tables(lbparse.read_capture_tables(path, batch_rows=4096))["messages"]
    assert wide.num_rows == messages.num_rows
    keys = ("source", "position", "error_kind")
    assert sorted(zip(*(wide.column(c).to_pylist() for c in keys))) == sorted(
        zip(*(messages.column(c).to_pylist() for c in keys))
    )
    assert reading_problems(wide) == reading_problems(messages)
    kinds = [p[2] for p in reading_problems(wide)]
    assert (
        kinds
        == {
            "api-short": [],
            "with gaps": ["input:gap", "input:gap", "input:grpc", "input:grpc"],
            "looks like HTTP/2": ["input:protocol"],
        }[case]
    ), kinds


def _held(path: Path) -> grpctables.Held:
    """The rows the C loop's reading of `path` holds for the gRPC reading."""
    from lbparse.columnar.api import _capture_records, _decoder
    from lbparse.columnar.ordered import decode_in_order
    from lbparse.columnar.tables import tables_of

    held = grpctables.Held()
    for decoded in decode_in_order(
        _capture_records(path, 4096, None), _decoder("auto", True, False, False)
    ):
        held.take(tables_of(decoded)["messages"])
    return held


@pytest.mark.slow  # two gRPC readings of each capture (and editcap)
@pytest.mark.parametrize("case", ["api-short", "with gaps"])
def test_the_grpc_reading_of_the_held_connections_finds_what_a_whole_reading_does(
    case: str, tmp_path: Path
) -> None:
    """The gRPC reading reads only the connections whose rows were held (the
    others, NATS, skipped before reassembly): api-short's 12 HTTP/2 connections of 28.
    Its tables, the connections it finds HTTP/2 and its notices are a whole
    reading's."""
    need_api_short()
    path = API_SHORT if case == "api-short" else with_gaps(tmp_path / "gaps.pcapng")
    source = str(path)
    only = _held(path).connections(source)
    assert only is not None
    every = {
        (min(r.src, r.dst), max(r.src, r.dst))
        for r in CaptureReader(path, decode=False)
        if r.src and r.dst
    }
    readings = []
    for connections in (only, None):
        found: set[tuple[str, str]] = set()
        notices: list[Any] = []
        tables = list(
            grpctables.grpc_tables(
                source, found=found, on_notice=notices.append, connections=connections
            )
        )
        readings.append((tables, found, [n.to_json_dict() for n in notices]))
    (mine, found, notices), (whole, whole_found, whole_notices) = readings
    assert found == whole_found and found <= only and len(only) < len(every | found)
    assert notices == whole_notices
    assert len(mine) == len(whole) == 1
    for name in GRPC_TABLES:
        assert mine[0][name].num_rows and mine[0][name].equals(whole[0][name]), name


@pytest.mark.slow  # a reading of api-short (and a report of it)
@pytest.mark.parametrize(
    "how", ["read_capture_tables", "report", "report, a relative path", "pipeline task"]
)
def test_the_readings_read_again_only_the_held_connections(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """read_capture_tables, the report and the pipeline's task (without Spark)
    give the gRPC reading the held connections."""
    need_api_short()
    given: list[Any] = []
    real = grpctables.CaptureReader

    def reader(*args: Any, **kwargs: Any) -> Any:
        given.append(kwargs.get("connections"))
        return real(*args, **kwargs)

    monkeypatch.setattr(grpctables, "CaptureReader", reader)
    if how.startswith("report"):
        from lbparse.report import build_model

        build_model([os.path.relpath(API_SHORT) if "relative" in how else str(API_SHORT)])
    elif how == "pipeline task":
        from lbparse.columnar.decode_arrow import DecodeOptions
        from lbparse.columnar.sources import SourceOptions
        from lbparse.pipeline.input_plan import plan
        from lbparse.pipeline.tasks import TaskOptions, process_unit

        class Writer:
            def __init__(self) -> None:
                self.rows: Counter[str] = Counter()

            def write(self, table: str, n: int, columns: dict[str, Any]) -> None:
                self.rows[table] += n

            def write_table(self, table: str, rows: pa.Table) -> None:
                self.rows[table] += rows.num_rows

        source, writer = SourceOptions(), Writer()
        process_unit(
            plan([str(API_SHORT)], source)[0],
            TaskOptions(DecodeOptions(layout="auto"), source),
            writer,  # type: ignore[arg-type]
        )
        assert writer.rows[GRPC_CALLS] == CALLS and writer.rows[GRPC_MESSAGES] == MESSAGES
    else:
        concat_tables(lbparse.read_capture_tables(API_SHORT))
    assert given == [_held(API_SHORT).connections(str(API_SHORT))] and given[0]


def test_a_reader_told_its_connections_reads_those_alone() -> None:
    """CaptureReader(connections=...): the records of those connections, as a
    whole reading gives them; of none, no record (every packet still counted)."""
    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")
    whole = CaptureReader(SHORT, decode=False)
    records = [(r.src, r.dst, r.verb, r.subject, r.payload) for r in whole]
    pairs = Counter((min(s, d), max(s, d)) for s, d, *_ in records)
    pair = pairs.most_common()[len(pairs) // 2][0]  # one connection of many
    one = CaptureReader(SHORT, decode=False, connections=frozenset([pair]))
    mine = [(r.src, r.dst, r.verb, r.subject, r.payload) for r in one]
    assert mine == [r for r in records if (min(r[0], r[1]), max(r[0], r[1])) == pair]
    assert 0 < len(mine) < len(records)
    none = CaptureReader(SHORT, decode=False, connections=frozenset())
    assert not list(none) and none.stats.packets == whole.stats.packets


def test_held_rows_that_cannot_name_every_connection_name_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows past MAX_HELD go unlooked at, a held row without endpoints names
    no connection, a file none is of may be named otherwise: then None, and
    the gRPC reading reads every connection, as before."""
    schema = table_schema("messages", ("source", "position"))

    def rows(src: str | None) -> pa.Table:
        row = {n: None for n in schema.names}
        row.update(
            source="a.pcap",
            position=0,
            error_kind="input:protocol",
            error_message="not a NATS control line: b'PRI * HTTP/2.0\\r\\n'",
            src=src,
            dst="10.0.0.2:9292",
        )
        return pa.Table.from_pylist([row], schema=schema)

    held = grpctables.Held()
    assert held.take(rows("10.0.0.1:5000")).num_rows == 0
    assert held.connections("a.pcap") == {("10.0.0.1:5000", "10.0.0.2:9292")}
    assert held.connections("b.pcap") is None
    monkeypatch.setattr(grpctables, "MAX_HELD", 1)
    assert held.take(rows("10.0.0.3:5000")).num_rows == 1  # not held: past MAX_HELD
    assert held.connections("a.pcap") is None
    unnamed = grpctables.Held()
    unnamed.take(rows(None))
    assert unnamed.count == 1 and unnamed.connections("a.pcap") is None


def _mixed_capture(path: Path, fmt: str, cut: int = 0) -> tuple[Path, tuple[str, str], int]:
    """An IPv6 HTTP/2 connection (a call answered, a call still open) between
    the packets of an IPv4 NATS connection, which sends the last ones: the
    capture's end, and so the open call's, is a packet of another
    connection. `cut`: bytes cut off the file's end. Returns the path, the
    HTTP/2 connection and the last packet's time (ns)."""
    h2c = cw.Conn(("::1", 51000), ("::1", 7001))
    nats = cw.Conn(("127.0.0.1", 40000), ("127.0.0.1", 4222))
    ce, se = hpack.Encoder(), hpack.Encoder()
    req = api_pb2.FetchCursorRequest(stream="orders", partition=2, cursorId="c1")
    body = cw.grpc_message(req.SerializeToString())
    calls = [
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + cw.SETTINGS
        + cw.frame(1, 4, 1, cw.request_headers(ce, "FetchCursor"))
        + cw.frame(0, 1, 1, body),
        cw.frame(1, 4, 3, cw.request_headers(ce, "FetchCursor")) + cw.frame(0, 1, 3, body),
    ]
    answer = (
        cw.SETTINGS
        + cw.frame(1, 4, 1, se.encode([(":status", "200"), ("content-type", "application/grpc")]))
        + cw.frame(
            0, 0, 1, cw.grpc_message(api_pb2.FetchCursorResponse(offset=41).SerializeToString())
        )
        + cw.frame(1, 5, 1, se.encode([("grpc-status", "0")]))
    )
    packets = nats.handshake() + h2c.handshake()
    packets += nats.send("c", cw.pub("a.b", b"one")) + h2c.send("c", calls[0], mss=40)
    packets += h2c.send("s", answer) + nats.send("c", cw.pub("a.b", b"two"))
    packets += h2c.send("c", calls[1]) + nats.send("c", cw.pub("a.b", b"three") * 3, mss=30)
    times = [1_700_000_000_000_000_000 + 1_000_000 * i for i in range(len(packets))]
    if fmt == "pcap":
        cw.write_pcap(str(path), zip(times, [cw.link(cw.ETHERNET, p) for p in packets]), nanos=True)
    else:
        cw.write_pcapng(
            str(path),
            [(cw.ETHERNET, 9, 262144)],
            [(0, t, cw.link(cw.ETHERNET, p)) for t, p in zip(times, packets)],
        )
    if cut:
        path.write_bytes(path.read_bytes()[:-cut])
    return path, ("[::1]:51000", "[::1]:7001"), times[-1]


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("cut", [0, 7])
def test_the_c_loops_packets_of_the_connections_read_as_the_python_readers(
    fmt: str, cut: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gRPC reading of some connections runs the Python reader's packet
    loop over the packets the C loop finds for them (native_batches.
    ConnectionPackets), or over the file's own (the reference): the same
    tables, connections found and notices; an IPv6 connection; a call
    still open ends at the file's last packet, another connection's; a
    file cut short mid-packet reads as far as it goes."""
    path, pair, last = _mixed_capture(tmp_path / f"mixed.{fmt}", fmt, cut)
    made: list[Any] = []
    real = grpctables.ConnectionPackets

    def spy(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    readings = []
    for how in ("c", "python"):
        if how == "python":
            monkeypatch.setattr(grpctables, "_packets_of", lambda *args: None)
        else:
            monkeypatch.setattr(grpctables, "ConnectionPackets", spy)
        found: set[tuple[str, str]] = set()
        notices: list[Any] = []
        tables = concat_tables(
            grpctables.grpc_tables(
                str(path), found=found, on_notice=notices.append, connections=frozenset([pair])
            )
        )
        readings.append((tables, found, [n.to_json_dict() for n in notices]))
    assert len(made) == 1  # the C loop's packets were read
    (c, c_found, c_notices), (py, py_found, py_notices) = readings
    assert c_found == py_found == {pair}
    assert c_notices == py_notices
    for name in GRPC_TABLES:
        assert c[name].equals(py[name]), name
    calls = c[GRPC_CALLS].to_pylist()
    assert [call["end"] for call in calls] == ["trailers", "capture_end"]
    if not cut:  # the open call ends with the capture: the NATS connection's last packet
        assert calls[1]["end_ts_ns"] == last


def test_a_pcapng_clock_past_64_bits_gives_calls_without_times(tmp_path: Path) -> None:
    """A pcapng interface whose units reach past 2**63 ns (if_tsresol of
    seconds, a hostile count): the gRPC tables have the call, its times
    null (as the messages table has them); the reading raised OverflowError
    before."""
    enc = hpack.Encoder()
    conn = cw.Conn(("127.0.0.1", 51000), ("127.0.0.1", 7001))
    body = cw.grpc_message(api_pb2.FetchCursorRequest(stream="orders").SerializeToString())
    client = (
        h2_preface()
        + cw.frame(1, 4, 1, cw.request_headers(enc, "FetchCursor"))
        + cw.frame(0, 1, 1, body)
    )
    frames = [cw.link(cw.ETHERNET, p) for p in conn.handshake() + conn.send("c", client)]
    path = tmp_path / "clock.pcapng"
    cw.write_pcapng_units(path, 0, 0, [2**64 - 1], frames)
    tables = concat_tables(lbparse.read_capture_tables(path))
    calls = tables[GRPC_CALLS].to_pylist()
    assert [c["method"] for c in calls] == ["FetchCursor"]
    assert calls[0]["request_ts_ns"] is None and calls[0]["request_ts"] is None
    assert tables[GRPC_MESSAGES].column("ts_ns").null_count == tables[GRPC_MESSAGES].num_rows


def h2_preface() -> bytes:
    return b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + cw.SETTINGS
