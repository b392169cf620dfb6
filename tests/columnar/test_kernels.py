"""The pipeline's C kernels (when built) equal their Python references:
the batch CRC-32C equals crc32c.crc32c range by range, and the protobuf
wire scan equals wirescan's numpy scan occurrence by occurrence."""

from __future__ import annotations

import os
from pathlib import Path

import crc32c
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.wire import varint

from lbparse.columnar import crc as crc_mod
from lbparse.columnar import wirescan
from lbparse.columnar.crc import crc32c_ranges, crc32c_ranges_python

native = pytest.mark.skipif(
    crc_mod._native is None, reason="pure-Python install: the C module was not built"
)


def test_built_when_expected() -> None:
    if os.environ.get("LBPARSE_EXPECT_COMPILED"):
        assert crc_mod.implementation() != "python"


@st.composite
def buffers_and_ranges(draw: st.DrawFn) -> tuple[bytes, list[int], list[int]]:
    data = draw(st.binary(min_size=0, max_size=600))
    n = draw(st.integers(0, 12))
    starts, ends = [], []
    for _ in range(n):
        a = draw(st.integers(0, len(data)))
        b = draw(st.integers(a, len(data)))
        starts.append(a)
        ends.append(b)
    return data, starts, ends


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(buffers_and_ranges())
def test_every_range_as_crc32c_gives_it(case: tuple[bytes, list[int], list[int]]) -> None:
    data, starts, ends = case
    want = [crc32c.crc32c(data[a:b]) for a, b in zip(starts, ends)]
    arr = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    s, e = np.array(starts, np.int64), np.array(ends, np.int64)
    assert crc32c_ranges(arr, s, e).tolist() == want
    assert crc32c_ranges_python(arr, s, e).tolist() == want


@native
@pytest.mark.parametrize("portable", [False, True])
def test_both_c_implementations_agree_with_the_reference(portable: bool) -> None:
    """The CPU's path (sse4.2 where it has it) and the table-driven one, on
    unaligned ranges of every length up to 2.5 KB (every tail after whole words)."""
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 5000, dtype=np.uint8)
    starts = rng.integers(0, 2500, 2000)
    ends = starts + rng.integers(0, 2500, 2000)
    out = np.empty(len(starts), np.uint32)
    crc_mod._native.ranges(data, starts.astype(np.int64), ends.astype(np.int64), out, portable)
    assert out.tolist() == [crc32c.crc32c(data[a:b].tobytes()) for a, b in zip(starts, ends)]
    assert crc_mod.implementation() in ("sse4.2", "slicing-by-8")


@pytest.mark.parametrize("fn", [crc32c_ranges, crc32c_ranges_python])
@pytest.mark.parametrize("start,end", [(-1, 3), (5, 4), (0, 11)])
def test_a_range_outside_the_data_is_refused(fn, start: int, end: int) -> None:
    data = np.arange(10, dtype=np.uint8)
    with pytest.raises(ValueError, match=r"range 1 is \[" + str(start)):
        fn(data, np.array([0, start]), np.array([1, end]))


@native
def test_mismatched_crc_lengths_are_refused() -> None:
    out = np.empty(2, np.uint32)
    with pytest.raises(ValueError, match="starts and ends need n int64"):
        crc_mod._native.ranges(
            np.zeros(4, np.uint8), np.zeros(2, np.int64), np.zeros(3, np.int64), out
        )


# -- the protobuf wire scan ---------------------------------------------------

# The strategies each draw uses, made once: hypothesis checks a strategy
# (validate, is_empty...) the first time it draws from it, so strategies made
# anew in every draw were checked in every draw (this sweep: 14.9 CPU-s, now 10.5).
_NUMBER = st.one_of(st.integers(1, 20), st.integers(0, (1 << 29) - 1))
_WIRE_TYPE = st.sampled_from([0, 0, 1, 2, 2, 5, 3, 4, 6, 7])
_U64 = st.integers(0, (1 << 64) - 1)
_VALUE = st.binary(max_size=30)
_OTHER_BODY = st.binary(max_size=9)
_ONE_IN_8, _ONE_IN_10 = st.integers(0, 7), st.integers(0, 9)
_WIDTH = st.integers(1, 11)


