"""The pipeline's decoder against lbparse itself, without Spark.

The batch decoder must give what `lbparse.decode` gives, row by row, on
every layout (the v0 fast path included); the vectorized protobuf reader
must give what upb gives wherever it claims a message, and never claim one
upb refuses.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from crc32c import crc32c
from generations import legacy_capture, v0_capture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import REPLICATION_RESPONSES, messages
from support.shared import LIFTBRIDGE

import lbparse
from lbparse.capture import CaptureReader
from lbparse.codec import flatbuf, jsonform
from lbparse.codec.commitlog import encode_replication_response, parse_replication_response
from lbparse.codec.dispatch import DECODERS
from lbparse.codec.generation import NEWEST
from lbparse.codec.limits import DEFAULT
from lbparse.codec.payloads import REPLICATION_RESPONSE, fits_cleanly
from lbparse.columnar.columns import ReplicationResponseBuilder, builder_for
from lbparse.columnar.commitscan import decode_replication
from lbparse.columnar.decode_arrow import (
    BatchDecoder,
    DecodeOptions,
    _flatbuffer_like,
    decisive_reason,
)
from lbparse.columnar.sources import SourceOptions
from lbparse.columnar.wirescan import decode_structs, slices
from lbparse.pipeline.input_plan import plan
from lbparse.pipeline.spark_schema import (
    arrow_output_schema,
    arrow_record_schema,
    column_for,
    typed_payloads,
)
from lbparse.pipeline.tasks import TaskOptions, decode_unit, new_counts

VECTORS = [
    json.loads(line)
    for line in (Path(__file__).parent.parent / "data" / "vectors.jsonl").read_text().splitlines()
    if line
]
PROTO_TYPES = [p for p, cls in typed_payloads().items() if cls is not None]


def _damaged(seed: int = 5) -> list[bytes]:
    """The vectors, and copies with a byte changed or the end cut off."""
    rnd = random.Random(seed)
    out = [bytes.fromhex(v["hex"]) for v in VECTORS]
    for p in list(out):
        for _ in range(6):
            if p:
                b = bytearray(p)
                b[rnd.randrange(len(b))] = rnd.randrange(256)
                out.append(bytes(b))
            out.append(p[: rnd.randrange(len(p) + 1)])
    return out


PAYLOADS = _damaged()


def _batch(payloads: list[bytes | None]) -> pa.RecordBatch:
    schema = arrow_record_schema()
    n = len(payloads)
    cols = {f.name: pa.nulls(n, f.type) for f in schema}
    cols["source"] = pa.array(["test"] * n)
    cols["position"] = pa.array(range(n), pa.int64())
    cols["payload"] = pa.array(payloads, pa.binary())
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


def _norm(v: Any) -> Any:
    """Maps come back as lists of pairs; their order is not part of the data."""
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and isinstance(v[0], tuple):
            return sorted(v)
        return [_norm(x) for x in v]
    return v


@pytest.mark.slow
@pytest.mark.parametrize("layout", sorted(DECODERS))
@pytest.mark.parametrize("lenient", [False, True])
def test_batch_decoder_gives_what_lbparse_decode_gives(layout: str, lenient: bool) -> None:
    options = DecodeOptions(layout=layout, lenient=lenient)
    try:
        lbparse.decode(b"", layout, lenient=lenient)
    except lbparse.EnvelopeError:
        options.check()
    except ValueError as exc:  # options the library refuses: refused before any work
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            options.check()
        return
    out = BatchDecoder(DecodeOptions(layout=layout, lenient=lenient))(_batch(PAYLOADS))
    cols = {name: out.column(name).to_pylist() for name in out.schema.names}
    schema = arrow_output_schema()
    decoded = 0
    for i, p in enumerate(PAYLOADS):
        try:
            env = lbparse.decode(p, layout, lenient=lenient)
        except lbparse.EnvelopeError as exc:
            assert (cols["error_kind"][i], cols["error_message"][i]) == (exc.kind, exc.message)
            # the layout decoded as; auto's error rows found none ("undetermined")
            assert cols["layout"][i] == ("undetermined" if layout == "auto" else layout)
            # nothing was decided: no confidence, ambiguity or reason
            assert (
                cols["layout_confidence"][i],
                cols["layout_ambiguous"][i],
                cols["layout_reason"][i],
            ) == (None, None, None)
            continue
        decoded += 1
        got = tuple(
            cols[k][i]
            for k in (
                "error_kind",
                "layout",
                "version",
                "header_len",
                "flags",
                "crc32c",
                "msg_type",
                "msg_type_name",
                "payload_type",
            )
        )
        assert got == (
            None,
            env.layout,
            env.version,
            env.header_len,
            env.flags,
            env.crc32c,
            env.msg_type,
            env.msg_type_name,
            env.payload_type,
        ), i
        assert tuple(cols["warnings"][i] or ()) == tuple(env.warnings)
        assert (
            cols["layout_confidence"][i],
            cols["layout_ambiguous"][i],
            cols["layout_reason"][i],
        ) == (env.confidence, env.ambiguous, decisive_reason(env.layout, env.reasons)), i
        cls = typed_payloads().get(env.payload_type)
        if (
            isinstance(env.message, cls or lbparse.ReplicationResponse)
            and env.payload_type in typed_payloads()
        ):
            col = column_for(env.payload_type)
            want = (
                builder_for(env.payload_type, schema.field(col).type, cls, options.emit_defaults)
                .build([env.message])
                .to_pylist()[0]
            )
            assert _norm(cols[col][i]) == _norm(want), i
        elif not isinstance(env.message, bytes):
            # lbparse's JSON: 64-bit integers as decimal strings
            assert json.loads(cols["payload_json"][i]) == jsonform.to_json_value(
                env.to_json_dict()["payload_json"]
            )
    assert decoded > 0


def test_fast_path_and_per_row_path_agree() -> None:
    """v0 strict takes the numpy path; lenient v0 goes row by row: same rows decoded alike."""
    fast = BatchDecoder(DecodeOptions(layout="v0"))(_batch(PAYLOADS)).to_pylist()
    slow = BatchDecoder(DecodeOptions(layout="v0", lenient=True))(_batch(PAYLOADS)).to_pylist()
    same = 0
    for f, s in zip(fast, slow):
        if f["error_kind"] is None and not s["warnings"]:
            assert _norm(f) == _norm(s)
            same += 1
    assert same > 100


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["v0", "auto"])
def test_the_c_kernels_and_their_python_fallbacks_decode_alike(
    layout: str, monkeypatch: Any
) -> None:
    """The batch CRC and the protobuf scan in C (setup.py builds them when it
    can) or in Python (a pure install, a --py-files zip): the same rows."""
    from lbparse.columnar import crc, wirescan

    payloads = PAYLOADS + _damaged(seed=11)
    built = BatchDecoder(DecodeOptions(layout=layout))(_batch(payloads)).to_pylist()
    monkeypatch.setattr(wirescan, "_kernels", None)
    monkeypatch.setattr(crc, "_native", None)
    pure = BatchDecoder(DecodeOptions(layout=layout))(_batch(payloads)).to_pylist()
    assert [_norm(r) for r in pure] == [_norm(r) for r in built]


def _v0(byte7: int, payload: bytes, crc: bool) -> bytes:
    """A strict v0 envelope around any payload bytes."""
    if crc:
        return (
            bytes.fromhex("b90e43b4000c01")
            + bytes([byte7])
            + crc32c(payload).to_bytes(4, "big")
            + payload
        )
    return bytes.fromhex("b90e43b4000800") + bytes([byte7]) + payload


UNKNOWN_FIELD = bytes.fromhex("b806 2a")  # field 99, varint 42
# Payloads a strict v0 header may carry that are not clean, or clean for
# another layout as well: what the auto fast path must tell apart.
ACK = lbparse.message_class("proto.Ack")(
    stream="s",
    partitionSubject="foo.1",
    msgSubject="foo",
    offset=10,
    ackInbox="acks",
    correlationId="c1",
    ackPolicy=1,
).SerializeToString()
PUBLISH = lbparse.message_class("proto.Message")(
    offset=7, value=b"v", stream="orders", headers={"a": b"b"}
).SerializeToString()
INFO = lbparse.message_class("protocol.ServerInfoResponse")(
    id="s1", host="h", port=9292
).SerializeToString()


def _flat_ack_in_unknown_fields() -> bytes:
    """Bytes that are a clean FlatBuffers Ack and a protobuf proto.Ack made
    of two unknown fields: the root offset 602 (5a 02 00 00) reads as field
    11 of two bytes, then field 12 holds the whole FlatBuffer, moved (its
    offsets are relative) to put its root table at 602."""
    flat = flatbuf.build_table(flatbuf.FlatTable("proto.Ack", stream="orders", offset=5))
    pad = 602 - int.from_bytes(flat[:4], "little") - 7  # the prelude: 4 + tag + 2-byte length
    length = pad + len(flat)
    assert 128 <= length < 1 << 14
    return bytes([0x5A, 0x02, 0, 0, 0x62, length & 0x7F | 0x80, length >> 7]) + bytes(pad) + flat


def _flat_publish_in_a_clean_message() -> bytes:
    """Bytes that are a clean protobuf proto.Message (key b"\\0\\0", then a
    value) and a well-formed FlatBuffers PublishRequest: the root offset 530
    (12 02 00 00) reads as the key, and the value holds the FlatBuffer,
    moved to put its root table at 530. v0, legacy and both FlatBuffers
    layouts are clean candidates: auto's v0 is ambiguous, confidence 0.25."""
    flat = flatbuf.build_table(
        flatbuf.FlatTable("proto.PublishRequest", stream="orders", value=b"v")
    )
    content = bytes(530 - int.from_bytes(flat[:4], "little") - 7) + flat
    assert 128 <= len(content) < 1 << 14
    return (
        bytes.fromhex("12020000 1a")
        + bytes([len(content) & 0x7F | 0x80, len(content) >> 7])
        + content
    )


