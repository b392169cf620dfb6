"""Vectorized ReplicationResponse decoding: commit-log entries of many payloads at once.

`decode_replication(arrow_type, data, starts, ends)` reads the payloads
`data[starts[i]:ends[i]]` (spec/commitlog.ksy: leader epoch, high
watermark, then entries back to back) into the struct column of
`schema.REPLICATION_RESPONSE_STRUCT`, one entry of every payload per step, with
numpy. A payload is left to `lbparse.codec.commitlog` (the caller's fallback,
which also words the errors) when anything is unusual: a length that runs
past its entry, a body shorter than its fields, bytes left after the last
header of an entry, a header key that is not UTF-8. The values are those
of `columns.ReplicationResponseBuilder`; a test holds the two equal.

The walk runs in C (`_kernels.replication`: one pass per batch, every
entry's CRC-32C computed there, the column built there and handed to
pyarrow whole through the C data interface) when setup.py built it and it
builds the type asked for (`_orders`: the spec's, its fields in any order);
the numpy walk here is the reference (`native=False`), and
tests/columnar/test_envelope_pass.py holds the two equal.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import crc32c as _crc32c
import numpy as np
import pyarrow as pa

from lbparse.codec.wire import BODY_HEAD, ENTRY_HEAD, NIL_LENGTH, REPLICATION_PREFIX, int_struct
from lbparse.columnar.wirescan import slices

_kernels: Any
try:
    from lbparse.columnar import _kernels  # type: ignore[attr-defined,no-redef]
except ImportError:  # not built: the numpy walk below does the same
    _kernels = None

__all__ = ["decode_replication"]

MAX_ENTRIES = 1 << 16  # entries per payload read here; more are left to lbparse
MAX_HEADERS = 1 << 10  # headers per entry

# Formats, offsets and sizes from spec/commitlog.ksy (through lbparse.codec.wire).
_RR = REPLICATION_PREFIX.fields  # leader_epoch, high_watermark
_ENTRY = ENTRY_HEAD.fields  # offset, timestamp, leader_epoch, size
_BODY = BODY_HEAD.fields  # crc32c, magic, attributes, key_len
_VALUE_LEN = int_struct("liftbridge_commitlog::body", "value_len").format
_HEADER_COUNT = int_struct("liftbridge_commitlog::body", "header_count").format
_HKEY_LEN = int_struct("liftbridge_commitlog::header", "key_len").format
_HVALUE_LEN = int_struct("liftbridge_commitlog::header", "value_len").format
_NUMPY = {"B": "u1", "H": "u2", "I": "u4", "Q": "u8", "b": "i1", "h": "i2", "i": "i4", "q": "i8"}


def _be(data: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian integers of `width` bytes at `pos` (all in bounds)."""
    if not len(pos):
        return np.zeros(0, dtype)
    idx = pos[:, None] + np.arange(width)
    return np.ascontiguousarray(data[idx]).view(dtype).ravel().astype(dtype[1:])


def _read(data: np.ndarray, pos: np.ndarray, fmt: str) -> np.ndarray:
    """The integers of a one-field struct format (`>I`, ...) at `pos`, as int64
    (unsigned 64-bit ones wrap, as Spark's bigint holds them)."""
    code = _NUMPY[fmt[1:]]
    v = _be(data, pos, int(code[1]), ">" + code)
    return v.view(np.int64) if code == "u8" else v.astype(np.int64)


def _width(fmt: str) -> int:
    return int(_NUMPY[fmt[1:]][1])


# The shortest body: its fixed head, a nil value's length, no headers.
_BODY_MIN = BODY_HEAD.size + _width(_VALUE_LEN) + _width(_HEADER_COUNT)


def _binary(
    data: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    null: np.ndarray | None,
    typ: pa.DataType,
) -> pa.Array:
    return slices(data, starts, np.where(lens < 0, 0, lens), null, typ)