@st.composite
def field_bytes(draw: st.DrawFn) -> bytes:
    """One field as encoders write it, or something near it that is not."""
    number = draw(_NUMBER)
    wt = draw(_WIRE_TYPE)
    tag = varint(number << 3 | wt)
    if wt == 0:
        body = varint(draw(_U64))
    elif wt == 2:
        value = draw(_VALUE)
        body = varint(draw(st.one_of(st.just(len(value)), st.integers(0, 1 << 64 - 1)))) + value
    else:
        body = draw(_OTHER_BODY)
    if draw(_ONE_IN_8) == 0:  # a tag or length padded past what it needs
        width = draw(_WIDTH)
        if wt == 2 and draw(st.booleans()):
            n = len(value)
            body = varint(n, width) + value
        else:
            tag = varint(number << 3 | wt, width)
    out = tag + body
    if draw(_ONE_IN_10) == 0:  # damage: cut, or an overlong varint
        out = draw(st.sampled_from([out[: draw(st.integers(0, len(out)))], b"\x88" + b"\xff" * 10]))
    return out


_FIELDS = st.lists(field_bytes(), max_size=8)
_MESSAGES, _GAP = st.integers(0, 10), st.binary(max_size=3)


@st.composite
def message_batches(draw: st.DrawFn) -> tuple[bytes, list[int], list[int]]:
    messages = [b"".join(draw(_FIELDS)) for _ in range(draw(_MESSAGES))]
    if draw(st.booleans()):
        messages.append(b"\x08\x01" * 300)  # past MAX_STEPS
    gap = draw(_GAP)  # bytes between messages: never read
    data, starts, ends = b"", [], []
    for m in messages:
        data += gap
        starts.append(len(data))
        data += m
        ends.append(len(data))
    return data, starts, ends


def _normalized(scan: wirescan._Scan) -> dict[int, list[tuple[int, int, int, int]]]:
    """Occurrences per field number, message by message in order."""
    out = {}
    for number, parts in scan.by_field.items():
        rows, wt, a, b = (np.concatenate(x) for x in zip(*parts))
        occ = sorted(zip(rows.tolist(), b.tolist(), wt.tolist(), a.tolist()))
        out[number] = occ
    return out


@pytest.mark.slow  # a long property sweep (500 batches through both scans)
@native
@settings(max_examples=500, deadline=None)
@given(message_batches())
def test_the_c_scan_finds_what_the_numpy_scan_finds(
    case: tuple[bytes, list[int], list[int]],
) -> None:
    data, starts, ends = case
    arr = np.frombuffer(data, np.uint8) if data else np.zeros(1, np.uint8)
    s, e = np.array(starts, np.int64), np.array(ends, np.int64)
    known = tuple(range(1, 12, 2)) + (70_000,)  # some numbers grouped in C, the rest after
    c, ref = wirescan._Scan(arr, s, e, known), wirescan._Scan(arr, s, e, native=False)
    assert c.bad.tolist() == ref.bad.tolist()
    assert _normalized(c) == _normalized(ref)
    for parts in c.by_field.values():  # one part per field, rows ascending
        assert len(parts) == 1 and (np.diff(parts[0][0]) >= 0).all()


