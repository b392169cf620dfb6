"""Every parser linear in its input, memory bounded by the input and the
limits (issue #19, part 1): each class an attacker found, as a timing-growth
test (doubling inputs, minima of interleaved rounds: tests/support/growth.py)
and, where objects could pile up, objects counted.

The timing tests are `slow` (each takes seconds); the counting ones are not.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flatbuffers
import pytest
from support import capwriter as cw
from support.growth import assert_linear

import lbparse
from lbparse.capture import CaptureReader, reader
from lbparse.capture.nats import Frame, NatsParser, Parsed, Problem
from lbparse.codec import flatbuf, wirefit

ENVELOPE = bytes.fromhex("b90e43b400080000")  # v0, MsgType 0 Publish (proto.Message)


def _feed(stream: bytes, piece: int = 0) -> list[Parsed]:
    """The parser's items for `stream`, fed whole or `piece` bytes at a time, then ended."""
    parser, frames = NatsParser(), []
    if piece:
        for i in range(0, len(stream), piece):
            frames += parser.feed(stream[i : i + piece])
    else:
        frames += parser.feed(stream)
    parser.finish(frames)
    return frames


def _check_linear(
    make: Callable[[int], Any], run: Callable[[Any], object], sizes: list[int], **kw: Any
) -> None:
    inputs = {n: make(n) for n in sizes}
    assert_linear(lambda n: run(inputs[n]), sizes, **kw)


# -- NATS: lines ended by a bare LF ------------------------------------------------


def test_a_bare_lf_ends_a_control_line_as_nats_server_reads_it() -> None:
    """nats-server (and the clients) end a control line at LF, dropping a CR
    before it; the payload must still be followed by CRLF."""
    frames = _feed(b"PUB a 1\nx\r\nMSG b 7 2\nhi\r\nPING\n+OK\r\nPUB c 1\ny\nPONG\r\n")
    assert [f for f in frames if isinstance(f, Frame)] == [
        Frame("PUB", "a", None, None, None, b"x"),
        Frame("MSG", "b", None, "7", None, b"hi"),
    ]
    assert [type(f).__name__ for f in frames] == [
        "Frame",
        "Frame",
        "Control",
        "Control",
        "Problem",
        "Control",
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "line,piece",
    [(b"PUB a 1\nx\n", 0), (b"MSG a 1 1\nx\r\n", 0), (b"PUB a 1\nx\n", 7), (b"HPUB a 12 12\n", 0)],
)
def test_nats_lines_ended_by_a_bare_lf_parse_in_linear_time(line: bytes, piece: int) -> None:
    """lbparse/capture/nats.py: a control line was searched for its CRLF
    to the end of the segment, once per line: lines ended by a bare LF
    made a segment quadratic (720 KB: 33.5 s)."""
    _check_linear(
        lambda n: line * n, lambda data: _feed(data, piece), [4_000, 8_000, 16_000, 32_000]
    )


# -- NATS: size fields that lie ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("piece", [0, 16, 1460])
def test_lying_size_fields_are_given_up_in_linear_time(piece: int) -> None:
    """lbparse/capture/nats.py: `PUB a 60000000` lines, one after another,
    each wait for the bytes the one before held; giving up on them (at a
    gap or the end) re-sliced everything held, once per line (4.4 MB:
    15.5 s)."""
    _check_linear(
        lambda n: b"PUB a 60000000\r\n" * n,
        lambda data: _feed(data, piece),
        [8_000, 16_000, 32_000, 64_000],
    )


@pytest.mark.slow
@pytest.mark.parametrize("piece", [16, 1460])
def test_a_lie_found_out_mid_stream_costs_no_copy_of_what_follows(piece: int) -> None:
    """lbparse/capture/nats.py: when a waiting message's bytes arrive and no
    CRLF ends them, the frames within are parsed again; each message line
    found there waiting too copied every byte after it: lines declaring a
    little less than the stream made each segment cost the whole stream."""

    def make(n: int) -> bytes:
        line = b"PUB a %09d\r\n" % (n * 8)  # 16 bytes a line, each declaring half the stream
        return line * n

    _check_linear(make, lambda data: _feed(data, piece), [8_000, 16_000, 32_000, 64_000])


