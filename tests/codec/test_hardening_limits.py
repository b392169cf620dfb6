"""Resource limits (issue 7): each has a safe default, can be set, and is
reported when hit, with its name; never a silent drop."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import capwriter as cw
from support.cli import LBPARSE
from support.reading import pipeline_rows

import lbparse
from lbparse.capture import CaptureReader, native_batches
from lbparse.codec.limits import DEFAULT, LIMIT_NAMES, PROTOBUF_MAX_DEPTH, Limits, parse_size
from lbparse.codec.wirefit import nesting_depth

ROOT = Path(__file__).resolve().parents[2]
Message = lbparse.message_class("proto.Message")


def test_defaults_and_validation() -> None:
    assert LIMIT_NAMES == (
        "max_payload",
        "max_frame",
        "max_depth",
        "max_reassembly",
        "max_raft_db",
        "max_grpc_elements",
        "max_grpc_inflate",
        "max_grpc_headers",
        "max_open_calls",
    )
    assert (DEFAULT.max_payload, DEFAULT.max_frame, DEFAULT.max_depth, DEFAULT.max_reassembly) == (
        8 << 20,
        64 << 20,
        100,
        16 << 20,
    )
    for bad in (
        dict(max_payload=0),
        dict(max_frame=-1),
        dict(max_depth=101),
        dict(max_reassembly=1.5),
        dict(max_depth=True),
    ):
        with pytest.raises(ValueError):
            Limits(**bad)
    assert [parse_size(s) for s in ("4096", "64k", "8M", "1MiB", "2GB")] == [
        4096,
        64 << 10,
        8 << 20,
        1 << 20,
        2 << 30,
    ]
    with pytest.raises(ValueError):
        parse_size("lots")


def _sized(layout: str, payload_len: int) -> bytes:
    if layout == "plain":
        return b"p" * payload_len
    if layout == "lift-cookie":
        return b"LIFT" + b"\x1a" + bytes([payload_len - 2]) + b"v" * (payload_len - 2)
    return lbparse.encode(
        Message(value=b"v" * (payload_len - 2)),
        layout="legacy" if layout == "legacy" else "v0",
        crc=True,
    )


@pytest.mark.parametrize("layout", ["v0", "legacy", "lift-cookie", "plain", "auto"])
def test_max_payload_is_exact_and_named(layout: str) -> None:
    data = _sized("v0" if layout == "auto" else layout, 100)
    payload_len = len(lbparse.decode(data, layout).payload)
    assert lbparse.decode(data, layout, limits=Limits(max_payload=payload_len))
    with pytest.raises(lbparse.EnvelopeError) as err:
        lbparse.decode(data, layout, limits=Limits(max_payload=payload_len - 1))
    e = err.value
    assert (e.kind, e.limit, e.expected, e.actual) == (
        "bad_payload",
        "max_payload",
        payload_len - 1,
        payload_len,
    )
    assert "max_payload" in e.message and e.to_json_dict()["limit"] == "max_payload"


def test_default_max_payload_through_the_shortcut_and_the_full_decoder() -> None:
    big = lbparse.encode(Message(value=b"v" * (DEFAULT.max_payload - 4)), crc=True)
    assert len(big) - 12 > DEFAULT.max_payload
    with pytest.raises(lbparse.EnvelopeError, match="max_payload"):
        lbparse.decode(big)
    with pytest.raises(lbparse.EnvelopeError, match="max_payload"):
        lbparse.decode(bytearray(big))  # not bytes: the full decoder


def _groups(depth: int) -> bytes:
    """A payload nesting `depth` unknown groups (field 99)."""
    return b"\x9b\x06" * depth + b"\x9c\x06" * depth


@pytest.mark.parametrize("limit", [1, 5, 50, PROTOBUF_MAX_DEPTH])
def test_max_depth_is_exact_and_named(limit: int) -> None:
    head = bytes.fromhex("b90e43b400080000")
    lim = None if limit == PROTOBUF_MAX_DEPTH else Limits(max_depth=limit)
    lbparse.decode(head + _groups(limit), limits=lim)
    with pytest.raises(lbparse.EnvelopeError) as err:
        lbparse.decode(head + _groups(limit + 1), limits=lim)
    assert (err.value.kind, err.value.limit, err.value.expected) == (
        "bad_payload",
        "max_depth",
        limit,
    )
    with pytest.raises(lbparse.EnvelopeError) as err:  # LIFT carries protobuf too
        lbparse.decode(b"LIFT" + _groups(limit + 1), "lift-cookie", limits=lim)
    assert err.value.limit == "max_depth"


NEST = st.recursive(
    st.just(b""),
    lambda inner: st.one_of(
        inner.map(lambda b: b"\x9b\x06" + b + b"\x9c\x06"),  # an unknown group
        inner.map(
            lambda b: (
                b"\x4a" + bytes([len(b) + 4]) + b"\x0a\x00\x12\x00"[:4] + b if len(b) < 120 else b
            )
        ),  # a map entry
        inner.map(lambda b: b"\x0a" + bytes([min(len(b), 127)]) + b[:127]),  # bytes: not parsed
        st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
    ),
    max_leaves=60,
)


def _parses(payload: bytes) -> bool:
    try:
        Message.FromString(payload)
    except Exception:
        return False
    return True


@pytest.mark.slow
@settings(max_examples=150, deadline=timedelta(seconds=5))
@given(nest=NEST, extra=st.integers(0, 105))
def test_depth_walk_agrees_with_the_protobuf_runtime(nest: bytes, extra: int) -> None:
    """nesting_depth counts what upb counts, to the level: wrapped in more
    groups, a payload upb reads stays readable exactly as long as the walk
    says it is within 100 levels."""
    payload = b"\x9b\x06" * extra + nest + b"\x9c\x06" * extra
    deep = nesting_depth(payload, Message.DESCRIPTOR, PROTOBUF_MAX_DEPTH) > PROTOBUF_MAX_DEPTH
    if deep:
        assert not _parses(payload)
        with pytest.raises(lbparse.EnvelopeError) as err:
            lbparse.decode(bytes.fromhex("b90e43b400080000") + payload)
        assert err.value.limit == "max_depth"
    elif _parses(nest):
        assert _parses(payload), "the walk says within the limit, upb refuses"


def _capture(tmp: Path, data_c: bytes, out_of_order: bool = False) -> Path:
    conn = cw.Conn()
    packets = conn.handshake()
    segs = conn.send("c", data_c, mss=500)
    if out_of_order:  # the first segment arrives last: everything waits behind it
        segs = segs[1:] + segs[:1]
    packets += segs + [conn.fin("c")]
    path = tmp / "c.pcap"
    cw.write_pcap(
        path, [(1.7e9 + k / 1000, cw.link(cw.ETHERNET, p)) for k, p in enumerate(packets)]
    )
    return path


def test_max_frame_on_a_capture_is_a_limit_notice(tmp_path: Path) -> None:
    payload = lbparse.encode(Message(value=b"v" * 3000))
    path = _capture(tmp_path, cw.pub("big", payload) + cw.pub("small", b"ok"))
    notices: list = []
    reader = CaptureReader(
        path, layout="v0", limits=Limits(max_frame=1000), on_notice=notices.append
    )
    assert [r.subject for r in reader] == ["small"]
    assert [(n.kind, n.limit) for n in notices] == [("limit", "max_frame")]
    assert reader.stats.limits == {"max_frame": 1} and reader.stats.notices == {"limit": 1}


def test_max_reassembly_is_a_limit_notice_then_a_gap(tmp_path: Path) -> None:
    stream = b"".join(cw.pub(f"m.{i}", b"x" * 200) for i in range(40))
    path = _capture(tmp_path, stream, out_of_order=True)
    notices: list = []
    reader = CaptureReader(
        path, layout="plain", limits=Limits(max_reassembly=4000), on_notice=notices.append
    )
    subjects = [r.subject for r in reader]
    kinds = [n.kind for n in notices]
    assert "limit" in kinds and kinds.index("limit") < kinds.index("gap")
    assert notices[kinds.index("limit")].limit == "max_reassembly"
    assert "m.0" not in subjects and len(subjects) >= 35  # the hole cost its own messages
    # Without the limit, the late segment fills the hole and nothing is lost.
    assert len(list(CaptureReader(path, layout="plain"))) == 40


def test_max_payload_on_a_capture_is_a_record_error(tmp_path: Path) -> None:
    path = _capture(tmp_path, cw.pub("a", b"p" * 600) + cw.pub("b", b"p" * 10))
    reader = CaptureReader(path, layout="plain", limits=Limits(max_payload=100))
    records = list(reader)
    assert [(r.subject, r.error and r.error.limit) for r in records] == [
        ("a", "max_payload"),
        ("b", None),
    ]
    assert reader.stats.limits == {"max_payload": 1} and reader.stats.errors == {"bad_payload": 1}


def _lbparse(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LBPARSE, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


@pytest.mark.slow
def test_cli_options(tmp_path: Path) -> None:
    wire = lbparse.encode(Message(value=b"v" * 40)).hex()
    out = _lbparse("decode", "--max-payload", "10", wire)
    assert out.returncode == 1 and json.loads(out.stdout)["limit"] == "max_payload"
    assert _lbparse("decode", "--max-payload", "1k", wire).returncode == 0
    assert _lbparse("decode", "--max-depth", "101", wire).returncode == 2
    path = _capture(tmp_path, cw.pub("big", b"x" * 3000) + cw.pub("small", b"ok"))
    out = _lbparse(
        "capture",
        "--layout",
        "plain",
        "--stats",
        "--max-frame",
        "1000",
        "--max-payload",
        "1",
        str(path),
    )
    assert out.returncode == 1
    assert [json.loads(x)["error"]["kind"] for x in out.stdout.splitlines()] == ["bad_payload"]
    assert "limit: " in out.stderr and "max_frame" in out.stderr
    assert "limits hit:" in out.stderr and "max_payload" in out.stderr
    help_text = _lbparse("capture", "--help").stdout
    for option in ("--max-payload", "--max-frame", "--max-depth", "--max-reassembly"):
        assert option in help_text


@pytest.mark.parametrize("loop", ["reference", "c"])
def test_idle_connections_are_forgotten_and_nothing_is_lost(
    loop: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture of endless connections that never speak (a SYN scan) must
    not grow the flow table without bound; forgetting idle ones loses no
    message, even of a connection that comes back after being forgotten,
    and one with a message half-read is kept. In both capture loops: the C
    loop takes MAX_FLOWS from reader.py (lbparse.capture.native_batches.rules)."""
    import lbparse.capture.reader as reader_module

    if loop == "c" and not native_batches.available():
        pytest.skip("the C capture module is not built (setup.py)")
    monkeypatch.setattr(reader_module, "MAX_FLOWS", 50)
    talker, quiet = cw.Conn(), cw.Conn(client=("127.0.0.2", 41000))
    frame = cw.pub("long", b"y" * 400)
    packets = talker.handshake() + quiet.handshake()
    packets += quiet.send("c", cw.pub("early", b"e"))
    packets += talker.send("c", frame[:200])  # half a message, waiting
    for i in range(400):  # 400 silent connections
        packets += cw.Conn(client=(f"10.1.{i // 200}.{i % 200 + 1}", 2000 + i)).handshake()[:1]
    packets += talker.send("c", frame[200:])
    packets += quiet.send("c", cw.pub("late", b"l"))  # forgotten meanwhile: picked up again
    path = tmp_path / "scan.pcap"
    cw.write_pcap(path, [(1.7e9 + k / 1e6, cw.link(cw.ETHERNET, p)) for k, p in enumerate(packets)])
    if loop == "c":
        table, _ = pipeline_rows(path, native=True)
        assert sorted(table.column("subject").to_pylist()) == ["early", "late", "long"]
        assert table.column("error_kind").to_pylist() == [None] * 3
        assert table.equals(pipeline_rows(path, native=False)[0])
        # the C loop's state half-way (its flow table: at most 2 * 50 connections there)
        forgetting = _state_half_way(path)
        monkeypatch.setattr(reader_module, "MAX_FLOWS", 1000)
        assert forgetting * 2 < _state_half_way(path)
        return
    notices: list = []
    records = list(CaptureReader(path, layout="plain", on_notice=notices.append))
    assert sorted(r.subject for r in records) == ["early", "late", "long"]
    assert notices == []


def _state_half_way(path: Path) -> int:
    """The bytes of the C loop's state (its snapshot) half-way through `path`."""
    cuts, _ = native_batches.NativeCapture(path).index(path.stat().st_size // 2)
    return len(cuts[0].snapshot)


def test_distinct_subjects_in_the_summary_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lbparse.capture.reader as reader_module

    monkeypatch.setattr(reader_module, "MAX_SUBJECTS", 10)
    conn = cw.Conn()
    packets = conn.handshake() + conn.send(
        "c", b"".join(cw.pub(f"_INBOX.{i}", b"r") for i in range(25))
    )
    path = tmp_path / "inboxes.pcap"
    cw.write_pcap(path, [(1.7e9 + k / 1e6, cw.link(cw.ETHERNET, p)) for k, p in enumerate(packets)])
    reader = CaptureReader(path, layout="plain")
    assert len(list(reader)) == 25
    assert len(reader.stats.per_subject) == 11
    assert reader.stats.per_subject[reader_module.OTHER_SUBJECTS] == 15