@native
def test_the_scan_refuses_ranges_outside_the_data_and_short_buffers() -> None:
    k = wirescan._kernels
    slots = np.array([-1, 0, 1], np.int32)
    data = np.zeros(4, np.uint8)
    with pytest.raises(ValueError, match=r"range 0 is \[2, 9\)"):
        k.scan(data, np.array([2]), np.array([9]), 256, slots, np.zeros(3, np.int64), *(None,) * 7)
    data = np.frombuffer(b"\x08\x01\x10\x02\x18\x03", np.uint8)
    s, e = np.array([0]), np.array([6])
    counts = np.zeros(3, np.int64)
    k.scan(data, s, e, 256, slots, counts, *(None,) * 7)
    assert counts.tolist() == [1, 1, 1]  # fields 1, 2, and 3 in the last slot (other)
    with pytest.raises(ValueError, match=r"slot_of\[2\] is 1, past the 1 slots"):
        k.scan(data, s, e, 256, slots, np.zeros(1, np.int64), *(None,) * 7)

    def fill(m: int, nxt: list[int], bad: int = 1) -> None:
        k.scan(
            data,
            s,
            e,
            256,
            slots,
            None,
            np.array(nxt, np.int64),
            np.empty(m, np.int64),
            np.empty(m, np.int32),
            np.empty(m, np.int8),
            np.empty(m, np.int64),
            np.empty(m, np.int64),
            np.zeros(bad, np.uint8),
        )

    fill(3, [0, 1, 2])
    with pytest.raises(RuntimeError, match="more occurrences than the buffers hold"):
        fill(2, [0, 1, 2])
    with pytest.raises(ValueError, match=r"next\[2\] is outside the 2 occurrences"):
        fill(2, [0, 1, 3])
    with pytest.raises(ValueError, match="bad has 2 bytes, not 1"):
        fill(3, [0, 1, 2], bad=2)


@pytest.mark.parametrize("native_scan", [False, True])
@pytest.mark.parametrize("width", range(1, 12))
def test_tags_and_lengths_longer_than_upb_reads_are_refused(native_scan: bool, width: int) -> None:
    """upb reads a tag or a length in at most 5 bytes (a longer one, even of
    zero padding, is corrupt); both scans leave such messages out, so they
    reach upb and its error (issue #19)."""
    if native_scan and wirescan._kernels is None:
        pytest.skip("pure-Python install: the C module was not built")
    from lbparse.codec.payloads import message_class

    ack = message_class("proto.Ack")
    for wire in (varint(0x0A, width) + b"\x01a", b"\x0a" + varint(1, width) + b"a"):
        data = np.frombuffer(wire, np.uint8)
        scan = wirescan._Scan(data, np.array([0]), np.array([len(wire)]), (1,), native=native_scan)
        assert scan.bad.tolist() == [width > wirescan.MAX_SIZE_BYTES]
        try:
            ack.FromString(wire)
            upb_ok = True
        except Exception:
            upb_ok = False
        assert upb_ok == (width <= wirescan.MAX_SIZE_BYTES)


