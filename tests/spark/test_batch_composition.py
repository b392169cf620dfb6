"""No batch composition can misalign or fail the pipeline's batch decoder.

Whatever payloads a batch holds (reference vectors, real payloads of a
Liftbridge cluster, damaged copies, payloads crafted to be legal but
unusual), in whatever order and however the input is cut into batches,
each row the decoder gives is the row `lbparse.decode` gives for that
payload alone, errors included, and decoding never raises. The decoder
runs `strict` here: an exception inside a vectorized reader, which in
production sends the batch's rows to the per-row path instead, fails the
test.

The reference row is built from `lbparse.decode` and the upb-based column
builders (`columns.py`) only; nothing of the batch decoder is used.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.shared import LIFTBRIDGE
from support.wire import read_varint, varint

import lbparse
from lbparse.codec import jsonform
from lbparse.codec.commitlog import CommitLogEntry, ReplicationResponse, encode_replication_response
from lbparse.codec.payloads import REPLICATION_RESPONSE
from lbparse.columnar.columns import builder_for
from lbparse.columnar.decode_arrow import BatchDecoder, DecodeOptions, decisive_reason
from lbparse.pipeline.spark_schema import (
    arrow_output_schema,
    arrow_record_schema,
    column_for,
    typed_payloads,
)

VECTORS = [
    json.loads(line)
    for line in (Path(__file__).parent.parent / "data" / "vectors.jsonl").read_text().splitlines()
    if line
]
MAGIC = bytes.fromhex("b90e43b4")


# -- payloads --------------------------------------------------------------------


def v0(byte7: int, payload: bytes, crc: bool = False) -> bytes:
    if crc:
        return MAGIC + bytes([0, 12, 1, byte7]) + crc32c(payload).to_bytes(4, "big") + payload
    return MAGIC + bytes([0, 8, 0, byte7]) + payload


def fields_of(wire: bytes) -> list[tuple[int, int, int, int]] | None:
    """Top-level fields of a well-formed message: (start, end of tag, start of
    value, end); None when the bytes are not that simple."""
    out, pos = [], 0
    while pos < len(wire):
        start = pos
        if (got := read_varint(wire, pos)) is None:
            return None
        tag, tag_end = got
        wt = tag & 7
        if wt in (0, 2):
            if (got := read_varint(wire, tag_end)) is None:
                return None
            n, after = got
            value, pos = (tag_end, after) if wt == 0 else (after, after + n)
        elif wt in (1, 5):
            value, pos = tag_end, tag_end + (8 if wt == 1 else 4)
        else:
            return None
        if pos > len(wire):
            return None
        out.append((start, tag_end, value, pos))
    return out


def mutations(wire: bytes) -> list[bytes]:
    """Copies of a message, legal or not, that encoders never write: a field
    twice (a singular message field is merged, a scalar's last value wins),
    tag and length varints of 5 bytes (legal) and 6 (not), an unknown field,
    a length varint of 10 bytes."""
    fs = fields_of(wire)
    if not fs:
        return []
    out = []
    for start, tag_end, value, end in fs:
        tag = int.from_bytes(wire[start:tag_end], "little")  # only used when one byte
        field_bytes = wire[start:end]
        out.append(wire + field_bytes)  # the field again at the end
        out.append(wire[:end] + field_bytes + wire[end:])  # twice in a row
        if tag_end - start == 1:
            for width in (5, 6):
                out.append(wire[:start] + varint(tag, width) + wire[tag_end:])
        if value > tag_end:  # length-delimited: re-encode its length
            n = end - value
            for width in (5, 6, 10):
                out.append(wire[:tag_end] + varint(n, width) + wire[value:])
    out.append(wire + bytes.fromhex("b8062a"))  # field 99, varint 42
    return out


def _vector_envelopes() -> list[bytes]:
    return [bytes.fromhex(v["hex"]) for v in VECTORS]


def _damaged(payloads: list[bytes], seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for p in payloads:
        for _ in range(2):
            if p:
                b = bytearray(p)
                b[rnd.randrange(len(b))] = rnd.randrange(256)
                out.append(bytes(b))
            out.append(p[: rnd.randrange(len(p) + 1)])
    return out


def _crafted() -> list[bytes]:
    out = [bytes.fromhex("b90e43b400080009120412024131120412024132")]  # issue #19's example
    for env in _vector_envelopes():
        try:
            e = lbparse.decode(env)
        except lbparse.EnvelopeError:
            continue
        if e.payload_type in typed_payloads() and e.payload_type != REPLICATION_RESPONSE:
            for m in mutations(e.payload):
                out += [v0(e.msg_type, m), v0(e.msg_type, m, crc=True)]
    # ReplicationResponses: header-only (what a caught-up follower gets),
    # empty, too short, with entries, with bytes after them.
    entries = [
        CommitLogEntry(
            10 + j,
            1_763_700_000_000_000_000 + j,
            3,
            key=b"k",
            value=b"v" * j,
            headers=[("subject", b"orders")],
        )
        for j in range(3)
    ]
    rr = encode_replication_response(ReplicationResponse(3, 12, entries))
    for payload in (
        bytes(16),
        b"",
        bytes(7),
        bytes(15),
        (5).to_bytes(8, "big") * 2,
        rr,
        rr + b"\x00",
        rr[:-3],
    ):
        out += [v0(3, payload), v0(3, payload, crc=True)]
    return out


@lru_cache(maxsize=1)
def real_payloads() -> tuple[bytes, ...]:
    """Every distinct payload of the shared real cluster's capture (none where missing)."""
    path = LIFTBRIDGE / "samples" / "short.pcapng"
    if not path.exists():
        return ()
    from lbparse.capture import CaptureReader

    seen: dict[bytes, None] = {}
    for rec in CaptureReader(str(path), layout="v0"):
        seen.setdefault(bytes(rec.payload), None)
    return tuple(seen)


@lru_cache(maxsize=1)
def pool() -> tuple[bytes, ...]:
    base = _vector_envelopes() + _crafted() + list(real_payloads())
    return tuple(dict.fromkeys(base + _damaged(base[:400], 7)))


# -- the reference row -------------------------------------------------------------

FIXED = (
    "layout",
    "layout_confidence",
    "layout_ambiguous",
    "layout_reason",
    "version",
    "header_len",
    "flags",
    "crc32c",
    "crc_ok",
    "msg_type",
    "msg_type_name",
    "payload_type",
    "error_kind",
    "error_message",
    "warnings",
    "payload_json",
)


def _norm(v: Any) -> Any:
    """Maps come back as lists of pairs; their order is not part of the data."""
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and isinstance(v[0], tuple):
            return sorted(v)
        return [_norm(x) for x in v]
    return v


def reference_row(p: bytes, o: DecodeOptions) -> dict[str, Any]:
    """The row of `p` from lbparse.decode alone: header, error, payload columns."""
    schema = arrow_output_schema()
    row: dict[str, Any] = dict.fromkeys(FIXED)
    try:
        env = lbparse.decode(p, o.layout, verify_crc=o.verify_crc, lenient=o.lenient)
    except lbparse.EnvelopeError as exc:
        # auto found no layout: the row says so ("undetermined"), never "auto"
        row.update(
            layout="undetermined" if o.layout == "auto" else o.layout,
            error_kind=exc.kind,
            error_message=exc.message,
        )
        # The header as far as it was read: from the bytes, past the magic.
        if exc.kind not in ("too_short", "bad_magic") and len(p) >= 8 and p[:4] == MAGIC:
            row.update(version=p[4], header_len=p[5], flags=p[6])
            if p[6] & 1 and len(p) >= 12:
                row["crc32c"] = int.from_bytes(p[8:12], "big")
                if p[5] <= len(p):
                    row["crc_ok"] = crc32c(p[p[5] :]) == row["crc32c"]
            if exc.kind == "bad_payload" and o.layout != "auto":  # auto has no one header
                h = lbparse.decode_header(p, o.layout, lenient=o.lenient)
                row.update(
                    msg_type=h.msg_type, msg_type_name=h.msg_type_name, payload_type=h.payload_type
                )
        return row
    row.update(
        layout=env.layout,
        version=env.version,
        header_len=env.header_len,
        flags=env.flags,
        crc32c=env.crc32c,
        msg_type=env.msg_type,
        msg_type_name=env.msg_type_name,
        payload_type=env.payload_type,
        warnings=list(env.warnings) or None,
        layout_confidence=env.confidence,
        layout_ambiguous=env.ambiguous,
        layout_reason=decisive_reason(env.layout, env.reasons),
    )
    if env.crc32c is not None:
        row["crc_ok"] = crc32c(env.payload) == env.crc32c
    cls = typed_payloads().get(env.payload_type)
    if env.payload_type in typed_payloads() and isinstance(
        env.message, cls or lbparse.ReplicationResponse
    ):
        col = column_for(env.payload_type)
        row[col] = (
            builder_for(env.payload_type, schema.field(col).type, cls, o.emit_defaults)
            .build([env.message])
            .to_pylist()[0]
        )
    elif env.message is not None and not isinstance(env.message, bytes):
        # As lbparse's JSON writes it: 64-bit integers as decimal strings.
        row["payload_json"] = jsonform.to_json_value(env.to_json_dict()["payload_json"])
    return row


@lru_cache(maxsize=200_000)
def _reference(p: bytes, o: DecodeOptions) -> str:
    return json.dumps(_norm(reference_row(p, o)), sort_keys=True, default=repr)


def batch(payloads: list[bytes]) -> pa.RecordBatch:
    schema = arrow_record_schema()
    n = len(payloads)
    cols = {f.name: pa.nulls(n, f.type) for f in schema}
    cols["source"] = pa.array(["test"] * n)
    cols["position"] = pa.array(range(n), pa.int64())
    cols["payload"] = pa.array(payloads, pa.binary())
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


def check_batches(decoder: BatchDecoder, batches: list[list[bytes]]) -> None:
    o = decoder.options
    for payloads in batches:
        out = decoder(batch(payloads))
        assert out.num_rows == len(payloads)
        # The partitioned form (what the tasks write) has the same rows: every
        # column of a partition has its rows, and they are the batch's.
        check_partitions(decoder.decode(batch(payloads)), out)
        for p, got in zip(payloads, out.to_pylist()):
            got = {k: v for k, v in got.items() if v is not None or k in FIXED}
            got.pop("payload")
            for k in (
                "source",
                "position",
                "ts",
                "src",
                "dst",
                "direction",
                "verb",
                "subject",
                "reply",
                "sid",
                "headers",
            ):
                got.pop(k, None)
            if got.get("payload_json"):
                got["payload_json"] = json.loads(got["payload_json"])
            want = json.loads(_reference(p, o))
            assert json.loads(json.dumps(_norm(got), sort_keys=True, default=repr)) == want, p.hex()


def check_partitions(decoded: Any, whole: pa.RecordBatch) -> None:
    names = whole.column("msg_type_name").to_pylist()
    rows = whole.to_pylist()
    total = 0
    for value, n, columns in decoded.partitions("msg_type_name"):
        assert all(len(a) == n for a in columns.values()), value
        mine = [r for r, name in zip(rows, names) if name == value]
        assert len(mine) == n
        for name, a in columns.items():
            assert a.to_pylist() == [r[name] for r in mine], (value, name)
        total += n
    assert total == whole.num_rows


OPTIONS = [
    DecodeOptions(layout="v0"),
    DecodeOptions(layout="auto"),
    DecodeOptions(layout="v0", verify_crc=False, emit_defaults=True),
    DecodeOptions(layout="auto", verify_crc=False),
    DecodeOptions(layout="v0", lenient=True),
    DecodeOptions(layout="legacy"),
    DecodeOptions(layout="flatbuffers"),
]
V0_OPTIONS = OPTIONS[:5]  # those that read v0's MsgTypes


def strict(o: DecodeOptions) -> BatchDecoder:
    d = BatchDecoder(o)
    d.strict = True
    return d


# -- the classes of issues #12 and #19, each named ---------------------------------

HEADER_ONLY_RR = v0(3, bytes(16))
DUPLICATE_SUBMESSAGE = bytes.fromhex("b90e43b400080009120412024131120412024132")
ONE_ERROR = bytes.fromhex("b90e43b4000800630a01")


@pytest.mark.parametrize("o", OPTIONS, ids=repr)
@pytest.mark.parametrize(
    "payloads",
    [
        [HEADER_ONLY_RR],
        [HEADER_ONLY_RR] * 3,
        [v0(3, b"")],
        [v0(3, bytes(9))],
        [HEADER_ONLY_RR, v0(3, b""), v0(3, bytes(9))],
    ],
    ids=["one", "three", "empty", "too_short", "mixed"],
)
def test_replication_responses_without_entries(o: DecodeOptions, payloads: list[bytes]) -> None:
    """Issue #12: the entries' empty columns are typed (was: int64 vs int32)."""
    check_batches(strict(o), [payloads])


@pytest.mark.parametrize("o", V0_OPTIONS, ids=repr)
def test_a_singular_submessage_twice_is_merged_and_misaligns_nothing(o: DecodeOptions) -> None:
    """Issue #19: row A's second occurrence never lands in row B."""
    b = v0(9, bytes.fromhex("120412024133"))  # PropagatedResponse, error.msg = "A3"
    check_batches(
        strict(o), [[DUPLICATE_SUBMESSAGE], [DUPLICATE_SUBMESSAGE, b], [b, DUPLICATE_SUBMESSAGE, b]]
    )
    out = (
        strict(o)(batch([DUPLICATE_SUBMESSAGE, b]))
        .column("protocol_PropagatedResponse")
        .to_pylist()
    )
    assert [r["error"]["msg"] for r in out] == ["A2", "A3"]


@pytest.mark.parametrize("o", V0_OPTIONS, ids=repr)
@pytest.mark.parametrize("width,kind", [(5, None), (6, "bad_payload")])
def test_tag_and_length_varints_protobuf_allows_and_refuses(
    o: DecodeOptions, width: int, kind: str | None
) -> None:
    """Issue #19: tags and lengths of more than 5 bytes are bad_payload, row by row
    and in a batch; of 5, decoded."""
    long_tag = v0(1, varint(0x0A, width) + bytes.fromhex("0161"))  # Ack.stream = "a"
    long_len = v0(1, bytes.fromhex("0a") + varint(1, width) + b"a")
    for p in (long_tag, long_len):
        try:
            lbparse.decode(p, o.layout, lenient=o.lenient)
            got = None
        except lbparse.EnvelopeError as exc:
            got = exc.kind
        assert got == kind
        check_batches(strict(o), [[p], [p, v0(1, bytes.fromhex("0a0162"))]])


@pytest.mark.parametrize("o", OPTIONS, ids=repr)
def test_one_partition_value_over_several_payload_types(o: DecodeOptions) -> None:
    """A legacy Message and a legacy Ack are both msg_type_name "Reserved"; a
    bad_payload error of a MsgType shares its name with the decoded rows."""
    from generations import LEGACY_ACK, LEGACY_MESSAGE

    check_batches(
        strict(o),
        [
            [LEGACY_MESSAGE, LEGACY_ACK],
            [LEGACY_ACK, LEGACY_MESSAGE, LEGACY_ACK],
            [v0(1, bytes.fromhex("0a0161")), v0(1, b"\xff\xff")],
        ],
    )


@pytest.mark.parametrize("o", OPTIONS, ids=repr)
def test_batches_of_only_errors_and_of_one_msgtype(o: DecodeOptions) -> None:
    ack = v0(1, bytes.fromhex("0a0161"))
    check_batches(
        strict(o),
        [
            [ONE_ERROR],
            [ONE_ERROR, b"", b"\xb9"],
            [ack] * 5,
            [ack] * 3 + [ONE_ERROR],
            [v0(0, b"")] * 2,
        ],
    )


# -- the property --------------------------------------------------------------------


@st.composite
def batches(draw: st.DrawFn) -> list[list[bytes]]:
    """Payloads from the pool in any order (sometimes of one kind only), cut anywhere."""
    mixed, kinds, of_kind = _strategies()
    if draw(st.booleans()):
        picks = draw(mixed)
    else:  # a run of one MsgType (or one error): the small batches that broke before
        picks = draw(of_kind[draw(kinds)])
    cuts = sorted(set(draw(st.lists(st.integers(1, len(picks)), max_size=4))))
    bounds = [0, *[c for c in cuts if c < len(picks)], len(picks)]
    return [picks[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


@lru_cache(maxsize=1)
def _strategies() -> tuple[Any, Any, dict[str, Any]]:
    """batches' strategies over the pool, made once: hypothesis checks a strategy
    the first time it draws from it, a sampled_from over the whole pool included."""
    of_kind = {
        k: st.lists(st.sampled_from(v), min_size=1, max_size=25) for k, v in _kinds().items()
    }
    return (
        st.lists(st.sampled_from(pool()), min_size=1, max_size=60),
        st.sampled_from(sorted(of_kind)),
        of_kind,
    )


@lru_cache(maxsize=1)
def _kinds() -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    for p in pool():
        try:
            key = lbparse.decode(p).msg_type_name or "none"
        except lbparse.EnvelopeError as exc:
            key = "error:" + exc.kind
        out.setdefault(key, []).append(p)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("o", OPTIONS, ids=repr)
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_any_batches_give_lbparse_decodes_rows(o: DecodeOptions, data: st.DataObject) -> None:
    check_batches(strict(o), data.draw(batches()))


def test_the_pool_has_teeth() -> None:
    """Real traffic is in it where the shared capture is, and the crafted rows are."""
    kinds = _kinds()
    assert len(pool()) > 1000
    assert "error:bad_payload" in kinds and "ReplicationResponse" in kinds
    if real_payloads():
        assert len(real_payloads()) > 500


@pytest.mark.slow
def test_a_failing_vectorized_reader_sends_the_rows_to_the_per_row_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not strict (production): whatever goes wrong inside a vectorized reader,
    the batch's rows are still lbparse.decode's, decoded one by one, and a
    FastPathWarning says so (naming the reader and the exception)."""
    from lbparse.columnar import decode_arrow
    from lbparse.errors import FastPathWarning, OperationalError

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise pa.ArrowInvalid("a reader bug")

    monkeypatch.setattr(decode_arrow, "decode_structs", broken)
    monkeypatch.setattr(decode_arrow, "decode_replication", broken)
    payloads = list(pool()[:300])
    for o in OPTIONS[:2]:
        d = BatchDecoder(o)
        with pytest.warns(FastPathWarning, match=r"the vectorized \S+ reader failed") as said:
            check_batches(d, [payloads])
        assert d.fallbacks > 0
        w = said[0].message
        assert isinstance(w, FastPathWarning) and isinstance(w, OperationalError)
        assert w.kind == "fast_path_failed" and "ArrowInvalid: a reader bug" in w.message
        d.strict = True
        with pytest.raises(pa.ArrowInvalid, match="a reader bug"):
            d(batch(payloads))
    assert np  # numpy is what the decoder runs on
