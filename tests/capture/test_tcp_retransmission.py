"""A TCP retransmission whose bytes differ from the first copy (issue #27, item
4 of the hardening round): the reader keeps the copy delivered first and
says so with a `retransmission` notice, once per direction of a connection.
Each direction keeps the last RETRANSMIT_WINDOW bytes it delivered to
compare with: bytes further back are not compared (documented in
lbparse/capture/tcp.py), and memory stays bounded however many copies come.
The C capture loop gives the same notices: tests/capture/test_native_capture.py
(test_retransmissions_read_alike), whole and cut into ranges (snapshots)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import capwriter as cw
from support import retransmit
from support.growth import assert_linear, peak_bytes

from lbparse.capture import CaptureReader, native_batches
from lbparse.capture.notices import Notice
from lbparse.capture.tcp import RETRANSMIT_WINDOW


def _read(path: str) -> tuple[list[tuple[str, bytes]], list[Notice]]:
    notices: list[Notice] = []
    records = [
        (r.subject, r.payload)
        for r in CaptureReader(path, layout="plain", on_notice=notices.append)
    ]
    return records, notices


def _told(notices: list[Notice]) -> list[Notice]:
    return [n for n in notices if n.kind == "retransmission"]


def test_a_retransmission_with_other_bytes_is_a_notice(tmp_path: Path) -> None:
    records, notices = _read(retransmit.other_bytes(tmp_path / "r.pcap"))
    assert records == [("a", b"hello"), ("b", b"ok")]  # the first copy kept
    assert [str(n) for n in notices] == [
        "retransmission: 127.0.0.1:40000 -> 127.0.0.1:4222: retransmitted bytes differ from "
        "those delivered: 5 of 16 bytes compared in a segment of 16 bytes at sequence 1001, "
        "the first at sequence 1010; the copy delivered first was kept (later retransmissions "
        "in this direction are not compared)"
    ]
    assert notices[0].nbytes == 5 and notices[0].to_json_dict()["notice"] == "retransmission"


def test_a_retransmission_of_the_same_bytes_says_nothing(tmp_path: Path) -> None:
    records, notices = _read(retransmit.same_bytes(tmp_path / "r.pcap"))
    assert records == [("a", b"hello"), ("b", b"ok")]
    assert notices == []


def test_one_notice_per_direction_of_a_connection(tmp_path: Path) -> None:
    """Two differing copies each way: one notice each way; the same
    addresses and ports for a new connection (SYN) are told again."""
    records, notices = _read(retransmit.once_per_direction(tmp_path / "r.pcap"))
    assert records == [("a", b"hello"), ("a", b"hi"), ("b", b"ok"), ("c", b"new")]
    told = _told(notices)
    assert [(n.src, n.dst, n.nbytes) for n in told] == [
        ("127.0.0.1:40000", "127.0.0.1:4222", 5),
        ("127.0.0.1:4222", "127.0.0.1:40000", 1),
        ("127.0.0.1:40000", "127.0.0.1:4222", 3),
    ]
    assert "at sequence 4294967044" in told[1].message  # the server's side wraps
    assert "at sequence 77010" in told[2].message


def test_a_waiting_segment_that_overlaps_other_bytes(tmp_path: Path) -> None:
    """A segment waits behind a hole; the one filling the hole runs into it
    with other bytes and is delivered first: it is kept, the waiting
    copy's overlap is compared."""
    records, notices = _read(retransmit.overlap_waiting(tmp_path / "r.pcap"))
    assert records == [("a", b"hello"), ("b", b"WORLD"), ("c", b"ok")]
    assert [n.message.split(";")[0] for n in notices] == [
        "retransmitted bytes differ from those delivered: 4 of 4 bytes compared in a segment "
        "of 6 bytes at sequence 1027, the first at sequence 1027"
    ]


def test_a_loss_empties_the_window(tmp_path: Path) -> None:
    """Bytes declared lost come late with other bytes than those before the
    hole: not compared with those (they are not theirs); a copy of bytes
    delivered after the loss is."""
    records, notices = _read(retransmit.after_a_loss(tmp_path / "r.pcap"))
    assert records == [("a", b"hello"), ("c", b"three"), ("d", b"four")]
    assert [n.kind for n in notices] == ["gap", "retransmission"]
    assert "at sequence 1033, the first at sequence 1042" in notices[1].message