def test_lying_size_fields_keep_every_message_after_them() -> None:
    """The same bytes, however they are split: the frames after the lies survive."""
    stream = b"PUB a 99999\r\n" * 50 + b"PUB b 2\r\nhi\r\n" * 3
    for piece in (0, 1, 16, 1460):
        frames = _feed(stream, piece)
        assert [f for f in frames if isinstance(f, Frame)] == [
            Frame("PUB", "b", None, None, None, b"hi")
        ] * 3, piece


# -- capture: connections past the flow table's size -------------------------------


def _busy_connections(path: Path, n: int) -> str:
    """`n` connections, each one packet holding a message that never ends."""
    frames = []
    for i in range(n):
        src = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
        p = cw.ip_tcp(
            src, 1000 + i % 50000, "127.0.0.1", 4222, 5, 0, cw.ACK | cw.PSH, b"PUB a 100\r\nxx"
        )
        frames.append((1.7e9 + i / 1e6, cw.link(cw.ETHERNET, p)))
    out = path / f"busy{n}.pcap"
    cw.write_pcap(out, frames)
    return str(out)


@pytest.mark.slow
def test_busy_connections_past_the_flow_table_cost_no_scan_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lbparse/capture/reader.py: past MAX_FLOWS connections, each new one
    scanned the whole table for idle ones to forget; busy ones (a message
    half-read) cannot be forgotten, so every new connection scanned them
    all again (72k connections, a 5 MB file: 128 s). The table is now
    scanned once per doubling. (MAX_FLOWS lowered to 256, so that the
    inputs stay small; the mechanism is the same.)"""
    monkeypatch.setattr(reader, "MAX_FLOWS", 256)

    def run(path: str) -> None:
        notices: list = []
        assert list(CaptureReader(path, layout="plain", on_notice=notices.append)) == []
        assert {n.kind for n in notices} == {"incomplete"}

    _check_linear(lambda n: _busy_connections(tmp_path, n), run, [1_000, 2_000, 4_000, 8_000])


# -- protobuf payloads the runtime refuses at their last byte ----------------------


def _refused_at_the_end(n: int) -> bytes:
    """An envelope whose payload is `n` bytes of two-byte varint fields (no
    shortcut for one-byte ones) and one byte the runtime refuses."""
    return ENVELOPE + b"\x80\x01\x80\x01" * (n // 4) + b"\x80"


def _auto_and_check(data: bytes) -> None:
    with pytest.raises(lbparse.EnvelopeError):
        lbparse.decode(data, "auto")
    assert lbparse.upstream_verdict(data).verdicts


@pytest.mark.slow
def test_a_refused_protobuf_payload_is_judged_in_linear_time() -> None:
    _check_linear(_refused_at_the_end, _auto_and_check, [32_000, 64_000, 128_000, 256_000])


@pytest.mark.slow
def test_a_refused_payload_is_walked_once_per_type_and_makes_no_object_per_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """lbparse/codec/wirefit.py, detect.py, upstream.py: a payload the protobuf
    runtime refuses at its last byte was walked again in Python for every
    candidate layout of `auto` and every upstream decoder of `check` (8 MB:
    22-28 s), and `check` made a tuple and a copy of every field (285 MB).
    Now each (payload, type) is walked at most once per call, by offsets."""
    walks: list[tuple[int, str]] = []
    real = wirefit._walk

    def counting(buf: bytes, pos: int, end: int, desc: Any, depth: int, *rest: Any) -> Any:
        if depth == 0:
            walks.append((len(buf), desc.full_name if desc is not None else ""))
        return real(buf, pos, end, desc, depth, *rest)

    monkeypatch.setattr(wirefit, "_walk", counting)
    data = _refused_at_the_end(400_000)
    with pytest.raises(lbparse.EnvelopeError):
        lbparse.decode(data, "auto")
    assert walks and len(walks) == len(set(walks)), walks
    walks.clear()
    tracemalloc.start()
    try:
        lbparse.upstream_verdict(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # At most once: legacy's type inference only asks whether each type
    # parses (the runtime's answer), so `check` may need no walk at all.
    assert len(walks) == len(set(walks)), walks
    # A few copies of the payload; 100,000 fields as a tuple each (~100
    # bytes with their ints) would be 25 times its size.
    assert peak < 6 * len(data), f"judging {len(data)} bytes took {peak >> 20} MiB"


# -- FlatBuffers: many offsets to one table ----------------------------------------


def _shared_table_vector(entries: int) -> bytes:
    """A FlatBuffers PublishRequest whose `headers` are `entries` offsets to
    one empty MessageHeader table."""
    b = flatbuffers.Builder(0)
    b.StartObject(2)
    header = b.EndObject()
    b.StartVector(4, entries, 4)
    for _ in range(entries):
        b.PrependUOffsetTRelative(header)
    vec = b.EndVector()
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(6, vec, 0)
    b.Finish(b.EndObject())
    return ENVELOPE + bytes(b.Output())


@pytest.mark.slow
@pytest.mark.parametrize("entries,max_payload", [(2_000_000, 8 << 20), (50_000, 1 << 20)])
def test_offsets_to_one_table_cannot_multiply_objects(
    entries: int, max_payload: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lbparse/codec/flatbuf.py: each of N offsets to one table became its own
    FlatTable, and only the 4 bytes of each offset counted against
    max_payload: 8 MB decoded into 2 million objects (620 MB, 11.5 s).
    Each table read now counts what its object costs; the tables made are
    counted here, as well as the bytes."""
    made = 0
    real = flatbuf.FlatTable

    class Counted(real):  # type: ignore[valid-type, misc]
        __slots__ = ()

        def __init__(self, *args: Any, **kw: Any) -> None:
            nonlocal made
            made += 1
            super().__init__(*args, **kw)

    monkeypatch.setattr(flatbuf, "FlatTable", Counted)
    data = _shared_table_vector(entries)
    tracemalloc.start()
    try:
        with pytest.raises(lbparse.EnvelopeError) as err:
            lbparse.decode(data, "flatbuffers", limits=lbparse.Limits(max_payload=max_payload))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.value.limit == "max_payload"
    assert made <= max_payload // flatbuf.TABLE_COST
    assert peak < 2 * max(max_payload, len(data)), f"{peak >> 20} MiB"


