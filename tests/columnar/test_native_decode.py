"""The C protobuf reader (lbparse/columnar/_structs.c, wirescan_native.py)
gives exactly what wirescan's numpy reader (the reference) gives: the same
`ok` rows and, for them, the same struct values, for every payload type,
with Spark's emit.default.values on and off, `clean` on and off.

Inputs: every payload of the reference vectors and of the real cluster
capture, under every payload type (most are not that type: refusals are
held equal too), and hypothesis-made ones: those payloads cut, joined,
with bytes flipped or inserted (fields twice, unknown fields, wrong wire
types, long varints, invalid UTF-8), and random bytes.
"""

from __future__ import annotations

import os
import random
import struct

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.shared import LIFTBRIDGE
from support.wire import varint
from vectors import VECTORS, data

import lbparse
from lbparse.columnar import wirescan, wirescan_native
from lbparse.columnar.decode_arrow import binary_buffers
from lbparse.columnar.schema import arrow_output_schema, payload_columns, typed_payloads
from lbparse.errors import EnvelopeError

pytestmark = pytest.mark.skipif(
    not wirescan_native.available() and not os.environ.get("LBPARSE_EXPECT_COMPILED"),
    reason="the C protobuf reader is not built (setup.py): nothing to compare",
)

TYPES = [p for p, cls in typed_payloads().items() if cls is not None]


def _payloads() -> list[bytes]:
    out = []
    envelopes = [data(v) for v in VECTORS]
    short = LIFTBRIDGE / "samples" / "short.pcapng"
    if short.exists():
        from lbparse.capture.native_batches import NativeCapture, available
        from lbparse.columnar.schema import arrow_record_schema

        if available():
            for b in NativeCapture(short).batches(arrow_record_schema()):
                envelopes += [p for p in b.column("payload").to_pylist() if p]
    for e in dict.fromkeys(envelopes):
        try:
            env = lbparse.decode(e, "v0", verify_crc=False)
        except EnvelopeError:
            out.append(e)
            continue
        out.append(e[env.header_len :])
    return list(dict.fromkeys(out))


PAYLOADS = _payloads()


def round_trips(arr: pa.Array) -> None:
    """The array writes to Parquet and reads back the same: its children are
    typed as its type says (a map's key not null), or Parquet's levels break
    (what Spark then fails on)."""
    import io

    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.table({"c": arr}), sink)
    back = pq.read_table(io.BytesIO(sink.getvalue())).column("c").combine_chunks()
    assert repr(back.to_pylist()) == repr(arr.to_pylist())  # repr: NaN equals NaN


def assert_same(payloads: list[bytes], ptype: str, emit: bool, clean: bool) -> None:
    schema = arrow_output_schema()
    typ = schema.field(payload_columns()[ptype]).type
    desc = typed_payloads()[ptype].DESCRIPTOR
    starts, ends, buf = binary_buffers(pa.array(payloads, pa.binary()))
    ref, ref_ok = wirescan.decode_structs(desc, typ, buf, starts, ends, emit, clean, native=False)
    got, got_ok = wirescan_native.decode_structs(desc, typ, buf, starts, ends, emit, clean)
    got.validate(full=True)
    assert len(got) == len(payloads) and got.type == typ
    bad = np.flatnonzero(ref_ok != got_ok)
    assert not bad.size, (ptype, emit, clean, [payloads[i].hex() for i in bad[:3]], ref_ok[bad[:3]])
    mask = pa.array(ref_ok)
    a, b = ref.filter(mask), got.filter(mask)
    if not a.equals(b):
        for i, (x, y) in enumerate(zip(a.to_pylist(), b.to_pylist())):
            assert x == y, (ptype, emit, clean, payloads[np.flatnonzero(ref_ok)[i]].hex())
    assert got.null_count == int((~got_ok).sum())
    round_trips(got)


@pytest.mark.parametrize("ptype", TYPES)
@pytest.mark.parametrize("emit,clean", [(False, False), (True, False), (False, True)])
def test_real_payloads_under_every_type(ptype: str, emit: bool, clean: bool) -> None:
    assert len(PAYLOADS) > 100
    assert_same(PAYLOADS, ptype, emit, clean)


