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

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from support.reading import concat_tables
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
    path = LIFTBRIDGE / "samples" / "short.pcapng"
    if not path.exists():
        pytest.skip(f"{path} is not here")
    from lbparse.capture import CaptureReader

    plain, rows = TrafficReader(), TrafficReader()
    seen = 0
    for rec in CaptureReader(str(path)):
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
    path = LIFTBRIDGE / "samples" / "short.pcapng"
    if not path.exists():
        pytest.skip(f"{path} is not here")
    from lbparse.capture import CaptureReader

    streams: dict[tuple[str, str, str], list[bytes]] = {}
    for rec in CaptureReader(str(path)):
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


@pytest.mark.parametrize("name", ["short.pcapng", "api-short.pcapng"])
def test_stream_rows_is_read_for_the_common_message(name: str) -> None:
    """`TrafficReader.stream_rows`, the columns' short way (whole RPCs on a
    known stream, rows in one C call), says what `read(rows=True)` says of
    every message it answers, leaves the rest to `read` unchanged, and
    answers most of a real cluster's stream messages: it would fail if the
    short way were never taken or moved a stream otherwise."""
    path = LIFTBRIDGE / "samples" / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    from lbparse.capture import CaptureReader
    from lbparse.raft import transport

    if not transport.native_available():
        pytest.skip("the C transport reader is not in use (not built, or LBPARSE_NATIVE=0)")
    reference, quick = TrafficReader(), TrafficReader()
    answered = streams = 0
    for rec in CaptureReader(str(path)):
        want = reference.read(rec.src, rec.dst, rec.subject, rec.reply, rec.payload, rows=True)
        got = quick.stream_rows(rec.src, rec.dst, rec.subject, rec.payload)
        if want is not None and want.chunk is not None:
            streams += 1
        if got is None:
            other = quick.read(rec.src, rec.dst, rec.subject, rec.reply, rec.payload, rows=True)
            assert (other is None) == (want is None)
            if want is not None and other is not None:
                assert (other.kind, other.node, other.error, other.rows) == (
                    want.kind,
                    want.node,
                    want.error,
                    want.rows,
                )
        else:
            answered += 1
            assert want is not None and want.error is None
            assert got == (want.kind, want.node, want.rows)
        assert sorted(quick.streams) == sorted(reference.streams)
    for key, dec in reference.streams.items():
        other = quick.streams[key]
        assert (dec.role, bytes(dec.buf), dec.trailer, dec.in_step, dec.rpcs, dec.skipped) == (
            other.role,
            bytes(other.buf),
            other.trailer,
            other.in_step,
            other.rpcs,
            other.skipped,
        )
    assert streams > 1000 and answered > 0.8 * streams, (answered, streams)