def test_a_vector_of_tables_within_the_limit_still_decodes() -> None:
    env = lbparse.decode(_shared_table_vector(1000), "flatbuffers")
    assert len(env.message.fields["headers"]) == 1000
    with pytest.raises(lbparse.EnvelopeError, match="max_payload"):
        lbparse.decode(
            _shared_table_vector(1000),
            "flatbuffers",
            limits=lbparse.Limits(max_payload=1000 * flatbuf.TABLE_COST),
        )


@pytest.mark.slow
def test_flatbuffers_tables_are_read_in_linear_time() -> None:
    _check_linear(
        _shared_table_vector,
        lambda data: lbparse.decode(
            data, "flatbuffers", limits=lbparse.Limits(max_payload=64 << 20)
        ),
        [4_000, 8_000, 16_000, 32_000],
    )


def test_problem_items_stay_items() -> None:
    """(Problem is part of the parser's output contract: unchanged.)"""
    assert isinstance(_feed(b"bogus\r\n")[0], Problem)


STORAGE_TIMEOUT = Path(__file__).parents[1] / "data" / "fuzz" / "storage-timeout-2c0209cb.bin"


@pytest.mark.slow
def test_the_storage_campaigns_timeout_input_is_read_in_linear_time() -> None:
    """The issue #19 campaign's `storage` target timed out (over 10 s under
    atheris on a loaded machine) on these 13 KB: a damaged segment whose
    recovery probes every byte position for an entry, in every segment
    format, whole and in 64-byte parts. 0.6 s uninstrumented: slow
    instrumented, not a hang. Held here: the whole check stays bounded and
    recovery grows linearly with garbage repeated 1 to 8 times."""
    import time

    from support import hostile

    from lbparse.storage import read_segment_bytes
    from lbparse.storage.formats import SEGMENT_FORMATS_BY_NAME

    data = STORAGE_TIMEOUT.read_bytes()
    t = time.perf_counter()
    hostile.check_storage(data)
    assert time.perf_counter() - t < 10
    for fmt in [None, *SEGMENT_FORMATS_BY_NAME.values()]:
        assert_linear(
            lambda k, fmt=fmt: read_segment_bytes(data * k, "x.log", fmt, base_offset=7),
            [1, 2, 4, 8],
            floor=0.01,
        )
