"""The C capture loop (lbparse/capture/_native.c) gives exactly the
reference's rows: every record, every notice (as a problem row, with its
message), in the same order, and the same counts.

The reference is lbparse.capture's Python reader as the pipeline's sources
read it (`read_capture_reference`); the C loop is what the pipeline uses
when it is built (`read_capture` chooses). Compared on every shared
capture, the bundled sample, the real cluster capture, every damaged
capture of tests/support/damage.py (pcap and pcapng, with their limits),
files read in small blocks, hostile bytes, and hypothesis-made captures:
several connections (IPv4 and IPv6, every link type), random NATS content
cut into random segments, reordered, dropped, duplicated and overlapping
segments, SYN/FIN/RST, small snap lengths and limits, and damaged files.
On each, the packets the C loop gives the Python reader for some of the
connections (the gRPC reading's, native_batches.ConnectionPackets) are the
Python source's packets of those connections, and its last
(support.hostile.check_connection_packets).
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import capwriter as cw
from support import retransmit
from support.damage import damaged_captures
from support.hostile import check_connection_packets
from support.reading import pipeline_rows as rows
from support.shared import CAPTURES, LIFTBRIDGE

from lbparse.capture import native_batches
from lbparse.capture.tcp import RETRANSMIT_WINDOW
from lbparse.codec.limits import Limits
from lbparse.columnar.schema import arrow_record_schema
from lbparse.columnar.sources import SourceOptions, Unit, UnitStats, read_capture, read_unit
from lbparse.pipeline.input_plan import plan

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not native_batches.available() and not os.environ.get("LBPARSE_EXPECT_COMPILED"),
    reason="the C capture module is not built (setup.py): nothing to compare",
)


def assert_same(path: str | Path, limits: Limits | None = None, batch_rows: int = 65536) -> int:
    # The packets the C loop gives the gRPC reading of some connections too.
    check_connection_packets(str(path), limits)
    ref, ref_counts = rows(path, False, limits)
    got, got_counts = rows(path, True, limits, batch_rows)
    if not got.equals(ref):
        for name in ref.column_names:
            a, b = ref.column(name).to_pylist(), got.column(name).to_pylist()
            for i, (x, y) in enumerate(zip(a, b)):
                assert x == y, f"{path}: column {name}, row {i}: {y!r} != reference {x!r}"
            assert len(a) == len(b), f"{path}: {len(b)} rows, reference {len(a)}"
    assert got_counts == ref_counts, path
    return ref.num_rows


def test_the_native_module_is_built_when_expected() -> None:
    if os.environ.get("LBPARSE_EXPECT_COMPILED"):
        assert native_batches.available()


SHARED_FILES = sorted(CAPTURES.glob("*.pcap*")) + [ROOT / "lbparse" / "examples" / "sample.pcap"]


@pytest.mark.parametrize("path", SHARED_FILES, ids=lambda p: p.name)
def test_shared_captures(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not there")
    assert assert_same(path) > 0


def test_real_cluster_capture() -> None:
    path = LIFTBRIDGE / "samples" / "short.pcapng"
    if not path.exists():
        pytest.skip(f"{path} not there (shared/ beside the checkout)")
    assert assert_same(path) > 7000
    assert_same(path, batch_rows=1000)  # batch boundaries change nothing


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_damaged_captures(fmt: str, tmp_path: Path) -> None:
    for case in damaged_captures(tmp_path, fmt):
        limits = Limits(**case.limits) if case.limits else None
        assert_same(case.path, limits)
        assert_same(case.path, Limits(max_frame=500, max_reassembly=1500))


@pytest.mark.parametrize("block", [16, 100, 4096])
def test_small_blocks_read_the_same(block: int, tmp_path: Path) -> None:
    """Records cross the read blocks everywhere; nothing changes but the blocks."""
    paths = [c.path for fmt in ("pcap", "pcapng") for c in damaged_captures(tmp_path, fmt)]
    short = LIFTBRIDGE / "samples" / "short.pcapng"
    if short.exists():
        paths.append(str(short))
    schema = arrow_record_schema()
    for path in paths:
        whole = pa.Table.from_batches(
            list(native_batches.NativeCapture(path).batches(schema)), schema=schema
        )
        cap = native_batches.NativeCapture(path, block=block)
        small = pa.Table.from_batches(list(cap.batches(schema)), schema=schema)
        assert small.equals(whole), (path, block)
        assert cap.stats["bytes_read"] == os.path.getsize(path)


# -- the loop's limits: the reference's constants, handed to C (native_batches.rules) ------


def _pcap(path: Path, packets: list[bytes], snaplen: int = 262144) -> Path:
    cw.write_pcap(
        str(path),
        [(1.7e9 + k / 1e6, cw.link(cw.ETHERNET, p)) for k, p in enumerate(packets)],
        snaplen=snaplen,
    )
    return path


def _forgotten_and_repeated(tmp_path: Path) -> Path:
    """A segment sent again after 400 other connections: a duplicate while
    its connection is remembered, a new message once it was forgotten."""
    conn = cw.Conn()
    packets = conn.handshake()
    again = conn.send("c", cw.pub("a", b"once"))
    packets += again
    for i in range(400):
        packets += cw.Conn(client=(f"10.1.{i // 200}.{i % 200 + 1}", 2000 + i)).handshake()[:1]
    packets += again + conn.send("c", cw.pub("b", b"after"))
    return _pcap(tmp_path / "flows.pcap", packets)


def _long_line(tmp_path: Path) -> Path:
    conn = cw.Conn()
    packets = conn.handshake() + conn.send("c", b"x" * 300) + conn.send("c", cw.pub("ok", b"1"))
    return _pcap(tmp_path / "line.pcap", packets)


def _behind_a_hole(tmp_path: Path) -> Path:
    conn = cw.Conn()
    packets = conn.handshake()
    segments = conn.send("c", b"".join(cw.pub(f"s{i}", b"p" * 20) for i in range(8)), mss=30)
    return _pcap(tmp_path / "hole.pcap", packets + segments[1:])


def _big_records(tmp_path: Path, snaplen: int = 262144) -> Path:
    conn = cw.Conn()
    packets = (
        conn.handshake()
        + conn.send("c", cw.pub("big", b"b" * 1400))
        + conn.send("c", cw.pub("small", b"s"))
    )
    return _pcap(tmp_path / "records.pcap", packets, snaplen)


def _big_records_small_snaplen(tmp_path: Path) -> Path:
    """Records past the file's snap length (64): taken up to MIN_MAX_RECORD."""
    path = _big_records(tmp_path)
    data = bytearray(path.read_bytes())
    data[16:20] = struct.pack("<I", 64)
    path.write_bytes(bytes(data))
    return path


