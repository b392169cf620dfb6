"""Capture files built by the tests: every file flavour, link type and
address family, and the damage real captures have (reordering,
retransmissions, gaps, snap-length cuts, truncated files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.capwriter import (
    ETHERNET,
    LINUX_SLL,
    LINUX_SLL2,
    LOOP,
    NULL,
    RAW,
    Conn,
    link,
    msg,
    pub,
    write_pcap,
    write_pcapng,
)
from support.shared import CAPTURES

from lbparse.capture import CaptureError, CaptureReader, Notice

VECTORS = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "data" / "vectors.jsonl").read_text().splitlines()
    if line
]
VALID = [v for v in VECTORS if v["layout"] == "v0" and "error" not in v["expect"]][:20]
PAYLOADS = [bytes.fromhex(v["hex"]) for v in VALID]
T0 = 1_700_000_000.0  # seconds
NS = 1_000_000_000
T0_NS = int(T0) * NS  # the same, in integer nanoseconds (exact)


def _stream(n: int = 20) -> tuple[bytes, bytes]:
    """The client's bytes (PUB/HPUB) and the server's (MSG/HMSG) for n messages."""
    c = [b'CONNECT {"verbose":false} \r\n', b"SUB foo.>  7\r\n"]
    s = [b'INFO {"server_id":"t"} \r\n']
    for i in range(n):
        p = PAYLOADS[i % len(PAYLOADS)]
        hdr = [("X-Seq", str(i))] if i % 3 == 0 else None
        reply = f"_INBOX.{i}" if i % 2 else None
        c.append(pub(f"foo.{i % 4}", p, reply, hdr))
        s.append(msg(f"foo.{i % 4}", 7, p, reply, hdr))
    return b"".join(c), b"".join(s)


def _frames(conn: Conn, mss: int = 100, n: int = 20) -> list[bytes]:
    cbytes, sbytes = _stream(n)
    out = conn.handshake()
    cs, ss = conn.send("c", cbytes, mss), conn.send("s", sbytes, mss)
    for i in range(max(len(cs), len(ss))):  # interleave the two directions
        out += cs[i : i + 1] + ss[i : i + 1]
    return out + [conn.fin("c"), conn.fin("s")]


def _read(path: Path, **kw) -> tuple[list, list[Notice]]:
    notices: list[Notice] = []
    recs = list(CaptureReader(path, layout="v0", on_notice=notices.append, **kw))
    return recs, notices


def _expect_all(recs: list, n: int = 20) -> None:
    pubs = [r for r in recs if r.direction == "client_to_server"]
    msgs = [r for r in recs if r.direction == "server_to_client"]
    for side in (pubs, msgs):
        assert [r.payload for r in side] == [PAYLOADS[i % len(PAYLOADS)] for i in range(n)]
        assert [r.subject for r in side] == [f"foo.{i % 4}" for i in range(n)]
        assert [r.reply for r in side] == [f"_INBOX.{i}" if i % 2 else None for i in range(n)]
        assert [r.headers for r in side] == [
            [["X-Seq", str(i)]] if i % 3 == 0 else None for i in range(n)
        ]
    assert all(r.envelope is not None and r.envelope.layout == "v0" for r in recs)
    assert all(r.sid == "7" for r in msgs) and all(r.sid is None for r in pubs)


@pytest.mark.parametrize("nanos", [False, True])
@pytest.mark.parametrize("big_endian", [False, True])
def test_pcap_resolutions_and_byte_orders(tmp_path: Path, nanos: bool, big_endian: bool) -> None:
    frames = [link(ETHERNET, f) for f in _frames(Conn())]
    path = tmp_path / "t.pcap"
    # Times the file's resolution holds exactly: they come back to the nanosecond.
    step = 123_456_789 if nanos else 123_457_000
    times = [T0_NS + i * step for i in range(len(frames))]
    write_pcap(path, list(zip(times, frames)), nanos=nanos, big_endian=big_endian)
    recs, notices = _read(path)
    assert notices == []
    _expect_all(recs)
    assert recs and all(r.ts in times for r in recs)
    assert recs[0].src == "127.0.0.1:40000" and recs[0].dst == "127.0.0.1:4222"


@pytest.mark.parametrize("linktype", [ETHERNET, LINUX_SLL, LINUX_SLL2, NULL, LOOP, RAW])
@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_link_types_and_address_families(tmp_path: Path, linktype: int, family: str) -> None:
    conn = Conn() if family == "ipv4" else Conn(("2001:db8::1", 40000), ("2001:db8::2", 4222))
    path = tmp_path / "t.pcap"
    write_pcap(
        path, [(T0 + i, link(linktype, f)) for i, f in enumerate(_frames(conn))], linktype=linktype
    )
    recs, notices = _read(path)
    assert notices == []
    _expect_all(recs)
    if family == "ipv6":
        assert recs[0].src == "[2001:db8::1]:40000" and recs[0].dst == "[2001:db8::2]:4222"


def test_pcapng_several_interfaces(tmp_path: Path) -> None:
    """Two connections on two interfaces with their own link type and clock."""
    a = _frames(Conn(("10.0.0.1", 50000), ("10.0.0.2", 4222)))
    b = _frames(Conn(("2001:db8::1", 50001), ("2001:db8::2", 4222)))
    packets = []
    for i in range(max(len(a), len(b))):
        if i < len(a):
            packets.append((0, T0_NS + i * 1_000_001, link(ETHERNET, a[i])))
        if i < len(b):
            packets.append((1, T0_NS + i * 1_000_000 + 500_000, link(LINUX_SLL2, b[i])))
    interfaces = [(ETHERNET, 9, 262144), (LINUX_SLL2, 0x80 | 20, 262144)]  # ns and 2^-20 s
    for big_endian in (False, True):
        path = tmp_path / f"t{big_endian}.pcapng"
        write_pcapng(path, interfaces, packets, big_endian=big_endian)
        recs, notices = _read(path)
        assert notices == []
        for host in ("10.0.0.1:50000", "[2001:db8::1]:50001"):
            _expect_all([r for r in recs if host in (r.src, r.dst)])
        v4 = [r.ts for r in recs if r.src.startswith("10.") or r.dst.startswith("10.")]
        v6 = [r.ts for r in recs if r.src.startswith("[") or r.dst.startswith("[")]
        # ns clock: to the nanosecond; 2^-20 s clock (~954 ns a unit): within a unit.
        assert all((t - T0_NS) % 1_000_001 == 0 for t in v4)
        assert all(
            0 <= (t - T0_NS - 500_000) % 1_000_000 < 954
            or (t - T0_NS - 500_000) % 1_000_000 > 1_000_000 - 954
            for t in v6
        )
        assert [r.ts for r in recs] == sorted(r.ts for r in recs)


def test_reordered_duplicated_and_overlapping_segments(tmp_path: Path) -> None:
    conn = Conn()
    cbytes, sbytes = _stream()
    start_c = conn.seq["c"] + 1
    out = conn.handshake()
    segs = conn.send("c", cbytes, 50)
    # Swap neighbours, send some twice, and add overlapping retransmissions.
    shuffled = []
    for i in range(0, len(segs) - 1, 2):
        shuffled += [segs[i + 1], segs[i]]
        if i % 6 == 0:
            shuffled.append(segs[i])
    shuffled += segs[len(segs) // 2 * 2 :]
    for off in (0, 30, 777, len(cbytes) - 40):
        shuffled.insert(
            len(shuffled) // 2, conn.segment_at("c", start_c + off, cbytes[off : off + 75])
        )
    out += shuffled + conn.send("s", sbytes, 700)
    path = tmp_path / "t.pcap"
    write_pcap(path, [(T0 + i, link(ETHERNET, f)) for i, f in enumerate(out)])
    recs, notices = _read(path)
    assert notices == []
    _expect_all(recs)


def test_gap_from_a_dropped_segment(tmp_path: Path) -> None:
    conn = Conn()
    out = conn.handshake()
    cbytes, _ = _stream()
    segs = conn.send("c", cbytes, 120)
    del segs[10]  # the capture lost this one
    path = tmp_path / "t.pcap"
    write_pcap(path, [(T0 + i, link(ETHERNET, f)) for i, f in enumerate(out + segs)])
    recs, notices = _read(path)
    gaps = [n for n in notices if n.kind == "gap"]
    assert len(gaps) == 1 and gaps[0].nbytes == 120 and gaps[0].src == "127.0.0.1:40000"
    # Every message yielded is one that was sent, intact; the lost ones are few.
    sent = [PAYLOADS[i % len(PAYLOADS)] for i in range(20)]
    got = [r.payload for r in recs]
    assert all(p in sent for p in got)
    assert got == [p for p in sent if p in got] and 15 <= len(got) < 20
    assert all(r.envelope is not None for r in recs)


def test_gap_declared_as_soon_as_the_peer_acknowledges_past_it(tmp_path: Path) -> None:
    conn = Conn()
    out = conn.handshake()
    cbytes, _ = _stream()
    segs = conn.send("c", cbytes, 120)
    lost = segs.pop(3)
    ack = conn.segment_at("s", conn.seq["s"], b"")  # acks everything the client sent
    path = tmp_path / "t.pcap"
    write_pcap(
        path, [(T0 + i, link(ETHERNET, f)) for i, f in enumerate(out + segs[:5] + [ack] + segs[5:])]
    )
    notices: list[Notice] = []
    reader = CaptureReader(path, on_notice=notices.append, decode=False)
    recs = list(reader)
    assert [n.kind for n in notices][:1] == ["gap"] and notices[0].nbytes == len(lost) - 40
    assert notices[0].ts == int(T0 + len(out) + 6) * NS  # the first segment after the ACK
    assert recs


def test_snap_length_cuts_a_large_message(tmp_path: Path) -> None:
    big = PAYLOADS[0] + bytes(70000)
    conn = Conn()
    out = conn.handshake()
    out += conn.send("c", pub("a", PAYLOADS[1]))
    out += conn.send("c", pub("big", big), 65495)  # 65535-byte IP packets, as on loopback
    out += conn.send("c", pub("b", PAYLOADS[2]) + pub("c", PAYLOADS[3]))
    path = tmp_path / "t.pcap"
    write_pcap(path, [(T0 + i, link(ETHERNET, f)) for i, f in enumerate(out)], snaplen=65535)
    recs, notices = _read(path)
    assert [r.subject for r in recs] == ["a", "b", "c"]
    kinds = [n.kind for n in notices]
    assert "gap" in kinds and "incomplete" in kinds
    assert any("snap length" in n.message for n in notices)


def test_cut_last_packet(tmp_path: Path) -> None:
    conn = Conn()
    out = conn.handshake() + conn.send("c", pub("a", PAYLOADS[0]) + pub("b", PAYLOADS[1]))
    path = tmp_path / "t.pcap"
    write_pcap(
        path,
        [(T0 + i, link(ETHERNET, f)) for i, f in enumerate(out)],
        snaplen=len(link(ETHERNET, out[-1])) - 20,
    )
    recs, notices = _read(path)
    assert [r.subject for r in recs] == ["a"]
    assert [n.kind for n in notices] == ["gap", "incomplete"]
    assert "PUB b" in notices[1].message


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("cut", [1, 10, 30, 200])
def test_truncated_file(tmp_path: Path, fmt: str, cut: int) -> None:
    frames = _frames(Conn(), mss=1000)
    path = tmp_path / f"t.{fmt}"
    if fmt == "pcap":
        write_pcap(path, [(T0 + i, link(ETHERNET, f)) for i, f in enumerate(frames)])
    else:
        write_pcapng(
            path,
            [(ETHERNET, 6, 262144)],
            [(0, T0 + i, link(ETHERNET, f)) for i, f in enumerate(frames)],
        )
    whole, _ = _read(path)
    data = path.read_bytes()
    # Drop the two FINs and cut into the last data packet.
    fins = 2 * (16 + len(link(ETHERNET, frames[-1]))) if fmt == "pcap" else 0
    if fmt == "pcapng":
        fins = 2 * (32 + len(link(ETHERNET, frames[-1])) + (-len(link(ETHERNET, frames[-1])) % 4))
    path.write_bytes(data[: len(data) - fins - cut])
    recs, notices = _read(path)
    assert notices[0].kind == "truncated"
    assert [r.payload for r in recs] == [r.payload for r in whole[: len(recs)]]
    assert 0 < len(recs) < len(whole)


def test_capture_starting_mid_stream(tmp_path: Path) -> None:
    """No handshake, and the first segment starts inside a message."""
    frames = _frames(Conn(), mss=97)[3:]
    frames = frames[1:]  # the first client segment is the start of CONNECT...
    frames = [f for i, f in enumerate(frames) if i != 1]  # ...and the server's INFO
    path = tmp_path / "t.pcap"
    write_pcap(path, [(T0 + i, link(ETHERNET, f)) for i, f in enumerate(frames)])
    recs, notices = _read(path)
    assert notices == []
    sent = [PAYLOADS[i % len(PAYLOADS)] for i in range(20)]
    for side in ("client_to_server", "server_to_client"):
        got = [r.payload for r in recs if r.direction == side]
        assert got == sent[len(sent) - len(got) :] and len(got) >= 18


def test_unreadable_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"\x00\x01\x02\x03garbage")
    with pytest.raises(CaptureError) as e:
        list(CaptureReader(bad))
    assert e.value.kind == "unknown_format"
    odd = tmp_path / "odd.pcap"
    write_pcap(odd, [(T0, b"xx")], linktype=147)
    with pytest.raises(CaptureError) as e:
        list(CaptureReader(odd))
    assert e.value.kind == "unsupported_linktype" and "147" in e.value.message
    ng = tmp_path / "bad.pcapng"
    ng.write_bytes(b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\xde\xad\xbe\xef" + bytes(16))
    with pytest.raises(CaptureError) as e:
        list(CaptureReader(ng))
    assert e.value.kind == "bad_header" and "deadbeef" in e.value.message
    huge = tmp_path / "huge.pcap"
    write_pcap(huge, [(T0, b"x" * 40)])
    data = bytearray(huge.read_bytes())
    data[32:36] = (1 << 30).to_bytes(4, "little")
    huge.write_bytes(bytes(data))
    # Issue 7: a damaged record is a notice, and reading goes on past it.
    notices: list = []
    assert list(CaptureReader(huge, on_notice=notices.append)) == []
    assert notices[0].kind == "bad_block" and "offset 24" in notices[0].message


def test_non_tcp_packets_are_skipped(tmp_path: Path) -> None:
    conn = Conn()
    frames = [link(ETHERNET, f) for f in _frames(conn)]
    arp = b"\xff" * 6 + b"\0" * 6 + b"\x08\x06" + bytes(28)
    udp = bytearray(frames[0])
    udp[14 + 9] = 17
    path = tmp_path / "t.pcap"
    write_pcap(path, [(T0 + i, f) for i, f in enumerate([arp, bytes(udp)] + frames)])
    reader = CaptureReader(path)
    _expect_all(list(reader))
    assert reader.stats.skipped_packets == 2


def test_record_columns_are_the_records_fields() -> None:
    """What the pipeline builds its Arrow columns from: each record's own fields."""
    from lbparse.capture.records import COLUMNS, Record, record_columns

    shared = CAPTURES
    recs = [r for p in sorted(shared.glob("*.pcap*")) for r in CaptureReader(p, decode=False)]
    recs.append(
        Record.make(1_500_000_000, "a:1", "b:2", "HPUB", "s", "r", None, b"NATS/1.0\r\n\r\n", b"x")
    )
    cols = record_columns(recs)
    assert list(cols) == list(COLUMNS) and len(recs) > 100
    for name in COLUMNS:
        assert cols[name] == [getattr(r, name) for r in recs], name
    assert record_columns([]) == {name: [] for name in COLUMNS}
