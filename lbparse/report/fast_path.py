"""The report's fast path: decoded rows as Arrow record batches, counted over columns.

`lbparse pipeline` reads a capture into record batches, one row per NATS
message, decoded by the columnar core into narrow tables (`arrow_batches`:
the C capture reader where lbparse has it, as `lbparse.read_capture_tables`;
else the pipeline's Python reader): `messages`, and one table per payload
type with the rows of that type. `add_batch` puts such a batch into an
`Aggregator`:

- over columns (numpy, pyarrow): the time bins, messages, bytes by
  direction, messages by MsgType, and the capture's counts (`Stats`);
- row by row, only what needs order (pairing a Publish with its Ack, a
  request with its reply, leader epochs, the Raft transport, node names):
  the handlers of `aggregate.Aggregator`, given each row's payload fields
  as attributes (`_View`) from its payload table, the columns taken to
  Python once per batch.

`test_report_fast_path_*` hold its model equal to the record path's
(`Aggregator.add` over `CaptureReader`), the reference.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]

from lbparse.capture import Notice, Stats, native_batches
from lbparse.capture.reader import MAX_SUBJECTS, OTHER_SUBJECTS
from lbparse.capture.records import build_header_block
from lbparse.codec.api import decode
from lbparse.codec.layouts import LAYOUTS
from lbparse.codec.payloads import message_class
from lbparse.columnar.decode_arrow import DecodeOptions, decoder_for
from lbparse.columnar.schema import column_for
from lbparse.columnar.sources import SourceOptions, UnitStats, plan_files, read_unit
from lbparse.columnar.tables import JOIN_KEYS, tables_of
from lbparse.columnar.units import INPUT_PROBLEM, input_problems
from lbparse.report.aggregate import (
    MAX_STREAMS,
    OTHER_STREAMS,
    PUBLISHING_VERBS,
    Aggregator,
    handler_view,
)
from lbparse.report.cluster import is_no_responders
from lbparse.report.nodes import SUBSCRIBED, node_of_subject
from lbparse.textform import NO_MSG_TYPE, msg_type_word

BATCH_ROWS = 65536
# The MsgTypes whose message `Aggregator._typed_rest` reads (the sender's PUB).
TYPED_REST = frozenset(
    (
        "ServerInfoResponse",
        "RaftJoinRequest",
        "PropagatedResponse",
        "RaftJoinResponse",
        "PropagatedRequest",
    )
)


def native_reader() -> bool:
    """Whether this lbparse reads captures with the C capture loop.

    The pipeline's reader, and lbparse.read_capture_arrow, use it when it is
    built.

    Returns:
        True if the C capture loop is built.
    """
    return bool(native_batches.available())


def arrow_batches(path: str, layout: str, stats: Any) -> Iterator[dict[str, Any]]:
    """The decoded rows of one capture file as narrow tables.

    These are what read_capture_tables yields; the reader's counts go into
    `stats`.

    Args:
        path: The capture file.
        layout: The envelope layout to decode with ("v0", ..., or "auto").
        stats: A list collecting one pipeline UnitStats per unit read (appended
            after the unit's last batch).

    Yields:
        One dict of Arrow tables (table name -> table) per batch of rows.
    """
    decoder = decoder_for(DecodeOptions(layout=layout))
    options = SourceOptions(batch_rows=BATCH_ROWS)
    for unit in plan_files([os.fspath(path)], options):
        unit_stats = UnitStats(unit.path, unit.format, unit.size)
        # read_capture_tables's rows: the C capture loop where it is built, else
        # lbparse.capture's Python reader
        for batch in read_unit(unit, options, unit_stats):
            yield tables_of(decoder.decode(batch))
        stats.append(unit_stats)


def _messages(tables: dict[str, Any]) -> Any:
    """The messages table of a batch's tables, as one record batch."""
    table = tables["messages"].combine_chunks()  # one chunk already: tables_of makes one
    chunks = table.to_batches()
    return chunks[0] if chunks else pa.RecordBatch.from_pylist([], schema=table.schema)


_FLAT: dict[tuple[int, tuple[str, ...]], Any] = {}


def _flat(arr: Any, desc: Any) -> Iterator[Any]:
    """The rows of a struct column as objects with its fields as attributes.
    Flat messages: a named tuple per row, each field's column taken to Python
    once, proto3's left-out defaults filled over the column; messages that
    nest others: a `_View` per row."""
    names = tuple(f.name for f in arr.type)
    if desc is not None and any(_field(desc, n)[0] is not None for n in names):
        return (_View(d, desc) for d in arr.to_pylist())
    key = (id(desc), names)
    cls = _FLAT.get(key)
    if cls is None:
        from collections import namedtuple

        cls = _FLAT[key] = namedtuple("Row", names, rename=True)  # type: ignore[misc,unused-ignore]
    columns = []
    for n in names:
        child = arr.field(n)
        default = _field(desc, n)[1]
        if default is not None and child.null_count:
            child = pc.fill_null(child, pa.scalar(default, child.type))
        columns.append(child.to_pylist())
    make: Callable[[Any], Any] = getattr(cls, "_make")  # noqa: B009 (mypy: cls is any tuple type)
    return map(make, zip(*columns))


def _descriptor(column: str) -> Any:
    """The protobuf descriptor of a struct column (proto_Message: proto.Message), or None."""
    try:
        return message_class(column.replace("_", ".", 1)).DESCRIPTOR
    except (KeyError, ValueError, AttributeError):
        return None


_MISSING = object()
# (descriptor, field name) -> (the field's message descriptor or None, its default)
_FIELDS: dict[tuple[int, str], tuple[Any, Any]] = {}


def _field(desc: Any, name: str) -> tuple[Any, Any]:
    key = (id(desc), name)
    info = _FIELDS.get(key)
    if info is None:
        f = desc.fields_by_name.get(name) if desc is not None else None
        if f is None:
            info = (None, None)
        elif f.message_type is not None:
            info = (f.message_type, None)
        elif f.enum_type is not None:
            info = (None, f.enum_type.values_by_number[0].name)
        else:
            info = (None, f.default_value)
        _FIELDS[key] = info
    return info


class _View:
    """A decoded message's fields as attributes (a struct row, as a dict), a
    field left out (proto3's default) read as protobuf reads it: from the
    message's descriptor (enums by the name of their value 0, as the rows
    name them)."""

    __slots__ = ("_d", "_desc")

    def __init__(self, d: dict[str, Any] | None, desc: Any) -> None:
        self._d = d or {}
        self._desc = desc

    def __getattr__(self, name: str) -> Any:
        sub, default = _field(self._desc, name)
        v = self._d.get(name)
        if sub is not None:
            return _View(v, sub)
        return default if v is None else v


class _Row:
    """The record-like fields the handlers read."""

    __slots__ = ("src", "dst", "verb", "subject", "reply", "error")

    def __init__(
        self, src: str, dst: str, verb: str, subject: str, reply: str | None, error: Any = None
    ) -> None:
        self.src, self.dst, self.verb, self.subject, self.reply = src, dst, verb, subject, reply
        self.error = error


class _Error:
    __slots__ = ("kind", "message")

    def __init__(self, kind: str, message: str) -> None:
        self.kind, self.message = kind, message


# The layouts whose payloads are FlatBuffers tables.
_FLAT_LAYOUTS = frozenset(
    name for name, layout in LAYOUTS.items() if layout.payload_format == "flatbuffers"
)


def _names(batch: Any) -> Any:
    """The by-MsgType key of each row, as `Aggregator.add` names it."""
    name = batch.column("msg_type_name")
    layout = batch.column("layout")
    err = batch.column("error_kind")
    # An error row keeps the layout asked for: the error decides first.
    return pc.if_else(
        pc.is_valid(err),
        "(error)",
        pc.if_else(
            pc.is_valid(name), name, pc.if_else(pc.is_valid(layout), NO_MSG_TYPE, "(not decoded)")
        ),
    )


def _count_pairs(
    i: np.ndarray, keys: Any, weights: np.ndarray | None, data: dict[tuple[int, str], int]
) -> None:
    """data[(bin, key)] += count (or the sum of weights) over the rows."""
    codes = (
        pc.dictionary_encode(keys).combine_chunks()
        if isinstance(keys, pa.ChunkedArray)
        else pc.dictionary_encode(keys)
    )
    labels = codes.dictionary.to_pylist()
    idx = np.asarray(codes.indices.fill_null(0), np.int64)
    k = len(labels) or 1
    lo = int(i.min())
    combined = (i - lo) * k + idx
    uniq, inverse = np.unique(combined, return_inverse=True)
    sums = np.bincount(inverse, weights=weights, minlength=len(uniq))
    for c, n in zip(uniq.tolist(), sums.tolist()):
        key = (lo + c // k, labels[c % k])
        data[key] = data.get(key, 0) + int(n)


def add_batch(
    agg: Aggregator,
    tables: dict[str, Any],
    stats: Stats,
    where: str,
    on_notice: Callable[[str, Notice], None] | None = None,
) -> tuple[int, int] | None:
    """Put one batch of decoded rows (arrow_batches' tables) into `agg` and `stats`.

    The reader's notices (rows `input:KIND`) go to `on_notice(where, notice)`
    too.

    Args:
        agg: The report's Aggregator.
        tables: One batch's tables, as arrow_batches yields them.
        stats: The capture reader's counts, added to.
        where: The input's name, for notices and problems.
        on_notice: Called with (where, notice) for each reader notice, if given.

    Returns:
        The first and last message time of the batch (integer nanoseconds
        since the epoch), or None if it holds no message.
    """
    batch = _messages(tables)
    kinds = batch.column("error_kind")
    inputs = input_problems(kinds)
    if pc.any(inputs).as_py():
        _input_problems(agg, batch.filter(inputs), where, on_notice)
        batch = batch.filter(pc.invert(inputs))
    n = batch.num_rows
    if n == 0:
        return None
    ns = np.asarray(batch.column("ts_ns").fill_null(0), np.int64)
    lo, hi = int(ns.min()), int(ns.max())
    axis = agg.axis
    axis.index(lo)  # the axis grows to the batch's span first: every row's bin is then
    axis.index(hi)  # ns // width, and stays right when the axis grows later (rekeyed)
    i = ns // axis.width
    sizes = np.asarray(pc.binary_length(batch.column("payload")).fill_null(0), np.int64)
    agg.messages += n
    agg.bytes += int(sizes.sum())
    verbs = batch.column("verb")
    publishing = pc.is_in(verbs, pa.array(PUBLISHING_VERBS))
    direction = pc.if_else(publishing, "client_to_server", "server_to_client")
    _count_pairs(i, direction, sizes.astype(np.float64), agg.volume.data)
    _see_spans(agg, batch, publishing)
    names = _names(batch)
    _count_pairs(i, names, None, agg.by_type.data)
    _count_stats(stats, batch, names)
    _rows(agg, batch, tables, ns, i, names)
    return lo, hi


def _see_spans(agg: Aggregator, batch: Any, publishing: Any) -> None:
    """Each connection's first and last row of the batch (Aggregator.add's
    `activity`), its client side: the sender of a PUB, the receiver of a MSG."""
    endpoint = pc.if_else(publishing, batch.column("src"), batch.column("dst"))
    spans = (
        pa.table({"e": endpoint, "t": batch.column("ts_ns")})
        .group_by("e")
        .aggregate([("t", "min"), ("t", "max")])
        .sort_by([("t_min", "ascending"), ("e", "ascending")])
    )
    for e, lo, hi in zip(*(spans.column(c).to_pylist() for c in ("e", "t_min", "t_max"))):
        if e is not None and lo is not None:
            agg.activity.see_span(e, lo, hi)


def _count_stats(stats: Stats, batch: Any, names: Any) -> None:
    """What `Stats.count` counts, over the columns."""
    stats.messages += batch.num_rows
    per_subject = stats.per_subject
    for subject, count in _value_counts(batch.column("subject")):
        if subject in per_subject:
            per_subject[subject] += count
        elif len(per_subject) < MAX_SUBJECTS:
            per_subject[subject] = count
        else:
            per_subject[OTHER_SUBJECTS] = per_subject.get(OTHER_SUBJECTS, 0) + count
    for verb, count in _value_counts(batch.column("verb")):
        stats.per_verb[verb] = stats.per_verb.get(verb, 0) + count
    decoded = pc.and_(pc.is_null(batch.column("error_kind")), pc.is_valid(batch.column("layout")))
    ok = batch.filter(decoded)
    for layout, count in _value_counts(ok.column("layout")):
        stats.per_layout[layout] = stats.per_layout.get(layout, 0) + count
    for name, count in _value_counts(ok.column("msg_type_name")):
        key = msg_type_word(name)
        stats.per_msg_type[key] = stats.per_msg_type.get(key, 0) + count
    bad = batch.filter(pc.invert(decoded))
    for kind, count in _value_counts(bad.column("error_kind")):
        if kind is not None:
            stats.errors[kind] = stats.errors.get(kind, 0) + count


def _value_counts(arr: Any) -> list[tuple[Any, int]]:
    """(value, count) in order of first appearance (as counting row by row gives them)."""
    counts = pc.value_counts(arr)
    return list(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))


def _input_problems(
    agg: Aggregator, rows: Any, where: str, on_notice: Callable[[str, Notice], None] | None
) -> None:
    """The reader's notices (rows `input:KIND`), as the record path's on_notice has them."""
    for ts, kind, message, src, dst, source in zip(
        *(
            rows.column(c).to_pylist()
            for c in ("ts_ns", "error_kind", "error_message", "src", "dst", "source")
        )
    ):
        kind = kind[len(INPUT_PROBLEM) :]
        # The pipeline's row says "<file>: <kind>: <the reader's message>".
        message = (message or "").removeprefix(f"{source}: {kind}: ")
        agg.notice(kind, ts, f"{where}: {src} -> {dst}" if src else where, message or "")
        if on_notice is not None:
            on_notice(where, Notice(kind, message or "", ts, src, dst))


def _payload_rows(batch: Any, tables: dict[str, Any], name: str, payload_type: str) -> Any | None:
    """The payloads of the decoded rows of `batch` named `name` with
    `payload_type`, in row order, as a struct array of their payload
    table's fields: null for a row its table lacks (a FlatBuffers payload
    of the same type name, in payload_json). None when no table has the type."""
    table = tables.get(column_for(payload_type))
    if table is None:
        return None
    rows = pc.and_(
        pc.and_(
            pc.equal(batch.column("msg_type_name"), name),
            pc.equal(batch.column("payload_type"), payload_type),
        ),
        pc.is_null(batch.column("error_kind")),
    )
    wanted = np.asarray(batch.column("position").filter(pc.fill_null(rows, False)))
    # A payload table's rows are rows of messages (unique positions, ascending).
    have = np.asarray(table.column("position"))
    at = np.searchsorted(have, wanted)
    found = at < len(have)
    found[found] = have[at[found]] == wanted[found]
    fields = [f for f in table.schema if f.name not in JOIN_KEYS]
    values = pa.StructArray.from_arrays(
        [table.column(f.name).combine_chunks() for f in fields], fields=fields
    )
    return values.take(pa.array(np.where(found, at, 0), mask=~found))


def _rows(
    agg: Aggregator, batch: Any, tables: dict[str, Any], ns: np.ndarray, i: np.ndarray, names: Any
) -> None:
    """What needs the rows in order: requests and their replies, the handlers of
    decoded envelopes, node names, 503s, errors and the Raft transport."""
    cols = {c: batch.column(c).to_pylist() for c in ("src", "dst", "verb", "subject", "reply")}
    msg_names = batch.column("msg_type_name").to_pylist()
    has_headers = pc.is_valid(batch.column("headers"))
    headers = batch.column("headers")
    kinds = batch.column("error_kind").to_pylist()
    messages = batch.column("error_message")
    # Each decoded message's payload is in its payload type's table
    # (proto.Message: proto_Message); a MsgType may have another in another layout.

    payload_types = batch.column("payload_type").to_pylist()
    layouts = batch.column("layout").to_pylist()
    handlers = agg._handlers
    structs: dict[tuple[str, str], Iterator[Any]] = {}
    for n, pt in set(zip(msg_names, payload_types)):
        if (n in handlers or n in TYPED_REST) and pt:
            arr = _payload_rows(batch, tables, n, pt)
            if arr is not None:
                structs[(n, pt)] = _flat(arr, _descriptor(column_for(pt)))
    ns_list, i_list = ns.tolist(), i.tolist()
    replies = agg._replies
    nodes = agg.nodes
    payload = batch.column("payload")
    raft_bytes = _raft_payloads(agg, batch, names)
    hdr = has_headers.to_pylist()
    streams: list[str | None] = [None] * len(ns_list)
    for k, (src, dst, verb, subject, reply) in enumerate(
        zip(cols["src"], cols["dst"], cols["verb"], cols["subject"], cols["reply"])
    ):
        if reply and reply not in replies:
            agg.cluster.request(reply, subject)
        publishing = verb in PUBLISHING_VERBS
        if not publishing and dst not in nodes.by_endpoint:
            node = node_of_subject(subject)
            if node is not None:
                nodes.learn(dst, node, SUBSCRIBED)
        t, b = ns_list[k], i_list[k]
        stream = None
        kind = kinds[k]
        name = msg_names[k] if kind is None else None
        if kind is not None:
            agg.problems.error(
                t, b, _Row(src, dst, verb, subject, reply, _Error(kind, messages[k].as_py() or ""))
            )
        elif name is not None:
            it = structs.get((name, payload_types[k]))
            m: Any = next(it) if it is not None else None
            handler = handlers.get(name)
            if handler is not None and layouts[k] in _FLAT_LAYOUTS:
                # no payload table holds FlatBuffers tables: the envelope again
                m = _flat_message(payload[k].as_py() or b"", layouts[k])
            if handler is not None:
                # the payload tells apart publishes that no ack inbox names
                data = (payload[k].as_py() or b"") if name == "Publish" and not m.ackInbox else b""
                stream = handler(_Row(src, dst, verb, subject, reply), t, b, m, data)
            elif publishing and name in TYPED_REST:
                agg._typed_rest(
                    _Row(src, dst, verb, subject, reply),
                    t,
                    b,
                    name,
                    m if m is not None else _View(None, None),
                )
        elif k in raft_bytes:  # decoded, no MsgType: maybe the Raft transport's
            agg._raft_feed(_Row(src, dst, verb, subject, reply), t, b, raft_bytes[k] or b"")
        if stream:
            streams[k] = stream
        if verb == "HMSG" and hdr[k]:
            pairs = headers[k].as_py()
            if is_no_responders(build_header_block([(h["key"], h["value"]) for h in pairs])):
                agg.cluster.status_503(t, b, subject)
    _count_streams(agg, i, streams)


def _raft_payloads(agg: Aggregator, batch: Any, names: Any) -> dict[int, bytes | None]:
    """The payloads of the rows `_rows` gives the Raft transport's reading (no
    error, no MsgType, decoded; none without one), by row: which rows those
    are is decided here alone. Taken to Python in one call, not as a pyarrow
    scalar per row (1.5 us each: most rows of an idle cluster's capture are
    the transport's)."""
    if agg.raft is None:
        return {}
    want = pc.and_(
        pc.and_(pc.is_null(batch.column("error_kind")), pc.is_null(batch.column("msg_type_name"))),
        pc.not_equal(names, "(not decoded)"),
    )
    idx = np.flatnonzero(np.asarray(want.fill_null(False), np.bool_))
    if not idx.size:
        return {}
    return dict(zip(idx.tolist(), batch.column("payload").take(pa.array(idx)).to_pylist()))


def _flat_message(envelope: bytes, layout: str) -> Any:
    """The FlatBuffers table of an envelope the columnar pass decoded, as the
    handlers read it (a FlatBuffers Ack's fields are not proto_Ack's)."""
    return handler_view(decode(envelope, layout).message)


def _count_streams(agg: Aggregator, i: np.ndarray, streams: list[str | None]) -> None:
    """Messages by stream and bin; past MAX_STREAMS streams, the new ones together.

    The streams past the limit are replaced in one pass (pc.is_in): one
    replacement per new stream was a pass over the batch each, quadratic in
    the streams of a batch (100,000 distinct streams: 64.9 s)."""
    arr = pa.array(streams, pa.string())
    known = pc.is_valid(arr)
    if not pc.any(known).as_py():
        return
    arr = arr.filter(known)
    past: list[str] = []
    for name in pc.unique(arr).to_pylist():  # in order of first appearance
        if name in agg.streams:
            continue
        if len(agg.streams) >= MAX_STREAMS:
            past.append(name)
            name = OTHER_STREAMS
        agg.streams.add(name)
    if past:
        arr = pc.if_else(pc.is_in(arr, value_set=pa.array(past, pa.string())), OTHER_STREAMS, arr)
    _count_pairs(i[np.asarray(known)], arr, None, agg.by_stream.data)
