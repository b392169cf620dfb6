"""The batch decoder's C passes (issue #24, item 3) equal their Python references.

One C pass reads every row's envelope header and checks its CRC
(`_kernels.headers`, for decode_arrow's `_headers` and `_v0_rows`); one
counting sort groups the rows by payload type (`_kernels.group`, for the
masks one per type); one walk reads the ReplicationResponse entries with
their CRCs straight into Arrow buffers (`_kernels.replication`, for
commitscan's numpy walk); the protobuf reader reads packed repeated
numbers (`_structs.c`, wirescan's numpy reader). Each is held equal to its
reference on the reference vectors, the real captures, damaged captures
and hypothesis-made input, errors included; and the whole decoder, C
against Python, row for row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import damage
from support.native_pass import (
    RR_TYPE,
    check_binary,
    check_decoder,
    check_group,
    check_headers,
    check_replication,
    check_strings,
    decoders,
    records,
)
from support.shared import CAPTURES, LIFTBRIDGE
from vectors import VECTORS, data

from lbparse.capture import native_batches
from lbparse.codec.commitlog import CommitLogEntry, ReplicationResponse, encode_replication_response
from lbparse.codec.wire import CRC_HEADER_LEN
from lbparse.columnar import commitscan
from lbparse.columnar.decode_arrow import DecodeOptions, native_available
from lbparse.columnar.schema import arrow_record_schema

pytestmark = pytest.mark.skipif(
    not native_available(), reason="pure-Python install: the C kernels were not built"
)

SAMPLES = LIFTBRIDGE / "samples"
CAPTURE_FILES = [
    SAMPLES / "short.pcapng",
    SAMPLES / "api-short.pcapng",
    *sorted(CAPTURES.glob("*.pcap*")),
]
VECTOR_PAYLOADS = [data(v) for v in VECTORS]


def capture_batches(path: Path) -> list[pa.RecordBatch]:
    if not path.exists():
        pytest.skip(f"shared material missing: {path}")
    return list(native_batches.NativeCapture(path).batches(arrow_record_schema()))


def payloads_of(path: Path) -> list[bytes]:
    return [
        p for b in capture_batches(path) for p in b.column("payload").to_pylist() if p is not None
    ]


def rr_payloads(envelopes: list[bytes]) -> list[bytes]:
    """The ReplicationResponse payloads (MsgType 3) of v0 envelopes."""
    return [
        e[CRC_HEADER_LEN if e[5] & 1 else 8 :]
        for e in envelopes
        if e[:4] == bytes.fromhex("b90e43b4") and len(e) > 8 and e[7] == 3
    ]


# -- the header pass ----------------------------------------------------------


def test_the_header_pass_equals_numpy_on_every_vector() -> None:
    for verify in (True, False):
        check_headers(VECTOR_PAYLOADS, verify_crc=verify)


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_the_header_pass_equals_numpy_on_the_real_captures(path: Path) -> None:
    payloads = payloads_of(path)
    assert payloads
    check_headers(payloads)


@st.composite
def envelopes(draw: st.DrawFn) -> list[bytes | None]:
    """Vectors damaged: bytes flipped (the header, the CRC, the flags), cut
    at any length (inside the header too), nulls, empty rows."""
    out: list[bytes | None] = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            out.append(None)
            continue
        b = bytearray(draw(st.sampled_from(VECTOR_PAYLOADS)))
        if kind in (1, 2, 3) and b:
            b[draw(st.integers(0, min(len(b), 14) - 1))] ^= draw(st.integers(1, 255))
        if kind in (4, 5):
            b = b[: draw(st.integers(0, len(b)))]
        if kind == 6 and len(b) > 5:
            b[5] ^= 1  # the CRC flag
        out.append(bytes(b))
    return out


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(envelopes(), st.booleans(), st.integers(0, 2**12 - 1))
def test_the_header_pass_equals_numpy_on_damaged_envelopes(
    payloads: list[bytes | None], verify: bool, todo_bits: int
) -> None:
    todo = np.array(
        [p is not None and (todo_bits >> (i % 12)) & 1 == 0 for i, p in enumerate(payloads)],
        np.bool_,
    )
    check_headers(payloads, verify_crc=verify)
    check_headers(payloads, todo=todo, verify_crc=verify)


def test_a_batch_whose_data_buffer_ends_inside_a_header() -> None:
    """The last row's header bytes past the buffer read as its last byte, in both."""
    check_headers([bytes.fromhex("b90e43b40008"), b"", bytes.fromhex("b90e43b40008000b0a")])
    check_headers([b""])


