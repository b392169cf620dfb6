"""Vectorized protobuf decoding: many messages of one type at once, in numpy.

`decode_structs(descriptor, arrow_type, data, starts, ends)` reads the
messages `data[starts[i]:ends[i]]` straight into an Arrow struct column,
one field occurrence per message per step: every step reads the next tag
of every message still unfinished, then its value, with numpy operations
over all of them together. A Publish costs about as many numpy passes as
it has fields, instead of a `FromString` and a getattr per field per row.

It covers what encoders write: known fields with their wire type, each
singular field at most once, repeated fields packed or not, maps without
duplicate keys, valid UTF-8, tags and lengths of at most 5 bytes. Any
message outside that (a packed run cut inside an element, a wire type that
does not match the field, a singular field twice (legal: upb merges it), a
map entry with a key twice or with a field it does not declare (upb keeps
such an entry out of the map), truncated or malformed bytes, invalid UTF-8,
groups) is left out and reported in `ok`; the caller decodes those with upb
(`columns.py`), which also decides whether they are errors. Unknown field
numbers are skipped, as protobuf does (`clean=True` leaves such messages
out too). Values follow the same rules as `columns.py` (Spark's
`from_protobuf`), and a test holds the two equal.

The scan of the field occurrences runs in C (`_kernels.scan`, one pass
per batch grouped by field number) when setup.py built it; the numpy scan
`_Scan` is the fallback and the reference it is tested against
(tests/columnar/test_kernels.py).
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from lbparse.columnar import wirescan_native

_kernels: Any
try:
    from lbparse.columnar import _kernels  # type: ignore[attr-defined,no-redef]
except ImportError:  # not built: the numpy scan below does the same
    _kernels = None

__all__ = [
    "binary_buffers",
    "bitmap",
    "decode_structs",
    "enum_names",
    "gather",
    "scatter",
    "slices",
    "spread",
]

F = FieldDescriptor
MAX_STEPS = 256  # field occurrences read per message before it is left to upb
# The longest tag or length varint upb reads (5 bytes, 35 bits; a longer one,
# even of zero padding, is "wire format was corrupt"). A value varint may
# take 10 bytes. Issue #19: the scan read any, and decoded rows upb refuses.
MAX_SIZE_BYTES = 5


# protobuf type -> expected wire type
_WIRE = {
    F.TYPE_DOUBLE: 1,
    F.TYPE_FIXED64: 1,
    F.TYPE_SFIXED64: 1,
    F.TYPE_FLOAT: 5,
    F.TYPE_FIXED32: 5,
    F.TYPE_SFIXED32: 5,
    F.TYPE_STRING: 2,
    F.TYPE_BYTES: 2,
    F.TYPE_MESSAGE: 2,
}
# fixed-width types -> (width, numpy type of the little-endian value)
_FIXED = {
    F.TYPE_DOUBLE: (8, "<f8"),
    F.TYPE_FIXED64: (8, "<i8"),
    F.TYPE_SFIXED64: (8, "<i8"),
    F.TYPE_FLOAT: (4, "<f4"),
    F.TYPE_FIXED32: (4, "<i4"),
    F.TYPE_SFIXED32: (4, "<i4"),
}
_INT32 = {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_ENUM}
_INT64 = {F.TYPE_INT64, F.TYPE_UINT64}


def binary_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, data) of a binary array, zero-copy; respects `arr.offset`.

    Args:
        arr: A binary array (another binary type is cast to binary first).

    Returns:
        Each value's start and end (int64 arrays) in `data`, and the data
        buffer as a uint8 array (one zero byte when empty).
    """
    if arr.type != pa.binary():
        arr = arr.cast(pa.binary())
    n = len(arr)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], np.int32, n + 1, arr.offset * 4).astype(np.int64)
    data = (
        np.frombuffer(bufs[2], np.uint8)
        if bufs[2] is not None and bufs[2].size
        else np.zeros(1, np.uint8)
    )
    return offsets[:-1], offsets[1:], data


