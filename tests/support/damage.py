"""Damaged captures with known answers: does a reader account for every message?

`damaged_captures(directory, fmt)` writes one capture per kind of damage
(cut in the middle of a frame, garbage between frames or between file
records, a bad pcapng block, a corrupted payload, a lying size field, a
resource limit...) and returns a `DamagedCapture` for each, saying what a
reader must make of it: which messages come out decoded exactly as
written, which come out with an error (and its kind), which are lost, and
which notices must report the damage. `check_accounting` holds a reading to
that, with the counts adding up: decoded + errors + lost = messages
written. Anything that reads captures (CaptureReader, `lbparse capture`,
the pipeline) can be checked the same way: it needs only the subjects and
error kinds of what it produced, and the kinds of its notices.

Every message has its own subject, `lb.<case>.<i>`, and a v0 envelope with
a CRC as payload, so a record names the message it came from, and a
corrupted byte shows as crc_mismatch. Real parts only: the captures are
Ethernet/IPv4/TCP frames as capwriter writes them, read back by the real
reader.
"""

from __future__ import annotations

import os
import struct
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import lbparse
from support import capwriter as cw

MESSAGES = 12
T0 = 1_700_000_000.0


@dataclass
class DamagedCapture:
    """A capture file and what a correct reader makes of it."""

    name: str
    path: str
    written: list[str]  # subjects of the messages written, in order
    intact: set[str]  # must come out, decoded, payload as written
    errored: dict[str, str] = field(default_factory=dict)  # subject -> error kind
    lost: set[str] = field(default_factory=set)  # must not come out at all
    notices: dict[str, int] = field(default_factory=dict)  # notice kind -> at least this many
    limits: dict[str, int] = field(default_factory=dict)  # Limits(**limits) to read with
    payloads: dict[str, bytes] = field(default_factory=dict, repr=False)

    def cli_args(self) -> list[str]:
        """`lbparse capture` options for the limits this case is read with."""
        return [a for k, v in self.limits.items() for a in (f"--{k.replace('_', '-')}", str(v))]


def _payload(case: str, i: int) -> bytes:
    Message = lbparse.message_class("proto.Message")
    body = b"v" * (40 if i % 4 else 700)  # every 4th message spans several segments
    return lbparse.encode(
        Message(stream="orders", subject=f"lb.{case}.{i}", key=b"k%d" % i, value=body, offset=i),
        crc=True,
    )


@dataclass
class _Stream:
    """The packets of one connection, and which packets carry which message."""

    packets: list[bytes]
    carries: dict[int, list[int]]  # message index -> packet indices
    payloads: dict[str, bytes]
    subjects: list[str]
    conn: cw.Conn


def _stream(case: str, mss: int = 300) -> _Stream:
    conn = cw.Conn(client=("10.0.0.1", 40000), server=("10.0.0.2", 4222))
    packets = conn.handshake()
    packets += conn.send("c", b"CONNECT {}\r\nPING\r\n")
    carries, payloads, subjects = {}, {}, []
    for i in range(MESSAGES):
        subject = f"lb.{case}.{i}"
        payload = _payload(case, i)
        segs = conn.send("c", cw.pub(subject, payload), mss=mss)
        carries[i] = list(range(len(packets), len(packets) + len(segs)))
        packets += segs
        payloads[subject] = payload
        subjects.append(subject)
    packets.append(conn.fin("c"))
    return _Stream(packets, carries, payloads, subjects, conn)


def _write(path: str, fmt: str, packets: list[bytes]) -> list[tuple[int, int]]:
    """Write the packets; return each packet's (record start, record end) in the file."""
    frames = [(T0 + k / 1000, cw.link(cw.ETHERNET, p)) for k, p in enumerate(packets)]
    if fmt == "pcap":
        cw.write_pcap(path, frames)
    else:
        cw.write_pcapng(path, [(cw.ETHERNET, 6, 262144)], [(0, ts, f) for ts, f in frames])
    return _records(open(path, "rb").read(), fmt)


