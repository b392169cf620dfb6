"""One Arrow batch of NATS records in, the same rows decoded out.

`BatchDecoder(options).decode(records)` is what each task calls per batch;
the `Decoded` it returns gives the rows of each msg_type_name with only the
columns they fill (`partitions`, for the writer) or the whole batch in the
output schema (`to_batch`; `BatchDecoder(options)(records)` is that).
Every record becomes exactly one output row: decoded, or with
`error_kind`/`error_message` (the `EnvelopeError` lbparse.decode raises),
or passed through when the reader already marked it as a problem.

The work is split so that per-row Python runs only where it must:

- the header of every row is read at once with numpy from the Arrow
  buffers (magic, version, header length, flags, byte 7, CRC);
- for `--layout v0` (strict) the well-formed rows take a fast path: the
  header checks are numpy masks, the CRCs one call per batch
  (`crc.crc32c_ranges`), and the payloads are decoded by the vectorized protobuf
  reader (`wirescan`), one call per payload type per batch;
- `--layout auto` takes the same path for the strict v0 rows whose auto
  answer is v0's (nearly all v0 traffic; `_auto_v0` says which), their
  payloads decoded before the rows are taken;
- everything else (other layouts, `--lenient`, any row the fast path
  does not take, including every error) goes through `lbparse.decode`
  itself, so the errors and their messages are the library's own. Their
  payloads still go through `wirescan` when they are a suffix of the
  record, else through upb and the column builders (`columns.py`).

Rows the fast path takes give exactly what `lbparse.decode(data, layout)`
gives; tests hold the paths equal on the reference vectors, on damaged
copies of them, and (auto) on payloads crafted to be unclean.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import crc32c as _crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message as ProtoMessage

from lbparse.capture.traffic import TrafficReader
from lbparse.codec import jsonform
from lbparse.codec.api import decode, decode_header
from lbparse.codec.commitlog import ReplicationResponse
from lbparse.codec.detect import contested_msg_types
from lbparse.codec.generation import CONFIDENCE, NEWEST, GenerationContext, proof_label, proves
from lbparse.codec.layouts import LAYOUTS
from lbparse.codec.limits import DEFAULT
from lbparse.codec.payloads import BYTES, CODECS, REPLICATION_RESPONSE, descriptor_of
from lbparse.codec.wire import (
    COOKIE,
    CRC_FLAG,
    CRC_HEADER_LEN,
    CRC_OFFSET,
    CRC_STRUCT,
    FIELD_ERRORS,
    FLAGS_OFFSET,
    HEADER_LEN_OFFSET,
    HEADER_SIZE,
    MAGIC,
    MSG_TYPE_OFFSET,
    VERSION,
    VERSION_OFFSET,
)
from lbparse.columnar import DEFAULT_BATCH_ROWS
from lbparse.columnar.columns import builder_for
from lbparse.columnar.commitscan import decode_replication
from lbparse.columnar.context import apply_context
from lbparse.columnar.crc import crc32c_ranges
from lbparse.columnar.schema import (
    JSON_COLUMNS,
    RECORD_COLUMNS,
    arrow_output_schema,
    payload_columns,
    typed_payloads,
)
from lbparse.columnar.trafficcols import traffic_parts
from lbparse.columnar.wirescan import binary_buffers, bitmap, decode_structs, spread
from lbparse.errors import EnvelopeError, FastPathWarning, InputError
from lbparse.native_switch import native_enabled

__all__ = [
    "UNDETERMINED",
    "BatchDecoder",
    "DecodeOptions",
    "Decoded",
    "binary_array",
    "binary_buffers",
    "decisive_reason",
    "decoder_for",
    "group_rows",
    "native_available",
]

# The layout column of a row `--layout auto` could not decode: envelope bytes that
# no layout accepts (lbparse.codec.detect raises the newest layout's error for them).
UNDETERMINED = "undetermined"

# The fixed header and the CRC field after it: what _headers reads of every row.
_HEADER_AND_CRC = CRC_OFFSET + CRC_STRUCT.size
_MAX_PAYLOAD = DEFAULT.max_payload  # the per-row path decodes with the default limits
# The envelope header as the C pass (_kernels.headers) reads it: lbparse.codec.wire's facts.
_ENVELOPE = (
    bytes(MAGIC),
    VERSION_OFFSET,
    HEADER_LEN_OFFSET,
    FLAGS_OFFSET,
    MSG_TYPE_OFFSET,
    CRC_OFFSET,
    CRC_STRUCT.size,
    HEADER_SIZE,
    CRC_HEADER_LEN,
    CRC_FLAG,
    VERSION,
    _MAX_PAYLOAD,
)

_kernels: Any
try:
    from lbparse.columnar import _kernels  # type: ignore[attr-defined,no-redef]
except ImportError:  # not built: numpy does the same
    _kernels = None


def native_available() -> bool:
    """Whether the C kernels are built and not turned off (LBPARSE_NATIVE=0).

    Returns:
        True when the batch decoder may use them.
    """
    return _kernels is not None and native_enabled()


_crc = _crc32c.crc32c


@dataclass(frozen=True)
class DecodeOptions:
    """How payloads are decoded.

    The `lbparse.decode` options, and Spark's `emit.default.values` for the
    struct columns.

    Attributes:
        layout: As `lbparse.decode` takes it ("auto" included).
        verify_crc: Check the CRC-32C a header carries.
        lenient: Accept what upstream accepts, with warnings.
        emit_defaults: Proto3 zeros, "" and an enum's first value are values,
            as the data has them (the default); False: null, as from_protobuf
            gives them without the option.
        json_columns: Also the JSON text columns of Liftbridge's traffic
            (lbparse.columnar.schema.JSON_COLUMNS: traffic_json, fields_json,
            command_json); off by default, when none is made.
    """

    layout: str = "v0"
    verify_crc: bool = True
    lenient: bool = False
    emit_defaults: bool = True
    json_columns: bool = False

    def check(self) -> None:
        """Raise ValueError (the library's own) if lbparse.decode refuses these options."""
        try:
            decode(b"", self.layout, verify_crc=self.verify_crc, lenient=self.lenient)
        except EnvelopeError:
            pass  # the options are fine; the empty bytes are not


def binary_array(items: list[Any] | tuple[Any, ...], native: bool | None = None) -> pa.Array:
    """A list or tuple of payloads (bytes, None, or what pyarrow takes) as a binary array.

    Args:
        items: The payloads.
        native: By `_kernels.binary` (None: when `native_available()`), one
            pass over exact bytes and None; pyarrow's conversion, the
            reference, for any other item and when False.

    Returns:
        A binary array of len(items) rows, None a null.
    """
    if native is None:
        native = native_available()
    got = _kernels.binary(items) if native else None
    if got is None:
        return pa.array(items, pa.binary())
    offsets, data, validity, nulls = got
    buffers = [validity and pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.binary(), len(items), buffers, null_count=nulls)


class _Names:
    """Strings of a column as small codes; `array(codes)` builds the column."""

    def __init__(self, code: dict[str, int] | None = None) -> None:
        # `code`: names already coded, each its insertion rank (_Rows.reason_texts)
        self.code: dict[str, int] = {} if code is None else code
        self._table = pa.array([], pa.string())  # the names by code, made again as codes grow
        # The table's own offsets and bytes, for _kernels.strings.
        self._offsets = np.zeros(1, np.int32)
        self._data = b""

    def __call__(self, name: str | None) -> int:
        if name is None:
            return -1
        c = self.code.get(name)
        if c is None:
            c = self.code[name] = len(self.code)
        return c

    def name(self, code: int) -> str | None:
        for name, c in self.code.items():
            if c == code:
                return name
        return None

    def array(self, codes: np.ndarray, native: bool = False) -> pa.Array:
        """The string column of `codes` (int32; -1 a null).

        `native`: by _kernels.strings, one copy of each row's bytes; Arrow's
        take is the reference (three such columns a batch took ~0.7 ms each
        of a 65,536-row batch's ~15)."""
        if len(self._table) != len(self.code):  # codes are only ever added
            self._table = pa.array(list(self.code), pa.string())
            encoded = [name.encode() for name in self.code]
            self._offsets = np.zeros(len(encoded) + 1, np.int32)
            np.cumsum([len(b) for b in encoded], out=self._offsets[1:])
            self._data = b"".join(encoded)
        table = self._table
        n = len(codes)
        if not len(table):
            return null_column(n, pa.string())
        null = codes < 0
        if not native:
            return table.take(pa.array(np.where(null, 0, codes).astype(np.int32), mask=null))
        offsets = np.empty(n + 1, np.int32)
        data = _kernels.strings(
            np.ascontiguousarray(codes, np.int32), self._offsets, self._data, offsets
        )
        nulls = int(np.count_nonzero(null))
        validity = bitmap(~null) if nulls else None
        return pa.Array.from_buffers(
            pa.string(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls
        )


@dataclass
class _Rows:
    """What decoding found for each row of a batch (numpy columns, sparse extras)."""

    n: int
    layout: np.ndarray = field(init=False)
    version: np.ndarray = field(init=False)
    header_len: np.ndarray = field(init=False)
    flags: np.ndarray = field(init=False)
    has_header: np.ndarray = field(init=False)
    crc: np.ndarray = field(init=False)
    has_crc: np.ndarray = field(init=False)
    crc_ok: np.ndarray = field(init=False)  # -1 unknown, 0, 1
    msg_type: np.ndarray = field(init=False)
    name: np.ndarray = field(init=False)
    ptype: np.ndarray = field(init=False)
    pstart: np.ndarray = field(init=False)  # payload range in the batch's data buffer
    pend: np.ndarray = field(init=False)
    errors: dict[int, tuple[str, str]] = field(default_factory=dict)
    warnings: dict[int, tuple[str, ...]] = field(default_factory=dict)
    messages: dict[int, Any] = field(default_factory=dict)  # decoded objects, when not by range
    # auto, per-row rows: layout candidates of the ambiguous; what the others prove
    ambiguous: dict[int, tuple[str, ...]] = field(default_factory=dict)
    proofs: dict[int, tuple[str, str]] = field(default_factory=dict)
    # How the layout was decided (Envelope.confidence, .ambiguous, decisive_reason):
    # NaN / -1 where null; `reason` codes index `reason_texts` (-1: none).
    confidence: np.ndarray = field(init=False)
    decided_ambiguous: np.ndarray = field(init=False)  # -1 null, 0, 1
    reason: np.ndarray = field(init=False)
    reason_texts: dict[str, int] = field(default_factory=dict)
    # Payloads decoded before the rows were taken: per payload type, the
    # rows (ascending) and their struct values.
    decoded: dict[str, tuple[np.ndarray, pa.Array]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = self.n
        self.layout = np.full(n, -1, np.int32)
        self.version = np.zeros(n, np.int32)
        self.header_len = np.zeros(n, np.int32)
        self.flags = np.zeros(n, np.int32)
        self.has_header = np.zeros(n, np.bool_)
        self.crc = np.zeros(n, np.int64)
        self.has_crc = np.zeros(n, np.bool_)
        self.crc_ok = np.full(n, -1, np.int8)
        self.msg_type = np.full(n, -1, np.int32)
        self.name = np.full(n, -1, np.int32)
        self.ptype = np.full(n, -1, np.int32)
        self.pstart = np.zeros(n, np.int64)
        self.pend = np.full(n, -1, np.int64)  # -1: no payload range to decode
        self.confidence = np.full(n, np.nan)
        self.decided_ambiguous = np.full(n, -1, np.int8)
        self.reason = np.full(n, -1, np.int32)

    def reason_code(self, reason: str | None) -> int:
        """The code of a row's reason (-1 for none: the column is null there)."""
        if reason is None:
            return -1
        return self.reason_texts.setdefault(reason, len(self.reason_texts))


class BatchDecoder:
    """Decodes record batches into output batches (one per process and options).

    Args:
        options: How payloads are decoded.
    """

    def __init__(self, options: DecodeOptions) -> None:
        self.options = options
        self.schema = arrow_output_schema(options.json_columns)
        # Each column's type, looked up once: pyarrow wraps a type anew at
        # every Field.type (~0.7 us each, dozens a batch).
        self.types = {f.name: f.type for f in self.schema}
        self.typed = typed_payloads()
        self.columns = payload_columns()
        newest, _ = contested_msg_types()
        self.auto = options.layout == "auto" and newest == "v0"
        # The numpy path: strict v0, and auto, whose answer for most strict
        # v0 envelopes is v0's (see _auto_v0). Tests turn it off to compare.
        self.fast = (options.layout == "v0" or self.auto) and not options.lenient
        self.layouts, self.names, self.ptypes = _Names(), _Names(), _Names()
        # v0's MsgType table as arrays indexed by byte 7 (256 entries).
        v0 = LAYOUTS["v0"]
        self.v0_code = self.layouts("v0")
        self.v0_known = np.zeros(256, np.bool_)
        self.v0_name = np.full(256, -1, np.int32)
        self.v0_ptype = np.full(256, -1, np.int32)
        for value, mt in v0.msg_types.items():
            self.v0_known[value] = True
            self.v0_name[value] = self.names(mt.name)
            self.v0_ptype[value] = self.ptypes(mt.payload_type)
        self.ptype_names = list(self.ptypes.code)  # v0's codes -> payload types
        self._builders: dict[str, Any] = {}
        # auto's decision for the fast path's rows, by byte 7 * 2 + CRC flag (_decided_v0):
        # confidence, ambiguous, the reason, the layout candidates.
        self.auto_decisions: dict[int, tuple[float | None, bool, str | None, tuple[str, ...]]] = {}
        # Byte 7 values for which a FlatBuffers layout reads the payload as a table.
        self.fb_checked = np.zeros(256, np.bool_)
        for lay in LAYOUTS.values():
            if lay.payload_format == "flatbuffers":
                for value, mt in lay.msg_types.items():
                    self.fb_checked[value] |= mt.payload_type != BYTES
        # strict: an exception of a vectorized reader propagates (tests);
        # otherwise the rows go the per-row way, `fallbacks` counts it and a
        # FastPathWarning says it.
        self.strict = False
        self.fallbacks = 0
        self._use_vectorized = True
        # The C passes (headers and CRCs, grouping, ReplicationResponse, the
        # protobuf reader); False runs their Python references (tests compare).
        self.native = native_available()

    def _vectorized(
        self,
        ptype: str,
        typ: pa.DataType,
        data: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        clean: bool = False,
    ) -> tuple[pa.Array, np.ndarray]:
        """The vectorized reader of a payload type over the ranges: (column, ok).
        If it fails (or is off), no row is ok: every one is left to upb or
        lbparse.codec.commitlog, row by row."""
        k = len(starts)
        if self._use_vectorized:
            try:
                if ptype == REPLICATION_RESPONSE:
                    arr, ok = decode_replication(typ, data, starts, ends, native=self.native)
                else:
                    arr, ok = decode_structs(
                        self._descriptor(ptype),
                        typ,
                        data,
                        starts,
                        ends,
                        self.options.emit_defaults,
                        clean=clean,
                        native=self.native,
                    )
                if len(arr) == k and len(ok) == k and arr.type == typ:
                    return arr, ok
                raise ValueError(
                    f"the vectorized {ptype} reader gave {len(arr)} rows of "
                    f"{arr.type} for {k} of {typ}"
                )
            except Exception as exc:
                if self.strict:
                    raise
                self._fell_back(f"the vectorized {ptype} reader", k, exc)
        return null_column(k, typ), np.zeros(k, np.bool_)

    def _fell_back(self, what: str, rows: int, exc: Exception) -> None:
        """Count a fast path's failure and say it: a bug, never silent."""
        self.fallbacks += 1
        warnings.warn(
            FastPathWarning(
                "fast_path_failed",
                f"{what} failed on a batch of {rows:,} rows "
                f"({type(exc).__name__}: {exc}); the rows were decoded by the Python "
                "reference instead (right, but slower): please report this",
            ),
            stacklevel=3,
        )

    # -- the batch ---------------------------------------------------------

    def __call__(self, records: pa.RecordBatch) -> pa.RecordBatch:
        """The decoded rows as one batch of the output schema, in input order."""
        return self.decode(records).to_batch()

    def decode(
        self,
        records: pa.RecordBatch,
        context: GenerationContext | None = None,
        base: int = 0,
        traffic: TrafficReader | None = None,
    ) -> Decoded:
        """The batch decoded, with the columns of Liftbridge's non-envelope traffic.

        Args:
            records: A batch of the record schema.
            context: As `decoded`.
            base: As `decoded`.
            traffic: The unit's traffic reader, fed each batch once, in order;
                None: no traffic columns.

        Returns:
            The decoded batch.
        """
        out = self.decoded(records, context, base)
        if traffic is not None:
            # `traffic` a value per row; its detail at the rows it names, as
            # a struct column's (spread only for the wide batch)
            wide, named = traffic_parts(traffic, records, self.options.json_columns)
            out.columns.update(wide)
            out.structs.update(named)
        return out

    def decoded(
        self, records: pa.RecordBatch, context: GenerationContext | None = None, base: int = 0
    ) -> Decoded:
        """The batch decoded.

        Should anything of the vectorized readers fail on it (a bug: the tests
        run `strict`, which lets it through), the batch is decoded again row by
        row with lbparse.decode and upb alone, `fallbacks` counts it and a
        `lbparse.errors.FastPathWarning` says it: a job never fails on its
        data, and never falls back unseen.

        Args:
            records: A batch of the record schema.
            context: Layout auto: the proof of generations of the unit this batch
                belongs to; the batch's proof is noted in it and its ambiguous
                envelopes resolved by it, as the capture reader does
                (lbparse.codec.generation). None: each envelope alone.
            base: The index of the batch's first message in its unit.

        Returns:
            The decoded batch.
        """
        try:
            return self._decode(records, self.fast, vectorized=True, context=context, base=base)
        except Exception as exc:
            if self.strict:
                raise
            self._fell_back("the batch decoder", records.num_rows, exc)
            return self._decode(records, False, vectorized=False, context=context, base=base)

    def _decode(
        self,
        records: pa.RecordBatch,
        fast: bool,
        vectorized: bool,
        context: GenerationContext | None = None,
        base: int = 0,
    ) -> Decoded:
        self._use_vectorized = vectorized
        n = records.num_rows
        payload = records.column("payload")
        starts, ends, data = binary_buffers(payload)
        rows = _Rows(n)
        preset = _valid(records.column("error_kind"))
        todo = ~preset & _valid(payload)
        # Rows neither preset nor with a payload: a null cell in a table.
        for i in np.flatnonzero(~preset & ~todo):
            rows.errors[int(i)] = ("input:null_payload", "the payload cell is null")
        hdr = self._headers(rows, starts, ends, data, todo if fast else None)
        rest = todo
        take = np.zeros(n, np.bool_)
        if fast:
            take = self._v0_rows(rows, todo, hdr, starts, ends, data)
            if self.auto:
                take = self._auto_v0(rows, take, hdr, starts, ends, data)
            self._fill_v0(rows, take, hdr, starts, ends)
            self._decided_v0(rows, take, hdr, starts, ends, data)
            rest = todo & ~take
        if rest.any() and fast and self.native:  # not fast: every row its own decode
            rest = self._headerless(rows, rest, hdr, starts, ends, data)
        if rest.any():
            self._per_row(rows, np.flatnonzero(rest), hdr, starts, ends, data)
        if context is not None and self.options.layout == "auto":
            apply_context(
                self, context, base, records, rows, take, preset, hdr, (starts, ends, data)
            )
        return self._assemble(records, rows, preset, starts, ends, data)

    def _headers(
        self,
        rows: _Rows,
        starts: np.ndarray,
        ends: np.ndarray,
        data: np.ndarray,
        todo: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        """The fixed header and the CRC field of every row, as header fields.
        Bytes past a row's end are read too (or the buffer's last byte), but
        only used where the row is long enough: the magic needs the fixed
        header, the CRC the CRC-sized one.

        With `todo` and the C kernels (`native`), one C pass also does
        `_v0_rows`' checks and CRCs: `take` and `crc_ok` come with the fields."""
        if self.native and todo is not None:
            return self._headers_native(starts, ends, data, todo)
        lens = ends - starts
        last = len(data) - 1
        b = [data[np.minimum(starts + k, last)] for k in range(_HEADER_AND_CRC)]
        magic = lens >= HEADER_SIZE
        for k, byte in enumerate(MAGIC):
            magic &= b[k] == byte
        flags = b[FLAGS_OFFSET].astype(np.int32)
        crc = b[CRC_OFFSET].astype(np.int64)
        for k in range(CRC_OFFSET + 1, _HEADER_AND_CRC):  # big-endian, as the spec declares it
            crc <<= 8  # in place: as fast as the expression of four bytes it replaced
            crc |= b[k]
        return {
            "lens": lens,
            "magic": magic,
            "version": b[VERSION_OFFSET].astype(np.int32),
            "hl": b[HEADER_LEN_OFFSET].astype(np.int32),
            "flags": flags,
            "byte7": b[MSG_TYPE_OFFSET].astype(np.int32),
            "crc": crc,
            "has_crc": magic & (flags & CRC_FLAG != 0) & (lens >= CRC_HEADER_LEN),
        }

    def _headers_native(
        self, starts: np.ndarray, ends: np.ndarray, data: np.ndarray, todo: np.ndarray
    ) -> dict[str, np.ndarray]:
        """`_headers` and `_v0_rows`' decision in one C pass (`_kernels.headers`)."""
        n = len(starts)
        out = {
            "lens": np.empty(n, np.int64),
            "magic": np.empty(n, np.bool_),
            "version": np.empty(n, np.int32),
            "hl": np.empty(n, np.int32),
            "flags": np.empty(n, np.int32),
            "byte7": np.empty(n, np.int32),
            "crc": np.empty(n, np.int64),
            "has_crc": np.empty(n, np.bool_),
            "take": np.empty(n, np.bool_),
            "crc_ok": np.empty(n, np.int8),
        }
        u8 = np.uint8
        _kernels.headers(
            np.ascontiguousarray(data, u8),
            np.ascontiguousarray(starts, np.int64),
            np.ascontiguousarray(ends, np.int64),
            np.ascontiguousarray(todo).view(u8),
            _ENVELOPE,
            self.v0_known.view(u8),
            self.options.verify_crc,
            out["lens"],
            out["magic"].view(u8),
            out["version"],
            out["hl"],
            out["flags"],
            out["byte7"],
            out["crc"],
            out["has_crc"].view(u8),
            out["take"].view(u8),
            out["crc_ok"],
        )
        return out

    def _v0_rows(
        self,
        rows: _Rows,
        todo: np.ndarray,
        hdr: dict[str, np.ndarray],
        starts: np.ndarray,
        ends: np.ndarray,
        data: np.ndarray,
    ) -> np.ndarray:
        """Well-formed v0 rows (strict), decided with numpy, CRC checked: the rows to take."""
        if "take" in hdr:  # decided by the C pass (_headers_native)
            rows.crc_ok[:] = hdr["crc_ok"]
            return hdr["take"].copy()
        hl, crc_flag = hdr["hl"], (hdr["flags"] & CRC_FLAG) != 0
        # A payload over max_payload is lbparse.decode's bad_payload: left to it.
        take: np.ndarray = (
            todo
            & hdr["magic"]
            & (hdr["version"] == VERSION)
            & np.where(crc_flag, hl == CRC_HEADER_LEN, hl == HEADER_SIZE)
            & (hdr["lens"] >= hl)
            & (hdr["lens"] - hl <= _MAX_PAYLOAD)
            & self.v0_known[hdr["byte7"]]
        )
        crc_rows = np.flatnonzero(take & crc_flag)
        if crc_rows.size:
            got = crc32c_ranges(data, starts[crc_rows] + CRC_HEADER_LEN, ends[crc_rows])
            match = got == hdr["crc"][crc_rows]
            rows.crc_ok[crc_rows] = match
            if self.options.verify_crc and not match.all():
                take[crc_rows[~match]] = False  # the per-row path says crc_mismatch
        return take

    def _auto_v0(
        self,
        rows: _Rows,
        take: np.ndarray,
        hdr: dict[str, np.ndarray],
        starts: np.ndarray,
        ends: np.ndarray,
        data: np.ndarray,
    ) -> np.ndarray:
        """Of the strict v0 rows, those whose auto answer is v0's; their payloads decoded.

        layout="auto" decodes a strict v0 envelope (header, size and CRC
        passed) with every layout and picks, among the clean candidates if
        there are any, else among all, the most recent: v0 (detect.py).
        So when v0 decodes the bytes, auto's envelope is v0's exactly when
        v0's payload is clean or no other layout's is. Other layouts that
        are clean too only make it `ambiguous` (layout_ambiguous).
        Only for Publish and Ack (byte 7 of 0 and 1: legacy, FlatBuffers)
        can another layout be clean (`contested_msg_types`). Rows are taken
        when the payload is clean, every top-level field of its type with
        its wire type (the vectorized reader's `clean`: an unclean one
        changes auto's confidence and reasons), and for Publish and Ack
        when no FlatBuffers layout may read it as a table (_decided_v0).
        The rest, payloads the vectorized readers leave to upb or
        lbparse.codec.commitlog included, go row by row through
        lbparse.decode(b, "auto")."""
        t = np.flatnonzero(take)
        # A payload a FlatBuffers layout may read as a table: auto's reasons
        # (and maybe its answer) depend on that table, so row by row.
        fb = t[self.fb_checked[hdr["byte7"][t]]]
        if fb.size:
            take[fb[_flatbuffer_like(data, starts[fb] + hdr["hl"][fb], ends[fb])]] = False
            t = np.flatnonzero(take)
        # Gathers by ndarray.take: half the time of a[indices] (numpy's
        # fancy indexing), which a 65,536-row batch does a dozen times.
        b7 = hdr["byte7"].take(t)
        pstart, pend = starts.take(t) + hdr["hl"].take(t), ends.take(t)
        codes = self.v0_ptype.take(b7)
        order, bounds = group_rows(codes, len(self.ptype_names), self.native)
        for code in np.flatnonzero(np.diff(bounds)).tolist():
            sel = order[bounds[code] : bounds[code + 1]]
            ptype = self.ptype_names[code]
            typ = self.types[self.columns[ptype]]
            # Clean payloads only: an unclean one changes auto's confidence
            # and reasons (and for Publish and Ack its layout).
            arr, ok = self._vectorized(
                ptype, typ, data, pstart.take(sel), pend.take(sel), clean=True
            )
            mine = t.take(sel)
            if not ok.all():
                take[mine[~ok]] = False
                mine, arr = mine[ok], arr.filter(pa.array(ok))
            if mine.size:
                rows.decoded[ptype] = (mine, arr)
        return take

    def _fill_v0(
        self,
        rows: _Rows,
        take: np.ndarray,
        hdr: dict[str, np.ndarray],
        starts: np.ndarray,
        ends: np.ndarray,
    ) -> None:
        """The header columns of the rows taken; their payload ranges unless decoded."""
        hl, crc_flag = hdr["hl"], (hdr["flags"] & CRC_FLAG) != 0
        # Every row taken, as in most batches of real traffic: whole-array
        # copies, not a dozen gathers and scatters by index (half the time:
        # 2.0 ms against 0.95 of a 65,536-row batch's ~16).
        t: slice | np.ndarray = slice(None) if take.all() else np.flatnonzero(take)
        rows.layout[t] = self.v0_code
        rows.has_header[t] = True
        rows.version[t] = VERSION
        rows.header_len[t] = hl[t]
        rows.flags[t] = hdr["flags"][t]
        rows.has_crc[t] = crc_flag[t]
        rows.crc[t] = hdr["crc"][t]
        b7 = hdr["byte7"][t]
        rows.msg_type[t] = b7
        rows.name[t] = self.v0_name.take(b7)  # ndarray.take: see _auto_v0
        rows.ptype[t] = self.v0_ptype.take(b7)
        if not self.auto:  # auto's payloads are in rows.decoded already
            rows.pstart[t] = starts[t] + hl[t]
            rows.pend[t] = ends[t]

    def _decided_v0(
        self,
        rows: _Rows,
        take: np.ndarray,
        hdr: dict[str, np.ndarray],
        starts: np.ndarray,
        ends: np.ndarray,
        data: np.ndarray,
    ) -> None:
        """How the layout of the rows taken was decided, as lbparse.decode says it.

        A named layout decides nothing: not ambiguous, no confidence, no
        reasons. For auto, the rows taken are strict v0 envelopes whose
        payload is clean and, for Publish and Ack, no FlatBuffers table
        (_auto_v0): detect's confidence, ambiguity and reasons then depend
        on byte 7 and the CRC flag alone (which layouts refuse that MsgType
        or carry opaque bytes for it; whether a CRC was verified). So each
        such pair is decided once per decoder by lbparse.decode itself, on
        its first row, and given to every row of the pair."""
        rows.decided_ambiguous[take] = 0
        if not self.auto or not take.any():
            return
        # Per key, looked up in tables of 512: three gathers, not a pass per key
        # (boolean masks and intp keys: the cheapest numpy has for this).
        key = (hdr["byte7"][take] * 2 + hdr["has_crc"][take]).astype(np.intp)
        confidence = np.full(512, np.nan)
        ambiguous = np.zeros(512, np.int8)
        reason = np.full(512, -1, np.int32)
        for k in np.flatnonzero(np.bincount(key, minlength=512)).tolist():
            if k not in self.auto_decisions:
                i = int(np.flatnonzero(take)[np.argmax(key == k)])
                env = decode(
                    data[starts[i] : ends[i]].tobytes(), "auto", verify_crc=self.options.verify_crc
                )
                self.auto_decisions[k] = (
                    env.confidence,
                    env.ambiguous,
                    decisive_reason(env.layout, env.reasons),
                    tuple(env.layout_candidates),
                )
            c, a, r, _ = self.auto_decisions[k]
            confidence[k] = np.nan if c is None else c
            ambiguous[k] = a
            reason[k] = rows.reason_code(r)
        rows.confidence[take] = confidence.take(key)
        rows.decided_ambiguous[take] = ambiguous.take(key)
        rows.reason[take] = reason.take(key)

    def _headerless(
        self,
        rows: _Rows,
        rest: np.ndarray,
        hdr: dict[str, np.ndarray],
        starts: np.ndarray,
        ends: np.ndarray,
        data: np.ndarray,
    ) -> np.ndarray:
        """Rows without the envelope magic, classified at once; the rows left
        for `_per_row` (those another layout's prefix could match).

        strict v0 refuses such a row by its first check that
        fails: shorter than the fixed header (the message names the length)
        or the magic (it names the first bytes). lbparse.decode words that
        error once per distinct length or first bytes, and every row of the
        same key gets it. auto makes a row that starts with neither the
        magic nor the LIFT cookie, within max_payload, a `plain` envelope
        whose every column but the bytes is the same: lbparse.decode
        decodes one, and the others are filled from it."""
        layout = self.options.layout
        if layout not in ("v0", "auto"):
            return rest
        lens = hdr["lens"]
        if layout == "v0":
            mine = rest & ~hdr["magic"]
        else:
            head = _first_word(data, starts, lens)
            mine = rest & (head != _MAGIC_WORD) & (head != _COOKIE_WORD) & (lens < _MAX_PAYLOAD)
        idx = np.flatnonzero(mine)
        if not idx.size:
            return rest
        o = self.options
        if layout == "auto":
            # One class, one decode: a plain envelope there is every such row's
            # (each row's columns but its bytes, which the columns hold already).
            first = int(idx[0])
            b = data[starts[first] : ends[first]].tobytes()
            try:
                env = decode(b, layout, verify_crc=o.verify_crc, lenient=o.lenient)
            except EnvelopeError:
                return rest  # not what this class gives: each row its own decode
            if not _plain_for_all(env):
                return rest
            self._fill(rows, first, env, b, int(ends[first]))
            if len(idx) > 1:
                _like(rows, first, idx[1:])
            left: np.ndarray = rest & ~mine
            return left
        # v0: the class is an error, worded once per length or first bytes
        raw = data.tobytes() if len(idx) > 64 else None
        known: dict[Any, EnvelopeError] = {}
        done = np.zeros(len(rest), np.bool_)
        for i in idx.tolist():
            s, e = int(starts[i]), int(ends[i])
            b = raw[s:e] if raw is not None else data[s:e].tobytes()
            key = len(b) if len(b) < HEADER_SIZE else b[: len(MAGIC)]
            got = known.get(key)
            if got is None:
                try:
                    decode(b, layout, verify_crc=o.verify_crc, lenient=o.lenient)
                except EnvelopeError as exc:
                    got = known[key] = exc
                else:
                    break  # decoded after all: the rest each their own decode
            done[i] = True
            self._error(rows, i, got, hdr, b)
        return rest & ~done

    def _per_row(
        self,
        rows: _Rows,
        idx: np.ndarray,
        hdr: dict[str, np.ndarray],
        starts: np.ndarray,
        ends: np.ndarray,
        data: np.ndarray,
    ) -> None:
        """lbparse.decode on each row: its envelope, or its error."""
        o = self.options
        raw = data.tobytes() if len(idx) > 64 else None
        for i in idx.tolist():
            s, e = int(starts[i]), int(ends[i])
            b = raw[s:e] if raw is not None else data[s:e].tobytes()
            try:
                env = decode(b, o.layout, verify_crc=o.verify_crc, lenient=o.lenient)
            except EnvelopeError as exc:
                self._error(rows, i, exc, hdr, b)
                continue
            if env.ambiguous:
                rows.ambiguous[i] = tuple(env.layout_candidates)
            elif self.auto:
                proof = proves(env)
                if proof is not None:
                    rows.proofs[i] = (proof, proof_label(env))
            self._fill(rows, i, env, b, e)

    def redecode(
        self, rows: _Rows, i: int, layout: str, b: bytes, e: int, scope: str = "capture"
    ) -> None:
        """Decode row `i` again as `layout`, the generation its context proves.

        Decided as the capture reader decides it (lbparse.codec.generation).

        Args:
            rows: The batch's decoded rows.
            i: The row.
            layout: The layout proven.
            b: The row's payload.
            e: The row's payload end in the batch's buffer.
            scope: Where the proof is: "subject", "connection" or "capture".
        """
        for ptype, (mine, arr) in list(rows.decoded.items()):
            keep = mine != i
            if not keep.all():
                rows.decoded[ptype] = (mine[keep], arr.filter(pa.array(keep)))
        rows.messages.pop(i, None)
        rows.warnings.pop(i, None)
        rows.ambiguous.pop(i, None)
        rows.pend[i] = -1
        rows.crc_ok[i] = -1
        rows.msg_type[i] = -1
        rows.has_crc[i] = rows.has_header[i] = False
        o = self.options
        self._fill(rows, i, decode(b, layout, verify_crc=o.verify_crc), b, e)
        self.decided_by_context(rows, i, layout, scope)

    def decided_by_context(self, rows: _Rows, i: int, layout: str, scope: str) -> None:
        """Mark row `i`'s layout as decided by the capture's proof in `scope`.

        As the capture reader decides it (lbparse.codec.generation): its
        confidence, no ambiguity, and its reason in the capture reader's words,
        but for which message was the first proof (the pipeline notes proof
        without it).

        Args:
            rows: The batch's decoded rows.
            i: The row.
            layout: The layout proven.
            scope: Where the proof is: "subject", "connection" or "capture".
        """
        rows.confidence[i], rows.decided_ambiguous[i] = CONFIDENCE[scope], 0
        rows.ambiguous.pop(i, None)
        what = "MsgTypes only it has" if layout == NEWEST else "envelopes only it reads"
        rows.reason[i] = rows.reason_code(f"context: this {scope} carried {what}: {layout}")

    def _fill(self, rows: _Rows, i: int, env: Any, b: bytes, e: int) -> None:
        """Row `i`'s columns from its envelope (`b` its bytes, ending at `e` in the batch)."""
        rows.layout[i] = self.layouts(env.layout)
        if env.header_len is not None:
            rows.has_header[i] = True
            rows.version[i] = env.version or 0
            rows.header_len[i] = env.header_len
            rows.flags[i] = env.flags or 0
        if env.crc32c is not None:
            rows.has_crc[i] = True
            rows.crc[i] = env.crc32c
            rows.crc_ok[i] = _crc(env.payload) == env.crc32c
        if env.msg_type is not None:
            rows.msg_type[i] = env.msg_type
        rows.name[i] = self.names(env.msg_type_name)
        rows.ptype[i] = self.ptypes(env.payload_type)
        rows.confidence[i] = np.nan if env.confidence is None else env.confidence
        rows.decided_ambiguous[i] = env.ambiguous
        rows.reason[i] = rows.reason_code(decisive_reason(env.layout, env.reasons))
        if env.warnings:
            rows.warnings[i] = tuple(env.warnings)
        msg = env.message
        if (
            isinstance(msg, ProtoMessage)
            and msg.DESCRIPTOR.full_name == env.payload_type
            and b.endswith(env.payload)
        ):
            rows.pstart[i] = e - len(env.payload)  # decoded again, vectorized
            rows.pend[i] = e
        else:
            rows.messages[i] = msg

    def _error(
        self, rows: _Rows, i: int, exc: EnvelopeError, hdr: dict[str, np.ndarray], b: bytes
    ) -> None:
        rows.errors[i] = (exc.kind, exc.message)
        # The layout the row was decoded as; `auto` is no layout: it found none.
        layout = self.options.layout
        rows.layout[i] = self.layouts(UNDETERMINED if layout == "auto" else layout)
        if exc.kind in (FIELD_ERRORS["header"], FIELD_ERRORS["magic"]) or not hdr["magic"][i]:
            return
        # The header fields as found, up to the check that failed.
        rows.has_header[i] = True
        rows.version[i] = hdr["version"][i]
        rows.header_len[i] = hdr["hl"][i]
        rows.flags[i] = hdr["flags"][i]
        if hdr["has_crc"][i]:
            rows.has_crc[i] = True
            rows.crc[i] = hdr["crc"][i]
            hl = int(hdr["hl"][i])
            if hl <= len(b):
                rows.crc_ok[i] = _crc(b[hl:]) == hdr["crc"][i]
        # the header was fine: name its MsgType, in the layout named (auto, a
        # choice among layouts, names none: decode_header refuses it)
        if exc.kind == "bad_payload" and self.options.layout != "auto":
            try:
                h = decode_header(b, self.options.layout, lenient=self.options.lenient)
            except (EnvelopeError, ValueError):
                return
            if h.msg_type is not None:
                rows.msg_type[i] = h.msg_type
            rows.name[i] = self.names(h.msg_type_name)
            rows.ptype[i] = self.ptypes(h.payload_type)

    def _reasons(self, rows: _Rows) -> pa.Array:
        """The layout_reason column: each row's decisive reason, null where it has none."""
        if not rows.reason_texts:
            return null_column(rows.n, pa.string())
        return _Names(rows.reason_texts).array(rows.reason, self.native)

    # -- typed columns -----------------------------------------------------

    def _descriptor(self, ptype: str) -> Descriptor:
        cls = self.typed[ptype]
        if cls is None:
            raise InputError("bad_option", f"payload type {ptype!r} has no protobuf class")
        return descriptor_of(cls)

    def _builder(self, ptype: str, typ: pa.DataType) -> Any:
        b = self._builders.get(ptype)
        if b is None:
            b = self._builders[ptype] = builder_for(
                ptype, typ, self.typed.get(ptype), self.options.emit_defaults
            )
        return b

    def _structs(
        self, rows: _Rows, data: np.ndarray, starts: np.ndarray, ends: np.ndarray
    ) -> tuple[dict[str, tuple[np.ndarray, pa.Array]], dict[int, str]]:
        """Per struct column: the rows that have it (ascending) and its values for
        those rows; and payload_json, by row where it is not null."""
        out: dict[str, tuple[np.ndarray, pa.Array]] = {}
        json_col: dict[int, str] = {}
        codes = rows.ptype
        used: set[int] = set()
        # The rows of each payload type with a range to decode, in one pass.
        by_type, bounds = group_rows(
            np.where(rows.pend >= 0, codes, -1), len(self.ptypes.code), self.native
        )
        # The decoded objects by payload type code, once (plain rows' bytes
        # are many and never typed): not one walk of them per type.
        by_code = _objects_by_code(rows.messages, codes)
        for ptype, col in self.columns.items():
            code = self.ptypes.code.get(ptype)
            if code is None:
                continue
            mine = by_type[bounds[code] : bounds[code + 1]]
            cls: type = self.typed[ptype] or ReplicationResponse
            objs = _objects_of(rows.messages, by_code, code, cls)
            pre = rows.decoded.get(ptype)
            if not mine.size and not objs and pre is None:
                continue
            typ = self.types[col]
            got_rows: list[np.ndarray] = [pre[0]] if pre else []
            parts: list[pa.Array] = [pre[1]] if pre else []
            if mine.size:
                arr, ok = self._vectorized(
                    ptype, typ, data, rows.pstart.take(mine), rows.pend.take(mine)
                )
                if ok.all():
                    got_rows.append(mine)
                    parts.append(arr)
                else:
                    got_rows.append(mine[ok])
                    parts.append(arr.filter(pa.array(ok)))
                    # Left to lbparse.codec.commitlog or upb: decoded, or the error named.
                    if ptype == REPLICATION_RESPONSE:
                        self._raw_messages(rows, mine[~ok], data)
                    else:
                        for i in mine[~ok].tolist():
                            self._upb(rows, i, cls, data, starts, ends)
                    by_code = _objects_by_code(rows.messages, codes)
                    objs = _objects_of(rows.messages, by_code, code, cls)
            used.update(objs)
            if objs:
                got_rows.append(np.array(objs, np.int64))
                parts.append(self._builder(ptype, typ).build([rows.messages[i] for i in objs]))
            if sum(len(r) for r in got_rows) == 0:
                continue  # every row of the type failed after all (now errors)
            if len(parts) == 1:
                out[col] = (got_rows[0], parts[0])
            else:
                all_rows = np.concatenate(got_rows)
                order = np.argsort(all_rows, kind="stable")
                out[col] = (all_rows[order], pa.concat_arrays(parts).take(pa.array(order)))
        for i, m in rows.messages.items():
            if i in used or m is None or isinstance(m, (bytes, bytearray)):
                continue
            to_json = getattr(m, "to_json_dict", None)
            # lbparse's JSON: a commit-log message's offsets as decimal strings.
            json_col[i] = jsonform.dumps(to_json() if to_json else str(m))
        return out, json_col

    def _raw_messages(self, rows: _Rows, mine: np.ndarray, data: np.ndarray) -> None:
        """ReplicationResponse payloads the vectorized reader left: the codec's
        parser (lbparse.codec.commitlog)."""
        parse = CODECS[REPLICATION_RESPONSE].decode
        for i in mine.tolist():
            try:
                rows.messages[i] = parse(data[rows.pstart[i] : rows.pend[i]].tobytes())
            except EnvelopeError as exc:
                self._fail(rows, i, exc)

    def _upb(
        self, rows: _Rows, i: int, cls: Any, data: np.ndarray, starts: np.ndarray, ends: np.ndarray
    ) -> None:
        try:
            rows.messages[i] = cls.FromString(data[rows.pstart[i] : rows.pend[i]].tobytes())
            return
        except Exception:
            pass
        b = data[starts[i] : ends[i]].tobytes()
        o = self.options
        try:
            env = decode(b, o.layout, verify_crc=o.verify_crc, lenient=o.lenient)
        except EnvelopeError as exc:
            self._fail(rows, i, exc)
            return
        rows.messages[i] = env.message

    def _fail(self, rows: _Rows, i: int, exc: EnvelopeError) -> None:
        """A row the fast path took turns out bad (its payload): keep the header, add the error."""
        rows.errors[i] = (exc.kind, exc.message)
        rows.messages.pop(i, None)
        rows.pend[i] = -1
        # lbparse.decode raises: nothing was decided
        rows.confidence[i], rows.decided_ambiguous[i], rows.reason[i] = np.nan, -1, -1

    # -- output ------------------------------------------------------------

    def _assemble(
        self,
        records: pa.RecordBatch,
        rows: _Rows,
        preset: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        data: np.ndarray,
    ) -> Decoded:
        n = rows.n
        structs, json_col = self._structs(rows, data, starts, ends)
        # By row, where not null: most rows have no error (and no JSON), and a
        # list of n Nones each, counted, was ~2% of a 65,536-row batch.
        kinds = {i: k for i, (k, _) in rows.errors.items()}
        texts = {i: m for i, (_, m) in rows.errors.items()}
        if preset.any():
            pk = records.column("error_kind").to_pylist()
            pm = records.column("error_message").to_pylist()
            for i in np.flatnonzero(preset).tolist():
                kinds[i], texts[i] = pk[i], pm[i]
        hh = ~rows.has_header
        # A batch of bare payloads has no capture columns (api._bare_records):
        # the record columns it has, as they are.
        have = records.schema.names
        cols: dict[str, pa.Array] = {
            name: records.column(name)
            for name in RECORD_COLUMNS
            if name in have and name not in ("error_kind", "error_message")
        }
        warnings = self.types["warnings"]
        cols.update(
            {
                "layout": self.layouts.array(rows.layout, self.native),
                "layout_confidence": _masked(
                    rows.confidence, pa.float64(), np.isnan(rows.confidence)
                ),
                "layout_ambiguous": _masked(
                    rows.decided_ambiguous == 1, pa.bool_(), rows.decided_ambiguous < 0
                ),
                "layout_reason": self._reasons(rows),
                "version": _masked(rows.version, pa.int32(), hh),
                "header_len": _masked(rows.header_len, pa.int32(), hh),
                "flags": _masked(rows.flags, pa.int32(), hh),
                "crc32c": _masked(rows.crc, pa.int64(), ~rows.has_crc),
                "crc_ok": _masked(rows.crc_ok == 1, pa.bool_(), rows.crc_ok < 0),
                "msg_type": _masked(rows.msg_type, pa.int32(), rows.msg_type < 0),
                "msg_type_name": self.names.array(rows.name, self.native),
                "payload_type": self.ptypes.array(rows.ptype, self.native),
                "error_kind": _strings(n, kinds),
                "error_message": _strings(n, texts),
                "warnings": (
                    pa.array([rows.warnings.get(i) for i in range(n)], warnings)
                    if rows.warnings
                    else null_column(n, warnings)
                ),
                "payload_json": _strings(n, json_col),
            }
        )
        return Decoded(n, self.schema, cols, structs, self.options.emit_defaults)


@lru_cache(maxsize=16)
def decoder_for(options: DecodeOptions) -> BatchDecoder:
    """The decoder of `options`, built once per process.

    Spark reuses its Python workers across tasks: the schema and the column
    builders are made here, not per batch.

    Args:
        options: How payloads are decoded.

    Returns:
        The (cached) BatchDecoder.
    """
    return BatchDecoder(options)


def _objects_by_code(messages: dict[int, Any], codes: np.ndarray) -> dict[int, list[int]]:
    """The rows of decoded objects (not bytes), by their payload type code, in
    the dict's order."""
    out: dict[int, list[int]] = {}
    for i, m in messages.items():
        if m is not None and not isinstance(m, (bytes, bytearray)):
            out.setdefault(int(codes[i]), []).append(i)
    return out


def _objects_of(
    messages: dict[int, Any], by_code: dict[int, list[int]], code: int, cls: type
) -> list[int]:
    """The rows of payload type `code` decoded to objects of `cls` (a
    FlatBuffers table of the same name is not: it goes to payload_json)."""
    return [i for i in by_code.get(code, ()) if isinstance(messages.get(i), cls)]


def _like(rows: _Rows, first: int, others: np.ndarray) -> None:
    """Rows `others` (none filled yet) given row `first`'s columns, as `_fill`
    of the same envelope gives them: one numpy assignment per column instead
    of a Python `_fill` per row. Not `messages`: each row's own bytes."""
    for a in (
        rows.layout,
        rows.version,
        rows.header_len,
        rows.flags,
        rows.has_header,
        rows.crc,
        rows.has_crc,
        rows.crc_ok,
        rows.msg_type,
        rows.name,
        rows.ptype,
        rows.pstart,
        rows.pend,
        rows.confidence,
        rows.decided_ambiguous,
        rows.reason,
    ):
        a[others] = a[first]
    warned = rows.warnings.get(first)
    if warned is not None:
        rows.warnings.update(dict.fromkeys(others.tolist(), warned))


def _plain_for_all(env: Any) -> bool:
    """Whether auto's envelope of one row of `_headerless`' class is what it
    gives them all: a plain envelope that is not ambiguous and proves no
    generation."""
    return env.layout == "plain" and not env.ambiguous and proves(env) is None


def _word(prefix: bytes) -> int:
    """A 4-byte prefix as _first_word gives it (big-endian)."""
    return int.from_bytes(prefix[:4].ljust(4, b"\0"), "big")


_MAGIC_WORD, _COOKIE_WORD = _word(MAGIC), _word(COOKIE)
assert len(MAGIC) == len(COOKIE) == 4, "_first_word reads 4 bytes"


def _first_word(data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Each row's first 4 bytes as a big-endian number, -1 for rows shorter than 4."""
    last = len(data) - 1
    w = np.zeros(len(starts), np.int64)
    for k in range(4):
        w = (w << 8) | data[np.minimum(starts + k, last)]
    return np.where(lens >= 4, w, -1)


def group_rows(
    codes: np.ndarray, ncodes: int, native: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The rows grouped by code, for codes 0..ncodes-1 (others in no group).

    One counting sort in C (`_kernels.group`) when built; numpy's stable
    argsort is the reference (`native=False`).

    Args:
        codes: An int code per row.
        ncodes: How many codes there are.
        native: Use the C kernel when it is built.

    Returns:
        (order, bounds): the rows of code c are order[bounds[c]:bounds[c+1]],
        ascending.
    """
    c = np.ascontiguousarray(codes, np.int32)
    if native and _kernels is not None:
        order = np.empty(len(c), np.int64)
        bounds = np.empty(ncodes + 1, np.int64)
        grouped = _kernels.group(c, ncodes, order, bounds)
        return order[:grouped], bounds
    inside = np.flatnonzero((c >= 0) & (c < ncodes))
    order = inside[np.argsort(c[inside], kind="stable")]
    bounds = np.zeros(ncodes + 1, np.int64)
    np.cumsum(np.bincount(c[inside], minlength=ncodes), out=bounds[1:])
    return order.astype(np.int64), bounds


def decisive_reason(layout: str | None, reasons: Sequence[str]) -> str | None:
    """The reason of an envelope's `reasons` that decided its layout.

    The capture's context when it spoke last, else the line describing the
    envelope chosen (detect writes it "LAYOUT: ..."), else the last (a
    plain payload's). The whole list is one lbparse.decode away; as a column
    it would cost ~5 strings a row (measured: 90-130 ns a row on the fast
    path against ~13 for one).

    Args:
        layout: The layout chosen.
        reasons: The envelope's reasons (lbparse.codec.detect, .generation).

    Returns:
        The deciding reason; None when there are none (a layout named, not
        detected).
    """
    if not reasons:
        return None
    for reason in reversed(reasons):
        if reason.startswith("context: ") or reason.startswith(f"{layout}: "):
            return reason
    return reasons[-1]


def _flatbuffer_like(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """lbparse.codec.flatbuf.plausible of each payload `data[starts[i]:ends[i]]`, with
    numpy: do its root offset and the root's vtable lie inside it?"""
    n = ends - starts
    # The u32 at every byte offset, as one strided view of the bytes: a gather
    # a value, not four and their shifts (~40 ns a row of auto's Publish and
    # Ack rows). Offsets past the last whole u32 read the last one: their
    # values are used only where in bounds (n >= 8, root + 4 <= n).
    if len(data) < 4:
        return np.zeros(len(starts), np.bool_)
    words = np.ndarray((len(data) - 3,), np.dtype("<u4"), data, 0, (1,))
    last = len(words) - 1

    def u32(at: np.ndarray) -> np.ndarray:
        found: np.ndarray = words[np.minimum(at, last)].astype(np.int64)
        return found

    root = u32(starts)
    ok = (n >= 8) & (root + 4 <= n)
    # The root's i32 only where the root lies inside: a protobuf payload's
    # first bytes (a tag, a length) rarely make an offset that does.
    inside = np.flatnonzero(ok)
    rel = u32(starts[inside] + root[inside])
    vtable = root[inside] - np.where(rel >= 1 << 31, rel - (1 << 32), rel)
    result: np.ndarray = np.zeros(len(starts), np.bool_)
    result[inside] = (vtable >= 0) & (vtable + 4 <= n[inside])
    return result


def null_column(n: int, typ: pa.DataType) -> pa.Array:
    """pa.nulls(n, typ), made once per length and type up to the pipeline's
    batch: Arrow arrays are immutable, and a batch has several all-null
    columns (no error, no JSON, no warning), each a zeroed buffer of n
    offsets or values written again for every batch of the same length
    (~1% of a 65,536-row batch's time). Longer ones are not kept.

    Args:
        n: The length.
        typ: The type.

    Returns:
        An array of n nulls.
    """
    return _kept_nulls(n, typ) if n <= _KEPT_NULLS_ROWS else pa.nulls(n, typ)


_KEPT_NULLS_ROWS = DEFAULT_BATCH_ROWS  # a batch of the pipeline: ~0.3 MB a column at most


@lru_cache(maxsize=64)
def _kept_nulls(n: int, typ: pa.DataType) -> pa.Array:
    return pa.nulls(n, typ)


def _valid(column: pa.Array) -> np.ndarray:
    """column.is_valid() as a numpy bool array: pyarrow converts a bool array
    to numpy one element at a time, and a batch's columns are mostly all
    valid (the payloads) or all null (the problems, for bare payloads)."""
    n = len(column)
    if column.null_count == 0:
        return np.ones(n, np.bool_)
    if column.null_count == n:
        return np.zeros(n, np.bool_)
    return np.asarray(column.is_valid())


def _masked(values: np.ndarray, typ: pa.DataType, mask: np.ndarray) -> pa.Array:
    """pa.array(values, typ, mask=mask) (mask: True is null), without packing a
    mask that holds no null or no value: most of a batch's header columns are
    one or the other (version with every header there, crc without CRCs),
    and a mask costs ~1.8 ns a row a column however it is filled."""
    n = len(values)
    nulls = int(np.count_nonzero(mask))
    if nulls == n:
        return null_column(n, typ)
    if typ == pa.bool_():
        # Bits packed by numpy (wirescan.bitmap): ~1% of a 65,536-row batch for
        # the two such columns, converted by pyarrow.
        validity = bitmap(~mask) if nulls else None
        return pa.Array.from_buffers(typ, n, [validity, bitmap(values)], null_count=nulls)
    if not nulls:
        return pa.array(values, typ)
    return pa.array(values, typ, mask=mask)


def _strings(n: int, values: Mapping[int, str | None]) -> pa.Array:
    """A string column of n rows: `values` by row, null elsewhere."""
    if not values:  # usually: no errors, no FlatBuffers
        return null_column(n, pa.string())
    column: list[str | None] = [None] * n
    for i, v in values.items():
        column[i] = v
    return pa.array(column, pa.string())


class Decoded:
    """A decoded batch.

    The fixed columns (input order) and, per struct column, the rows that
    have one and their values. Null struct columns are never made here:
    `to_batch()` makes the whole batch, `partitions()` the rows of each
    msg_type_name with only the columns they fill.

    Args:
        n: The batch's rows.
        schema: The output schema.
        columns: The fixed columns by name, a value per row.
        structs: Per struct column, (the rows that have one, their values).
        emit_defaults: The batch was decoded with DecodeOptions.emit_defaults
            (protobuf decoded later, raft_entries' commands, follows it).
    """

    def __init__(
        self,
        n: int,
        schema: pa.Schema,
        columns: dict[str, pa.Array],
        structs: dict[str, tuple[np.ndarray, pa.Array]],
        emit_defaults: bool = True,
    ) -> None:
        self.num_rows = n
        self.schema = schema
        self.columns = columns
        self.structs = structs
        self.emit_defaults = emit_defaults

    @property
    def json_columns(self) -> bool:
        """Whether the batch has the JSON text columns (DecodeOptions.json_columns)."""
        return bool(self.schema.get_field_index(JSON_COLUMNS[0]) >= 0)

    def column(self, name: str) -> pa.Array:
        """A fixed column by name.

        Args:
            name: The column's name.

        Returns:
            Its array, a value per row.
        """
        if name not in self.columns and name in self.structs:  # the traffic detail
            rows, arr = self.structs[name]
            return spread(arr, rows, self.num_rows)
        return self.columns[name]

    def to_batch(self) -> pa.RecordBatch:
        """The whole batch in the output schema, struct columns null where unset.

        Returns:
            A RecordBatch, a row per input row.
        """
        n = self.num_rows
        arrays = []
        for f in self.schema:
            if f.name in self.columns:
                arrays.append(self.columns[f.name])
            elif f.name in self.structs:
                rows, arr = self.structs[f.name]
                arrays.append(spread(arr, rows, n))
            else:
                arrays.append(null_column(n, f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def partitions(self, column: str) -> Iterator[tuple[str | None, int, dict[str, pa.Array]]]:
        """(value, rows, columns) for each value of `column`; struct columns only where set.

        A fixed column null in every row is left out: in the dataset a column a
        file lacks reads as null.

        Args:
            column: The fixed column to split by (msg_type_name).

        Yields:
            (the value, its row count, its columns by name).
        """
        names = self.columns[column]
        # A column that is null in every row is left out: in the dataset a
        # column a file lacks reads as null (see output.py), and taking and
        # writing it would cost as much as a column with data.
        fixed = {k: v for k, v in self.columns.items() if k != column and v.null_count < len(v)}
        if names.null_count == 0 and pc.count_distinct(names).as_py() <= 1:
            value = names[0].as_py() if len(names) else None
            # One value, but not always one payload type: a legacy Message and
            # Ack are both "Reserved", and error rows carry no struct. A struct
            # that does not cover every row is spread over them (issue #19:
            # "Arrays were not all the same length").
            yield (
                value,
                self.num_rows,
                {
                    **fixed,
                    **{
                        k: a if len(rows) == self.num_rows else spread(a, rows, self.num_rows)
                        for k, (rows, a) in self.structs.items()
                    },
                },
            )
            return
        enc = names.dictionary_encode()
        codes = np.asarray(enc.indices.fill_null(-1))
        values = {**dict(enumerate(enc.dictionary.to_pylist())), -1: None}
        batch = pa.RecordBatch.from_pydict(fixed)
        for code, value in values.items():
            idx = np.flatnonzero(codes == code)
            if not idx.size:
                continue
            cols = dict(zip(batch.schema.names, batch.take(pa.array(idx)).columns))
            for k, (rows, arr) in self.structs.items():
                mine = codes[rows] == code
                if not mine.any():
                    continue
                if mine.all() and len(rows) == len(idx):
                    cols[k] = arr  # the usual case: the partition's rows are the type's rows
                    continue
                # Place the type's rows of this partition among the partition's rows.
                pos = np.full(len(idx), -1, np.int64)
                pos[np.searchsorted(idx, rows[mine])] = np.flatnonzero(mine)
                cols[k] = arr.take(pa.array(np.maximum(pos, 0), mask=pos < 0))
            yield value, len(idx), cols