def varints(
    data: np.ndarray, pos: np.ndarray, lim: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The varints at `pos` (each must end before `lim`): values (uint64),
    positions after them, and which were well formed. Requires pos < lim."""
    b = data[pos]
    val = b.astype(np.uint64)
    nxt = pos + 1
    ok = np.ones(len(pos), np.bool_)
    more = np.flatnonzero(b >= 0x80)
    if not more.size:  # most varints (tags, lengths, small numbers) are one byte
        return val, nxt, ok
    # Byte by byte over the varints that go on, fewer at each byte.
    val[more] &= np.uint64(0x7F)
    for j in range(1, 10):
        p = pos[more] + j
        inside = p < lim[more]
        if not inside.all():
            ok[more[~inside]] = False
            more, p = more[inside], p[inside]
        b = data[p]
        val[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * j)
        last = b < 0x80
        if j == 9:
            ok[more[~last | (b > 1)]] = False  # 11 bytes, or bits past 64
        nxt[more[last]] = p[last] + 1
        more = more[~last]
        if not more.size:
            break
    return val, nxt, ok


def gather(data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The byte ranges `data[starts[i]:starts[i]+lens[i]]` back to back.

    Args:
        data: A uint8 array.
        starts: Each range's start.
        lens: Each range's length.

    Returns:
        (int32 offsets, a value per range plus one; the bytes, a uint8 array).
    """
    offsets = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return offsets.astype(np.int32), np.empty(0, np.uint8)
    # The index of every byte to copy: each range's start, less where its
    # bytes land, repeated over its length, plus where they land. Batches hold
    # < 2 GiB (Arrow's int32 offsets), so int32 indices do, moving half the memory.
    idx = np.repeat((starts - offsets[:-1]).astype(np.int32), lens)
    np.add(idx, np.arange(total, dtype=np.int32), out=idx)
    return offsets.astype(np.int32), data[idx]


def slices(
    data: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    null: np.ndarray | None = None,
    typ: pa.DataType | None = None,
) -> pa.Array:
    """The byte ranges `data[starts[i]:starts[i]+lens[i]]` as a binary column.

    Args:
        data: A uint8 array.
        starts: Each range's start.
        lens: Each range's length.
        null: True where the value is null; None: none is.
        typ: The column's type (the bytes taken as they are: a string type
            for UTF-8); None: binary.

    Returns:
        An Arrow array, a value per range.
    """
    k = len(starts)
    bounds = np.empty(2 * k, np.int64)
    bounds[0::2] = starts
    bounds[1::2] = starts + lens
    if k and bounds[0] >= 0 and bounds[-1] <= len(data) and (bounds[1:] >= bounds[:-1]).all():
        # Ranges in order (what the scanner reads: fields of consecutive
        # messages) are the even elements of a binary array over the whole
        # buffer, made without a copy; the odd ones are the bytes between
        # them. Arrow's take copies the even ones out, in C++: about a third
        # of gather's time.
        whole = pa.Array.from_buffers(
            pa.binary(),
            2 * k - 1,
            [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(data)],
        )
        arr = whole.take(
            pa.array(
                np.arange(0, 2 * k, 2, dtype=np.int32),
                mask=null if null is not None and null.any() else None,
            )
        )
    else:
        offsets, values = gather(data, starts, lens)
        validity = None if null is None or not null.any() else bitmap(~null)
        arr = pa.Array.from_buffers(
            pa.binary(), k, [validity, pa.py_buffer(offsets), pa.py_buffer(values)]
        )
    if typ is None or typ == pa.binary():
        return arr
    return pa.Array.from_buffers(typ, k, arr.buffers(), arr.null_count, arr.offset)


def _value_or_length(
    data: np.ndarray, p: np.ndarray, end: np.ndarray, is2: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """After a tag of wire type 0 or 2 at p-1: (value or start, end of the field, ok)."""
    inside = p < end
    v, nx, ok = varints(data, np.minimum(p, end - 1), end)
    n = v.view(np.int64)  # a huge length turns negative: refused below
    # upb reads a length in at most MAX_SIZE_BYTES bytes and refuses a longer one.
    ok &= inside & (~is2 | ((n >= 0) & (n <= end - nx) & (nx - p <= MAX_SIZE_BYTES)))
    a = np.where(is2, nx, n)
    b = np.where(is2, nx + np.where(ok, n, 0), nx)
    return a, b, ok


class _Scan:
    """Every field occurrence of k messages, by field number: rows, wire
    types, values (varint) or starts, and ends, each message's in the order
    they appear; `bad` the messages whose bytes break the rules above.

    This numpy scan is the reference; `_native_scan` (C, when built) gives
    the same occurrences in one pass, message by message."""

    __slots__ = ("by_field", "bad")

    def __init__(
        self,
        data: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        known: tuple[int, ...] = (),
        native: bool = True,
    ) -> None:
        if native and _kernels is not None:
            self.by_field, self.bad = _native_scan(data, starts, ends, known)
            return
        k = len(starts)
        bad = np.zeros(k, np.bool_)
        rows = np.arange(k, dtype=np.int64)
        pos = starts.astype(np.int64)
        end = ends.astype(np.int64)
        by_field: dict[int, list[tuple[np.ndarray, ...]]] = {}
        for _ in range(MAX_STEPS):
            live = pos < end
            if not live.all():
                rows, pos, end = rows[live], pos[live], end[live]
            if not rows.size:
                break
            tag = data[pos]
            if tag.max() < 0x80:  # field numbers below 16: one-byte tags, the usual case
                tag = tag.astype(np.int64)
                p = pos + 1
                ok = tag >= 8  # field number 0 is invalid
            else:
                utag, p, ok = varints(data, pos, end)
                tag = utag.astype(np.int64)
                ok &= (utag <= np.uint64(0xFFFFFFFF)) & (tag >= 8) & (p - pos <= MAX_SIZE_BYTES)
            wt = tag & 7
            field = tag >> 3
            # Wire types 0 and 2 both continue with a varint: the value, or
            # the length of what follows. When they are all there is (nearly
            # always), one pass over every message does the step.
            if wt.max() <= 2 and not (wt == 1).any():
                a, b, good = _value_or_length(data, p, end, wt == 2)
                ok &= good
            else:
                a, b = p.copy(), p.copy()
                w = np.flatnonzero((wt == 0) | (wt == 2))
                if w.size:
                    a[w], b[w], good = _value_or_length(data, p[w], end[w], wt[w] == 2)
                    ok[w] &= good
                w = np.flatnonzero(wt == 1)
                b[w] = p[w] + 8
                w = np.flatnonzero(wt == 5)
                b[w] = p[w] + 4
                ok &= ((wt <= 2) | (wt == 5)) & (b <= end)  # groups, 6 and 7: left to upb
            if not ok.all():
                bad[rows[~ok]] = True
                rows, field, wt, a, b, end = (x[ok] for x in (rows, field, wt, a, b, end))
            if rows.size:
                # Encoders write fields in order: a step is usually one field.
                lo, hi = int(field.min()), int(field.max())
                for f in (lo,) if lo == hi else _distinct(field, hi):
                    sel = slice(None) if lo == hi else field == f
                    by_field.setdefault(f, []).append((rows[sel], wt[sel], a[sel], b[sel]))
            pos = b
        else:
            bad[rows[pos < end]] = True  # more occurrences than MAX_STEPS
        self.by_field = by_field
        self.bad = bad


def _native_scan(
    data: np.ndarray, starts: np.ndarray, ends: np.ndarray, known: tuple[int, ...]
) -> tuple[dict[int, list[tuple[np.ndarray, ...]]], np.ndarray]:
    """_Scan's result from the C scan: one part per field number, rows ascending.

    The C scan groups the `known` field numbers itself (two passes: count,
    then write each occurrence in its group); the rare others are grouped here."""
    assert _kernels is not None
    k = len(starts)
    data = np.ascontiguousarray(data, np.uint8)
    s = np.ascontiguousarray(starts, np.int64)
    e = np.ascontiguousarray(ends, np.int64)
    slot_of = _slot_table(known)
    counts = np.zeros(len(known) + 1, np.int64)
    _kernels.scan(data, s, e, MAX_STEPS, slot_of, counts, *(None,) * 7)
    bounds = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    m = int(bounds[-1])
    rows, a, b = np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.int64)
    field, wt = np.empty(m, np.int32), np.empty(m, np.int8)
    bad = np.zeros(k, np.bool_)
    _kernels.scan(
        data,
        s,
        e,
        MAX_STEPS,
        slot_of,
        None,
        bounds[:-1].copy(),
        rows,
        field,
        wt,
        a,
        b,
        bad.view(np.uint8),
    )
    by_field: dict[int, list[tuple[np.ndarray, ...]]] = {}
    edges = bounds.tolist()
    for j, number in enumerate(known):
        lo, up = edges[j], edges[j + 1]
        if up > lo:
            by_field[number] = [(rows[lo:up], wt[lo:up], a[lo:up], b[lo:up])]
    lo = edges[-2]
    if m > lo:  # field numbers the caller did not ask for, in message order
        other = field[lo:]
        order = np.argsort(other, kind="stable")
        other = other[order]
        cuts = [0, *(np.flatnonzero(other[1:] != other[:-1]) + 1).tolist(), len(other)]
        r, w, x, y = (v[lo:][order] for v in (rows, wt, a, b))
        for c0, c1 in zip(cuts[:-1], cuts[1:]):
            by_field[int(other[c0])] = [(r[c0:c1], w[c0:c1], x[c0:c1], y[c0:c1])]
    return by_field, bad


@lru_cache(maxsize=256)
def _slot_table(known: tuple[int, ...]) -> np.ndarray:
    """Field number -> its index in `known` (-1: not known), for the C scan."""
    small = [n for n in known if n < 1 << 16]
    table = np.full(max(small, default=0) + 1, -1, np.int32)
    for j, n in enumerate(known):
        if n < 1 << 16:
            table[n] = j
    return table


def _distinct(field: np.ndarray, hi: int) -> list[int]:
    """The distinct field numbers of a step, ascending."""
    if hi < 1 << 12:  # the usual: counting beats hashing
        found: list[int] = np.flatnonzero(np.bincount(field, minlength=hi + 1)).tolist()
    else:
        found = np.unique(field).tolist()
    return found


@cache
def _enum_table(enum: Any) -> tuple[int, int, pa.Array, dict[int, str]]:
    by_number: dict[int, str] = {}
    for v in enum.values:
        by_number.setdefault(v.number, v.name)
    lo, hi = min(by_number), max(by_number)
    names = [by_number.get(i) or f"UNKNOWN_ENUM_VALUE_{enum.name}_{i}" for i in range(lo, hi + 1)]
    return lo, hi, pa.array(names, pa.string()), by_number


def enum_names(enum: Any, nums: np.ndarray, null: np.ndarray | None) -> pa.Array:
    """Enum numbers as their names (protobuf-java's name for unknown numbers).

    Args:
        enum: The enum's descriptor.
        nums: The numbers.
        null: True where the value is null; None: none is.

    Returns:
        A string array; a number the enum lacks is
        `UNKNOWN_ENUM_VALUE_<ENUM>_<n>`, protobuf-java's name for it.
    """
    lo, hi, table, by_number = _enum_table(enum)
    if len(nums) and (nums.min() < lo or nums.max() > hi):
        return pa.array(
            [by_number.get(int(n)) or f"UNKNOWN_ENUM_VALUE_{enum.name}_{n}" for n in nums],
            pa.string(),
            mask=null,
        )
    return table.take(pa.array(nums - lo, mask=null))


def scatter(values: pa.Array, present: np.ndarray) -> pa.Array:
    """`values` spread over len(present) rows, null elsewhere.

    Args:
        values: One value per True in `present`, in order.
        present: Which rows have a value.

    Returns:
        An array of len(present) rows (`values` itself when every row has one).
    """
    if present.all():
        return values
    idx = np.cumsum(present, dtype=np.int32) - 1
    return values.take(pa.array(idx, mask=~present))


def bitmap(bits: np.ndarray) -> pa.Buffer:
    """Pack a numpy array into an Arrow bitmap (validity or bool values).

    Bit i is set where element i is true or nonzero. Packed by numpy:
    pyarrow converts a bool array to bits one element at a time (~2.5 ns
    each).

    Args:
        bits: One element per bit: bools, or bytes of 0 and 1.

    Returns:
        The bitmap, least significant bit first, as Arrow lays it out.
    """
    return pa.py_buffer(np.packbits(bits, bitorder="little"))


def spread(values: pa.Array, rows: np.ndarray, n: int) -> pa.Array:
    """`values` at `rows` of n rows, null elsewhere (`scatter` by row numbers).

    Args:
        values: One value per row of `rows`, in order.
        rows: Ascending row numbers, below n.
        n: The rows of the result.

    Returns:
        An array of n rows.
    """
    present = np.zeros(n, np.bool_)
    present[rows] = True
    return scatter(values, present)


class _Decoder:
    """Columns of one message type from a scan; marks rows it cannot do."""

    def __init__(
        self, data: np.ndarray, scan: _Scan, k: int, emit_defaults: bool, keep_zero: bool
    ) -> None:
        self.data = data
        self.scan = scan
        self.k = k
        self.emit = emit_defaults  # Spark's emit.default.values, at every level
        self.keep_zero = keep_zero or emit_defaults  # this level only (map entries)
        self.bad = scan.bad

    def occurrences(self, fd: FieldDescriptor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where `fd` occurs: rows, value or start, end (rows that cannot be done are marked)."""
        parts = self.scan.by_field.get(fd.number)
        if not parts:
            empty = np.empty(0, np.int64)
            return empty, empty, empty
        rows, wt, a, b = parts[0] if len(parts) == 1 else (np.concatenate(x) for x in zip(*parts))
        expected = _WIRE.get(fd.type, 0)
        if fd.is_repeated and expected != 2 and (wt == 2).any():
            rows, wt, a, b = self._unpacked(rows, wt, a, b, expected)
        wrong = wt != expected
        if wrong.any():
            self.bad[rows[wrong]] = True
            right = ~wrong
            rows, wt, a, b = rows[right], wt[right], a[right], b[right]
        if not fd.is_repeated and len(rows) > 1:
            counts = np.bincount(rows, minlength=self.k)
            twice = counts > 1
            if twice.any():
                # A singular field twice is legal (upb merges a message and
                # keeps a scalar's last value): such rows are left to upb, and
                # one occurrence per row is kept, so that every column still
                # has one slot per row (issue #19: a second occurrence took
                # the next row's slot).
                self.bad[twice] = True
                order = np.argsort(rows, kind="stable")
                r = rows[order]
                last = order[np.append(r[1:] != r[:-1], True)]
                rows, a, b = rows[last], a[last], b[last]
        return rows, a, b

    def _unpacked(
        self, rows: np.ndarray, wt: np.ndarray, a: np.ndarray, b: np.ndarray, expected: int
    ) -> tuple[np.ndarray, ...]:
        """Packed occurrences of a repeated number (wire type 2) as one
        occurrence per element, in place; a packed run that is not whole
        elements marks its row. Python per packed run: the reference (the C
        reader does this in its pass)."""
        out: list[list[int]] = [[], [], [], []]
        width = {1: 8, 5: 4}.get(expected, 0)
        data = self.data
        for r, w, x, y in zip(rows.tolist(), wt.tolist(), a.tolist(), b.tolist()):
            if w != 2:
                for col, v in zip(out, (r, w, x, y)):
                    col.append(v)
                continue
            p, elems = x, []
            while p < y:
                if width:
                    if y - p < width:
                        break
                    elems.append((p, p + width))
                    p += width
                    continue
                val, nxt, ok = varints(data, np.array([p], np.int64), np.array([y], np.int64))
                if not ok[0] or int(nxt[0]) > y:
                    break
                elems.append((int(val.view(np.int64)[0]), int(nxt[0])))
                p = int(nxt[0])
            if p < y:  # a cut element: upb refuses the message
                self.bad[r] = True
                continue
            for ex, ey in elems:
                for col, v in zip(out, (r, expected, ex, ey)):
                    col.append(v)
        return (
            np.array(out[0], np.int64),
            np.array(out[1], wt.dtype),
            np.array(out[2], np.int64),
            np.array(out[3], np.int64),
        )

    def column(self, fd: FieldDescriptor, typ: pa.DataType) -> pa.Array:
        rows, a, b = self.occurrences(fd)
        k = self.k
        mt = fd.message_type
        if fd.is_repeated:
            return self._repeated(fd, typ, rows, a, b, mt is not None and mt.GetOptions().map_entry)
        if mt is not None:
            present = np.zeros(k, np.bool_)
            present[rows] = True
            if not rows.size:
                return pa.nulls(k, typ)
            order = np.argsort(rows, kind="stable")
            sub, sub_ok = _decode(mt, typ, self.data, a[order], b[order], self.emit)
            if not sub_ok.all():
                self.bad[rows[order][~sub_ok]] = True
            return scatter(sub, present)
        if fd.has_presence:  # proto3 `optional`, proto2: null exactly when absent
            present = np.zeros(k, np.bool_)
            present[rows] = True
            arr = self._scalars(fd, typ, rows, a, b, k, nullable=False)
            return arr if present.all() else pa.compute.if_else(pa.array(present), arr, None)
        return self._scalars(fd, typ, rows, a, b, k, nullable=not self.keep_zero)

    def _scalars(
        self,
        fd: FieldDescriptor,
        typ: pa.DataType,
        rows: np.ndarray,
        a: np.ndarray,
        b: np.ndarray,
        k: int,
        nullable: bool,
        dense: bool = False,
    ) -> pa.Array:
        """Values in k slots: slot = message row, from the occurrences `rows`;
        or `dense`: slot i is occurrence i (of message `rows[i]`)."""
        t = fd.type
        if t in (F.TYPE_STRING, F.TYPE_BYTES):
            if dense:
                starts, lens = a, b - a
            else:
                # A message without the field: an empty range where the
                # previous one ended, so that the ranges stay in order.
                ends = np.zeros(k, np.int64)
                ends[rows] = b
                np.maximum.accumulate(ends, out=ends)
                starts = ends.copy()
                starts[rows] = a
                lens = ends - starts
            arr = slices(self.data, starts, lens, (lens == 0) if nullable else None)
            if t == F.TYPE_STRING:
                arr = self._utf8(arr, rows if dense else np.arange(k))
            return arr
        if t in _FIXED:
            width, dtype = _FIXED[t]
            vals = np.zeros(k, dtype)
            if len(rows):
                idx = (a[:, None] + np.arange(width)).ravel()
                got = self.data[idx].view(dtype)
                if dense:
                    vals = got.copy()
                else:
                    vals[rows] = got
            vals = vals.astype(dtype[1:])  # native order
            null = ((vals == 0) & ~np.signbit(vals)) if vals.dtype.kind == "f" else (vals == 0)
            return pa.array(vals, typ, mask=null if nullable and null.any() else None)
        raw = np.zeros(k, np.int64)
        raw[np.arange(k) if dense else rows] = a
        if t in _INT32:
            vals = raw.astype(np.int32)  # low 32 bits, as upb and Java read them
        elif t == F.TYPE_SINT32:
            u = raw.astype(np.uint32)
            vals = ((u >> np.uint32(1)) ^ (np.uint32(0) - (u & np.uint32(1)))).view(np.int32)
        elif t == F.TYPE_SINT64:
            u = raw.view(np.uint64)
            vals = ((u >> np.uint64(1)) ^ (np.uint64(0) - (u & np.uint64(1)))).view(np.int64)
        elif t == F.TYPE_BOOL:
            vals = raw != 0
        else:  # int64, uint64 (wraps, as Java's long)
            vals = raw
        null = ~vals.astype(bool) if nullable else None
        if null is not None and not null.any():
            null = None
        if t == F.TYPE_ENUM:
            enum = fd.enum_type
            assert enum is not None  # an enum field has its enum
            if enum.is_closed:  # unknown numbers go to unknown fields: upb's call
                known = np.isin(vals, [v.number for v in enum.values])
                if not known.all():
                    self.bad[(rows if dense else np.arange(k))[~known]] = True
            return enum_names(fd.enum_type, vals, null)
        return pa.array(vals, typ, mask=null)

    def _utf8(self, arr: pa.Array, slot_rows: np.ndarray) -> pa.Array:
        try:
            return arr.cast(pa.string())  # validates the UTF-8 in C++
        except pa.ArrowInvalid:
            # upb refuses invalid UTF-8 in proto3 strings: find the rows
            # (rare) and leave them to it; their values here are dropped.
            keep = []
            for i, v in enumerate(arr.to_pylist()):
                try:
                    keep.append(None if v is None else v.decode("utf-8"))
                except UnicodeDecodeError:
                    self.bad[slot_rows[i]] = True
                    keep.append(None)
            return pa.array(keep, pa.string())

    def _repeated(
        self,
        fd: FieldDescriptor,
        typ: pa.DataType,
        rows: np.ndarray,
        a: np.ndarray,
        b: np.ndarray,
        is_map: bool,
    ) -> pa.Array:
        k = self.k
        order = np.argsort(rows, kind="stable")
        rows, a, b = rows[order], a[order], b[order]
        offsets = np.zeros(k + 1, np.int32)
        np.cumsum(np.bincount(rows, minlength=k), out=offsets[1:])
        mt = fd.message_type
        n = len(rows)
        if mt is not None:
            # Entries of a map, elements of a repeated message: their fields
            # are the message's, decoded like any other message. Map keys
            # and values are kept even when zero (Spark writes them).
            sub, sub_ok = _decode(
                mt,
                _entry_type(typ) if is_map else typ.value_type,
                self.data,
                a,
                b,
                self.emit,
                keep_zero=is_map,
            )
            if not sub_ok.all():
                self.bad[rows[~sub_ok]] = True
            if is_map:
                keys, items = sub.field(0), sub.field(1)
                if items.null_count:  # an entry without its (message) value
                    self.bad[rows[~np.asarray(items.is_valid())]] = True
                if n > 1:
                    self._duplicate_keys(rows, keys)
                if keys.null_count:  # keys of entries left to upb (their rows are)
                    keys = keys.fill_null(_zero(keys.type))
                return pa.MapArray.from_arrays(pa.array(offsets), keys, items, type=typ)
            return pa.ListArray.from_arrays(pa.array(offsets), sub, type=typ)
        values = self._scalars(fd, typ.value_type, rows, a, b, n, nullable=False, dense=True)
        return pa.ListArray.from_arrays(pa.array(offsets), values, type=typ)

    def _duplicate_keys(self, rows: np.ndarray, keys: pa.Array) -> None:
        """A map with a key twice: upb keeps the last; leave such rows to it."""
        t = pa.table({"r": rows, "k": keys, "one": np.ones(len(rows), np.int8)})
        counts = t.group_by(["r", "k"]).aggregate([("one", "count")])
        dup = counts.filter(pa.compute.greater(counts["one_count"], 1))
        if dup.num_rows:
            self.bad[np.asarray(dup["r"])] = True


def _zero(t: pa.DataType) -> pa.Scalar:
    """The zero value of a map key type (protobuf keys are integers, bools or strings)."""
    if pa.types.is_string(t):
        return pa.scalar("", t)
    if pa.types.is_boolean(t):
        return pa.scalar(False, t)
    return pa.scalar(0, t)


def _entry_type(map_type: pa.MapType) -> pa.StructType:
    return pa.struct([pa.field("key", map_type.key_type), pa.field("value", map_type.item_type)])


def _decode(
    descriptor: Descriptor,
    arrow_type: pa.StructType,
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    emit_defaults: bool,
    keep_zero: bool = False,
    clean: bool = False,
) -> tuple[pa.StructArray, np.ndarray]:
    """Struct column of the messages, null where a message is left to upb; and `ok`."""
    k = len(starts)
    if k == 0:
        return pa.array([], arrow_type), np.ones(0, np.bool_)
    dec = _Decoder(
        data, _Scan(data, starts, ends, _numbers(descriptor)), k, emit_defaults, keep_zero
    )
    by_name = descriptor.fields_by_name
    fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
    children = [dec.column(by_name[f.name], f.type) for f in fields]
    if keep_zero:
        # A map entry with a field it does not declare is not put in the map
        # by upb (it keeps the entry as an unknown field): leave it to upb.
        _mark_unknown(dec, {fd.number for fd in descriptor.fields})
    elif clean:
        # Only the fields read above had their wire types checked (a field
        # Spark drops was not): anything else makes the message unclean.
        _mark_unknown(dec, {by_name[f.name].number for f in fields})
    bad = dec.bad
    return (
        pa.StructArray.from_arrays(
            children, fields=fields, mask=pa.array(bad) if bad.any() else None
        ),
        ~bad,
    )


@cache
def _numbers(descriptor: Descriptor) -> tuple[int, ...]:
    return tuple(sorted(fd.number for fd in descriptor.fields))


def _mark_unknown(dec: _Decoder, known: set[int]) -> None:
    """Mark the messages with a top-level field number outside `known`."""
    for number, parts in dec.scan.by_field.items():
        if number not in known:
            for rows, *_ in parts:
                dec.bad[rows] = True


def decode_structs(
    descriptor: Descriptor,
    arrow_type: pa.StructType,
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    emit_defaults: bool = False,
    clean: bool = False,
    native: bool = True,
) -> tuple[pa.StructArray, np.ndarray]:
    """The messages `data[starts[i]:ends[i]]` as a struct column, and `ok`.

    `clean=True` also leaves out every message with a top-level field the
    type does not declare: an `ok` message is then one whose every field
    has a number and wire type of its type, what `payloads.fits_cleanly`
    says of upb's parse (layout="auto" trusts a payload on that evidence).

    The C reader (wirescan_native, when setup.py built it) does this in one
    pass per batch; the numpy reader here is the reference (`native=False`).

    Args:
        descriptor: The message type.
        arrow_type: Its struct type (`schema.message_type`).
        data: The batch's bytes, a uint8 array.
        starts: Each message's start in `data`.
        ends: Each message's end (excluded).
        emit_defaults: Proto3 scalars and enums at their default are values,
            not nulls.
        clean: Also leave to upb every message with a top-level field the type
            does not declare.
        native: Use the C reader when it is built and knows the type.

    Returns:
        (a struct column of len(starts) rows; `ok`, a bool array: False for
        the messages left to upb, whose slots hold nulls).
    """
    if native and len(starts) and wirescan_native.available():
        try:
            return wirescan_native.decode_structs(
                descriptor, arrow_type, data, starts, ends, emit_defaults, clean
            )
        except wirescan_native.Unsupported:
            pass  # a type the C reader is not compiled for: the numpy reader below
    return _decode(descriptor, arrow_type, data, starts, ends, emit_defaults, clean=clean)