def decode_replication(
    arrow_type: pa.StructType,
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    native: bool = True,
) -> tuple[pa.StructArray, np.ndarray]:
    """The payloads as a struct column (null where left to lbparse), and `ok`.

    Args:
        arrow_type: The ReplicationResponse struct type.
        data: The batch's payload bytes, a uint8 array.
        starts: Each payload's start in `data`.
        ends: Each payload's end.
        native: Use the C kernels when they are built.

    Returns:
        (the struct column, a row per payload; a bool array: True where the
        payload was decoded here, False where it is left to lbparse's
        per-row decoder to decode or refuse).
    """
    if native and _kernels is not None:
        orders = _orders(arrow_type)
        if orders is not None:
            return _native(arrow_type, orders, data, starts, ends)
    k = len(starts)
    ok = (ends - starts) >= REPLICATION_PREFIX.size
    epoch = np.zeros(k, np.int64)
    hw = np.zeros(k, np.int64)
    for out, name in ((epoch, "leader_epoch"), (hw, "high_watermark")):
        out[ok] = _read(data, starts[ok] + _RR[name].offset, _RR[name].format)
    # One entry of every live payload per step.
    rows = np.flatnonzero(ok)
    pos = starts[rows] + REPLICATION_PREFIX.size
    end = ends[rows]
    ent: dict[str, list[np.ndarray]] = {
        n: []
        for n in (
            "row",
            "offset",
            "timestamp",
            "epoch",
            "size",
            "crc",
            "magic",
            "attributes",
            "kstart",
            "klen",
            "vstart",
            "vlen",
            "hstart",
            "hend",
            "body",
            "bend",
        )
    }
    for _ in range(MAX_ENTRIES):
        live = pos < end
        rows, pos, end = rows[live], pos[live], end[live]
        if not rows.size:
            break
        fits = pos + ENTRY_HEAD.size <= end
        size = np.zeros(len(rows), np.int64)
        size[fits] = _read(data, pos[fits] + _ENTRY["size"].offset, _ENTRY["size"].format)
        body = pos + ENTRY_HEAD.size
        bend = body + size
        good = fits & (bend <= end) & (size >= _BODY_MIN)
        bad = rows[~good]
        ok[bad] = False
        rows, pos, end, body, bend = rows[good], pos[good], end[good], body[good], bend[good]
        klen = _read(data, body + _BODY["key_len"].offset, _BODY["key_len"].format)
        p = body + BODY_HEAD.size
        good = (klen == NIL_LENGTH) | ((klen >= 0) & (p + klen <= bend))
        kstart = p
        p = p + np.maximum(klen, 0)
        good &= p + _width(_VALUE_LEN) <= bend
        vlen = np.full(len(rows), NIL_LENGTH, np.int64)
        vlen[good] = _read(data, p[good], _VALUE_LEN)
        p = p + _width(_VALUE_LEN)
        good &= (vlen == NIL_LENGTH) | ((vlen >= 0) & (p + vlen <= bend))
        vstart = p
        p = p + np.maximum(vlen, 0)
        good &= p + _width(_HEADER_COUNT) <= bend
        hcount = np.zeros(len(rows), np.int64)
        hcount[good] = _read(data, p[good], _HEADER_COUNT)
        hstart = p + _width(_HEADER_COUNT)
        ok[rows[~good]] = False
        keep = good
        ent["row"].append(rows[keep])
        for name, field in (
            ("offset", "offset"),
            ("timestamp", "timestamp"),
            ("epoch", "leader_epoch"),
        ):
            ent[name].append(_read(data, pos[keep] + _ENTRY[field].offset, _ENTRY[field].format))
        ent["size"].append(bend[keep] - body[keep])
        ent["crc"].append(_read(data, body[keep] + _BODY["crc32c"].offset, _BODY["crc32c"].format))
        for name in ("magic", "attributes"):
            ent[name].append(
                _read(data, body[keep] + _BODY[name].offset, _BODY[name].format).astype(np.int32)
            )
        for name, v in (
            ("kstart", kstart),
            ("klen", klen),
            ("vstart", vstart),
            ("vlen", vlen),
            ("hstart", hstart),
            ("body", body),
            ("bend", bend),
        ):
            ent[name].append(v[keep])
        ent["hend"].append(np.maximum(hcount[keep], 0))  # the count, for now
        rows, pos, end = rows[keep], bend[keep], end[keep]
    else:
        ok[rows] = False  # more entries than MAX_ENTRIES
    e = {n: (np.concatenate(v) if v else np.zeros(0, np.int64)) for n, v in ent.items()}
    h = _headers(data, e, ok)
    # Entries of payloads that are left to lbparse go; the rest in payload order,
    # and the headers follow their entries' new numbers.
    keep = ok[e["row"]]
    sel = np.flatnonzero(keep)[np.argsort(e["row"][keep], kind="stable")]
    renumber = np.full(len(e["row"]), -1, np.int64)
    renumber[sel] = np.arange(len(sel))
    he = renumber[h["entry"]]
    order = np.flatnonzero(he >= 0)
    order = order[np.argsort(he[order], kind="stable")]
    h = {n: v[order] for n, v in h.items()}
    h["entry"] = he[order]
    return _assemble(arrow_type, data, k, ok, epoch, hw, {n: v[sel] for n, v in e.items()}, h)