# -- grouping -------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-3, 20), max_size=200), st.integers(0, 18))
def test_grouping_equals_a_stable_sort(codes: list[int], ncodes: int) -> None:
    check_group(codes, ncodes)


# -- the input column: Python bytes as a binary column --------------------------------


@pytest.mark.slow  # over half a second: not in make test-fast
@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=200))
def test_binary_columns_equal_pyarrows(items: list[bytes | None]) -> None:
    check_binary(items)


def test_binary_columns_of_edge_lists() -> None:
    """No item, every item null, empty values, a null past a byte of the bitmap."""
    assert len(check_binary([])) == 0
    assert check_binary([None] * 9).null_count == 9
    assert check_binary([b"", b"", None]).to_pylist() == [b"", b"", None]
    got = check_binary([b"a"] * 8 + [None, b"\x00\xff"])
    assert got.null_count == 1 and got.buffers()[0] is not None


@pytest.mark.parametrize(
    "odd", [bytearray(b"ab"), memoryview(b"cd"), "text", type("Sub", (bytes,), {})(b"ef")]
)
def test_binary_columns_of_other_items_are_pyarrows(odd: object) -> None:
    """Items the C pass does not read (bytearray, memoryview, str, a bytes
    subclass) leave the whole list to pyarrow, which takes them all."""
    from lbparse.columnar.decode_arrow import _kernels

    assert _kernels.binary([b"x", odd]) is None
    check_binary([b"x", None, odd])


def test_binary_refuses_what_is_not_a_list_or_tuple() -> None:
    from lbparse.columnar.decode_arrow import _kernels

    with pytest.raises(TypeError, match="a list or a tuple"):
        _kernels.binary(iter([b"x"]))


# -- string columns of codes ---------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_string_columns_equal_arrows_take(data: st.DataObject) -> None:
    names = data.draw(st.lists(st.text(max_size=12), min_size=1, max_size=8, unique=True))
    codes = data.draw(st.lists(st.integers(-1, len(names) - 1), max_size=300))
    check_strings(names, codes)


def test_string_columns_of_the_decoders_names() -> None:
    """Nulls, an empty name, multi-byte UTF-8, names either side of the 32
    bytes copied at once, every row null, no row."""
    names = ["ReplicationResponse", "", "é\u4e2d", "Ack", "x" * 32, "y" * 33, "z" * 70]
    got = check_strings(names, [0, -1, 1, 2, 3, 0, -1, 4, 5, 6, 4, 6, 0])
    assert got.null_count == 2
    assert check_strings(names, [-1, -1]).null_count == 2
    assert len(check_strings(names, [])) == 0


@pytest.mark.parametrize("rows", [1, 2, 3, 1000])
def test_a_column_of_one_name_equals_arrows_take(rows: int) -> None:
    """One name in every row (a batch's layout, the MsgType of a batch of
    one type), made by its own loop: short and long names, an empty one,
    multi-byte UTF-8, a code past the table still refused."""
    names = ["v0", "", "é\u4e2d", "z" * 70]
    for code in range(len(names)):
        assert check_strings(names, [code] * rows).null_count == 0
    assert check_strings(names, [-1] * rows).null_count == rows
    from lbparse.columnar.decode_arrow import _kernels

    with pytest.raises(ValueError, match="code 4 at row 0, for a table of 4"):
        _kernels.strings(
            np.full(rows, 4, np.int32),
            np.array([0, 1, 2, 3, 4], np.int32),
            b"abcd",
            np.zeros(rows + 1, np.int32),
        )


