"""The Raft traffic's rows without RPC objects equal the reference (issue #45).

Without the JSON columns the pipeline takes each Raft message's RPCs as rows
(`StreamDecoder.feed_rows`: no RPC, Chunk detail or fields dict made, in C
where the transport reader is built); with them, or with LBPARSE_NATIVE=0,
as before. `read_capture_tables` gives the same tables, every table and
column, either way: on the real 3-node captures and the shared NATS ones.
(tests/support/hostile.check_raft_native holds the rows equal RPC by RPC on
hypothesis-made and hostile streams.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from support.reading import concat_tables, sample_records
from support.shared import CAPTURES, LIFTBRIDGE

import lbparse
from lbparse.capture.traffic import TrafficReader
from lbparse.raft import StreamDecoder, rpc_row

CASES = [
    LIFTBRIDGE / "samples" / "short.pcapng",
    LIFTBRIDGE / "samples" / "api-short.pcapng",
    *sorted(CAPTURES.glob("*.pcap*")),
]

# Writes every table of read_capture_tables(argv[1]) to argv[2]/typed and,
# with the JSON columns, to argv[2]/json, as Arrow IPC streams, one file per
# table: the LBPARSE_NATIVE=0 side, which must be chosen before lbparse is
# imported. One process a capture for both.
_DUMP = """
import os, sys, pyarrow as pa, lbparse
from support.reading import concat_tables
for flag in ("typed", "json"):
    out = os.path.join(sys.argv[2], flag)
    os.mkdir(out)
    tables = concat_tables(lbparse.read_capture_tables(sys.argv[1], batch_rows=1000,
                                                       json_columns=flag == "json"))
    for name, t in tables.items():
        with pa.OSFile(f"{out}/{name}.arrows", "wb") as f, pa.ipc.new_stream(f, t.schema) as w:
            w.write_table(t)
"""

Reference = Callable[[Path, bool], dict[str, pa.Table]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The LBPARSE_NATIVE=0 tables of a capture, typed or with the JSON
    columns: both made by one process the first time the capture is asked for."""
    tests = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "LBPARSE_NATIVE": "0",
        "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")]),
    }
    made: dict[Path, Path] = {}

    def tables(path: Path, json_columns: bool) -> dict[str, pa.Table]:
        if path not in made:
            out = tmp_path_factory.mktemp("reference")
            subprocess.run(
                [sys.executable, "-P", "-c", _DUMP, str(path), str(out)], env=env, check=True
            )
            made[path] = out
        folder = made[path] / ("json" if json_columns else "typed")
        return {p.stem: pa.ipc.open_stream(p).read_all() for p in sorted(folder.glob("*.arrows"))}

    return tables


@pytest.mark.slow  # a process a capture, and each capture read twice more
@pytest.mark.parametrize("json_columns", [False, True], ids=["typed", "json"])
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_the_tables_equal_the_reference(
    path: Path, json_columns: bool, reference: Reference
) -> None:
    if not path.exists():
        pytest.skip(f"{path} is not here")
    got = concat_tables(
        lbparse.read_capture_tables(str(path), batch_rows=1000, json_columns=json_columns)
    )
    want = reference(path, json_columns)
    assert sorted(got) == sorted(want)
    for name, table in got.items():
        assert table.schema == want[name].schema, name
        for column in table.column_names:
            a, b = table.column(column), want[name].column(column)
            assert a.equals(b), f"{name}.{column}"


def test_a_raft_message_read_for_columns_makes_no_rpc_objects() -> None:
    """The rows path hands over the rows alone: the RPC objects it no longer
    makes were most of a Raft message's Python cost."""
    plain, rows = TrafficReader(), TrafficReader()
    seen = 0
    for rec in sample_records("short.pcapng"):
        a = plain.read(rec.src, rec.dst, rec.subject, rec.reply, rec.payload)
        b = rows.read(rec.src, rec.dst, rec.subject, rec.reply, rec.payload, rows=True)
        if a is None or b is None:
            assert a is b
            continue
        assert (a.kind, a.node, a.error) == (b.kind, b.node, b.error)
        if a.chunk is None:
            assert b.rows is None and b.rpcs == a.rpcs
            continue
        assert b.rpcs == [] and b.rows == [rpc_row(r) for r in a.rpcs]
        seen += len(a.rpcs)
    assert seen > 2000