def test_the_c_modules_share_their_crc_and_varint() -> None:
    """CRC-32C (its polynomials and the SSE 4.2 path), the varint and the
    n-byte big-endian reader are written once, in lbparse/_c's headers, and
    every C module that needs them includes those: none has its own copy."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "lbparse"
    facts = (
        "0x82F63B78",
        "0xEDB88320",
        "__builtin_ia32_crc32",
        "(byte & 0x7F) << (7 * j)",
        "(v << 8) | p[",
    )
    for source in root.rglob("*.c"):
        text = source.read_text()
        assert not [f for f in facts if f in text], source
    headers = {h.name: h.read_text() for h in (root / "_c").glob("*.h")}
    assert all(any(f in h for h in headers.values()) for f in facts)
    for name, needs in (
        ("columnar/_kernels.c", ("lb_be.h", "lb_crc.h", "lb_varint.h")),
        ("columnar/_structs.c", ("lb_varint.h",)),
        ("storage/_scan.c", ("lb_be.h", "lb_crc.h")),
        ("raft/_transport.c", ("lb_msgpack.h",)),
    ):
        text = (root / name).read_text()
        assert all(f'#include "{h}"' in text for h in needs), name


def test_the_c_modules_share_one_growable_buffer() -> None:
    """The growable byte buffer is written once, in lbparse/_c/lb_gbuf.h:
    every C module includes it, and none reallocates a byte buffer of its
    own (_native.c, _kernels.c, _structs.c and _scan.c each had one, with
    different rules for a size that overflows). raft/_transport.c calls no
    allocator itself: its columns grow in lb_gbuf.h's buffers, the rest is
    Python objects and the stack."""
    import re

    root = Path(__file__).resolve().parents[2] / "lbparse"
    own = re.compile(
        r"(?:uint8_t|char)\s*\*\s*\w+\s*=\s*"
        r"(?:realloc|PyMem_Realloc|PyMem_RawRealloc|LB_GBUF_REALLOC)\(|\}\s*gbuf;"
    )
    allocates = re.compile(r"\b(?:m|re|c)alloc\(|PyMem_")
    sources = sorted(root.rglob("*.c"))
    assert len(sources) == 5
    assert [s.name for s in sources if not allocates.search(s.read_text())] == ["_transport.c"]
    for source in sources:
        text = source.read_text()
        if allocates.search(text):
            assert '#include "lb_gbuf.h"' in text, source
        assert not own.findall(text), source
    assert own.findall((root / "_c" / "lb_gbuf.h").read_text())


def test_the_growable_buffer_keeps_its_rule(tmp_path: Path) -> None:
    """lb_gbuf.h compiled alone (tests/support/gbuf_check.c): a size whose sum
    wraps or passes PTRDIFF_MAX is refused before any arithmetic, a failed
    allocation leaves the bytes, length and capacity as they were, the
    capacity doubles from 64."""
    import shutil
    import subprocess
    import sysconfig

    cc = next(
        (
            c
            for c in (sysconfig.get_config_var("CC") or "", "cc", "gcc", "clang")
            if c and shutil.which(c.split()[0])
        ),
        None,
    )
    if cc is None:
        pytest.skip("no C compiler to build the header's check")
    here = Path(__file__).resolve().parents[1]
    exe = tmp_path / "gbuf_check"
    # (no -Werror: the compiler rightly sees the sizes past PTRDIFF_MAX the check passes)
    subprocess.run(
        [
            *cc.split(),
            "-O1",
            f"-I{here.parent / 'lbparse' / '_c'}",
            str(here / "support" / "gbuf_check.c"),
            "-o",
            str(exe),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert [line for line in lines if not line.endswith(" ok")] == []
    assert len(lines) == 14 and out.returncode == 0


@st.composite
def flatbuffer_candidates(draw: st.DrawFn) -> list[bytes]:
    """Payloads whose first u32 is often a small root offset and whose root's
    i32 often points back into them: every branch of `plausible`, payloads
    shorter than 8 bytes and ones at the very end of the shared buffer."""
    out = []
    for _ in range(draw(st.integers(0, 10))):
        body = bytearray(draw(st.binary(min_size=0, max_size=40)))
        if len(body) >= 4 and draw(st.booleans()):
            root = draw(st.integers(0, len(body)))
            body[0:4] = root.to_bytes(4, "little")
            if root < len(body) and draw(st.booleans()):
                # cut where the body ends: a root whose i32 runs past it
                back = draw(st.integers(-8, root + 8))
                word = (back % (1 << 32)).to_bytes(4, "little")
                body[root : root + 4] = word[: len(body) - root]
        out.append(bytes(body))
    return out


@settings(max_examples=300, deadline=None)
@given(flatbuffer_candidates())
# a root whose i32 would end one byte past its payload, on the next one's zero
@example([bytes([5, 0, 0, 0, 0, 5, 0, 0]), bytes(8)])
def test_the_vectorized_flatbuffer_look_is_plausibles(payloads: list[bytes]) -> None:
    """decode_arrow._flatbuffer_like (auto's look at Publish and Ack rows, numpy
    over one buffer) says of each payload what codec.flatbuf.plausible says."""
    from lbparse.codec.flatbuf import plausible
    from lbparse.columnar.decode_arrow import _flatbuffer_like

    data = b"".join(payloads)
    ends = np.cumsum([len(p) for p in payloads], dtype=np.int64)
    starts = ends - np.array([len(p) for p in payloads], np.int64)
    buf = np.frombuffer(data, np.uint8) if data else np.zeros(1, np.uint8)
    got = _flatbuffer_like(buf, starts, ends).tolist()
    assert got == [plausible(p) for p in payloads]