@st.composite
def mutated(draw: st.DrawFn) -> list[bytes]:
    rnd = random.Random(draw(st.integers(0, 2**32)))
    out = []
    for _ in range(draw(st.integers(1, 12))):
        p = bytearray(rnd.choice(PAYLOADS))
        for _ in range(draw(st.integers(0, 3))):
            op = rnd.randrange(6)
            if op == 0 and p:  # a byte flipped
                p[rnd.randrange(len(p))] ^= 1 << rnd.randrange(8)
            elif op == 1:  # cut
                del p[rnd.randrange(len(p) + 1) :]
            elif op == 2:  # another payload's fields after these (fields twice, unknown ones)
                p += rnd.choice(PAYLOADS)
            elif op == 3:  # bytes inserted: tags of any number and wire type, long varints
                at = rnd.randrange(len(p) + 1)
                p[at:at] = draw(
                    st.sampled_from(
                        [
                            b"\x08\x00",
                            b"\x80\x80\x80\x80\x80\x00",
                            b"\x12\x02\xc3\x28",
                            b"\x0a\x00",
                            b"\xfa\x7f\x01",
                            b"\x0d\x00\x00\x80\x80",
                            b"\x13",
                            b"\x52\x00",
                            b"\x52\x04\x0a\x00\x0a\x00",
                            b"\x8a\x80\x80\x80\x80\x00\x00",
                            b"\x0a\x80\x80\x80\x80\x80\x00",
                            b"\x0a\x80\x80\x80\x80\x00",
                        ]
                    )
                )
            elif op == 4:  # a payload inside a length-delimited field of another
                q = rnd.choice(PAYLOADS)[:120]
                p += bytes([(rnd.randrange(1, 16) << 3) | 2, len(q)]) + q
            else:
                p = bytearray(draw(st.binary(max_size=40)))
        out.append(bytes(p))
    return out


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads=mutated(), ptype=st.sampled_from(TYPES), emit=st.booleans(), clean=st.booleans())
def test_hypothesis_payloads(payloads: list[bytes], ptype: str, emit: bool, clean: bool) -> None:
    assert_same(payloads, ptype, emit, clean)


# -- every protobuf kind: a message type made here -----------------------------


