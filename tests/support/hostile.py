"""Entry points that must survive any bytes, and the invariants they check.

Shared by the hypothesis tests (tests/test_hardening_*.py) and the atheris
harness (fuzz/harness.py), so that the coverage-guided campaigns and the
test suite hold lbparse to the same promises:

* only `EnvelopeError` (decoding) or `CaptureError` (capture files) ever
  escapes, whatever the bytes; anything else propagates and is a finding;
* a decoded envelope always renders as JSON;
* the Kaitai parser, the construct schema and lbparse agree on the header
  of every input under every layout, and on the commit-log entries of
  every ReplicationResponse payload, errors included;
* `lbparse.decode`'s v0 shortcut says what the full decoder says;
* the NATS parser yields the same messages however the stream is split.

Each function raises AssertionError for a broken invariant and lets any
unexpected exception through; both are findings.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import lbparse
from lbparse.capture import CaptureError, CaptureReader, NatsParser
from lbparse.capture.nats import Parsed, Problem
from lbparse.errors import EnvelopeError
from lbparse.payloads import REPLICATION_RESPONSE
from lbparse.dispatch import DECODERS
from support.reference import PARSERS, commitlog_result

LAYOUT_NAMES = [*lbparse.LAYOUTS, "auto"]
ENVELOPED = [n for n, lay in lbparse.LAYOUTS.items() if lay.has_header]
VECTORS = Path(__file__).resolve().parent.parent / "data" / "vectors.jsonl"


def seed_envelopes() -> list[bytes]:
    """Every reference vector, and well-formed payloads of every layout: the
    seeds of the mutation tests and of the atheris corpora."""
    from lbparse.flatbuf import FlatTable

    lines = VECTORS.read_text(encoding="utf-8").splitlines()
    out = [bytes.fromhex(json.loads(x)["hex"]) for x in lines if x.strip()]
    Message, Ack = lbparse.message_class("proto.Message"), lbparse.message_class("proto.Ack")
    msg = Message(key=b"k", value=b"hello", stream="orders", subject="orders.eu",
                  headers={"h": b"v"})
    ack = Ack(stream="orders", offset=42, msgSubject="orders.eu")
    out += [lbparse.encode(msg, crc=True), lbparse.encode(ack),
            lbparse.encode(msg, layout="legacy"), lbparse.encode(ack, layout="legacy", crc=True),
            lbparse.encode(msg, layout="lift-cookie"), lbparse.encode(ack, layout="lift-cookie"),
            lbparse.encode(lbparse.ReplicationResponse(3, 9, [lbparse.CommitLogEntry(
                9, 1, 3, key=b"k", value=b"v", headers=[("subject", b"s")])]), crc=True)]
    pub = FlatTable("proto.PublishRequest", key=b"k", value=b"v", stream="s", partition=1,
                    headers=[FlatTable("proto.MessageHeader", key="h", value=b"v")])
    fack = FlatTable("proto.Ack", stream="s", offset=7, ackPolicy=1)
    out += [lbparse.encode(pub, layout="flatbuffers", crc=True),
            lbparse.encode(fack, layout="flatbuffers"),
            lbparse.encode(pub, layout="flatbuffers-draft")]
    return out


def _outcome(fn: Callable[[bytes], Any], raw: bytes) -> tuple:
    try:
        env = fn(raw)
    except EnvelopeError as exc:
        return ("error", exc.kind, str(exc))
    return ("ok", env, env.to_json_dict())  # Envelope == compares every field


def check_decode(data: bytes, **options: Any) -> None:
    """Every layout, strict and lenient, header only, upstream verdict;
    every success renders as JSON. `options` go to `decode` (limits)."""
    for layout in LAYOUT_NAMES:
        try:
            env = lbparse.decode(data, layout, **options)
        except EnvelopeError:
            continue
        json.dumps(env.to_json_dict())
    for layout in ENVELOPED:
        try:
            json.dumps(lbparse.decode(data, layout, lenient=True, **options).to_json_dict())
        except EnvelopeError:
            pass
    for layout in lbparse.LAYOUTS:
        try:
            lbparse.decode_header(data, layout)
        except EnvelopeError:
            pass
    lbparse.upstream_verdict(data)
    full = DECODERS["v0"]
    fast = _outcome(lambda d: lbparse.decode(d, **options), data)
    slow = _outcome(lambda d: full(d, True, False, None, **options) if options
                    else full(d, True, False, None), data)
    assert fast == slow, f"v0 shortcut says {fast[:2]}, the full decoder {slow[:2]}"


def check_headers_agree(data: bytes) -> None:
    """Kaitai, construct and lbparse agree on the header under every layout."""
    for layout in lbparse.LAYOUTS:
        results = {name: parse(data, layout) for name, parse in PARSERS.items()}
        first = results["lbparse"]
        for name, res in results.items():
            assert res == first, f"{layout}: {name} says {res}, lbparse says {first}"


def check_commitlog_agree(payload: bytes) -> None:
    """The three commit-log parsers agree on a ReplicationResponse payload."""
    got = {p: commitlog_result(payload, p) for p in ("kaitai", "construct", "lbparse")}
    assert got["kaitai"] == got["lbparse"], f"kaitai {got['kaitai']!r} != lbparse {got['lbparse']!r}"
    assert got["construct"] == got["lbparse"], \
        f"construct {got['construct']!r} != lbparse {got['lbparse']!r}"


def check_differential(data: bytes) -> None:
    check_headers_agree(data)
    check_commitlog_agree(data)  # the bytes as a payload: the commit log gets every input
    try:
        env = lbparse.decode(data)
    except EnvelopeError:
        return
    if env.payload_type == REPLICATION_RESPONSE:
        check_commitlog_agree(env.payload)


def _messages(frames: list[Parsed]) -> list[Parsed]:
    return [f for f in frames if not isinstance(f, Problem)]


def nats_frames(stream: bytes, cuts: list[int], **options: Any) -> list[Parsed]:
    """What the parser makes of `stream` fed in pieces cut at `cuts`, then the end."""
    parser = NatsParser(**options)
    frames: list[Parsed] = []
    prev = 0
    for cut in sorted(set(c for c in cuts if 0 < c < len(stream))):
        frames += parser.feed(stream[prev:cut])
        prev = cut
    frames += parser.feed(stream[prev:])
    parser.finish(frames)  # with what an abandoned message's bytes still held
    return frames


def check_nats(stream: bytes, cuts: list[int], **options: Any) -> None:
    """The messages do not depend on how the stream was segmented."""
    whole = _messages(nats_frames(stream, [], **options))
    split = _messages(nats_frames(stream, cuts, **options))
    assert split == whole, f"cut at {cuts}: {split!r} != {whole!r}"


def check_capture_file(path: str, **options: Any) -> int:
    """Read a capture to the end: records render as JSON, only CaptureError
    escapes. Returns the number of records (or -1 for a CaptureError)."""
    reader = CaptureReader(path, **options)
    n = 0
    try:
        for rec in reader:
            json.dumps(rec.to_json_dict())
            n += 1
    except CaptureError:
        return -1
    stats = reader.stats
    assert stats.messages == n, f"stats say {stats.messages} messages, {n} records came out"
    assert sum(stats.per_verb.values()) == n
    assert sum(stats.per_layout.values()) + sum(stats.errors.values()) == n
    return n


_TMP = os.environ.get("LBPARSE_FUZZ_TMP") or ("/dev/shm" if os.path.isdir("/dev/shm") else None)


def check_capture(data: bytes, **options: Any) -> int:
    """`check_capture_file` on the bytes, written to a temporary file."""
    fd, path = tempfile.mkstemp(prefix="lbparse-fuzz-", dir=_TMP)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return check_capture_file(path, **options)
    finally:
        os.unlink(path)


def _native_rows(path: str, native: bool, limits: Any = None) -> tuple[Any, dict[str, Any]]:
    import pyarrow as pa

    from lbparse.pipeline.schema import arrow_record_schema
    from lbparse.pipeline.sources import SourceOptions, Unit, UnitStats, _read_capture

    size = os.path.getsize(path)
    unit = Unit(path, "pcap", size, size)
    stats = UnitStats(path, "pcap", size)
    table = pa.Table.from_batches(list(_read_capture(unit, SourceOptions(), stats, limits=limits,
                                                     native=native)),
                                  schema=arrow_record_schema())
    return table, dict(vars(stats))


def check_native_capture(data: bytes, limits: Any = None) -> int:
    """The C capture loop (lbparse/capture/_native.c) reads the bytes exactly
    as the Python reader does: the same rows, notices and counts. Returns the
    number of rows."""
    fd, path = tempfile.mkstemp(prefix="lbparse-fuzz-", dir=_TMP)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        ref = _native_rows(path, False, limits)
        got = _native_rows(path, True, limits)
    finally:
        os.unlink(path)
    assert got[0].equals(ref[0]), "native capture rows differ from the reference's"
    assert got[1] == ref[1], f"native counts {got[1]} != reference {ref[1]}"
    return ref[0].num_rows


def check_decode_arrow(data: bytes, layout: str = "v0") -> None:
    """lbparse.decode_arrow gives lbparse.decode's answer for any bytes."""
    batch = lbparse.decode_arrow([data], layout)
    row = batch.to_pylist()[0]
    try:
        env = lbparse.decode(data, layout)
    except EnvelopeError as exc:
        assert (row["error_kind"], row["error_message"]) == (exc.kind, exc.message), row
        return
    assert row["error_kind"] is None, row
    assert (row["layout"], row["msg_type_name"], row["payload_type"], row["crc32c"]) == \
        (env.layout, env.msg_type_name, env.payload_type, env.crc32c)