def test_feed_rows_and_feed_may_take_turns() -> None:
    """One stream fed by both methods reads on as one (the decoder's state is
    the same whichever made the rows)."""
    streams: dict[tuple[str, str, str], list[bytes]] = {}
    for rec in sample_records("short.pcapng"):
        if ".request._INBOX." in rec.subject:
            streams.setdefault((rec.src, rec.dst, rec.subject), []).append(rec.payload)
    for messages in streams.values():
        one, mixed = StreamDecoder(), StreamDecoder()
        for i, m in enumerate(messages):
            want = [rpc_row(r) for r in one.feed(m).rpcs]
            got = mixed.feed_rows(m)[1] if i % 2 else [rpc_row(r) for r in mixed.feed(m).rpcs]
            assert got == want
        assert (one.rpcs, one.skipped, bytes(one.buf)) == (
            mixed.rpcs,
            mixed.skipped,
            bytes(mixed.buf),
        )


@pytest.mark.parametrize(
    "name",
    [
        "short.pcapng",
        # its HTTP/2 read by the Python reader too: a second
        pytest.param("api-short.pcapng", marks=pytest.mark.slow),
    ],
)
def test_the_batch_reads_the_common_message_in_c_as_read_does(name: str) -> None:
    """`TrafficReader.stream_batch`, the typed columns' way (stream messages
    of whole plain RPCs read in one C call, the rest by `read` in their
    turn), says of every message what `read(rows=True)` says, leaves every
    stream as `read` leaves it, and reads most of a real cluster's stream
    messages in C: it would fail if the C reading were never taken, or
    moved a stream otherwise."""
    from support.hostile import batch_rows

    from lbparse.raft import transport

    if not transport.native_available():
        pytest.skip("the C transport reader is not in use (not built, or LBPARSE_NATIVE=0)")
    recs = [r for r in sample_records(name) if ".raft.metadata." in r.subject or r.reply]
    reference, batched = TrafficReader(), TrafficReader()
    want = [reference.read(r.src, r.dst, r.subject, r.reply, r.payload, rows=True) for r in recs]
    slow: dict[int, object] = {}

    def fallback(j: int) -> None:
        r = recs[j]
        slow[j] = batched.read(r.src, r.dst, r.subject, r.reply, r.payload, rows=True)

    got = batched.stream_batch(
        [r.src for r in recs],
        [r.dst for r in recs],
        [r.subject for r in recs],
        [r.payload for r in recs],
        fallback,
    )
    assert got is not None
    fast = 0
    for j, (rows, w) in enumerate(zip(batch_rows(got), want)):
        if rows is None:
            t = slow.get(j)
            assert (t is None) == (w is None), j
            if t is not None and w is not None:
                assert (t.kind, t.node, t.error, t.rows) == (w.kind, w.node, w.error, w.rows), j
            continue
        fast += 1
        assert j not in slow and w is not None and w.error is None, j
        code = got[0][j]
        assert ("raft_request" if code == 1 else "raft_response") == w.kind, j
        assert TrafficReader.stream_node(recs[j].subject) == w.node, j
        assert rows == w.rows, j
    assert sorted(batched.streams) == sorted(reference.streams)
    for key, dec in reference.streams.items():
        other = batched.streams[key]
        assert (dec.role, bytes(dec.buf), dec.trailer, dec.in_step, dec.rpcs, dec.skipped) == (
            other.role,
            bytes(other.buf),
            other.trailer,
            other.in_step,
            other.rpcs,
            other.skipped,
        )
    streams = sum(1 for w in want if w is not None and w.chunk is not None)
    assert streams > 1000 and fast > 0.8 * streams, (fast, streams)
    # the log entries too: every AppendEntries of these clusters' is read in C
    entries = [sum(len(r["entries"]) for r in w.rows or ()) for w in want if w is not None]
    in_c = sum(len(r["entries"]) for rows in batch_rows(got) if rows for r in rows)
    assert in_c == sum(entries) and in_c > 0, (in_c, sum(entries))