CRAFTED = [
    (1, _flat_ack_in_unknown_fields()),  # FlatBuffers' clean Ack, v0's unclean Ack
    (0, ACK),  # legacy's clean Ack, v0's unclean Publish
    (0, ACK + UNKNOWN_FIELD),  # clean for nobody: v0
    (0, bytes.fromhex("2005")),  # clean Publish and clean Ack: v0, ambiguous
    (0, PUBLISH + UNKNOWN_FIELD),  # an unknown field number
    (0, bytes.fromhex("09") + bytes(8) + PUBLISH),  # offset (varint) as fixed64
    (0, bytes.fromhex("1201") + PUBLISH),  # key, cut short
    (1, ACK + UNKNOWN_FIELD),
    (1, bytes.fromhex("0d01020304") + ACK),  # stream (string) as fixed32
    (1, PUBLISH),
    (11, INFO + UNKNOWN_FIELD),  # MsgTypes no other layout claims: v0, clean or not
    (11, bytes.fromhex("1805") + INFO),  # host (string) as a varint
    (2, PUBLISH),
    (0, _flat_publish_in_a_clean_message()),  # clean for all four: v0, ambiguous
]


def _auto_payloads() -> list[bytes]:
    out = list(PAYLOADS)
    for byte7, payload in CRAFTED:
        out += [_v0(byte7, payload, crc) for crc in (False, True)]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("verify_crc", [True, False])
