"""Arrow in, Arrow out: lbparse's answers as columns, for pandas, Polars, DuckDB, Spark.

    >>> import lbparse
    >>> batch = lbparse.decode_arrow([bytes.fromhex("b90e43b40008000b0a027331")])
    >>> batch.column("msg_type_name").to_pylist()
    ['ServerInfoResponse']
    >>> for batch in lbparse.read_capture_arrow("nats.pcap"):    # doctest: +SKIP
    ...     df = batch.to_pandas()

`decode_arrow(payloads)` decodes many envelopes at once into one
RecordBatch: one row per payload, exactly `lbparse.decode`'s answer for it
(the header fields, the CRC and whether it matched, the MsgType, the
payload as a typed struct column per payload type, or the error's kind and
message). `read_capture_arrow(path)` reads a capture (pcap, pcapng, or our
JSON Lines / Parquet recordings) and yields the rows `lbparse pipeline`
writes: one per NATS message, with its capture columns (time, endpoints,
verb, subject...), and one per problem in the input (`error_kind`
`input:...`). Both run the pipeline's batch decoder; a capture is read by
the C capture loop where it is built (setup.py), else by the Python reader.

The heavy imports (pyarrow, numpy, the columnar core) happen at the first
call, through lbparse.extras.need (its LATE table), so that `import lbparse`
stays light.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from lbparse.codec.limits import Limits  # light, and named in read_capture_arrow's signature
from lbparse.errors import InputError
from lbparse.extras import need

if TYPE_CHECKING:
    import pyarrow as pa

    from lbparse import capture
else:
    # The annotations name pyarrow's types and lbparse.capture's Notice;
    # `typing.get_type_hints` resolves them in this module's globals. A
    # stand-in that imports the module when an attribute is asked for keeps
    # `import lbparse` light and the hints whole.
    class _Late:
        def __init__(self, load):
            self._load = load
            self._module = None

        def __getattr__(self, name):
            # the module once loaded, not need() again: ~20 lookups a
            # decode_tables call, 3 us each through importlib
            if self._module is None:
                self._module = self._load()
            return getattr(self._module, name)

    pa = _Late(lambda: need("pyarrow"))
    capture = _Late(lambda: need("lbparse.capture"))

__all__ = [
    "DECODED_COLUMNS_FIRST",
    "decode_arrow",
    "decode_tables",
    "payload_records",
    "read_capture_arrow",
    "read_capture_tables",
]

# decode_arrow's first columns; then the payload and one struct column per payload type.
DECODED_COLUMNS_FIRST = (
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
)


@lru_cache(maxsize=16)  # as decoder_for: the options' check (a decode) once, not a call
def _decoder(layout: str, verify_crc: bool, lenient: bool, json_columns: bool = False) -> Any:
    decode_arrow = need("lbparse.columnar.decode_arrow")
    options = decode_arrow.DecodeOptions(
        layout=layout, verify_crc=verify_crc, lenient=lenient, json_columns=bool(json_columns)
    )
    options.check()  # the library's own ValueError for an unknown layout or options
    return decode_arrow.decoder_for(options)


def decode_arrow(
    payloads: pa.Array | pa.ChunkedArray | Iterable[bytes | None],
    layout: str = "v0",
    *,
    verify_crc: bool = True,
    lenient: bool = False,
) -> pa.RecordBatch:
    """Decode many envelopes at once: one row per payload, in order.

    Each row is `lbparse.decode`'s answer, errors included (`error_kind`,
    `error_message`). Columns: `DECODED_COLUMNS_FIRST`, `payload`,
    `payload_json`, then one struct column per payload type
    (`proto_Message`, `proto_Ack`, ..., `commitlog_ReplicationResponse`),
    null where the row has another type.

    Args:
        payloads: A pyarrow binary (or large binary) array, chunked or not,
            or anything `pyarrow.array(..., pyarrow.binary())` takes (a list
            of bytes); a null payload gives a row with `error_kind`
            "input:null_payload".
        layout: As `lbparse.decode` takes it ("auto" included).
        verify_crc: As `lbparse.decode`.
        lenient: As `lbparse.decode`.

    Returns:
        One pyarrow RecordBatch, a row per payload.
    """
    capture_columns = need("lbparse.columnar.schema").CAPTURE_COLUMNS
    decoder = _decoder(layout, verify_crc, lenient)
    out = decoder(payload_records(payloads))
    keep = [name for name in out.schema.names if name not in capture_columns]
    return cast("pa.RecordBatch", out.select(keep))


def decode_tables(
    payloads: pa.Array | pa.ChunkedArray | Iterable[bytes | None],
    layout: str = "v0",
    *,
    verify_crc: bool = True,
    lenient: bool = False,
) -> dict[str, pa.Table]:
    """Decode many envelopes at once into narrow tables.

    `"messages"`: one row per payload, in input order, `position` its index:
    the header fields, msg_type_name, payload_type, the error (as
    `decode_arrow`). Then one table per payload type present
    (`"proto_Message"`, `"commitlog_ReplicationResponse"`, ...): `position`
    and the payload's fields as top-level columns, one row per payload of
    that type. Join a payload table to `messages` on `position`.

        >>> t = lbparse.decode_tables([bytes.fromhex("b90e43b40008000b0a027331")])
        >>> t["protocol_ServerInfoResponse"].column("id").to_pylist()
        ['s1']

    Args:
        payloads: What `decode_arrow` takes (a binary array, a list of bytes).
        layout: As `lbparse.decode` takes it ("auto" included).
        verify_crc: As `lbparse.decode`.
        lenient: As `lbparse.decode`.

    Returns:
        pyarrow Tables by name: "messages", then one per payload type
        present, each with the pandas metadata `capture --tables` writes.
    """
    tables = need("lbparse.columnar.tables")
    decoder = _decoder(layout, verify_crc, lenient)
    # The bare keys' messages schema has no capture column: none is made
    # and dropped after (Table.drop_columns, a table a column: ~0.2 ms).
    out: dict[str, pa.Table] = tables.tables_of(
        decoder.decode(_bare_records(payloads)), keys=tables.BARE_KEYS
    )
    return out


def payload_records(payloads: Any) -> pa.RecordBatch:
    """The decoder's input for bare payloads: no capture columns, `position` the index.

    Args:
        payloads: Anything `decode_arrow` takes.

    Returns:
        A RecordBatch of the record schema: the payloads, `position`
        0..n-1, the capture columns null.
    """
    return _records(payloads, need("lbparse.columnar.schema").arrow_record_schema())


# What the decoder reads of bare payloads (their errors null): the record
# schema's columns but the capture's, which the bare tables do not have.
_BARE_RECORD = ("position", "payload", "error_kind", "error_message")


def _bare_records(payloads: Any) -> pa.RecordBatch:
    """decode_tables' input: `payload_records` without the capture columns.

    The decoder copies only the record columns a batch has, and the bare
    tables have no capture column: a dozen null columns were made for
    nothing (29 ns a row of a 65,536-row batch, 56 us a call of 100)."""
    return _records(payloads, _bare_record_schema())


@lru_cache(maxsize=1)
def _bare_record_schema() -> pa.Schema:
    full = need("lbparse.columnar.schema").arrow_record_schema()
    return pa.schema([f for f in full if f.name in _BARE_RECORD])


def _records(payloads: Any, schema: pa.Schema) -> pa.RecordBatch:
    """The payloads as a batch of `schema` (record columns): `position`
    0..n-1, `source` empty, every other column but the payload null."""
    np = need("numpy")
    nulls = need("lbparse.columnar.decode_arrow").null_column
    arr = _binary(payloads)
    n = len(arr)
    cols = []
    for f in schema:
        if f.name == "payload":
            cols.append(arr)
        elif f.name == "source":
            cols.append(pa.repeat(pa.scalar("", pa.string()), n))
        elif f.name == "position":
            cols.append(pa.array(np.arange(n, dtype=np.int64)))
        else:
            cols.append(nulls(n, f.type))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _binary(payloads: Any) -> pa.Array:
    if isinstance(payloads, pa.ChunkedArray):
        payloads = payloads.combine_chunks() if payloads.num_chunks != 1 else payloads.chunk(0)
    if not isinstance(payloads, pa.Array):
        payloads = need("lbparse.columnar.decode_arrow").binary_array(
            payloads if isinstance(payloads, (list, tuple)) else list(payloads)
        )
    if payloads.type != pa.binary():
        payloads = payloads.cast(pa.binary())  # large_binary: a batch holds < 2 GiB
    return payloads


def read_capture_arrow(
    path: str | os.PathLike[str],
    layout: str = "auto",
    *,
    verify_crc: bool = True,
    lenient: bool = False,
    batch_rows: int = 65536,
    limits: Limits | None = None,
    json_columns: bool = False,
) -> Iterator[pa.RecordBatch]:
    """The rows `lbparse pipeline` makes of one capture file, as RecordBatches.

    One row per NATS message (its capture columns, then decoded as
    `decode_arrow` decodes) and one per problem the reader found (a gap, a
    damaged block, a file that cannot be read: `error_kind` "input:KIND"),
    in reading order; `position` numbers them from 0. Memory stays flat
    whatever the file size. The problems are those of `read_capture_tables`
    and the pipeline: cleartext HTTP/2 connections (the clients' gRPC calls,
    which `read_capture_tables` gives as tables) make no rows; bytes that
    looked like HTTP/2 but were not are problem rows after the others, each
    `position` still its own; and what the gRPC reading lost is a problem
    row numbered after the file's rows.

    Args:
        path: A pcap, pcapng, or our JSON Lines / Parquet recording.
        layout: As `lbparse.decode` takes it; "auto" uses what the capture
            proves (lbparse.codec.generation).
        verify_crc: As `lbparse.decode`.
        lenient: As `lbparse.decode`.
        batch_rows: The most rows a batch holds.
        limits: What hostile input may cost (lbparse.Limits; captures only);
            None for the defaults.
        json_columns: Also the JSON text columns of Liftbridge's traffic:
            `traffic_json`, and `fields_json` and `command_json` inside
            `raft_rpcs` (JSON made row by row: slower). Off: the columns are
            not there.

    Yields:
        pyarrow RecordBatches of at most `batch_rows` rows, in reading order.
    """
    decode_in_order = need("lbparse.columnar.ordered").decode_in_order
    grpc = need("lbparse.columnar.grpctables")
    decoder = _decoder(layout, verify_crc, lenient, json_columns)
    # The verdict of read_capture_tables, the pipeline and the report: the
    # bytes of cleartext HTTP/2 connections are no NATS problem rows. The C
    # loop reads NATS only, so the rows that may be HTTP/2 are held back
    # until the gRPC reading names its connections (grpctables.Held).
    held = grpc.Held()
    after: dict[str, int] = {}  # source -> the position after its last row
    for decoded in decode_in_order(_capture_records(path, batch_rows, limits), decoder):
        batch = decoded.to_batch()
        rows = pa.Table.from_batches([batch])
        _positions_after(rows, after)
        kept = held.take(rows)
        if kept is rows:
            yield batch
        elif kept.num_rows:
            yield from kept.combine_chunks().to_batches()
    connections: set[tuple[str, str]] = set()
    for source in sorted(held.sources()):
        notices: list[capture.Notice] = []
        connections |= grpc.read_grpc(
            source,
            None,
            limits=limits,
            on_notice=notices.append,
            connections=held.connections(source),
        )
        lost = grpc.notice_rows(source, after.get(source, 0), notices, decoder.schema)
        yield from lost.to_batches(max_chunksize=batch_rows)
    problems, _ = held.release(connections)
    yield from problems.to_batches(max_chunksize=batch_rows)


def read_capture_tables(
    path: str | os.PathLike[str],
    layout: str = "auto",
    *,
    verify_crc: bool = True,
    lenient: bool = False,
    batch_rows: int = 65536,
    limits: Limits | None = None,
    on_info: Callable[[capture.Notice], None] | None = None,
    json_columns: bool = False,
) -> Iterator[dict[str, pa.Table]]:
    """`read_capture_arrow`'s rows as narrow tables, one dict per batch.

    Each dict has `"messages"` (every row of the batch: capture columns,
    header fields, msg_type_name, payload_type, error) and one table per
    payload type present in the batch, keyed like `messages` by
    `(source, position)`. The tables `lbparse pipeline` writes are these,
    batch after batch. A capture that holds cleartext HTTP/2 then gives
    `"grpc_calls"` and `"grpc_messages"` (the client's gRPC calls and their
    messages, lbparse.columnar.grpctables), in dicts whose `"messages"` is
    empty; the bytes of its HTTP/2 connections are not NATS problem rows
    (a row that looked like HTTP/2 but was not comes last, its `position`
    still its own). What the gRPC reading lost (a limit, a message cut
    short: lbparse.capture.notices) is a problem row of `messages`
    (`input:KIND`), numbered after the file's own rows.

    Args:
        path: A pcap, pcapng, or our JSON Lines / Parquet recording.
        layout: As `read_capture_arrow`.
        verify_crc: As `lbparse.decode`.
        lenient: As `lbparse.decode`.
        batch_rows: The most rows a batch holds.
        limits: What hostile input may cost (lbparse.Limits); None for the
            defaults.
        on_info: Called with each Notice of normal behaviour the gRPC reading
            noticed (`Notice.info`: a cancelled call, a call cut by the
            capture's end), which is not a row; None to drop them.
        json_columns: Also the JSON text columns, each last in its table:
            `traffic_json` in traffic (all of the message), `fields_json` in
            raft_rpcs (the RPC's fields), `command_json` in raft_entries (the
            RaftLog command). Made row by row, they cost more than the rest of
            the traffic's reading; off, the columns are not there.

    Yields:
        Dicts of pyarrow Tables by name, one per batch.
    """
    tables_of = need("lbparse.columnar.tables").tables_of
    decode_in_order = need("lbparse.columnar.ordered").decode_in_order
    grpc = need("lbparse.columnar.grpctables")
    decoder = _decoder(layout, verify_crc, lenient, json_columns)
    held = grpc.Held()
    after: dict[str, int] = {}  # source -> the position after its last row
    for decoded in decode_in_order(_capture_records(path, batch_rows, limits), decoder):
        tables: dict[str, pa.Table] = tables_of(decoded)
        _positions_after(tables["messages"], after)
        tables["messages"] = held.take(tables["messages"])
        yield tables
    # The C loop reads NATS only: a file that showed bytes that may be HTTP/2
    # is read again for it (lbparse.columnar.grpctables); the rows it held
    # back are problems only where the connection was not HTTP/2.
    empty = need("lbparse.columnar.tables").table_schema("messages").empty_table()
    connections: set[tuple[str, str]] = set()
    for source in sorted(held.sources()):
        notices: list[capture.Notice] = []
        for found in grpc.grpc_tables(
            source,
            limits=limits,
            batch_rows=batch_rows,
            found=connections,
            on_notice=notices.append,
            connections=held.connections(source),
        ):
            yield {"messages": empty, **found}
        if on_info is not None:
            for n in notices:
                if n.info:
                    on_info(n)
        rows = grpc.notice_rows(source, after.get(source, 0), notices)
        if rows.num_rows:
            yield {"messages": rows}
    problems, _ = held.release(connections)
    if problems.num_rows:
        yield {"messages": problems}


def _positions_after(messages: pa.Table, after: dict[str, int]) -> None:
    """Note, per source, the position after the last of `messages`' rows."""
    if not messages.num_rows:
        return
    pc = need("pyarrow.compute")
    # Over the two columns alone: filtering the whole batch (the wide row's
    # structs included) cost ~5 ms a batch for one maximum.
    sources, positions = messages.column("source"), messages.column("position")
    names = pc.unique(sources).to_pylist()
    if len(names) == 1:  # a batch of one file, the usual: no filter
        lasts = [pc.max(positions).as_py()]
    else:
        lasts = [pc.max(positions.filter(pc.equal(sources, s))).as_py() for s in names]
    for source, last in zip(names, lasts):
        after[source] = max(after.get(source, 0), last + 1)


def _capture_records(
    path: str | os.PathLike[str], batch_rows: int, limits: Limits | None
) -> Iterator[pa.RecordBatch]:
    sources = need("lbparse.columnar.sources")
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise InputError(
            "bad_option",
            f"batch_rows must be a whole number of rows, 1 or more; got {batch_rows!r}",
        )
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError(f"limits must be an lbparse.Limits; got {type(limits).__name__}")
    options = sources.SourceOptions(batch_rows=batch_rows)
    for unit in sources.plan_files([os.fspath(path)], options):
        stats = sources.UnitStats(unit.path, unit.format, unit.size)
        if unit.format in ("pcap", "pcapng") and unit.error is None:
            records = sources.read_capture(unit, options, stats, limits=limits)
        else:
            records = sources.read_unit(unit, options, stats)
        for batch in records:
            for start in range(0, max(batch.num_rows, 1), batch_rows):
                yield batch.slice(start, batch_rows)