def _all_kinds() -> tuple[object, pa.StructType]:
    """A proto3 message with every scalar kind singular, optional and repeated,
    an open enum, a nested message (singular and repeated) and maps with
    string, int32 and bool keys and scalar and message values; its class and
    the Arrow type the pipeline gives it (as for Liftbridge's own types)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from lbparse.columnar.schema import message_type

    F = descriptor_pb2.FieldDescriptorProto
    fp = descriptor_pb2.FileDescriptorProto(
        name="lbparse_test_kinds.proto", package="lbtest", syntax="proto3"
    )
    enum = fp.enum_type.add(name="Color")
    for i, name in enumerate(["RED", "GREEN", "BLUE"]):
        enum.value.add(name=name, number=i)
    enum.value.add(name="FAR", number=40)
    nested = fp.message_type.add(name="Nested")
    nested.field.add(name="x", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    nested.field.add(name="s", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    msg = fp.message_type.add(name="AllKinds")
    scalars = [
        F.TYPE_INT32,
        F.TYPE_UINT32,
        F.TYPE_SINT32,
        F.TYPE_INT64,
        F.TYPE_UINT64,
        F.TYPE_SINT64,
        F.TYPE_BOOL,
        F.TYPE_FLOAT,
        F.TYPE_DOUBLE,
        F.TYPE_FIXED32,
        F.TYPE_SFIXED32,
        F.TYPE_FIXED64,
        F.TYPE_SFIXED64,
        F.TYPE_STRING,
        F.TYPE_BYTES,
    ]
    n = 1
    for t in scalars:
        msg.field.add(name=f"s{n}", number=n, type=t, label=F.LABEL_OPTIONAL)
        r = msg.field.add(name=f"r{n}", number=n + 100, type=t, label=F.LABEL_REPEATED)
        if t not in (F.TYPE_STRING, F.TYPE_BYTES):
            r.options.packed = n == 1  # r1 packed by its encoder, the others not
        o = msg.field.add(
            name=f"o{n}", number=n + 200, type=t, label=F.LABEL_OPTIONAL, proto3_optional=True
        )
        msg.oneof_decl.add(name=f"_o{n}")
        o.oneof_index = len(msg.oneof_decl) - 1
        n += 1
    msg.field.add(
        name="color", number=50, type=F.TYPE_ENUM, type_name=".lbtest.Color", label=F.LABEL_OPTIONAL
    )
    msg.field.add(
        name="colors",
        number=51,
        type=F.TYPE_ENUM,
        type_name=".lbtest.Color",
        label=F.LABEL_REPEATED,
    )
    msg.field.add(
        name="nested",
        number=52,
        type=F.TYPE_MESSAGE,
        type_name=".lbtest.Nested",
        label=F.LABEL_OPTIONAL,
    )
    msg.field.add(
        name="nesteds",
        number=53,
        type=F.TYPE_MESSAGE,
        type_name=".lbtest.Nested",
        label=F.LABEL_REPEATED,
    )
    for name, number, kt, vt, vname in (
        ("m1", 54, F.TYPE_STRING, F.TYPE_BYTES, None),
        ("m2", 55, F.TYPE_INT32, F.TYPE_MESSAGE, ".lbtest.Nested"),
        ("m3", 56, F.TYPE_BOOL, F.TYPE_SINT64, None),
    ):
        entry = msg.nested_type.add(name=name.upper() + "Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=kt, label=F.LABEL_OPTIONAL)
        v = entry.field.add(name="value", number=2, type=vt, label=F.LABEL_OPTIONAL)
        if vname:
            v.type_name = vname
        msg.field.add(
            name=name,
            number=number,
            type=F.TYPE_MESSAGE,
            label=F.LABEL_REPEATED,
            type_name=f".lbtest.AllKinds.{name.upper()}Entry",
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fp)
    desc = pool.FindMessageTypeByName("lbtest.AllKinds")
    cls = message_factory.GetMessageClass(desc)
    # (the Arrow type of its Spark struct: tests/spark/test_schema.py holds them equal)
    return cls, message_type(desc)


ALL_KINDS, ALL_KINDS_TYPE = _all_kinds()


# The strategies of a draw, made once: hypothesis checks each strategy the first
# time it draws from it, so strategies made anew in every draw were checked in
# every draw (the two test_every_protobuf_kind tests: 20.5 CPU-s, now 18.2).
_INTS = st.integers(-(2**31), 2**31 - 1)
_VALUES = {
    1: _INTS,
    2: st.integers(0, 2**32 - 1),
    3: _INTS,
    4: st.integers(-(2**63), 2**63 - 1),
    5: st.integers(0, 2**64 - 1),
    6: st.integers(-(2**63), 2**63 - 1),
    7: st.booleans(),
    8: st.floats(width=32),
    9: st.floats(),
    10: st.integers(0, 2**32 - 1),
    11: _INTS,
    12: st.integers(0, 2**64 - 1),
    13: st.integers(-(2**63), 2**63 - 1),
    14: st.text(max_size=6),
    15: st.binary(max_size=6),
}
_REPEATED = {k: st.lists(strat, max_size=3) for k, strat in _VALUES.items()}
_COLOR, _COLORS = (
    st.sampled_from([0, 1, 2, 40, 7]),
    st.lists(st.sampled_from([0, 2, 40, 9]), max_size=3),
)
_NESTEDS, _SHORT_TEXT, _SHORT_BYTES = st.integers(0, 2), st.text(max_size=3), st.binary(max_size=3)
_M1_KEYS, _M2_KEYS = st.lists(_SHORT_TEXT, max_size=3), st.lists(_INTS, max_size=2)
_M3_KEYS, _M3_VALUE = st.lists(st.booleans(), max_size=2), st.integers(-5, 5)
_TAILED = st.integers(0, 3)
_TAIL = st.sampled_from(
    [
        b"\x08\x01",
        b"\xa2\x03\x02\x08\x01",
        b"\xb2\x03\x04\x08\x01\x08\x02",
        b"\xb2\x03\x02\x08\x01",
        b"\x72\x02\xc3\x28",
        b"\xaa\x06\x02\x01\x02",
        b"\x90\x03\x07",
        b"\xfd\x01\x00\x00\x00\x80",
        b"\xba\x03\x02\x08\x01",
        b"\x45\x00\x00\x00\x80",
    ]
)


@st.composite
def all_kinds_messages(draw: st.DrawFn) -> bytes:
    m = ALL_KINDS()  # type: ignore[operator]
    for k, strat in _VALUES.items():
        if draw(st.booleans()):
            setattr(m, f"s{k}", draw(strat))
        if draw(st.booleans()):
            setattr(m, f"o{k}", draw(strat))
        getattr(m, f"r{k}").extend(draw(_REPEATED[k]))  # r1 packed
    m.color = draw(_COLOR)
    m.colors.extend(draw(_COLORS))
    if draw(st.booleans()):
        m.nested.x = draw(_INTS)
    for _ in range(draw(_NESTEDS)):
        m.nesteds.add(x=draw(_INTS), s=draw(_SHORT_TEXT))
    for k in draw(_M1_KEYS):
        m.m1[k] = draw(_SHORT_BYTES)
    for k in draw(_M2_KEYS):
        m.m2[k].x = draw(_INTS)
    for k in draw(_M3_KEYS):
        m.m3[k] = draw(_M3_VALUE)
    wire = m.SerializeToString(deterministic=draw(st.booleans()))
    if draw(_TAILED):
        return wire
    return wire + draw(_TAIL)


def _assert_all_kinds(payloads: list[bytes], emit: bool, clean: bool) -> None:
    desc, typ = ALL_KINDS.DESCRIPTOR, ALL_KINDS_TYPE  # type: ignore[attr-defined]
    starts, ends, buf = binary_buffers(pa.array(payloads, pa.binary()))
    ref, ref_ok = wirescan.decode_structs(desc, typ, buf, starts, ends, emit, clean, native=False)
    got, got_ok = wirescan_native.decode_structs(desc, typ, buf, starts, ends, emit, clean)
    got.validate(full=True)
    round_trips(got)
    assert (ref_ok == got_ok).all(), [
        p.hex() for p, a, b in zip(payloads, ref_ok, got_ok) if a != b
    ]
    mask = pa.array(ref_ok)
    for i, (x, y) in enumerate(zip(ref.filter(mask).to_pylist(), got.filter(mask).to_pylist())):
        assert repr(x) == repr(y), payloads[np.flatnonzero(ref_ok)[i]].hex()


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    payloads=st.lists(all_kinds_messages(), min_size=1, max_size=6),
    emit=st.booleans(),
    clean=st.booleans(),
)
def test_every_protobuf_kind(payloads: list[bytes], emit: bool, clean: bool) -> None:
    """Values of every kind (zigzag, fixed widths, -0.0 and NaN floats,
    optional fields, enums past their names, nested messages, maps with
    message values, packed repeated numbers), and what is left to upb (a
    singular field twice, a map key twice or a map entry without its
    message value, invalid UTF-8, unknown fields under clean)."""
    _assert_all_kinds(payloads, emit, clean)


# Each numeric kind of AllKinds (field r<k>, number 100 + k): its elements' encoding.
_PACKED = {
    1: lambda v: varint(v & (2**64 - 1)),
    2: varint,
    3: lambda v: varint(((v << 1) ^ (v >> 31)) & (2**32 - 1)),
    4: lambda v: varint(v & (2**64 - 1)),
    5: varint,
    6: lambda v: varint(((v << 1) ^ (v >> 63)) & (2**64 - 1)),
    7: lambda v: varint(int(v)),
    8: lambda v: struct.pack("<f", v),
    9: lambda v: struct.pack("<d", v),
    10: lambda v: struct.pack("<I", v),
    11: lambda v: struct.pack("<i", v),
    12: lambda v: struct.pack("<Q", v),
    13: lambda v: struct.pack("<q", v),
}
_EDGES = {
    1: [0, -1, 2**31 - 1, -(2**31), 7],
    2: [0, 2**32 - 1, 300],
    3: [0, -1, 1, -(2**31)],
    4: [0, -1, 2**63 - 1, -(2**63)],
    5: [0, 2**64 - 1],
    6: [0, -1, 2**63 - 1, -(2**63)],
    7: [True, False, True],
    8: [0.0, -2.5, 1e30],
    9: [0.0, -0.0, 1e300, -3.25],
    10: [0, 2**32 - 1],
    11: [-(2**31), 5],
    12: [0, 2**64 - 1],
    13: [-(2**63), 9],
}


def _signed(k: int, v: object) -> object:
    """upb's value as the column holds it: unsigned numbers wrap as Java's (Spark's) do."""
    bits = {2: 32, 10: 32, 5: 64, 12: 64}.get(k)
    if bits and isinstance(v, int) and v >= 1 << (bits - 1):
        return v - (1 << bits)
    return v


def _packed(k: int, values: list) -> bytes:
    body = b"".join(_PACKED[k](v) for v in values)
    return varint((100 + k) << 3 | 2) + varint(len(body)) + body


@pytest.mark.parametrize("emit,clean", [(False, False), (True, True)])
def test_packed_repeated_numbers_are_read_as_upb_reads_them(emit: bool, clean: bool) -> None:
    """Every numeric kind packed (proto3's default encoding; Liftbridge's
    PauseStreamOp.partitions): both readers take the message and give upb's
    values; a packed run mixed with unpacked elements too. A run cut inside
    an element is left to upb by both (it refuses it)."""
    desc, typ = ALL_KINDS.DESCRIPTOR, ALL_KINDS_TYPE  # type: ignore[attr-defined]
    payloads, cut = [], []
    for k, values in _EDGES.items():
        payloads.append(_packed(k, values))
        payloads.append(_packed(k, values[:1]) + _packed(k, []) + _packed(k, values[1:]))
        whole = _packed(k, values)
        unpacked = ALL_KINDS(**{f"r{k}": values[:1]}).SerializeToString()  # type: ignore
        payloads.append(unpacked + whole)
        body = b"".join(_PACKED[k](v) for v in values)
        if k <= 7:  # a varint cut: its last byte still says "more"
            body = body[:-1] + bytes([body[-1] | 0x80])
        else:
            body = body[:-1]
        cut.append(varint((100 + k) << 3 | 2) + varint(len(body)) + body)
    _assert_all_kinds(payloads + cut, emit, clean)
    starts, ends, buf = binary_buffers(pa.array(payloads + cut, pa.binary()))
    got, ok = wirescan_native.decode_structs(desc, typ, buf, starts, ends, emit, clean)
    assert ok.tolist() == [True] * len(payloads) + [False] * len(cut)
    for p, row in zip(payloads, got.to_pylist()):
        upb = ALL_KINDS.FromString(p)  # type: ignore[attr-defined]
        for k in _EDGES:
            assert row[f"r{k}"] == [_signed(k, v) for v in getattr(upb, f"r{k}")], (k, p.hex())
    for p in cut:
        with pytest.raises(DecodeError):
            ALL_KINDS.FromString(p)  # type: ignore[attr-defined]


@pytest.mark.parametrize("emit,clean", [(False, False), (True, True)])
def test_utf8_at_every_position_of_an_ascii_string(emit: bool, clean: bool) -> None:
    """The C reader skips ASCII eight bytes at a time: a multi-byte sequence,
    valid or not, before, inside and after such a block is judged as the
    reference judges it (string field s14)."""
    seqs = [
        "é".encode(),
        "€".encode(),
        "𝄞".encode(),
        b"\xc3\x28",
        b"\xff",
        b"\x80",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xe2\x82",
        b"\xc0\xaf",
    ]
    payloads = []
    for before in range(18):
        for seq in seqs:
            for after in (0, 1, 7, 8, 9):
                text = b"a" * before + seq + b"z" * after
                payloads.append(b"\x72" + varint(len(text)) + text)
    _assert_all_kinds(payloads, emit, clean)
    starts, ends, buf = binary_buffers(pa.array(payloads, pa.binary()))
    _, ok = wirescan_native.decode_structs(
        ALL_KINDS.DESCRIPTOR,
        ALL_KINDS_TYPE,  # type: ignore
        buf,
        starts,
        ends,
        emit,
        clean,
    )
    assert 0.2 < ok.mean() < 0.5, ok.mean()  # three of the ten sequences are valid


@pytest.mark.parametrize("emit,clean", [(False, False), (True, False), (False, True)])
def test_field_numbers_either_side_of_the_lookup_table(emit: bool, clean: bool) -> None:
    """Numbers below 64 are found by table, the rest by search: declared
    and undeclared numbers around that edge (AllKinds declares 1-15, 50-56,
    101-115 and 201-215) are read, or refused under clean, as the
    reference reads them."""
    base = ALL_KINDS(s1=5, s14="x", color=1).SerializeToString()  # type: ignore[operator]
    payloads = [
        base + varint(n << 3) + b"\x01"
        for n in (
            1,
            2,
            15,
            16,
            31,
            49,
            50,
            56,
            57,
            62,
            63,
            64,
            65,
            100,
            101,
            115,
            116,
            200,
            201,
            215,
            216,
            1000,
            2**29 - 1,
        )
    ]
    _assert_all_kinds(payloads, emit, clean)


@pytest.mark.slow
def test_every_protobuf_kind_is_read_not_only_refused() -> None:
    """The messages above are mostly ones the readers take (else the test
    would compare refusals only)."""
    msgs: list[bytes] = []

    # 200 messages drawn as the tests above draw them (`.example()` 200 times
    # took 20 s: each call is a search of its own)
    @settings(
        max_examples=200,
        database=None,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(all_kinds_messages())
    def draw(msg: bytes) -> None:
        msgs.append(msg)

    draw()
    assert len(msgs) >= 200
    desc, typ = ALL_KINDS.DESCRIPTOR, ALL_KINDS_TYPE  # type: ignore[attr-defined]
    starts, ends, buf = binary_buffers(pa.array(msgs, pa.binary()))
    _, ok = wirescan_native.decode_structs(desc, typ, buf, starts, ends)
    assert ok.mean() > 0.15, ok.mean()  # about a third: map entries of empty messages go to upb


@pytest.mark.slow  # over half a second: not in make test-fast
def test_a_type_the_c_reader_is_not_compiled_for_is_read_by_numpy() -> None:
    """An enum whose numbers span more than 65,536 (no table of names): the
    C reader says Unsupported and decode_structs gives the numpy reader's."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from lbparse.columnar.schema import message_type

    F = descriptor_pb2.FieldDescriptorProto
    fp = descriptor_pb2.FileDescriptorProto(
        name="lbparse_test_sparse.proto", package="lbtest2", syntax="proto3"
    )
    enum = fp.enum_type.add(name="Sparse")
    enum.value.add(name="ZERO", number=0)
    enum.value.add(name="HUGE", number=1 << 20)
    msg = fp.message_type.add(name="M")
    msg.field.add(
        name="e", number=1, type=F.TYPE_ENUM, type_name=".lbtest2.Sparse", label=F.LABEL_OPTIONAL
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fp)
    desc = pool.FindMessageTypeByName("lbtest2.M")
    typ = message_type(desc)
    cls = message_factory.GetMessageClass(desc)
    payloads = [cls(e=v).SerializeToString() for v in (0, 1 << 20, 5)]
    with pytest.raises(wirescan_native.Unsupported):
        wirescan_native._program(desc, typ, False, False)
    starts, ends, buf = binary_buffers(pa.array(payloads, pa.binary()))
    with pytest.raises(wirescan_native.Unsupported):  # C says so; the dispatcher reads it in numpy
        wirescan_native.decode_structs(desc, typ, buf, starts, ends)
    got, ok = wirescan.decode_structs(desc, typ, buf, starts, ends)
    assert ok.all()
    assert got.to_pylist() == [{"e": None}, {"e": "HUGE"}, {"e": "UNKNOWN_ENUM_VALUE_Sparse_5"}]


def test_ranges_outside_the_buffer_are_refused() -> None:
    typ = arrow_output_schema().field(payload_columns()["proto.Ack"]).type
    desc = typed_payloads()["proto.Ack"].DESCRIPTOR
    buf = np.zeros(10, np.uint8)
    for s, e in ((0, 11), (-1, 2), (5, 4)):
        with pytest.raises(ValueError):
            wirescan_native.decode_structs(desc, typ, buf, np.array([s]), np.array([e]))


def test_the_decoder_uses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """wirescan.decode_structs runs the C reader when it is built."""
    calls = []
    real = wirescan_native.decode_structs
    monkeypatch.setattr(
        wirescan_native, "decode_structs", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    lbparse.decode_arrow([data(v) for v in VECTORS[:20]])
    assert calls


def test_a_column_is_the_callers_once_handed_over() -> None:
    """The column leaves C through the Arrow C data interface with its buffers
    (lbparse/_c/lb_arrow.h): the next batch the same Program decodes fills new
    buffers, never the ones an earlier column holds; a column decoded and never
    imported is freed by drop (make sanitize runs this under ASan)."""
    msg = lbparse.message_class("proto.Message")
    typ = arrow_output_schema().field(payload_columns()["proto.Message"]).type
    desc = typed_payloads()["proto.Message"].DESCRIPTOR

    def batch(stream: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raw = [
            msg(
                stream=f"{stream}{i}", value=bytes([i]) * 40, headers={"h": b"v" * i}, partition=i
            ).SerializeToString()
            for i in range(50)
        ]
        ends = np.cumsum([len(r) for r in raw])
        return np.frombuffer(b"".join(raw), np.uint8), ends - [len(r) for r in raw], ends

    first, ok = wirescan_native.decode_structs(desc, typ, *batch("a"))
    want = first.to_pylist()
    assert ok.all() and want[7]["stream"] == "a7" and want[7]["headers"] == [("h", b"v" * 7)]
    for stream in ("b", "c"):  # the same Program, twice more
        wirescan_native.decode_structs(desc, typ, *batch(stream))
    assert first.to_pylist() == want
    program = wirescan_native._program(desc, typ, False, False)
    for _ in range(3):  # decoded, never imported: freed whole
        _, address = program.decode(*batch("d"))
        wirescan_native._structs.drop(address)


def test_a_program_is_the_one_of_the_arrow_type_asked_for() -> None:
    """Programs are held per message type and options, beside the Arrow type
    they were compiled for (wirescan_native._program): one message type
    asked for with another struct type (fewer fields, another order) is read
    into that type, and the first type's program is made again, never
    confused with it."""
    msg = lbparse.message_class("proto.Message")
    full = arrow_output_schema().field(payload_columns()["proto.Message"]).type
    desc = typed_payloads()["proto.Message"].DESCRIPTOR
    narrow = pa.struct([full.field("partition"), full.field("stream")])
    raw = [msg(stream=f"s{i}", partition=i, value=b"v").SerializeToString() for i in range(5)]
    starts, ends, buf = binary_buffers(pa.array(raw, pa.binary()))
    for typ in (full, narrow, full, narrow):
        got, ok = wirescan_native.decode_structs(desc, typ, buf, starts, ends)
        assert ok.all() and got.type == typ
        want, _ = wirescan.decode_structs(desc, typ, buf, starts, ends, native=False)
        assert got.to_pylist() == want.to_pylist()