@pytest.mark.parametrize("emit_defaults", [False, True])
def test_auto_fast_path_gives_what_the_per_row_path_gives(
    verify_crc: bool, emit_defaults: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """layout=auto takes strict v0 rows whose answer is v0's in numpy; every
    row must come out as lbparse.decode(b, "auto") row by row makes it."""
    payloads = _auto_payloads()
    # The crafted rows have teeth: v0 decodes these, auto says otherwise.
    for (byte7, payload), other in zip(CRAFTED, ("flatbuffers", "legacy")):
        assert lbparse.decode(_v0(byte7, payload, True)).msg_type == byte7
        assert lbparse.decode(_v0(byte7, payload, True), "auto").layout == other
    options = DecodeOptions(layout="auto", verify_crc=verify_crc, emit_defaults=emit_defaults)
    slow = BatchDecoder(options)
    slow.fast = False
    per_row: list[int] = []
    original = BatchDecoder._per_row

    def counting(self: BatchDecoder, rows: Any, idx: np.ndarray, *args: Any) -> None:
        per_row.append(len(idx))
        original(self, rows, idx, *args)

    monkeypatch.setattr(BatchDecoder, "_per_row", counting)
    want = slow(_batch(payloads)).to_pylist()
    assert per_row == [len(payloads)]
    fast = BatchDecoder(options)
    assert fast.fast
    got = fast(_batch(payloads)).to_pylist()
    assert per_row[1] < len(payloads) - 200  # the fast path took the well-formed rows
    for i, (g, w) in enumerate(zip(got, want)):
        assert _norm(g) == _norm(w), (i, payloads[i].hex())


def test_the_crafted_publish_is_clean_for_every_enveloped_layout() -> None:
    env = lbparse.decode(_v0(0, _flat_publish_in_a_clean_message(), False), "auto")
    assert (env.layout, env.ambiguous, env.confidence) == ("v0", True, 0.25)
    assert len(env.layout_candidates) == 4


@pytest.mark.slow
@given(st.lists(st.binary(max_size=40), max_size=30), st.data())
@settings(max_examples=300, deadline=None)
def test_flatbuffer_like_is_flatbuf_plausible(payloads: list[bytes], data: st.DataObject) -> None:
    """The numpy look at root offset and vtable answers as lbparse.codec.flatbuf.plausible."""
    # Small root offsets: random bytes rarely point inside a 40-byte buffer.
    payloads = [
        data.draw(st.integers(0, 40)).to_bytes(4, "little") + p if data.draw(st.booleans()) else p
        for p in payloads
    ]
    buf = b"".join(payloads)
    ends = np.cumsum([len(p) for p in payloads], dtype=np.int64)
    starts = ends - np.array([len(p) for p in payloads], np.int64)
    arr = np.frombuffer(buf, np.uint8) if buf else np.zeros(1, np.uint8)
    assert _flatbuffer_like(arr, starts, ends).tolist() == [flatbuf.plausible(p) for p in payloads]


@pytest.mark.parametrize(
    "hexed,layout,reason",
    [
        (
            "b90e43b4000800" + "0b" + "0a027331",
            "v0",
            "v0: MsgType 11 ServerInfoResponse in its table; every protobuf field of the payload "
            "fits protocol.ServerInfoResponse",
        ),
        ("68656c6c6f", "plain", "no envelope magic and no LIFT message: plain NATS payload"),
    ],
)
def test_the_decisive_reason_names_the_answer(hexed: str, layout: str, reason: str) -> None:
    env = lbparse.decode(bytes.fromhex(hexed), "auto")
    assert env.layout == layout
    assert decisive_reason(env.layout, env.reasons) == reason
    assert decisive_reason("v0", ()) is None
    # the capture's context, when it spoke, decided
    assert (
        decisive_reason("legacy", ("v0: ...", "legacy: ...", "context: x: legacy"))
        == "context: x: legacy"
    )


@pytest.mark.slow
@pytest.mark.parametrize("batch_rows", [3, 1 << 16])
@pytest.mark.parametrize("which", ["legacy", "v0", "sample"])
def test_rows_the_context_decides_say_how_it_decided(
    tmp_path: Path, which: str, batch_rows: int
) -> None:
    """Auto finds Publishes (and legacy Messages) ambiguous, v0 or legacy; the
    capture's proof decides them (legacy's Acks; the MsgTypes only v0 has),
    as `lbparse capture` decides them when the row is decoded again (legacy):
    the same layout, confidence and no ambiguity, and a reason saying the
    context chose. A row whose layout the proof keeps (v0) keeps auto's own
    answer (context._decide: the same rows however a big capture is cut into
    ranges, test_big_capture). Whatever the batches:
    so a row the capture reader decided by a later proof (it holds a
    capture's first messages for it) and that keeps its layout keeps auto's
    own answer (context._settle)."""
    if which == "sample":
        path = LIFTBRIDGE / "samples" / "short.pcapng"
        if not path.exists():
            pytest.skip(f"shared material missing: {path}")
    else:
        path = (legacy_capture if which == "legacy" else v0_capture)(tmp_path / "c.pcap")
    want = [r.envelope for r in CaptureReader(path) if r.envelope is not None]
    # The pipeline's tasks: batches held until the unit's first proof, then decided
    batch_rows = max(batch_rows, 100) if which == "sample" else batch_rows
    [unit] = plan([str(path)], SourceOptions(batch_rows=batch_rows))
    out = [
        r
        for d in decode_unit(
            unit,
            TaskOptions(DecodeOptions(layout="auto"), SourceOptions(batch_rows=batch_rows)),
            new_counts(),
        )
        for r in d.to_batch().to_pylist()
        if r["error_kind"] is None
    ]
    assert len(out) == len(want)
    resolved = kept = 0
    for position, (env, row) in enumerate(zip(want, out)):
        later = re.search(r"message (\d+)\): v0$", env.reasons[-1])
        if later and int(later.group(1)) > position:
            env = lbparse.decode(row["payload"], "auto")
        if env.reasons[-1].startswith("context: ") and env.layout == NEWEST:
            # kept its layout: the pipeline keeps auto's own answer (context._decide:
            # a big capture's ranges are read apart, and must give the same rows)
            env = lbparse.decode(row["payload"], "auto")
            assert env.layout == NEWEST and row["layout_reason"] == decisive_reason(
                env.layout, env.reasons
            ), position
            kept += 1
        assert (row["layout"], row["layout_confidence"], row["layout_ambiguous"]) == (
            env.layout,
            env.confidence,
            env.ambiguous,
        ), position
        if env.reasons[-1].startswith("context: "):
            resolved += 1
            assert re.fullmatch(
                rf"context: this \w+ carried envelopes only it reads: "
                rf"{env.layout}",
                row["layout_reason"],
            ), row["layout_reason"]
    assert (resolved, kept) >= (3, 0) if which == "legacy" else kept >= 3


@pytest.mark.parametrize("layout", ["v0", "auto"])
def test_payloads_over_max_payload_are_lbparse_decodes_error(layout: str) -> None:
    """The fast paths leave a payload over the default max_payload to lbparse.decode."""
    big = lbparse.message_class("proto.Message")(value=b"x" * DEFAULT.max_payload)
    payloads = [lbparse.encode(big), lbparse.encode(big, crc=True), _v0(0, PUBLISH, True)]
    out = BatchDecoder(DecodeOptions(layout=layout))(_batch(payloads))
    kinds = out.column("error_kind").to_pylist()
    for p, kind in zip(payloads, kinds):
        try:
            lbparse.decode(p, layout)
        except lbparse.EnvelopeError as exc:
            assert kind == exc.kind == "bad_payload"
        else:
            assert kind is None


def test_null_payloads_and_preset_problems_pass_through() -> None:
    batch = _batch([None, bytes.fromhex(VECTORS[0]["hex"])])
    kinds = batch.column("error_kind").to_pylist()
    out = BatchDecoder(DecodeOptions())(batch).to_pylist()
    assert out[0]["error_kind"] == "input:null_payload" and kinds == [None, None]


def _scan_vs_upb(ptype: str, wires: list[bytes]) -> np.ndarray:
    cls = typed_payloads()[ptype]
    typ = arrow_output_schema().field(column_for(ptype)).type
    data = np.frombuffer(b"".join(wires) or b"\0", np.uint8)
    ends = np.cumsum([len(w) for w in wires]).astype(np.int64)
    starts = ends - np.array([len(w) for w in wires], np.int64)
    arr, ok = decode_structs(cls.DESCRIPTOR, typ, data, starts, ends)
    assert arr.type == typ and len(arr) == len(wires)
    # clean: what it claims is what upb parses cleanly (fits_cleanly).
    clean = decode_structs(cls.DESCRIPTOR, typ, data, starts, ends, clean=True)[1]
    assert not (clean & ~ok).any()
    for w in (w for w, c in zip(wires, clean) if c):
        assert fits_cleanly(cls.FromString(w)), (ptype, w.hex())
    build = builder_for(ptype, typ, cls).build
    got = arr.to_pylist()
    for i, w in enumerate(wires):
        try:
            m = cls.FromString(w)
        except Exception:
            assert not ok[i], (ptype, w.hex())
            continue
        if ok[i]:
            assert _norm(got[i]) == _norm(build([m]).to_pylist()[0]), (ptype, w.hex())
        else:
            assert got[i] is None
    return ok


@pytest.mark.parametrize("ordered", [True, False])
def test_slices_are_the_byte_ranges(ordered: bool) -> None:
    """In order (Arrow's take over the buffer) or not (numpy's gather): the same column."""
    rnd = random.Random(3)
    data = np.frombuffer(bytes(rnd.randrange(256) for _ in range(4000)), np.uint8)
    lens = np.array([rnd.choice((0, 1, 5, 30)) for _ in range(60)], np.int64)
    starts = (
        np.cumsum(lens + 3) - lens
        if ordered
        else np.array([rnd.randrange(3900) for _ in lens], np.int64)
    )
    null = lens == 0
    got = slices(data, starts, lens, null)
    want = [None if n else data[s : s + ln].tobytes() for s, ln, n in zip(starts, lens, null)]
    assert got.type == pa.binary() and got.to_pylist() == want
    assert slices(data, starts, lens).to_pylist() == [
        data[s : s + ln].tobytes() for s, ln in zip(starts, lens)
    ]


def _has_packed(m: Any) -> bool:
    """Whether a message (or one inside it) has a repeated number: encoders pack those."""
    for fd, value in m.ListFields():
        if fd.message_type is not None:
            if not fd.message_type.GetOptions().map_entry:
                if any(_has_packed(s) for s in (value if fd.is_repeated else [value])):
                    return True
        elif fd.is_repeated and fd.type not in (fd.TYPE_STRING, fd.TYPE_BYTES):
            return True
    return False


@pytest.mark.slow  # a long property sweep (whole random messages through upb)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_scanner_equals_upb_on_random_messages(data: st.DataObject) -> None:
    for ptype in PROTO_TYPES:
        cls = typed_payloads()[ptype]
        msgs = data.draw(st.lists(messages(cls.DESCRIPTOR), min_size=1, max_size=4))
        ok = _scan_vs_upb(ptype, [m.SerializeToString() for m in msgs])
        for m, good in zip(msgs, ok):
            assert good or _has_packed(m), m  # all else is the scanner's to do


@pytest.mark.slow  # a long property sweep (whole random messages through upb)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_scanner_never_claims_what_upb_refuses(data: st.DataObject) -> None:
    for ptype in PROTO_TYPES:
        cls = typed_payloads()[ptype]
        wires = []
        for m in data.draw(st.lists(messages(cls.DESCRIPTOR), min_size=1, max_size=3)):
            w = m.SerializeToString() or b"\x08\x01"
            at = data.draw(st.integers(0, len(w) - 1))
            wires += [
                w[:at] + bytes([data.draw(st.integers(0, 255))]) + w[at + 1 :],  # a byte changed
                w[:at],  # cut short
                w + data.draw(st.binary(min_size=1, max_size=3)),
            ]  # trailing bytes
        _scan_vs_upb(ptype, wires)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(REPLICATION_RESPONSES, min_size=1, max_size=4), st.data())