def _headers(data: np.ndarray, e: dict[str, np.ndarray], ok: np.ndarray) -> dict[str, np.ndarray]:
    """Every entry's headers (key and value ranges, by entry); marks payloads not ok."""
    count = e["hend"]
    p = e["hstart"].copy()
    bend = e["bend"]
    out: dict[str, list[np.ndarray]] = {
        "entry": [],
        "kstart": [],
        "klen": [],
        "vstart": [],
        "vlen": [],
    }
    ents = np.flatnonzero(count > 0)
    for j in range(MAX_HEADERS):
        ents = ents[count[ents] > j]
        if not ents.size:
            break
        q = p[ents]
        kw, vw = _width(_HKEY_LEN), _width(_HVALUE_LEN)
        good = q + kw <= bend[ents]
        hk = np.zeros(len(ents), np.int64)
        hk[good] = _read(data, q[good], _HKEY_LEN)
        ks = q + kw
        good &= (hk >= 0) & (ks + hk + vw <= bend[ents])
        hv = np.zeros(len(ents), np.int64)
        hv[good] = _read(data, (ks + hk)[good], _HVALUE_LEN)
        vs = ks + hk + vw
        good &= (hv >= 0) & (vs + hv <= bend[ents])
        ok[e["row"][ents[~good]]] = False
        ents, ks, hk, vs, hv = ents[good], ks[good], hk[good], vs[good], hv[good]
        for name, v in (
            ("entry", ents),
            ("kstart", ks),
            ("klen", hk),
            ("vstart", vs),
            ("vlen", hv),
        ):
            out[name].append(v)
        p[ents] = vs + hv
    else:
        ok[e["row"][ents]] = False
    # lbparse reads an entry's headers and stops: bytes after them are not
    # an error there, but they are unusual enough to leave to it.
    ok[e["row"][p != bend]] = False
    return {n: (np.concatenate(v) if v else np.zeros(0, np.int64)) for n, v in out.items()}


