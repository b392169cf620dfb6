"""Entry points that must survive any bytes, and the invariants they check.

Shared by the hypothesis tests (tests/*/test_hardening_*.py) and the atheris
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lbparse
from lbparse.capture import CaptureError, CaptureReader, NatsParser, h2
from lbparse.capture.nats import Parsed, Problem
from lbparse.codec.dispatch import DECODERS
from lbparse.codec.payloads import REPLICATION_RESPONSE
from lbparse.errors import EnvelopeError
from support.reference import PARSERS, commitlog_result

LAYOUT_NAMES = [*lbparse.LAYOUTS, "auto"]
ENVELOPED = [n for n, lay in lbparse.LAYOUTS.items() if lay.has_header]
VECTORS = Path(__file__).resolve().parent.parent / "data" / "vectors.jsonl"


def seed_envelopes() -> list[bytes]:
    """Every reference vector, and well-formed payloads of every layout: the
    seeds of the mutation tests and of the atheris corpora."""
    from lbparse.codec.flatbuf import FlatTable

    lines = VECTORS.read_text(encoding="utf-8").splitlines()
    out = [bytes.fromhex(json.loads(x)["hex"]) for x in lines if x.strip()]
    Message, Ack = lbparse.message_class("proto.Message"), lbparse.message_class("proto.Ack")
    msg = Message(
        key=b"k", value=b"hello", stream="orders", subject="orders.eu", headers={"h": b"v"}
    )
    ack = Ack(stream="orders", offset=42, msgSubject="orders.eu")
    out += [
        lbparse.encode(msg, crc=True),
        lbparse.encode(ack),
        lbparse.encode(msg, layout="legacy"),
        lbparse.encode(ack, layout="legacy", crc=True),
        lbparse.encode(msg, layout="lift-cookie"),
        lbparse.encode(ack, layout="lift-cookie"),
        lbparse.encode(
            lbparse.ReplicationResponse(
                3,
                9,
                [
                    lbparse.CommitLogEntry(
                        9, 1, 3, key=b"k", value=b"v", headers=[("subject", b"s")]
                    )
                ],
            ),
            crc=True,
        ),
    ]
    pub = FlatTable(
        "proto.PublishRequest",
        key=b"k",
        value=b"v",
        stream="s",
        partition=1,
        headers=[FlatTable("proto.MessageHeader", key="h", value=b"v")],
    )
    fack = FlatTable("proto.Ack", stream="s", offset=7, ackPolicy=1)
    out += [
        lbparse.encode(pub, layout="flatbuffers", crc=True),
        lbparse.encode(fack, layout="flatbuffers"),
        lbparse.encode(pub, layout="flatbuffers-draft"),
    ]
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
    slow = _outcome(
        lambda d: full(d, True, False, None, **options) if options else full(d, True, False, None),
        data,
    )
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
    assert got["kaitai"] == got["lbparse"], (
        f"kaitai {got['kaitai']!r} != lbparse {got['lbparse']!r}"
    )
    assert got["construct"] == got["lbparse"], (
        f"construct {got['construct']!r} != lbparse {got['lbparse']!r}"
    )


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


# -- issue #19: the batch decoder, Liftbridge's files, Raft --------------------------


def split_payloads(data: bytes, most: int = 40) -> list[bytes]:
    """Fuzzer bytes as a batch of payloads: each a length byte and that many
    bytes (so that the fuzzer chooses sizes and the batch's composition)."""
    out, pos = [], 0
    while pos < len(data) and len(out) < most:
        n = data[pos]
        out.append(bytes(data[pos + 1 : pos + 1 + n]))
        pos += 1 + n
    return out


def check_batch(payloads: list[bytes], layouts: tuple[str, ...] = ("v0", "auto")) -> None:
    """The pipeline's batch decoder, strict (an exception inside a vectorized
    reader fails rather than falling back), on one batch and on the batch cut
    in two: every row is lbparse.decode's row for that payload alone, errors
    included (tests/spark/test_batch_composition.py's reference)."""
    from spark.test_batch_composition import check_batches, strict  # needs pyarrow, not Spark

    from lbparse.columnar.decode_arrow import DecodeOptions

    if not payloads:
        return
    half = len(payloads) // 2
    for layout in layouts:
        check_batches(
            strict(DecodeOptions(layout=layout)),
            [payloads] + ([payloads[:half], payloads[half:]] if half else []),
        )


def check_checkpoints(data: bytes) -> None:
    """Bytes as both checkpoint files and as an index, read a chunk at a time."""
    from lbparse.storage import index as idx
    from lbparse.storage.checkpoints import parse_high_watermark, parse_leader_epochs
    from lbparse.storage.errors import StorageError

    for parse in (parse_high_watermark, parse_leader_epochs):
        try:
            got = parse(data, "cp")
        except StorageError as exc:
            assert exc.path == "cp" and exc.kind == "bad_checkpoint", exc.kind
            assert exc.position is None or 0 <= exc.position <= len(data)
            assert len(str(exc)) < 300, len(str(exc))
            continue
        values = (
            [got] if isinstance(got, int) else [v for e in got for v in (e.epoch, e.start_offset)]
        )
        assert all(-(1 << 63) <= v < (1 << 63) for v in values), values
    # The index read whole and in chunks of a few entries (its loop's cuts).
    whole = idx.read_index_bytes(data, "x.index", 7)
    chunk = idx.CHUNK
    idx.CHUNK = 40
    try:
        parts = idx.read_index_bytes(data, "x.index", 7)
    finally:
        idx.CHUNK = chunk
    assert (whole.entries, whole.after_tail, whole.zero_tail, whole.damage) == (
        parts.entries,
        parts.after_tail,
        parts.zero_tail,
        parts.damage,
    )


def check_storage(data: bytes) -> None:
    """Any bytes as each of Liftbridge's files: only StorageError escapes; a
    segment read in parts is the whole reading; the C entry loop (when
    built) reads what the Python one reads."""
    from lbparse.storage import read_index_bytes, read_segment_bytes
    from lbparse.storage import segment as seg
    from lbparse.storage.checkpoints import parse_high_watermark, parse_leader_epochs
    from lbparse.storage.errors import StorageError
    from lbparse.storage.formats import SEGMENT_FORMATS_BY_NAME
    from lbparse.storage.raftdb import read_raft_db_bytes

    for fmt in [None, *SEGMENT_FORMATS_BY_NAME.values()]:
        whole = read_segment_bytes(data, "x.log", fmt, base_offset=7)
        assert len(whole.entries) == len(whole.positions) == sum(1 for _ in whole)
        entries, positions, damage = [], [], []
        for part in seg.iter_segment_bytes(data, "x.log", fmt, base_offset=7, part_bytes=64):
            entries += part.entries
            positions += part.positions
            damage += [f.line() for f in part.damage]
        assert positions == whole.positions and entries == whole.entries
        assert damage == [f.line() for f in whole.damage]
        if fmt is not None and seg._native is not None:
            fast: tuple[list, list] = ([], [])
            slow: tuple[list, list] = ([], [])
            for native, (es, ps) in ((True, fast), (False, slow)):
                try:
                    seg._scan(data, 0, len(data), es, ps, fmt, native=native)
                except Exception as exc:
                    es.append(type(exc).__name__)
            assert fast == slow, "the C entry loop and the Python one disagree"
    reading = read_index_bytes(data, "x.index", 7)
    width = reading.format.entry.size
    assert all(e.index_position % width == 0 for e in reading.entries + reading.after_tail)
    for parse in (parse_high_watermark, parse_leader_epochs):
        try:
            parse(data, "cp")
        except StorageError as exc:
            assert exc.path == "cp"
    try:
        store = read_raft_db_bytes(data, "raft.db")
    except StorageError:
        return
    for f in store.findings:
        assert f.path == "raft.db"


def check_raft(data: bytes) -> None:
    """Any bytes as a Raft log entry and as a transport stream cut anywhere:
    an entry or RaftError, chunks whose error is a RaftError; the RPCs of a
    stream do not depend on how it is cut into messages."""
    from lbparse.raft import RaftError, StreamDecoder, decode_log_entry

    try:
        decode_log_entry(data)
    except RaftError:
        pass
    if not data:
        return
    step = data[0] % 17 + 1
    stream = data[1:]

    def rpcs(pieces: list[bytes]) -> tuple[list[str], bool]:
        """The RPCs, and whether any message was in error or skipped."""
        dec, out, odd = StreamDecoder(), [], False
        for piece in pieces:
            chunk = dec.feed(piece)
            assert chunk.error is None or isinstance(chunk.error, RaftError), chunk.error
            odd = odd or chunk.error is not None or bool(chunk.skipped)
            out += [json.dumps(r.to_json_dict(), sort_keys=True, default=repr) for r in chunk.rpcs]
        return out, odd

    whole, odd_whole = rpcs([stream])
    cut, odd_cut = rpcs([stream[i : i + step] for i in range(0, len(stream), step)])
    if not (odd_whole or odd_cut):  # a stream read whole: the cuts must not matter
        assert cut == whole, f"cut every {step} bytes: {cut!r} != {whole!r}"


def raft_chunk_view(chunk: Any) -> Any:
    """Everything a transport Chunk says, comparable: its JSON, its error's
    kind, message and offset, and its RPCs as objects (entries, warnings,
    sizes, decoded commands and configurations)."""
    err = chunk.error
    return (
        json.dumps(chunk.to_json_dict(), sort_keys=True, default=repr),
        None if err is None else (err.kind, err.message, err.offset),
        chunk.rpcs,
    )


def raft_decoder_state(dec: Any) -> Any:
    return (dec.role, bytes(dec.buf), dec.trailer, dec.in_step, dec.rpcs, dec.skipped)


def check_raft_native(
    messages: list[bytes], role: str | None = None, max_rpc: int = 1 << 20
) -> None:
    """The C transport reader against the Python one (issue #45): the same
    messages give the same chunks and leave the same state, message by
    message. And the rows path (`StreamDecoder.feed_rows`, no RPC objects)
    of either reader gives `rpc_row` of those chunks' RPCs, the rest of its
    chunk and its state as `feed`'s; `feed_plain` (the report's) gives a
    message's RPCs either so, as rows, or as `feed`'s objects, and the same
    state (the Python reader's always as objects); so does the columns' batch reading
    (`transport.stream_rows`, `feed_rows` reading the messages it leaves),
    message by message, and it leaves the same state. Nothing to do when the
    C reader is not built."""
    from lbparse.raft import transport

    if transport._NATIVE_READER is None:
        return
    fast = transport.StreamDecoder(role, max_rpc, native=True)
    slow = transport.StreamDecoder(role, max_rpc, native=False)
    fast_rows = transport.StreamDecoder(role, max_rpc, native=True)
    slow_rows = transport.StreamDecoder(role, max_rpc, native=False)
    fast_plain = transport.StreamDecoder(role, max_rpc, native=True)
    slow_plain = transport.StreamDecoder(role, max_rpc, native=False)
    wanted: list[Any] = []
    for i, m in enumerate(messages):
        chunk = fast.feed(m)
        a, b = raft_chunk_view(chunk), raft_chunk_view(slow.feed(m))
        assert a == b, f"message {i}: C {a!r} != Python {b!r}"
        assert raft_decoder_state(fast) == raft_decoder_state(slow), f"message {i}: state"
        want = [transport.rpc_row(r) for r in chunk.rpcs]
        chunk.rpcs = []
        bare = raft_chunk_view(chunk)
        for dec in (fast_rows, slow_rows):
            got, rows = dec.feed_rows(m)
            assert rows == want, f"message {i}: rows {rows!r} != {want!r}"
            assert raft_chunk_view(got) == bare, f"message {i}: rows chunk"
            assert raft_decoder_state(dec) == raft_decoder_state(fast), f"message {i}: rows state"
        for dec in (fast_plain, slow_plain):
            got, rows = dec.feed_plain(m)
            if rows:
                assert dec is fast_plain and rows == want, f"message {i}: plain rows {rows!r}"
                assert raft_chunk_view(got) == bare, f"message {i}: plain rows chunk"
            else:
                assert raft_chunk_view(got) == a, f"message {i}: plain objects"
            assert raft_decoder_state(dec) == raft_decoder_state(fast), f"message {i}: plain state"
        wanted.append(want)
    check_raft_batch(messages, role, max_rpc, wanted, raft_decoder_state(fast))


def batch_rows(got: tuple[bytes, ...]) -> list[Any]:
    """`transport.stream_rows`' columns as each message's rows (`rpc_row`'s
    dicts), None for a message it did not read."""
    import numpy as np

    from lbparse.columnar.schema import arrow_output_schema
    from lbparse.columnar.trafficcols import rpc_lists

    codes = np.frombuffer(got[0], np.uint8)
    lists = rpc_lists(got, arrow_output_schema(False).field("raft_rpcs").type).to_pylist()
    return [rows if c in (1, 2) else None for c, rows in zip(codes.tolist(), lists)]


def check_raft_batch(
    messages: list[bytes], role: str | None, max_rpc: int, wanted: list[Any], state: Any
) -> None:
    """The columns' batch reading of a stream (`transport.stream_rows`, the
    messages it leaves to `feed_rows`) gives each message's rows as wanted
    and leaves the decoder in `state`."""
    from lbparse.raft import transport

    dec = transport.StreamDecoder(role, max_rpc, native=True)
    key = ("a:1", "b:2", "s")
    slow: dict[int, Any] = {}

    def fallback(j: int) -> None:
        slow[j] = dec.feed_rows(messages[j])[1]

    k = len(messages)
    got = transport.stream_rows({key: dec}, ["a:1"] * k, ["b:2"] * k, ["s"] * k, messages, fallback)
    if got is None:  # LBPARSE_NATIVE=0
        return
    for i, rows in enumerate(batch_rows(got)):
        if rows is None:
            assert i in slow, f"message {i}: neither read in C nor handed back"
            rows = slow[i]
        else:
            assert i not in slow, f"message {i}: read twice"
        assert rows == wanted[i], f"message {i}: batch {rows!r} != {wanted[i]!r}"
    assert raft_decoder_state(dec) == state, "the batch's decoder state"


def check_raft_native_bytes(data: bytes, every_role: bool = True) -> None:
    """Any bytes as a transport stream, cut into messages as the first byte
    says, read with no role, as requests and as responses, under a small and
    the default RPC limit: the C reader and the Python one agree.
    `every_role=False` (the fuzz target): the one role the first byte also
    says, a third of the work an input (under the fuzzer's instrumentation a
    long input took its 10 s on a loaded machine)."""
    if not data:
        return
    step = data[0] % 17 + 1
    stream = data[1:]
    messages = [stream[i : i + step] for i in range(0, len(stream), step)]
    roles: tuple[str | None, ...] = (None, "request", "response")
    for role in roles if every_role else (roles[data[0] // 17 % 3],):
        check_raft_native([stream], role)
        # the second whole: the columns' batch reads it in C when the first
        # left the decoder in step (stream_rows takes no stream's first message)
        check_raft_native([stream, stream], role)
        check_raft_native(messages, role, max_rpc=64)
        check_raft_native(messages + [b""] + messages, role)


def check_raftdb(data: bytes, budget: int = 4096) -> None:
    """Any bytes as raft.db (issue #27): only StorageError escapes; what the
    store keeps of the file's keys and values stays within Limits.max_raft_db,
    past which exactly one `limit` finding is said; a smaller budget reads a
    prefix of the log a larger one reads; every page finding is worded as
    one of the walk's problems."""
    from lbparse.codec.limits import Limits
    from lbparse.storage.errors import StorageError
    from lbparse.storage.raftdb import read_raft_db_bytes

    try:
        wide = read_raft_db_bytes(data, "raft.db", Limits(max_raft_db=1 << 24))
    except StorageError as exc:
        assert exc.path == "raft.db", exc
        return
    tight = read_raft_db_bytes(memoryview(data), "raft.db", Limits(max_raft_db=budget))
    kept = sum(
        len(log.key)
        + (
            len(log.entry.data or b"") + len(log.entry.extensions or b"")
            if log.entry is not None
            else 0
        )
        for log in tight.logs
    )
    assert kept <= budget, f"{kept} bytes of the log kept, over the budget of {budget}"
    assert all(f.path == "raft.db" for f in wide.findings + tight.findings)
    limits = [f for f in tight.findings if f.kind == "limit" and "log key" in f.message]
    assert len(limits) <= 1, limits

    def rows(store: Any) -> list[str]:
        return [json.dumps(log.to_json_dict(), sort_keys=True, default=str) for log in store.logs]

    assert rows(tight) == rows(wide)[: len(tight.logs)]
    if not limits:
        assert len(tight.logs) == len(wide.logs)
    for f in wide.findings:
        assert f.kind != "bad_page" or "(a loop)" not in f.message, f  # words of issue #27


def _native_rows(path: str, native: bool, limits: Any = None) -> tuple[Any, dict[str, Any]]:
    import pyarrow as pa

    from lbparse.columnar.schema import arrow_record_schema
    from lbparse.columnar.sources import SourceOptions, Unit, UnitStats, read_capture

    size = os.path.getsize(path)
    unit = Unit(path, "pcap", size, size)
    stats = UnitStats(path, "pcap", size)
    table = pa.Table.from_batches(
        list(read_capture(unit, SourceOptions(), stats, limits=limits, native=native)),
        schema=arrow_record_schema(),
    )
    return table, dict(vars(stats))


def check_native_capture(data: bytes, limits: Any = None) -> int:
    """The C capture loop (lbparse/capture/_native.c) reads the bytes exactly
    as the Python reader does: the same rows, notices and counts, and the
    same packets of some connections (check_connection_packets). Returns the
    number of rows."""
    fd, path = tempfile.mkstemp(prefix="lbparse-fuzz-", dir=_TMP)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        ref = _native_rows(path, False, limits)
        got = _native_rows(path, True, limits)
        check_connection_packets(path, limits)
    finally:
        os.unlink(path)
    assert got[0].equals(ref[0]), "native capture rows differ from the reference's"
    assert got[1] == ref[1], f"native counts {got[1]} != reference {ref[1]}"
    return ref[0].num_rows


def check_connection_packets(path: str, limits: Any = None, batch: int = 3) -> int:
    """The C loop's packets of some connections (_native.Reader.packets, what
    native_batches.ConnectionPackets gives the gRPC reading's Python loop)
    are the Python source's packets whose flow key, by the Python reader's
    dissect, is among them (every other connection of the file's), then the
    file's last packet if it is not one of them; an error that stops the
    Python source stops the C reading after the same packets, said alike.
    Returns the number of packets given."""
    from lbparse.capture import native_batches
    from lbparse.capture import reader as rd
    from lbparse.capture.linktypes import SUPPORTED

    try:
        capture = native_batches.NativeCapture(path, limits=limits)
    except native_batches.NativeUnsupported:
        return 0  # a file the C loop leaves to the reference: nothing to compare
    every: list[tuple[Any, ...]] = []
    ref_error = None
    with open(path, "rb") as f:
        try:
            src = rd._open_source(f, path, lambda n: None)
            assert src is not None, "the C loop reads a file the Python reader does not"
            for ts, lt, buf, off, caplen, wirelen in src:
                parts = rd.dissect(lt, buf, off, caplen) if lt in SUPPORTED else None
                key = parts[0] if parts is not None else None
                every.append(((ts, lt, bytes(buf[off : off + caplen]), caplen, wirelen), key))
        except CaptureError as exc:
            ref_error = (exc.kind, str(exc))
    keys = sorted({key for _, key in every if key is not None})
    chosen = set(keys[::2])
    want = [p for p, key in every if key in chosen]
    if every and every[-1][1] not in chosen:
        want.append(every[-1][0])
    got: list[tuple[Any, ...]] = []
    error = None
    try:
        while True:  # bounded: each call reads on, None at the end
            part = capture._reader.packets(chosen, batch)
            if part is None:
                break
            assert 0 < len(part) <= batch
            got += [tuple(p) for p in part]
    except CaptureError as exc:
        error = (exc.kind, str(exc))
    finally:
        capture.close()
    assert got == want, "the C loop's packets of the connections differ from the reference's"
    assert error == ref_error, f"C loop error {error} != reference {ref_error}"
    return len(got)


_SCAN_FILE: list[str] = []  # one file a process: the scan target runs thousands a second


def check_native_scan(data: bytes, tight: Any = None) -> int:
    """The C capture loop alone, at the fuzzer's speed (no Python reference
    beside it: check_native_capture holds the two equal, ~50 runs a second
    under ASan). The last byte chooses the limits, the batch size and the
    block size; the rest is the file (so a capture, less its last byte, is
    a seed). Any bytes: no crash, no sanitizer report; every batch's buffers
    hold its n rows (8 bytes a time, n + 1 offsets a column); the rows read
    batch by batch are the rows `index` counts; read on from one of its
    cuts, the rest of the file gives the rows after it. `tight`: the small
    limits (the fuzz targets' TIGHT) an odd last byte reads with. Returns the
    rows."""
    from lbparse.capture import native_batches

    native = native_batches._native
    if native is None or not data:
        return 0
    if not _SCAN_FILE:
        fd, path = tempfile.mkstemp(prefix="lbparse-fuzz-scan-", dir=_TMP)
        os.close(fd)
        _SCAN_FILE.append(path)
    path = _SCAN_FILE[0]
    with open(path, "wb") as f:
        f.write(data[:-1])
    knob = data[-1]
    limits = tight if knob & 1 and tight is not None else lbparse.Limits()
    rules = native_batches.rules()
    rules["block"] = 64 + (knob >> 4) * 61

    def reader() -> Any:
        return native.Reader(path, "f", limits.max_frame, limits.max_reassembly, rules)

    def rows_of(r: Any, max_rows: int) -> int:
        rows = 0
        while (got := r.next_batch(max_rows, 1 << 12)) is not None:  # ends: the file does
            n, (_, ts), *columns = got
            size = memoryview(ts).nbytes
            assert size == 8 * n, f"{size} bytes of times for {n} rows"
            for _, offsets, _ in columns:
                size = memoryview(offsets).nbytes
                assert size == 4 * (n + 1), f"{size} bytes of offsets for {n} rows"
            rows += n
        return rows

    try:
        r = reader()
    except ValueError:  # not a capture's header, as NativeCapture says
        return 0
    try:
        rows = rows_of(r, 1 + (knob >> 1 & 7) * 3)
    except CaptureError:
        return -1  # the reading stopped: the rows before it were given
    finally:
        r.close()
    r = reader()
    try:
        cuts, total = r.index(1024 * (1 + (knob >> 5)))  # 1-8 KiB: a few cuts a file
    finally:
        r.close()
    assert total == rows, f"index counts {total} rows, the batches gave {rows}"
    if cuts:
        offset, before, snapshot = cuts[knob % len(cuts)]
        r = reader()
        try:
            r.restore(offset, snapshot, -1)
            after = rows_of(r, 4096)
        finally:
            r.close()
        assert before + after == rows, f"{before} rows before a cut and {after} after, of {rows}"
    return rows


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
    assert (row["layout"], row["msg_type_name"], row["payload_type"], row["crc32c"]) == (
        env.layout,
        env.msg_type_name,
        env.payload_type,
        env.crc32c,
    )


# -- issue #28: HTTP/2 and gRPC (lbparse.capture.h2, grpc) -----------------------------

H2_LIMIT = 1 << 16  # a gRPC message and all calls' half-received bytes: small, so hit


def h2_pieces(data: bytes) -> list[tuple[int, bytes]]:
    """The fuzzer's bytes as one connection's segments: each a byte (bit 7: the
    server's; bits 0-6: length - 1) then its bytes. The client's start with
    the preface (fed before them)."""
    out, i = [], 0
    while i < len(data):
        n = (data[i] & 0x7F) + 1
        out.append((data[i] >> 7, data[i + 1 : i + 1 + n]))
        i += 1 + n
    return out


def h2_records(pieces: list[tuple[int, bytes]], step: int) -> list[str]:
    """Every record and notice (as JSON) of the connection, each segment fed
    `step` bytes at a time; memory held to the limits throughout."""
    flows = h2.Flows(H2_LIMIT, max_buffered=H2_LIMIT)
    client, server = flows.pair("127.0.0.1:51000", "127.0.0.1:7001")
    assert client.sniff(h2.PREFACE, False) is client
    client.feed(h2.PREFACE)
    started = False
    for i, (side, data) in enumerate(pieces):
        flows.clock.ts = i
        if side and not started:  # the server's first bytes: HTTP/2, since its peer is
            started = server.sniff(data, False) is server
        for j in range(0, len(data), step):
            (server if side else client).feed(data[j : j + step])
        assert flows.buffered <= flows.max_buffered, (flows.buffered, flows.max_buffered)
    flows.ending = True
    flows.close()
    return [json.dumps(o.to_json_dict(), sort_keys=True) for o in flows.out]


# Once frames are lost (a frame past the size limit), reading resumes at a
# segment that starts with frames: from there on, by design, the cut matters.
_H2_LOST = "reading resumes at the next segment"


def _before_loss(records: list[str]) -> tuple[list[str], str | None]:
    for i, rec in enumerate(records):
        if _H2_LOST in rec:
            return records[:i], rec
    return records, None


def check_h2(data: bytes) -> None:
    """Any bytes of an HTTP/2 connection: no exception, memory within the limits,
    and the same calls, messages and notices however the segments are cut (the
    first byte: how many bytes at a time), up to the first loss of frames,
    which is found at the same place too."""
    if not data:
        return
    pieces = h2_pieces(data[1:])
    step = data[0] % 9 + 1
    whole, split = h2_records(pieces, 1 << 30), h2_records(pieces, step)
    assert _before_loss(split) == _before_loss(whole), (
        f"cut every {step} bytes: {split!r} != {whole!r}"
    )