def _big_blocks(tmp_path: Path) -> Path:
    conn = cw.Conn()
    packets = (
        conn.handshake()
        + conn.send("c", cw.pub("big", b"b" * 1400))
        + conn.send("c", cw.pub("small", b"s"))
    )
    path = tmp_path / "records.pcapng"
    cw.write_pcapng(
        str(path),
        [(cw.ETHERNET, 6, 65535)],
        [(0, 1.7e9 + k, cw.link(cw.ETHERNET, p)) for k, p in enumerate(packets)],
    )
    return path


LOWERED = [
    ("reader", "MAX_FLOWS", 50, _forgotten_and_repeated),
    ("nats", "MAX_LINE", 100, _long_line),
    ("tcp", "MAX_PENDING_SEGMENTS", 3, _behind_a_hole),
    ("pcap", "MAX_RECORD", 1000, _big_records),
    ("pcap", "MIN_MAX_RECORD", 1000, _big_records_small_snaplen),
    ("pcap", "MAX_RECORD", 1000, _big_blocks),
]


@pytest.mark.parametrize(
    "module, name, value, make",
    LOWERED,
    ids=[f"{n}-{m.__name__.strip('_')}" for _, n, _, m in LOWERED],
)
def test_a_limit_lowered_in_python_holds_in_the_c_loop(
    module: str, name: str, value: int, make: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C loop has no copy of the reference's limits: lowered in Python,
    each changes the reference's rows at the limit, and the C loop's rows
    equal them, problems included."""
    import importlib

    path = make(tmp_path)
    default, _ = rows(path, False)
    monkeypatch.setattr(importlib.import_module(f"lbparse.capture.{module}"), name, value)
    assert native_batches.rules()[name.lower()] == value
    native_batches.NativeCapture(path)  # the C loop takes it (no quiet fall-back to the reference)
    lowered, _ = rows(path, False)
    assert not lowered.equals(default), "the limit was not reached: no test of it"
    assert_same(path)


def test_the_c_loop_keeps_connect_text_up_to_the_python_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MAX_CONNECT_BYTES is the C loop's own bound (the reference reads each
    CONNECT line's name at once), and it too comes from Python."""
    import lbparse.capture.connects as connects

    conn = cw.Conn()
    line = b'{"name":"LIFT.ns.n1.raft"}'
    path = _pcap(
        tmp_path / "connect.pcap", conn.handshake() + conn.send("c", b"CONNECT " + line + b"\r\n")
    )

    def kept() -> list[bytes]:
        capture = native_batches.NativeCapture(path)
        assert sum(n for n, _ in capture.columns(100, 1 << 20)) == 0
        return [text for _, text in capture.stats["connects"]]

    assert kept() == [line]
    monkeypatch.setattr(connects, "MAX_CONNECT_BYTES", len(line))
    assert kept() == [line]
    monkeypatch.setattr(connects, "MAX_CONNECT_BYTES", len(line) - 1)
    assert kept() == []


@pytest.mark.parametrize("name, value", [("MAX_FLOWS", 1 << 31), ("MAX_FLOWS", -1)])
def test_a_limit_the_c_loop_cannot_take_leaves_the_file_to_the_reference(
    name: str, value: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lbparse.capture.reader as reader_module

    path = _long_line(tmp_path)
    monkeypatch.setattr(reader_module, name, value)
    with pytest.raises(
        native_batches.NativeUnsupported, match=f"{name.lower()} {value} is outside"
    ):
        native_batches.NativeCapture(path)
    got, _ = rows(path, True)  # the reference reads it
    assert got.equals(rows(path, False)[0])


def test_the_c_reader_checks_every_limit_it_is_given(tmp_path: Path) -> None:
    from lbparse.capture import _native

    path = str(_long_line(tmp_path))
    good = native_batches.rules()
    _native.Reader(path, "x", 1000, 1000, good)
    for name, lo in (
        ("block", 16),
        ("max_record", 16),
        ("min_max_record", 16),
        ("max_line", 1),
        ("max_pending_segments", 0),
        ("max_flows", 0),
        ("max_connect_bytes", 0),
    ):
        _native.Reader(path, "x", 1000, 1000, {**good, name: lo})
        for bad in (lo - 1, 1 << 62, 1 << 70):
            with pytest.raises(ValueError, match=f"rules: {name} {bad} is outside"):
                _native.Reader(path, "x", 1000, 1000, {**good, name: bad})
        with pytest.raises(TypeError, match=f"rules: {name} needs an int"):
            _native.Reader(path, "x", 1000, 1000, {**good, name: str(lo)})
    with pytest.raises(TypeError, match="a dict of the 7 limits"):
        _native.Reader(path, "x", 1000, 1000, {**good, "max_other": 1})
    with pytest.raises(TypeError, match="a dict of the 7 limits"):
        _native.Reader(path, "x", 1000, 1000, list(good.items()))


def test_files_the_native_loop_leaves_to_the_reference(tmp_path: Path) -> None:
    """Not pcap/pcapng, a cut file header, an unknown link type, a missing
    file: the reference's own rows (its errors), through the same entry point."""
    cases = {
        "empty.pcap": b"",
        "cut.pcap": b"\xd4\xc3\xb2\xa1\x02\x00",
        "cut.pcapng": b"\x0a\x0d\x0d\x0a\x1c\x00",
        "linktype.pcap": struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 147),
        "json.pcap": b'{"ts": 1}\n',
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert_same(tmp_path / name)
    with pytest.raises(native_batches.NativeUnsupported):
        native_batches.NativeCapture(tmp_path / "linktype.pcap")
    unit = Unit(str(tmp_path / "gone.pcap"), "pcap", 0, 0)
    got = [
        pa.Table.from_batches(
            list(read_capture(unit, SourceOptions(), UnitStats(unit.path, "pcap", 0), native=n))
        )
        for n in (False, True)
    ]
    assert got[0].equals(got[1])
    assert got[0].column("error_kind").to_pylist() == ["input:unreadable"]


def test_a_bad_section_header_mid_file(tmp_path: Path) -> None:
    """Bytes that read as a section header with a bad byte-order magic, in
    the middle of a pcapng file: damage (issue #19), not the file's end; the
    rows after it are read, in the C loop as in the reference."""
    path = tmp_path / "two.pcapng"
    conn = cw.Conn()
    packets = conn.handshake() + conn.send("c", cw.pub("a.b", b"hello"))
    cw.write_pcapng(
        str(path),
        [(cw.ETHERNET, 6, 65535)],
        [(0, 1.7e9 + k, cw.link(cw.ETHERNET, p)) for k, p in enumerate(packets)],
    )
    data = path.read_bytes()
    bad = (
        struct.pack("<II", 0x0A0D0D0A, 28)
        + b"\x00\x11\x22\x33"
        + b"\0" * 12
        + struct.pack("<I", 28)
    )
    path.write_bytes(data + bad + data)
    assert_same(path)
    table, counts = rows(path, True)
    kinds = table.column("error_kind").to_pylist()
    assert "input:bad_block" in kinds and "input:bad_header" not in kinds
    assert kinds.count(None) == 2 and kinds[-1] is None  # the message of each copy
    assert counts["file_error"] is None


# -- hypothesis-made captures --------------------------------------------------------

_LINES = [
    b"PUB a.b 5\r\nhello\r\n",
    b"PUB  a.b  r.1  3\r\nxyz\r\n",
    b"MSG a.b 7 2\r\nhi\r\n",
    b"MSG a.b 7 _INBOX.x 0\r\n\r\n",
    b"HPUB h 22 24\r\nNATS/1.0\r\nK: v\r\n\r\nok\r\n",
    b"HMSG h 1 r 12 12\r\nNATS/1.0\r\n\r\n\r\n",
    b"PING\r\n",
    b"+OK\r\n",
    b"pub x 1\r\nz\r\n",
    b"-ERR 'boom'\r\n",
    b'INFO {"a":1}\r\n',
    b"MSG bad\r\n",
    b"PUB a 3\r\nxyzW\r\n",
    b"garbage\r\n",
    b"PUB a 99999999999\r\n",
    b"HPUB a 9 3\r\n",
    b"\r\n",
    b"PUB s\xc3\x28 2\r\nhi\r\n",
    b"PUB a +1_0\r\n0123456789\r\n",
    b"HPUB a 5 99999999999999999999\r\n",
    b"PUB a -1\r\n",
    b"MSG \xff\xfe 1 4\r\nabcd\r\n",
    b"PUB big 300\r\n" + b"x" * 300 + b"\r\n",
    b"Pub m 2\r\nok\r\n",
]

_ADDRS = [("10.0.0.1", "10.0.0.2"), ("fe80::1", "2001:db8::2"), ("127.0.0.1", "127.0.0.1")]


# The strategies of a draw, made once: hypothesis checks each strategy the
# first time it draws from it, so strategies made anew in every draw were
# checked in every draw (test_hypothesis_captures: 10.3 CPU-s, now 7.3).
_PIECES = st.lists(st.sampled_from(_LINES) | st.binary(max_size=24), max_size=14)
_FORMAT = st.sampled_from(["pcap", "pcapng"])
_LINKTYPE = st.sampled_from([cw.ETHERNET, cw.LINUX_SLL, cw.LINUX_SLL2, cw.NULL, cw.LOOP, cw.RAW])
_SEED, _U32, _BOOL = st.integers(0, 2**32), st.integers(0, 2**32 - 1), st.booleans()
_CONNS, _ADDR, _UP_TO_3 = st.integers(1, 3), st.integers(0, len(_ADDRS) - 1), st.integers(0, 3)
_SIDES = st.lists(st.sampled_from("cs"), min_size=1, max_size=4)
_MSS = st.sampled_from([None, 1, 7, 40, 300])
_AGAIN = st.binary(max_size=40)
_END = st.sampled_from(["", "fin", "fins", "rst"])
_SNAPLEN = st.sampled_from([262144, 262144, 80, 120])
_LIMITS = st.sampled_from(
    [None, Limits(max_frame=40, max_reassembly=100), Limits(max_frame=1000, max_reassembly=60)]
)
_DAMAGE = st.lists(st.tuples(st.integers(0, 10**6), st.binary(min_size=1, max_size=6)), max_size=3)
_CUT = st.none() | st.integers(24, 10**6)


@st.composite
def _stream(draw: st.DrawFn) -> bytes:
    pieces = draw(_PIECES)
    return b"".join(pieces)


@st.composite
def captures(draw: st.DrawFn) -> tuple[str, list[tuple[int, float, bytes]], dict[str, Any]]:
    """(format, packets as (linktype, ts, frame), options): connections
    interleaved, each side's bytes cut into segments and then disordered."""
    fmt = draw(_FORMAT)
    linktype = draw(_LINKTYPE)
    rnd = random.Random(draw(_SEED))
    conns: list[list[bytes]] = []
    for c in range(draw(_CONNS)):
        a, b = _ADDRS[draw(_ADDR)]
        port = 40000 + c if draw(_BOOL) else 4222  # the same ports: a reused flow
        conn = cw.Conn(client=(a, port), server=(b, 4222), isn=(draw(_U32), draw(_U32)))
        packets = conn.handshake() if draw(_BOOL) else []
        sent = {"c": b"", "s": b""}
        for side in draw(_SIDES):
            data = draw(_stream())
            sent[side] += data
            packets += conn.send(side, data, mss=draw(_MSS))
        for _ in range(draw(_UP_TO_3)):  # retransmissions and overlaps
            side = rnd.choice("cs")
            back = rnd.randint(0, 60)
            again = draw(_AGAIN)
            if back <= len(sent[side]) and draw(_BOOL):
                # a copy of the bytes sent (then new ones), maybe one changed
                copy = bytearray(sent[side][len(sent[side]) - back :] + again)[:40]
                if copy and rnd.random() < 0.5:
                    copy[rnd.randrange(len(copy))] ^= 1
                again = bytes(copy)
            packets.append(conn.segment_at(side, conn.seq[side] - back, again))
        if packets and draw(_BOOL):
            k = rnd.randrange(len(packets))
            del packets[k]  # a dropped packet
        for _ in range(draw(_UP_TO_3)):  # reordering
            if len(packets) > 1:
                i = rnd.randrange(len(packets) - 1)
                packets[i], packets[i + 1] = packets[i + 1], packets[i]
        end = draw(_END)
        if end == "fin" or end == "fins":
            packets.append(conn.fin("c"))
        if end == "fins":
            packets.append(conn.fin("s"))
        if end == "rst":
            packets.append(conn._pkt("s", conn.seq["s"], cw.RST | cw.ACK, b""))
        if draw(_BOOL):  # the same addresses, a new connection
            conn.seq = {"c": draw(_U32), "s": 5}
            packets += conn.handshake() + conn.send("c", draw(_stream()), mss=50)
        conns.append(packets)
    merged: list[bytes] = []
    while any(conns):
        live = [p for p in conns if p]
        merged.append(rnd.choice(live).pop(0))
    frames = [(linktype, 1.7e9 + k * 0.001, cw.link(linktype, p)) for k, p in enumerate(merged)]
    options = {
        "snaplen": draw(_SNAPLEN),
        "limits": draw(_LIMITS),
        "damage": draw(_DAMAGE),
        "cut": draw(_CUT),
    }
    return fmt, frames, options


def _write(
    path: Path, fmt: str, frames: list[tuple[int, float, bytes]], options: dict[str, Any]
) -> None:
    snap = options["snaplen"]
    lt = frames[0][0] if frames else cw.ETHERNET
    if fmt == "pcap":
        cw.write_pcap(str(path), [(ts, f) for _, ts, f in frames], linktype=lt, snaplen=snap)
    else:
        cw.write_pcapng(str(path), [(lt, 6, snap)], [(0, ts, f) for _, ts, f in frames])
    data = bytearray(path.read_bytes())
    for at, junk in options["damage"]:
        at = 24 + at % max(len(data) - 24, 1)  # the file header stays whole
        data[at : at + len(junk)] = junk
    if options["cut"] is not None:
        del data[options["cut"] :]
    path.write_bytes(bytes(data))


def split_rows(path: str | Path, every: int) -> tuple[pa.Table, dict[str, Any], int]:
    """The rows of a capture cut into ranges of about `every` bytes (what
    `lbparse pipeline` does with a large capture: several tasks), each range
    read on its own in an order of its own, put back by position; the
    ranges' counts summed; and the number of ranges."""
    units = plan([str(path)], SourceOptions(capture_unit_bytes=every))
    tables, totals = [], {"packets": 0, "notices": {}, "gaps": 0, "gap_bytes": 0, "bytes_read": 0}
    for unit in reversed(units):  # tasks run in any order
        stats = UnitStats(unit.path, unit.format, unit.size)
        tables.append(
            pa.Table.from_batches(
                list(read_unit(unit, SourceOptions(), stats)), schema=arrow_record_schema()
            )
        )
        for k in ("packets", "gaps", "gap_bytes", "bytes_read"):
            totals[k] += getattr(stats, k)
        for k, v in stats.notices.items():
            totals["notices"][k] = totals["notices"].get(k, 0) + v
    table = pa.concat_tables(tables).sort_by("position")
    return table, totals, len(units)


def assert_split_same(path: str | Path, every: int) -> int:
    whole, counts = rows(path, False)
    got, totals, n = split_rows(path, every)
    assert got.equals(whole), f"{path} cut every {every} bytes into {n} ranges"
    for k in ("packets", "gaps", "gap_bytes", "notices"):
        assert totals[k] == counts[k], (path, k)
    assert totals["bytes_read"] == os.path.getsize(path)
    return n


@pytest.mark.slow
@pytest.mark.parametrize("every", [1, 300, 5000, 1 << 20])
def test_a_capture_cut_into_ranges_reads_as_one(every: int, tmp_path: Path) -> None:
    """Cut at every record (every=1), every message that spans packets
    crosses a cut: the reader's state (segments behind holes, half-read
    frames) goes over with the snapshot, and the rows are one reading's."""
    paths = [c.path for fmt in ("pcap", "pcapng") for c in damaged_captures(tmp_path, fmt)]
    short = LIFTBRIDGE / "samples" / "short.pcapng"
    if short.exists():
        paths.append(str(short))
    ranges = sum(assert_split_same(p, every) for p in paths)
    assert ranges > len(paths) or every > 10000


def test_a_range_handed_to_a_task_as_json_reads_as_in_this_process(tmp_path: Path) -> None:
    """A Spark task gets its range as JSON (the snapshot in base64): the unit
    comes back equal, and reads the same rows as the unit planned here."""
    (path, *_) = [c.path for c in damaged_captures(tmp_path, "pcapng")]
    units = plan([path], SourceOptions(capture_unit_bytes=300))
    assert len(units) > 3 and all(isinstance(u.snapshot, bytes) for u in units[1:])
    for unit in units:
        back = Unit.from_json(unit.to_json())
        assert back == unit
        here, there = (
            pa.Table.from_batches(
                list(read_unit(u, SourceOptions(), UnitStats(u.path, u.format, u.size))),
                schema=arrow_record_schema(),
            )
            for u in (unit, back)
        )
        assert here.equals(there)


def test_a_range_with_its_problems(tmp_path: Path) -> None:
    """A bad section header in the last range: that range's rows end with it."""
    path = tmp_path / "two.pcapng"
    conn = cw.Conn()
    packets = conn.handshake() + conn.send("c", cw.pub("a.b", b"hello" * 100), mss=50)
    cw.write_pcapng(
        str(path),
        [(cw.ETHERNET, 6, 65535)],
        [(0, 1.7e9 + k, cw.link(cw.ETHERNET, p)) for k, p in enumerate(packets)],
    )
    data = path.read_bytes()
    bad = (
        struct.pack("<II", 0x0A0D0D0A, 28)
        + b"\x00\x11\x22\x33"
        + b"\0" * 12
        + struct.pack("<I", 28)
    )
    path.write_bytes(data + bad + data)
    assert assert_split_same(path, 200) > 3


@pytest.mark.slow
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(capture=captures())
def test_hypothesis_captures(capture: tuple[str, list, dict[str, Any]], tmp_path: Path) -> None:
    fmt, frames, options = capture
    path = tmp_path / f"h.{fmt}"
    _write(path, fmt, frames, options)
    assert_same(path, options["limits"])
    if options["limits"] is None:
        assert_split_same(path, options["snaplen"] // 2)


@pytest.mark.parametrize("name", list(retransmit.CAPTURES))
def test_retransmissions_read_alike(name: str, tmp_path: Path) -> None:
    """Retransmissions that differ or not, within the window kept to compare
    them or beyond it: the same rows and notices, read whole and cut into
    ranges (the window, and whether a notice was given, go over with the
    snapshot)."""
    build, told = retransmit.CAPTURES[name]
    path = build(tmp_path / f"{name}.pcap")
    table, counts = rows(path, True)
    assert counts["notices"].get("retransmission", 0) == told
    assert table.column("error_kind").to_pylist().count("input:retransmission") == told
    assert_same(path)
    # ranges of one record, and of a few: one starts after a notice and
    # holds bytes delivered and a copy of them (`told` goes over too)
    assert [assert_split_same(path, every) > 5 for every in (1, 200, 500)][0]


@st.composite
def long_retransmissions(draw: st.DrawFn) -> list[tuple[int, float, bytes]]:
    """A stream longer than the retransmission window, both ways, in segments
    of random sizes, with copies of bytes sent up to 1.5 windows back
    (equal, or a few bytes changed) among them."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    conn = cw.Conn(isn=(draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 2**32 - 1))))
    packets = conn.handshake() if draw(st.booleans()) else []
    sizes = st.sampled_from(
        [0, 100, RETRANSMIT_WINDOW // 2, RETRANSMIT_WINDOW + 500, 3 * RETRANSMIT_WINDOW]
    )
    streams = {side: retransmit.long_stream(draw(sizes) + rnd.randint(0, 999)) for side in "cs"}
    sent = {"c": 0, "s": 0}
    copies = draw(st.integers(0, 12))
    while sent["c"] < len(streams["c"]) or sent["s"] < len(streams["s"]):
        side = rnd.choice("cs")
        at = sent[side]
        piece = streams[side][at : at + rnd.choice([1, 7, 536, 1460, 5000])]
        packets += conn.send(side, piece)
        sent[side] += len(piece)
        if sent[side] and copies and rnd.random() < 0.2:
            copies -= 1
            back = rnd.randint(1, min(sent[side], 3 * RETRANSMIT_WINDOW // 2))
            start = sent[side] - back
            copy = bytearray(streams[side][start : start + rnd.randint(1, 2 * back)])
            for _ in range(rnd.choice([0, 0, 1, 3])):
                copy[rnd.randrange(len(copy))] ^= 0x41
            packets.append(conn.segment_at(side, conn.seq[side] - back, bytes(copy)))
    return [
        (cw.ETHERNET, 1.7e9 + k * 0.001, cw.link(cw.ETHERNET, p)) for k, p in enumerate(packets)
    ]


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(frames=long_retransmissions())
def test_hypothesis_retransmissions_past_the_window(frames: list, tmp_path: Path) -> None:
    path = tmp_path / "long.pcap"
    _write(path, "pcap", frames, {"snaplen": 262144, "damage": [], "cut": None})
    assert_same(path)
    assert_split_same(path, 3000)


@pytest.mark.slow
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=600), fmt=st.sampled_from(["pcap", "pcapng"]))
def test_hostile_bytes_after_a_file_header(data: bytes, fmt: str, tmp_path: Path) -> None:
    head = (
        struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
        if fmt == "pcap"
        else struct.pack("<IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1)
        + struct.pack("<I", 28)
        + struct.pack("<IIHHI", 1, 20, 1, 0, 65535)
        + struct.pack("<I", 20)
    )
    path = tmp_path / f"x.{fmt}"
    path.write_bytes(head + data)
    assert_same(path, Limits(max_frame=100, max_reassembly=200))


def test_sanitize_builds_every_c_module_of_setup() -> None:
    """make sanitize (tools/sanitize.py) must build what setup.py builds, no less."""
    import re
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import sanitize

    listed = re.findall(r'_native\("([\w.]+)", "([\w/.]+\.c)"\)', (ROOT / "setup.py").read_text())
    assert len(listed) == 5 and sorted(listed) == sorted(sanitize.MODULES)


@pytest.mark.parametrize(
    "tsresol, offset_s, units",
    [
        (9, 0, [1_700_000_000_123_456_789]),  # nanoseconds, exact
        (12, 0, [2**64 - 1, 1_700_000_000_123_456_789]),  # picoseconds, rounded down
        (0x80 | 30, 5, [2**62 + 12345]),  # 2^-30 s, with an offset
        (0x80 | 127, -3, [2**64 - 1]),  # finer than anything: the offset
        (60, 7, [2**64 - 1]),  # 10^-60 s: nothing but the offset
        (0, 0, [2**64 - 1, 9_223_372_036]),  # seconds: past 2^63 ns, then not
        (6, -(2**62), [1]),  # an offset below -2^63 ns
        (6, 9_300_000_000, [1]),  # an offset above 2^63 ns
        (9, -9_223_372_037, [145_224_192]),  # exactly -2^63: NaT, null
    ],
)
def test_pcapng_times_are_exact_nanoseconds(
    tsresol: int, offset_s: int, units: list[int], tmp_path: Path
) -> None:
    """if_tsresol and if_tsoffset as exact integers, a time 64 bits do not
    hold null, in the C loop as in the reference."""
    conn = cw.Conn()
    frames = [
        cw.link(cw.ETHERNET, p)
        for p in conn.handshake()
        + conn.send("c", cw.pub("a.b", b"x"))
        + conn.send("c", cw.pub("a.c", b"y"))
    ]
    path = tmp_path / "times.pcapng"
    cw.write_pcapng_units(path, tsresol, offset_s, units, frames)
    assert assert_same(path) >= 2
    got = rows(path, True)[0].column("ts_ns").to_pylist()
    num, den = (
        (10**9, 1 << (tsresol & 0x7F))
        if tsresol & 0x80
        else ((10 ** (9 - tsresol), 1) if tsresol <= 9 else (1, 10 ** (tsresol - 9)))
    )
    want = {u * num // den + offset_s * 10**9 for u in units}
    want = {w if -(2**63) < w < 2**63 else None for w in want}
    assert set(got) <= want and got