def test_replication_reader_equals_lbparse(rrs: list[Any], data: st.DataObject) -> None:
    """The vectorized commit-log reader: lbparse.codec.commitlog's values, or it
    leaves the payload."""
    typ = arrow_output_schema().field(column_for(REPLICATION_RESPONSE)).type
    wires = []
    for rr in rrs:
        w = encode_replication_response(rr)
        at = data.draw(st.integers(0, len(w) - 1))
        wires += [
            w,
            w[:at] + bytes([data.draw(st.integers(0, 255))]) + w[at + 1 :],
            w[:at],
            w + data.draw(st.binary(min_size=1, max_size=3)),
        ]
    buf = np.frombuffer(b"".join(wires) + b"\0", np.uint8)
    ends = np.cumsum([len(w) for w in wires]).astype(np.int64)
    arr, ok = decode_replication(typ, buf, ends - np.array([len(w) for w in wires]), ends)
    got = arr.to_pylist()
    build = ReplicationResponseBuilder(typ).build
    for i, w in enumerate(wires):
        try:
            rr = parse_replication_response(w)
        except lbparse.EnvelopeError:
            assert not ok[i]
            continue
        assert got[i] == (build([rr]).to_pylist()[0] if ok[i] else None)
    assert ok[0]  # what the encoder writes is the reader's to do