@pytest.mark.parametrize("code", [4, -2, 1 << 30])
def test_a_code_past_the_table_is_refused(code: int) -> None:
    from lbparse.columnar.decode_arrow import _kernels

    offsets = np.zeros(4, np.int32)
    table = np.array([0, 1, 2, 3, 4], np.int32)
    with pytest.raises(ValueError, match=f"code {code} at row 2, for a table of 4"):
        _kernels.strings(np.array([0, 1, code], np.int32), table, b"abcd", offsets)
    with pytest.raises(ValueError, match="table entry 1 is outside"):
        _kernels.strings(np.zeros(3, np.int32), np.array([0, 1, 9], np.int32), b"ab", offsets)
    with pytest.raises(ValueError, match="offsets n \\+ 1"):
        _kernels.strings(np.zeros(3, np.int32), table, b"abcd", np.zeros(3, np.int32))


# -- ReplicationResponse ----------------------------------------------------------


def test_the_replication_walk_equals_numpy_on_the_real_mix() -> None:
    payloads = rr_payloads(payloads_of(SAMPLES / "short.pcapng"))
    assert len(payloads) > 1000
    _, ok = check_replication(payloads)
    assert ok.all()


def test_a_batch_of_header_only_responses_equals_numpy() -> None:
    """A batch without one entry (an idle cluster's header-only responses,
    a short and a long one among them): its entries lists all empty, made
    without the entries' columns (commitscan._no_entries)."""
    payloads = [p for p in rr_payloads(payloads_of(SAMPLES / "short.pcapng")) if len(p) == 16]
    assert len(payloads) > 100
    got, ok = check_replication(payloads + [payloads[0][:15], payloads[0] + b"\0"])
    assert ok.tolist() == [True] * len(payloads) + [False, False]
    rows = got.to_pylist()
    assert [r["entries"] for r in rows[:-2]] == [[]] * len(payloads) and rows[-2:] == [None, None]


def _reversed(t: pa.DataType, depth: int = 2) -> pa.DataType:
    """A struct type and the `depth` - 1 below it (inside lists) with their
    fields in reverse order (the payload's and an entry's: the walks in
    Python make a header's key and value in the spec's order)."""
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_reversed(t.value_type, depth)))
    if pa.types.is_struct(t) and depth:
        return pa.struct([f.with_type(_reversed(f.type, depth - 1)) for f in t][::-1])
    return t