def _assemble(
    arrow_type: pa.StructType,
    data: np.ndarray,
    k: int,
    ok: np.ndarray,
    epoch: np.ndarray,
    hw: np.ndarray,
    e: dict[str, np.ndarray],
    h: dict[str, np.ndarray],
) -> tuple[pa.StructArray, np.ndarray]:
    """The struct column from the entries (in payload order) and their headers."""
    entries_type = arrow_type.field("entries").type
    entry_type = entries_type.value_type
    headers_type = entry_type.field("headers").type
    m = len(e["row"])
    he = h["entry"]
    keys = _binary(data, h["kstart"], h["klen"], None, pa.binary())
    try:
        keys = keys.cast(pa.string())
    except pa.ArrowInvalid:  # a key that is not UTF-8: lbparse refuses the payload
        bad_entries = [int(he[i]) for i, v in enumerate(keys.to_pylist()) if _not_utf8(v)]
        ok[e["row"][bad_entries]] = False
        keys = pa.array([v.decode("utf-8", "replace") for v in keys.to_pylist()], pa.string())
    h_off = np.zeros(m + 1, np.int32)
    np.cumsum(np.bincount(he, minlength=m), out=h_off[1:])
    hstruct = headers_type.value_type
    headers = pa.ListArray.from_arrays(
        pa.array(h_off),
        pa.StructArray.from_arrays(
            [keys, _binary(data, h["vstart"], h["vlen"], None, pa.binary())],
            fields=[hstruct.field(0), hstruct.field(1)],
        ),
        type=headers_type,
    )
    mv = memoryview(np.ascontiguousarray(data).data)
    crc_ok = (
        np.fromiter(
            map(
                _crc32c.crc32c,
                map(
                    mv.__getitem__,
                    map(slice, (e["body"] + _BODY["crc32c"].size).tolist(), e["bend"].tolist()),
                ),
            ),
            np.int64,
            count=m,
        )
        == e["crc"]
    )  # the CRC covers the body after itself
    numbers = {
        "offset": e["offset"],
        "timestamp": e["timestamp"],
        "leader_epoch": e["epoch"],
        "size": e["size"],
        "crc32c": e["crc"],
        "crc_ok": crc_ok,
        "magic": e["magic"],
        "attributes": e["attributes"],
    }
    fields = [entry_type.field(i) for i in range(entry_type.num_fields)]
    # Every column typed by its field, not by numpy's dtype: a batch without
    # entries has empty int64 arrays where the schema says int32 (issue #12).
    cols = {f.name: pa.array(numbers[f.name], f.type) for f in fields if f.name in numbers}
    cols.update(
        {
            "key": _binary(data, e["kstart"], e["klen"], e["klen"] < 0, pa.binary()),
            "value": _binary(data, e["vstart"], e["vlen"], e["vlen"] < 0, pa.binary()),
            "headers": headers,
        }
    )
    entries = pa.StructArray.from_arrays([cols[f.name] for f in fields], fields=fields)
    e_off = np.zeros(k + 1, np.int32)
    np.cumsum(np.bincount(e["row"], minlength=k), out=e_off[1:])
    top = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
    values = {"leader_epoch": epoch, "high_watermark": hw}
    children = [
        pa.array(values[f.name], f.type)
        if f.name in values
        else pa.ListArray.from_arrays(pa.array(e_off), entries, type=entries_type)
        for f in top
    ]
    arr = pa.StructArray.from_arrays(
        children, fields=top, mask=pa.array(~ok) if not ok.all() else None
    )
    return arr, ok


def _not_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _field(fmt: str, offset: int = 0) -> tuple[int, int, int]:
    """(offset, width, signed) of an integer of struct format `fmt`, for the C walk."""
    code = _NUMPY[fmt[1:]]
    return offset, int(code[1]), int(code[0] == "i")


def layout() -> tuple[Any, ...]:
    """The commit-log layout as `_kernels.replication` takes it (lbparse.codec.wire's
    facts, and this module's limits)."""

    def at(part: Any, name: str) -> tuple[int, int, int]:
        return _field(part[name].format, part[name].offset)

    return (
        (at(_RR, "leader_epoch"), at(_RR, "high_watermark")),
        tuple(at(_ENTRY, n) for n in ("offset", "timestamp", "leader_epoch", "size")),
        tuple(at(_BODY, n) for n in ("crc32c", "magic", "attributes", "key_len")),
        _field(_VALUE_LEN),
        _field(_HEADER_COUNT),
        _field(_HKEY_LEN),
        _field(_HVALUE_LEN),
        REPLICATION_PREFIX.size,
        ENTRY_HEAD.size,
        BODY_HEAD.size,
        _BODY_MIN,
        NIL_LENGTH,
        _BODY["crc32c"].size,
        MAX_ENTRIES,
        MAX_HEADERS,
    )


