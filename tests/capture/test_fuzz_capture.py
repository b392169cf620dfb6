"""Hostile capture files (issue 7): pcap and pcapng cut at every byte,
length fields set to absurd values, link types nobody knows, random
damage. Only CaptureError (a documented kind) escapes; every record
renders; the stats agree with the records; what comes out of a cut file is
what the whole file holds up to the cut, never something else."""

from __future__ import annotations

import struct
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import capwriter as cw
from support.hostile import check_capture, check_capture_file, seed_envelopes

from lbparse.capture import KINDS, CaptureError, CaptureReader

PAYLOADS = seed_envelopes()[:6]


def _packets() -> list[bytes]:
    conn = cw.Conn()
    packets = conn.handshake()
    for i, p in enumerate(PAYLOADS):
        packets += conn.send("c", cw.pub(f"lb.{i}", p), mss=60 if i % 2 else None)
        packets += conn.send("s", cw.msg(f"lb.{i}", 1, p))
    packets.append(conn.fin("c"))
    return packets


def _capture(tmp: Path, fmt: str, linktype: int = cw.ETHERNET) -> bytes:
    frames = [(1.7e9 + k / 1000, cw.link(linktype, p)) for k, p in enumerate(_packets())]
    path = tmp / f"c.{fmt}"
    if fmt == "pcap":
        cw.write_pcap(path, frames, linktype=linktype)
    else:
        cw.write_pcapng(path, [(linktype, 6, 65535)], [(0, ts, f) for ts, f in frames])
    return path.read_bytes()


def _records(path: Path) -> list[tuple]:
    return [(r.verb, r.subject, r.payload) for r in CaptureReader(path, layout="v0")]


@pytest.mark.slow  # a long sweep: the capture read again cut at each of its ~4,000 bytes
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_cut_at_every_byte(fmt: str, tmp_path: Path) -> None:
    data = _capture(tmp_path, fmt)
    whole = _records(tmp_path / f"c.{fmt}")
    assert len(whole) == 2 * len(PAYLOADS)
    cut_path = tmp_path / f"cut.{fmt}"
    seen = 0
    for cut in range(len(data)):
        cut_path.write_bytes(data[:cut])
        try:
            got = _records(cut_path)
        except CaptureError as exc:
            assert exc.kind in KINDS and cut < 28, (cut, exc)  # only a cut file header
            continue
        assert set(got) <= set(whole), f"cut at {cut}: records the whole file does not hold"
        assert len(got) >= seen - 2, "a longer prefix lost messages a shorter one gave"
        seen = max(seen, len(got))
        check_capture_file(str(cut_path))


def _length_fields(data: bytes, fmt: str) -> list[int]:
    """Offsets of every length field of the file (record or block lengths)."""
    out = []
    if fmt == "pcap":
        pos = 24
        while pos + 16 <= len(data):
            out += [pos + 8, pos + 12]
            pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    else:
        pos = 0
        while pos + 12 <= len(data):
            btype, blen = struct.unpack_from("<II", data, pos)
            out += [pos + 4, pos + blen - 4]
            if btype == 6:
                out += [pos + 8, pos + 20, pos + 24]  # interface, captured and wire lengths
            pos += blen
    return out


ABSURD = st.sampled_from(
    [0, 1, 3, 11, 12, 13, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 26, (1 << 26) + 4, 65536]
) | st.integers(0, (1 << 32) - 1)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    tmp = tmp_path_factory.mktemp("clean")
    return {fmt: _capture(tmp, fmt) for fmt in ("pcap", "pcapng")}


@pytest.mark.slow
@settings(
    max_examples=200,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(fmt=st.sampled_from(["pcap", "pcapng"]), data=st.data())
def test_absurd_length_fields(clean: dict[str, bytes], fmt: str, data: st.DataObject) -> None:
    raw = bytearray(clean[fmt])
    fields = _length_fields(bytes(raw), fmt)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.sampled_from(fields))
        raw[at : at + 4] = struct.pack("<I", data.draw(ABSURD))
    check_capture(bytes(raw), layout="v0")


@pytest.mark.slow
@settings(
    max_examples=200,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(fmt=st.sampled_from(["pcap", "pcapng"]), data=st.data())
def test_random_damage(clean: dict[str, bytes], fmt: str, data: st.DataObject) -> None:
    raw = bytearray(clean[fmt])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw)))
        how = data.draw(st.sampled_from(["flip", "insert", "delete", "overwrite", "cut"]))
        if how == "flip" and at < len(raw):
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif how == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=40))
        elif how == "delete":
            del raw[at : at + data.draw(st.integers(1, 40))]
        elif how == "overwrite":
            raw[at : at + 8] = data.draw(st.binary(min_size=8, max_size=8))
        elif how == "cut":
            del raw[at:]
    check_capture(bytes(raw), layout="auto")


@pytest.mark.parametrize("linktype", [147, 0xFFFF, 200])
def test_unknown_link_types(linktype: int, tmp_path: Path) -> None:
    """A pcap of an unknown link type is CaptureError unsupported_linktype;
    in a pcapng, an interface of one is a notice, and the other interfaces'
    messages all come out."""
    data = bytearray(_capture(tmp_path, "pcap"))
    data[20:24] = struct.pack("<I", linktype)
    path = tmp_path / "odd.pcap"
    path.write_bytes(bytes(data))
    with pytest.raises(CaptureError) as err:
        list(CaptureReader(path))
    assert err.value.kind == "unsupported_linktype"

    frames = [(1.7e9 + k / 1000, cw.link(cw.ETHERNET, p)) for k, p in enumerate(_packets())]
    packets = []
    for ts, frame in frames:
        packets.append((0, ts, frame))
        packets.append((1, ts, b"\x01\x02" + frame))  # the same again on the unknown interface
    ng = tmp_path / "two.pcapng"
    cw.write_pcapng(ng, [(cw.ETHERNET, 6, 65535), (linktype, 6, 65535)], packets)
    notices: list = []
    records = list(CaptureReader(ng, layout="v0", on_notice=notices.append))
    assert len(records) == 2 * len(PAYLOADS)
    assert [n.kind for n in notices] == ["protocol"] and str(linktype) in notices[0].message