def _magic_int64(t: pa.DataType) -> pa.DataType:
    """The type with an entry's `magic` an int64 (a type the C walk does not build)."""
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_magic_int64(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct(
            [f.with_type(pa.int64() if f.name == "magic" else _magic_int64(f.type)) for f in t]
        )
    return t


def test_the_c_walk_follows_the_types_order_and_leaves_other_types_to_numpy() -> None:
    """_kernels.replication builds the fields in the order of the type asked
    for (the payload's and an entry's reversed here), equal to numpy's; a
    type it does not build (magic as int64) is the numpy walk's."""
    payloads = rr_payloads(payloads_of(SAMPLES / "short.pcapng"))
    payloads = [p for p in payloads if len(p) > 16][:50] + payloads[:50] + [b"\0" * 5]
    turned = _reversed(RR_TYPE)
    assert commitscan._orders(turned) is not None
    got, _ = check_replication(payloads, turned)
    assert got.type == turned and [f.name for f in got.type][0] == "entries"
    wider = _magic_int64(RR_TYPE)
    assert commitscan._orders(wider) is None
    got, _ = check_replication(payloads, wider)
    assert got.type == wider


def test_the_replication_walk_equals_numpy_on_the_vectors() -> None:
    payloads = rr_payloads(VECTOR_PAYLOADS)
    assert payloads
    check_replication(payloads)


header = st.tuples(st.text(max_size=4), st.binary(max_size=4))
entry = st.builds(
    CommitLogEntry,
    offset=st.integers(0, 2**63 - 1),
    timestamp=st.integers(-(2**63), 2**63 - 1),
    leader_epoch=st.integers(0, 2**64 - 1),
    key=st.none() | st.binary(max_size=5),
    value=st.none() | st.binary(max_size=8),
    headers=st.lists(header, max_size=3),
)
responses = st.builds(
    ReplicationResponse,
    leader_epoch=st.integers(0, 2**64 - 1),
    high_watermark=st.integers(-(2**63), 2**63 - 1),
    entries=st.lists(entry, max_size=4),
)


@st.composite
def damaged_responses(draw: st.DrawFn) -> bytes:
    b = bytearray(encode_replication_response(draw(responses)))
    kind = draw(st.integers(0, 5))
    if kind == 1 and b:
        b[draw(st.integers(0, len(b) - 1))] ^= draw(st.integers(1, 255))
    elif kind == 2:
        b = b[: draw(st.integers(0, len(b)))]
    elif kind == 3:
        b += draw(st.binary(min_size=1, max_size=6))
    elif kind == 4 and len(b) > 16:  # a length field set to -1, -2 or huge
        at = draw(st.integers(16, len(b) - 1))
        b[at : at + 4] = draw(
            st.sampled_from(
                [b"\xff\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00"]
            )
        )
    return bytes(b)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(damaged_responses(), min_size=1, max_size=6))
def test_the_replication_walk_equals_numpy_on_hypothesis_payloads(payloads: list[bytes]) -> None:
    check_replication(payloads)


def test_invalid_utf8_header_keys_and_crc_mismatches() -> None:
    good = ReplicationResponse(1, 2, [CommitLogEntry(5, 6, 7, b"k", b"v", [("h", b"x")])])
    b = encode_replication_response(good)
    at = b.rindex(b"hx") if b"hx" in b else b.rindex(b"h")
    bad_key = b[:at] + b"\xff" + b[at + 1 :]  # the header key
    bad_crc = bytearray(b)
    bad_crc[16 + 28] ^= 1  # the entry's stored CRC
    got, ok = check_replication([b, bad_key, bytes(bad_crc)])
    assert ok.tolist() == [True, False, True]
    assert got.to_pylist()[2]["entries"][0]["crc_ok"] is False


def test_the_entry_and_header_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A payload with MAX_ENTRIES entries or an entry with MAX_HEADERS headers
    is left to lbparse by both walks (the limits set small here)."""
    monkeypatch.setattr(commitscan, "MAX_ENTRIES", 3)
    monkeypatch.setattr(commitscan, "MAX_HEADERS", 2)
    payloads = [
        encode_replication_response(
            ReplicationResponse(
                1, 2, [CommitLogEntry(i, 0, 0, None, b"v", [("k", b"")] * h) for i in range(n)]
            )
        )
        for n in range(5)
        for h in range(4)
    ]
    _, ok = check_replication(payloads)
    assert 0 < ok.sum() < len(payloads)


# -- the whole decoder, C against Python ---------------------------------------------


def test_the_decoder_equals_its_python_reference_on_every_vector() -> None:
    check_decoder(VECTOR_PAYLOADS)


@pytest.mark.slow
@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_the_decoder_equals_its_python_reference_on_the_real_captures(path: Path) -> None:
    for batch in capture_batches(path):
        check_decoder(batch)


def test_the_decoder_equals_its_python_reference_on_damaged_captures(tmp_path: Path) -> None:
    (tmp_path / "pcap").mkdir()
    cases = damage.damaged_captures(tmp_path, "pcapng") + damage.damaged_captures(
        tmp_path / "pcap", "pcap"
    )
    assert len(cases) > 10
    for case in cases:
        for batch in capture_batches(Path(case.path)):
            check_decoder(batch, crcs=(True,))


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(envelopes())
def test_the_decoder_equals_its_python_reference_on_damaged_envelopes(
    payloads: list[bytes | None],
) -> None:
    check_decoder(payloads)


def test_the_check_catches_a_header_pass_that_disagrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teeth: a C pass that takes one row too few fails the comparison."""
    from lbparse.columnar import decode_arrow

    real = decode_arrow._kernels.headers

    def drops_one(*args):  # type: ignore[no-untyped-def]
        real(*args)
        take = args[-2]
        take[np.flatnonzero(take)[:1]] = 0

    monkeypatch.setattr(
        decode_arrow,
        "_kernels",
        type(
            "K",
            (),
            {
                "headers": staticmethod(drops_one),
                "group": real.__self__.group,
                "replication": real.__self__.replication,
            },
        ),
    )
    with pytest.raises(AssertionError):
        check_headers(VECTOR_PAYLOADS)