def test_inbox_replies_are_candidates_as_the_reference_reads_them(tmp_path: Path) -> None:
    """The rows the traffic columns look at (`trafficcols._candidates`: a Raft
    subject, or an inbox whose payload may be a reply): a node's 503 to an
    accept handshake has no payload, a JSON reply starts with `{`; an empty
    or other message on an inbox nobody awaits is no traffic. The traffic
    table holds what the records' reader says of each, no more, no less."""
    from support.capwriter import ETHERNET, Conn, link, msg, pub, write_pcap

    from lbparse.capture import CaptureReader

    ns = "liftbridge-default.raft.metadata"
    hello = json.dumps({"id": "node1", "inbox": f"{ns}.node1.request._INBOX.x"}).encode()
    reply = json.dumps({"inbox": f"{ns}.node2.request._INBOX.y"}).encode()
    conn = Conn()
    frames = conn.handshake()
    frames += conn.send("c", pub(f"{ns}.node2.accept", hello, reply="_INBOX.down"))
    frames += conn.send("c", pub(f"{ns}.node3.accept", hello, reply="_INBOX.up"))
    frames += conn.send("s", msg("_INBOX.down", 1, b"", headers=[("Status", "503")]))
    frames += conn.send("s", msg("_INBOX.up", 1, reply))
    frames += conn.send("s", msg("_INBOX.other", 1, b""))  # awaited by no accept
    frames += conn.send("s", msg("_INBOX.other", 1, b"{}"))
    frames += conn.send("s", msg("_INBOX.other", 1, b"x"))
    path = tmp_path / "accepts.pcap"
    write_pcap(
        str(path), [(1_763_700_000 + i / 1000, link(ETHERNET, f)) for i, f in enumerate(frames)]
    )
    traffic = concat_tables(lbparse.read_capture_tables(str(path)))["traffic"]
    got = sorted(zip(*(traffic.column(c).to_pylist() for c in ("position", "kind", "node"))))
    want = sorted(
        (i, t["kind"], t.get("node"))
        for i, r in enumerate(CaptureReader(str(path)))
        if (t := r.to_json_dict().get("liftbridge")) is not None
    )
    assert got == want
    kinds = [k for _, k, _ in got]
    assert kinds == ["raft_accept", "raft_accept", "raft_accept_reply", "raft_accept_reply"]


def test_the_rows_looked_at_are_those_the_rule_names() -> None:
    """trafficcols._candidates reads the payloads' first bytes in place; the rows
    it names are the rule's, row by row: a subject with `.raft.metadata.`, or
    an inbox whose payload is empty or starts with `{` (a handshake's reply),
    never a null payload; on a batch sliced out of a larger one too."""
    from lbparse.columnar.trafficcols import _candidates

    subjects = ["a.raft.metadata.x", "_INBOX.1", "_INBOX.2", "orders", None, "_INBOX.3"]
    payloads = [b"\x01", b"{}", b"", b"{", b"{", None]
    n = 600
    rows = [(subjects[i % 6], payloads[(i * 7 // 6) % 6]) for i in range(n)]
    batch = pa.record_batch(
        [pa.array([p for _, p in rows], pa.binary()), pa.array([s for s, _ in rows])],
        names=["payload", "subject"],
    )

    def rule(subject: str | None, payload: bytes | None) -> bool:
        if subject is None:
            return False
        if ".raft.metadata." in subject:
            return True
        return subject.startswith("_INBOX.") and payload is not None and payload[:1] in (b"", b"{")

    reader = TrafficReader()
    for part, lo in ((batch, 0), (batch.slice(37, 400), 37)):
        got = _candidates(part, reader).tolist()
        assert got == [rule(*rows[lo + i]) for i in range(part.num_rows)]