@lru_cache(maxsize=4)
def _layout_cached(max_entries: int, max_headers: int) -> tuple[Any, ...]:
    return layout()


# What `_kernels.replication` builds each field as (rr_export's codes): the
# payload's, an entry's, a header's. A type whose fields are these, in any
# order, is built in C; any other by the numpy walk.
_TOP_FIELDS = {
    "leader_epoch": (0, pa.int64()),
    "high_watermark": (1, pa.int64()),
    "entries": (2, None),
}
_ENTRY_FIELDS = {
    name: (code, typ)
    for code, (name, typ) in enumerate(
        [
            ("offset", pa.int64()),
            ("timestamp", pa.int64()),
            ("leader_epoch", pa.int64()),
            ("size", pa.int64()),
            ("crc32c", pa.int64()),
            ("crc_ok", pa.bool_()),
            ("magic", pa.int32()),
            ("attributes", pa.int32()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("headers", None),
        ]
    )
}
_HEADER_FIELDS = {"key": (0, pa.string()), "value": (1, pa.binary())}

# The last type asked for and its orders: one type all the time, and a struct
# type's hash walks all its fields (lru_cache on it: ~12 us a call).
_ORDERS: list[Any] = [None, None]


def _codes(
    struct: pa.DataType | None, known: dict[str, tuple[int, pa.DataType | None]]
) -> tuple[int, ...] | None:
    """Each field's code in `known`, its type checked (None in `known`: a list,
    looked into by the caller); None when a field is not known or not of its type."""
    if struct is None or not pa.types.is_struct(struct) or struct.num_fields != len(known):
        return None
    out = []
    for f in struct:
        code, typ = known.get(f.name, (-1, None))
        fits = pa.types.is_list(f.type) if typ is None else f.type == typ
        if code < 0 or not fits:
            return None
        out.append(code)
    return tuple(out)


def _items(struct: pa.StructType, name: str) -> pa.DataType:
    """The item type of the list field `name` (checked a list by `_codes`)."""
    return struct.field(name).type.value_type


def _find_orders(arrow_type: pa.StructType) -> tuple[tuple[int, ...], ...] | None:
    top = _codes(arrow_type, _TOP_FIELDS)
    if top is None:
        return None
    entry_type = _items(arrow_type, "entries")
    entry = _codes(entry_type, _ENTRY_FIELDS)
    if entry is None:
        return None
    header = _codes(_items(entry_type, "headers"), _HEADER_FIELDS)
    return None if header is None else (top, entry, header)


def _orders(arrow_type: pa.StructType) -> tuple[tuple[int, ...], ...] | None:
    """`_kernels.replication`'s orders of the type's fields; None when the C
    build of the column does not make that type (the numpy walk does)."""
    if _ORDERS[0] is arrow_type or arrow_type == _ORDERS[0]:
        return _ORDERS[1]  # type: ignore[no-any-return]
    orders = _find_orders(arrow_type)
    _ORDERS[:] = [arrow_type, orders]
    return orders


def _native(
    arrow_type: pa.StructType,
    orders: tuple[tuple[int, ...], ...],
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
) -> tuple[pa.StructArray, np.ndarray]:
    """decode_replication by `_kernels.replication`: one C pass, the column
    built there and imported whole (the Arrow C data interface)."""
    assert _kernels is not None
    ok_b, address = _kernels.replication(
        np.ascontiguousarray(data, np.uint8),
        np.ascontiguousarray(starts, np.int64),
        np.ascontiguousarray(ends, np.int64),
        _layout_cached(MAX_ENTRIES, MAX_HEADERS),
        orders,
    )
    try:  # pyarrow moves the array out; the struct that held it is freed either way
        arr: pa.StructArray = pa.Array._import_from_c(address, arrow_type)
    finally:
        _kernels.drop(address)
    return arr, np.frombuffer(ok_b, np.uint8, len(starts)).astype(np.bool_)