def test_the_records_helper_is_the_decoders_input() -> None:
    batch = records([b"a", None])
    assert batch.schema == arrow_record_schema() and batch.num_rows == 2


# -- rows without the envelope magic ---------------------------------------------------


def _non_envelopes() -> list[bytes | None]:
    rnd = np.random.default_rng(7)
    out: list[bytes | None] = [
        b"",
        b"\xb9",
        b"\xb9\x0e\x43",
        bytes.fromhex("b90e43b4"),
        bytes.fromhex("b90e43b40008"),
        b"LIF",
        b"LIFT",
        b"LIFTx",
        b"LIFT" + bytes(20),
        b'{"op": "pub"}',
        b"PING",
        b"+OK",
        None,
        b"x" * 7,
        b"x" * 8,
        b"y" * 8,
        b"\xff" * 30,
    ]
    out += [
        rnd.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rnd.integers(0, 40, 200)
    ]
    return out + VECTOR_PAYLOADS[:20]


def test_rows_without_the_magic_get_lbparse_decodes_answer() -> None:
    """Classified at once (one lbparse.decode per distinct length or first
    bytes under v0, one for every plain row under auto), each row is still
    lbparse.decode's answer for it, errors and their messages included."""
    import lbparse
    from lbparse.errors import EnvelopeError

    payloads = _non_envelopes()
    check_decoder(payloads)
    for layout, lenient in (("v0", False), ("v0", True), ("auto", False)):
        c, _ = decoders(DecodeOptions(layout=layout, lenient=lenient))
        got = c.decode(records(payloads)).to_batch().to_pylist()
        for p, row in zip(payloads, got):
            if p is None:
                continue
            try:
                env = lbparse.decode(p, layout, lenient=lenient)
            except EnvelopeError as exc:
                assert (row["error_kind"], row["error_message"]) == (exc.kind, exc.message)
                continue
            assert row["error_kind"] is None
            assert (row["layout"], row["payload_type"], row["msg_type_name"]) == (
                env.layout,
                env.payload_type,
                env.msg_type_name,
            )


@pytest.mark.slow  # over half a second: not in make test-fast
def test_a_row_over_max_payload_is_left_to_lbparse() -> None:
    from lbparse.codec.limits import DEFAULT

    big = b"x" * (DEFAULT.max_payload + 1)
    check_decoder([big, b"plain", b"x" * DEFAULT.max_payload], crcs=(True,))


def test_plain_rows_do_not_each_call_lbparse_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teeth for the classification: 2,000 rows without the magic cost a
    handful of lbparse.decode calls, not one each (under v0: one per
    distinct first bytes)."""
    from lbparse.columnar import decode_arrow

    calls = []
    real = decode_arrow.decode

    def counting(*args, **kw):  # type: ignore[no-untyped-def]
        calls.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(decode_arrow, "decode", counting)
    payloads = [b'{"n": %d}' % i for i in range(1000)] + [b"PING"] * 1000
    for layout in ("v0", "auto"):
        calls.clear()
        decoders(DecodeOptions(layout=layout))[0].decode(records(payloads))
        assert len(calls) <= 3, (layout, len(calls))