@pytest.mark.parametrize(
    "back, flip, told",
    [
        (40, 0, 1),
        (40, 39, 1),
        (40, 40, 0),
        (1, 0, 1),
        (RETRANSMIT_WINDOW, 0, 1),
        (RETRANSMIT_WINDOW + 1, 0, 0),
        (RETRANSMIT_WINDOW + 1, 1, 1),
        (RETRANSMIT_WINDOW + 20, 19, 0),
        (RETRANSMIT_WINDOW + 20, 20, 1),
    ],
)
def test_the_window_is_the_last_bytes_delivered(
    back: int, flip: int, told: int, tmp_path: Path
) -> None:
    """A long stream in uneven segments (one larger than the window), then
    40 bytes `back` bytes behind its end, one byte changed: told when that
    byte is among the last RETRANSMIT_WINDOW delivered, not otherwise (the
    documented limit); only the bytes in the window are counted as compared."""
    records, notices = _read(retransmit.back_by(back, flip)(tmp_path / "r.pcap"))
    assert len(records) == len(retransmit.long_stream().split(b"\r\nPUB")) + 1
    assert len(_told(notices)) == told == len(notices)
    if told:
        compared = min(40, back, RETRANSMIT_WINDOW - back + 40)
        assert f"1 of {compared} bytes compared" in notices[0].message


def test_beyond_the_window_nothing_is_compared(tmp_path: Path) -> None:
    """The first message again, with other bytes, after more than the window:
    the first copy is kept, as always, and nothing is said (documented)."""
    records, notices = _read(retransmit.beyond_window(tmp_path / "r.pcap"))
    assert records[0] == ("s", b"000000" * 10) and notices == []


# -- bounded memory, linear time ----------------------------------------------------


def _resent(path: Path, n: int, differ: bool) -> str:
    """n segments of 1000 bytes, each followed by a copy of the last 6000
    bytes sent (more than the window), equal or, when `differ`, not."""
    conn = cw.Conn()
    packets = conn.handshake()
    c0 = conn.seq["c"]
    stream = retransmit.long_stream(1000 * n + 6000)
    for i in range(n):
        packets += conn.send("c", stream[1000 * i : 1000 * (i + 1)])
        start = max(0, 1000 * (i + 1) - 6000)
        again = stream[start : 1000 * (i + 1)]
        packets.append(conn.segment_at("c", c0 + start, again.upper() if differ else again))
    return retransmit.write(path / f"resent{n}{differ}.pcap", packets)


@pytest.mark.slow  # two reads of 800 and 3,200 resent segments under tracemalloc: seconds
@pytest.mark.parametrize("differ", [False, True])
def test_many_retransmissions_keep_memory_bounded(differ: bool, tmp_path: Path) -> None:
    """Every segment sent again, 6000 bytes of it: the window holds at most
    2 x RETRANSMIT_WINDOW bytes per direction, so the reader's peak does not
    grow with the number of copies (4x as many, 2.4 MB more of them: within
    a quarter of the peak, which is mostly the file's read buffer)."""
    paths = {n: _resent(tmp_path, n, differ) for n in (800, 3200)}

    def run(n: int) -> None:
        notices: list[Notice] = []
        for _ in CaptureReader(paths[n], layout="plain", on_notice=notices.append):
            pass  # nothing kept but the reader's own state
        assert len(_told(notices)) == int(differ)

    small, big = peak_bytes(lambda: run(800)), peak_bytes(lambda: run(3200))
    assert big <= 1.25 * small, (small, big)


def _read_native(path: str) -> int:
    rows = 0
    for n, _ in native_batches.NativeCapture(path).columns(65536, 1 << 26):
        rows += n
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("native", [False, True])
@pytest.mark.parametrize("differ", [False, True])
def test_many_retransmissions_are_compared_in_linear_time(
    differ: bool, native: bool, tmp_path: Path
) -> None:
    if native and not native_batches.available():
        pytest.skip("the C capture module is not built")
    paths = {n: _resent(tmp_path, n, differ) for n in (500, 1000, 2000, 4000)}
    read = _read_native if native else _read
    assert_linear(lambda n: read(paths[n]), list(paths), max_exponent=1.3)