def _records(data: bytes, fmt: str) -> list[tuple[int, int]]:
    spans = []
    if fmt == "pcap":
        pos = 24
        while pos + 16 <= len(data):
            incl = struct.unpack_from("<I", data, pos + 8)[0]
            spans.append((pos, pos + 16 + incl))
            pos += 16 + incl
    else:
        pos = 0
        while pos + 12 <= len(data):
            btype, blen = struct.unpack_from("<II", data, pos)
            if btype == 6:
                spans.append((pos, pos + blen))
            pos += blen
    return spans


def _case(name: str, fmt: str, s: _Stream, path: str, **kw: Any) -> DamagedCapture:
    lost = kw.pop("lost", set())
    errored = kw.pop("errored", {})
    intact = set(s.subjects) - set(lost) - set(errored)
    return DamagedCapture(
        name, path, s.subjects, intact, errored, set(lost), payloads=s.payloads, **kw
    )


# Each damage: (case name, fmt) -> DamagedCapture, writing its file in `d`.


def _clean(d: str, fmt: str) -> DamagedCapture:
    s = _stream("clean")
    path = os.path.join(d, f"clean.{fmt}")
    _write(path, fmt, s.packets)
    return _case("clean", fmt, s, path)


def _truncated_file(d: str, fmt: str) -> DamagedCapture:
    """The file ends in the middle of the packet record carrying message 6."""
    s = _stream("truncated")
    path = os.path.join(d, f"truncated.{fmt}")
    spans = _write(path, fmt, s.packets)
    start, end = spans[s.carries[6][0]]
    with open(path, "r+b") as f:
        f.truncate((start + end) // 2)
    gone = s.subjects[6:]  # 6 is cut; 7.. were never in the file
    return _case(
        "truncated",
        fmt,
        s,
        path,
        lost=set(gone),
        notices={"truncated": 1, "incomplete": 1} if len(s.carries[6]) > 1 else {"truncated": 1},
    )


def _frame_cut_by_gap(d: str, fmt: str) -> DamagedCapture:
    """The middle segment of message 4 (it spans three) is missing."""
    s = _stream("frame_cut")
    assert len(s.carries[4]) >= 3
    drop = s.carries[4][1]
    packets = [p for k, p in enumerate(s.packets) if k != drop]
    path = os.path.join(d, f"frame_cut.{fmt}")
    _write(path, fmt, packets)
    return _case(
        "frame_cut", fmt, s, path, lost={s.subjects[4]}, notices={"gap": 1, "incomplete": 1}
    )


def _dropped_packet(d: str, fmt: str) -> DamagedCapture:
    """The one packet carrying message 5 is missing: a gap of exactly its frame."""
    s = _stream("dropped")
    assert len(s.carries[5]) == 1
    packets = [p for k, p in enumerate(s.packets) if k != s.carries[5][0]]
    path = os.path.join(d, f"dropped.{fmt}")
    _write(path, fmt, packets)
    return _case("dropped", fmt, s, path, lost={s.subjects[5]}, notices={"gap": 1})


def _garbage_between_frames(d: str, fmt: str) -> DamagedCapture:
    """Bytes that are not NATS between messages 2 and 3, inside the TCP stream."""
    s = _stream("garbage_frames")
    # Rebuild the stream with an extra segment of garbage in sequence.
    conn = cw.Conn(client=("10.0.0.1", 40000), server=("10.0.0.2", 4222))
    packets = conn.handshake() + conn.send("c", b"CONNECT {}\r\nPING\r\n")
    for i, subject in enumerate(s.subjects):
        if i == 3:
            packets += conn.send("c", b"\x00\x17garbage that is not the NATS protocol\r\n")
        packets += conn.send("c", cw.pub(subject, s.payloads[subject]), mss=300)
    packets.append(conn.fin("c"))
    path = os.path.join(d, f"garbage_frames.{fmt}")
    _write(path, fmt, packets)
    return _case("garbage_frames", fmt, s, path, notices={"protocol": 1})


def _garbage_between_records(d: str, fmt: str) -> DamagedCapture:
    """Bytes that are no record at all between two file records (around message 7)."""
    s = _stream("garbage_records")
    path = os.path.join(d, f"garbage_records.{fmt}")
    spans = _write(path, fmt, s.packets)
    at = spans[s.carries[7][0]][0]
    data = open(path, "rb").read()
    open(path, "wb").write(data[:at] + b"\xffgarbage between records\x00\x01" + data[at:])
    return _case("garbage_records", fmt, s, path, notices={"bad_block": 2})


def _bad_block(d: str, fmt: str) -> DamagedCapture:
    """The record carrying message 9 has a length field that makes no sense."""
    s = _stream("bad_block")
    path = os.path.join(d, f"bad_block.{fmt}")
    spans = _write(path, fmt, s.packets)
    at = spans[s.carries[9][0]][0]
    data = bytearray(open(path, "rb").read())
    where = at + 8 if fmt == "pcap" else at + 4  # incl_len / block total length
    data[where : where + 4] = struct.pack("<I", 0x7FFF_FFF0)
    open(path, "wb").write(bytes(data))
    return _case(
        "bad_block", fmt, s, path, lost={s.subjects[9]}, notices={"bad_block": 2, "gap": 1}
    )


def _corrupt_payload(d: str, fmt: str) -> DamagedCapture:
    """One bit of message 8's envelope payload flipped: its CRC says so."""
    s = _stream("corrupt")
    subject = s.subjects[8]
    bad = bytearray(s.payloads[subject])
    bad[-3] ^= 0x10
    conn = cw.Conn(client=("10.0.0.1", 40000), server=("10.0.0.2", 4222))
    packets = conn.handshake() + conn.send("c", b"CONNECT {}\r\nPING\r\n")
    for subj in s.subjects:
        payload = bytes(bad) if subj == subject else s.payloads[subj]
        packets += conn.send("c", cw.pub(subj, payload), mss=300)
    packets.append(conn.fin("c"))
    path = os.path.join(d, f"corrupt.{fmt}")
    _write(path, fmt, packets)
    case = _case("corrupt", fmt, s, path, errored={subject: "crc_mismatch"})
    case.payloads[subject] = bytes(bad)
    return case


def _lying_size(d: str, fmt: str) -> DamagedCapture:
    """Message 2's PUB line declares 5000 bytes more than it carries."""
    s = _stream("lying")
    conn = cw.Conn(client=("10.0.0.1", 40000), server=("10.0.0.2", 4222))
    packets = conn.handshake() + conn.send("c", b"CONNECT {}\r\nPING\r\n")
    for i, subj in enumerate(s.subjects):
        frame = cw.pub(subj, s.payloads[subj])
        if i == 2:
            n = len(s.payloads[subj])
            frame = frame.replace(f"  {n}\r\n".encode(), f"  {n + 5000}\r\n".encode(), 1)
        packets += conn.send("c", frame, mss=300)
    packets.append(conn.fin("c"))
    path = os.path.join(d, f"lying.{fmt}")
    _write(path, fmt, packets)
    return _case("lying", fmt, s, path, lost={s.subjects[2]}, notices={"incomplete": 1})


def _over_limits(d: str, fmt: str) -> DamagedCapture:
    """Read with limits the big messages (every 4th) exceed: max_payload for
    0 and 8, max_frame for 4 (refused unbuffered, so lost, with a notice)."""
    s = _stream("limits")
    conn = cw.Conn(client=("10.0.0.1", 40000), server=("10.0.0.2", 4222))
    packets = conn.handshake() + conn.send("c", b"CONNECT {}\r\nPING\r\n")
    for i, subj in enumerate(s.subjects):
        payload = s.payloads[subj]
        if i == 4:  # a frame the max_frame limit refuses
            payload = payload + b"\0" * 2000
            s.payloads[subj] = payload
        packets += conn.send("c", cw.pub(subj, payload), mss=300)
    packets.append(conn.fin("c"))
    path = os.path.join(d, f"limits.{fmt}")
    _write(path, fmt, packets)
    big = {s.subjects[i] for i in range(MESSAGES) if i % 4 == 0} - {s.subjects[4]}
    return _case(
        "limits",
        fmt,
        s,
        path,
        lost={s.subjects[4]},
        errored={subj: "bad_payload" for subj in big},
        notices={"limit": 1},
        limits={"max_payload": 500, "max_frame": 2000},
    )


def _patch(path: str, at: int, value: bytes) -> None:
    data = bytearray(open(path, "rb").read())
    data[at : at + len(value)] = value
    open(path, "wb").write(bytes(data))


def _past_end(d: str, fmt: str) -> DamagedCapture:
    """The record carrying message 5 claims a plausible length that runs past
    the end of the file, and whole records follow it (issue #19)."""
    s = _stream("past_end")
    path = os.path.join(d, f"past_end.{fmt}")
    spans = _write(path, fmt, s.packets)
    at = spans[s.carries[5][0]][0]
    claim = os.path.getsize(path) + 4000  # plausible: under any snap length the file allows
    _patch(path, at + 8 if fmt == "pcap" else at + 4, struct.pack("<I", claim))
    return _case("past_end", fmt, s, path, lost={s.subjects[5]}, notices={"bad_block": 2, "gap": 1})


def _garbled_section_header(d: str, fmt: str) -> DamagedCapture:
    """The record carrying message 7 overwritten by bytes that read as a pcapng
    section header with a bad byte-order magic (issue #19: CaptureError, exit 2)."""
    s = _stream("garbled_shb")
    path = os.path.join(d, f"garbled_shb.{fmt}")
    spans = _write(path, fmt, s.packets)
    at = spans[s.carries[7][0]][0]
    _patch(path, at, struct.pack("<II", 0x0A0D0D0A, 28) + b"\xde\xad\xbe\xef")
    return _case(
        "garbled_shb", fmt, s, path, lost={s.subjects[7]}, notices={"bad_block": 2, "gap": 1}
    )


def _tso_record(d: str, fmt: str) -> DamagedCapture:
    """Message 3's packet as segmentation offload leaves it in a capture (IPv4
    total length 0), its record's original length claiming 100,000 bytes the
    capture did not hold; the next segment starts right after what it holds.
    Nothing is missing (issue #19: the stream jumped by the claim)."""
    s = _stream("tso")
    k = s.carries[3][0]
    s.packets[k] = s.packets[k][:2] + b"\0\0" + s.packets[k][4:]
    path = os.path.join(d, f"tso.{fmt}")
    spans = _write(path, fmt, s.packets)
    start, end = spans[k]
    caplen = end - start - (16 if fmt == "pcap" else 32)
    _patch(path, start + 12 if fmt == "pcap" else start + 24, struct.pack("<I", caplen + 100_000))
    return _case("tso", fmt, s, path)


def _ipv6_payload_length_zero(d: str, fmt: str) -> DamagedCapture:
    """The connection over IPv6, every packet's payload length 0 (a jumbogram's,
    or offload's): the record's length tells (issue #19: every message dropped
    without a notice, exit 0)."""
    s = _stream("ipv6_zero")
    conn = cw.Conn(client=("fd00::1", 40000), server=("fd00::2", 4222))
    packets = conn.handshake() + conn.send("c", b"CONNECT {}\r\nPING\r\n")
    for subj in s.subjects:
        packets += conn.send("c", cw.pub(subj, s.payloads[subj]), mss=300)
    packets.append(conn.fin("c"))
    packets = [p[:4] + b"\0\0" + p[6:] for p in packets]
    path = os.path.join(d, f"ipv6_zero.{fmt}")
    _write(path, fmt, packets)
    return _case("ipv6_zero", fmt, s, path)


def _stale_ack(d: str, fmt: str) -> DamagedCapture:
    """After message 4, a segment 2^31 - 16 bytes ahead; the server's last ACK
    is the handshake's, long stale (issue #19: it counted as acknowledging the
    hole, the stream jumped 2 GiB and every later message was lost). It waits
    as any segment ahead, and its hole is declared at the end."""
    s = _stream("stale_ack")
    conn = s.conn
    after = s.carries[4][-1] + 1
    # The sequence number the client had reached after message 4.
    seq = 1000 + 1 + sum(len(p) - 40 for p in s.packets[3:after])
    bogus = conn.segment_at("c", seq + (1 << 31) - 16, b"x" * 11)
    packets = s.packets[:after] + [bogus] + s.packets[after:]
    path = os.path.join(d, f"stale_ack.{fmt}")
    _write(path, fmt, packets)
    return _case("stale_ack", fmt, s, path, notices={"gap": 1})


DAMAGES: dict[str, Callable[[str, str], DamagedCapture]] = {
    "clean": _clean,
    "truncated": _truncated_file,
    "frame_cut": _frame_cut_by_gap,
    "dropped": _dropped_packet,
    "garbage_frames": _garbage_between_frames,
    "garbage_records": _garbage_between_records,
    "bad_block": _bad_block,
    "corrupt": _corrupt_payload,
    "lying": _lying_size,
    "limits": _over_limits,
    "past_end": _past_end,
    "garbled_shb": _garbled_section_header,
    "tso": _tso_record,
    "ipv6_zero": _ipv6_payload_length_zero,
    "stale_ack": _stale_ack,
}


def damaged_captures(
    directory: str | os.PathLike[str], fmt: str = "pcapng", names: Iterable[str] = DAMAGES
) -> list[DamagedCapture]:
    """Write every damaged capture (pcap or pcapng) in `directory`."""
    d = os.path.join(os.fspath(directory), fmt)
    os.makedirs(d, exist_ok=True)
    return [DAMAGES[name](d, fmt) for name in names]


def check_accounting(
    case: DamagedCapture,
    records: Iterable[tuple[str, str | None, bytes | None]],
    notice_kinds: Iterable[str],
) -> dict[str, int]:
    """Hold a reading of `case` to its answers. `records`: (subject, error
    kind or None, payload or None when the reader does not keep it) of
    every message read; `notice_kinds`: the kind of every notice. Returns
    the tally: decoded + errors + lost = written."""
    records = list(records)
    by_subject = Counter(subject for subject, _, _ in records)
    twice = [s for s, c in by_subject.items() if c > 1]
    assert not twice, f"{case.name}: messages read twice: {twice}"
    unknown = set(by_subject) - set(case.written)
    assert not unknown, f"{case.name}: records of messages never written: {unknown}"
    decoded = {s for s, err, _ in records if err is None}
    errors = {s: err for s, err, _ in records if err is not None}
    assert decoded == case.intact, (
        f"{case.name}: decoded {sorted(decoded)}, expected {sorted(case.intact)}"
    )
    assert errors == case.errored, f"{case.name}: errors {errors}, expected {case.errored}"
    for subject, _, payload in records:
        if payload is not None:
            assert payload == case.payloads[subject], f"{case.name}: {subject} payload differs"
    lost = set(case.written) - set(by_subject)
    assert lost == case.lost, f"{case.name}: lost {sorted(lost)}, expected {sorted(case.lost)}"
    kinds = Counter(notice_kinds)
    for kind, at_least in case.notices.items():
        assert kinds[kind] >= at_least, (
            f"{case.name}: {kinds[kind]} {kind} notices, "
            f"expected at least {at_least} ({dict(kinds)})"
        )
    if lost:
        assert sum(kinds.values()) > 0, f"{case.name}: {len(lost)} messages lost unreported"
    if not case.lost and not case.errored and not case.notices:
        assert not kinds, f"{case.name}: notices on a clean capture: {dict(kinds)}"
    tally = {
        "written": len(case.written),
        "decoded": len(decoded),
        "errors": len(errors),
        "lost": len(lost),
    }
    assert tally["decoded"] + tally["errors"] + tally["lost"] == tally["written"]
    return tally
