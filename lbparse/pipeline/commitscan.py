"""Vectorized ReplicationResponse decoding: commit-log entries of many payloads at once.

`decode_replication(arrow_type, data, starts, ends)` reads the payloads
`data[starts[i]:ends[i]]` (spec/commitlog.ksy: leader epoch, high
watermark, then entries back to back) into the struct column of
`schema.REPLICATION_RESPONSE`, one entry of every payload per step, with
numpy. A payload is left to `lbparse.commitlog` (the caller's fallback,
which also words the errors) when anything is unusual: a length that runs
past its entry, a body shorter than its fields, bytes left after the last
header of an entry, a header key that is not UTF-8. The values are those
of `columns.ReplicationResponseBuilder`; a test holds the two equal.
"""

from __future__ import annotations

import crc32c as _crc32c
import numpy as np
import pyarrow as pa

from lbparse.pipeline.wirescan import slices

__all__ = ["decode_replication"]

MAX_ENTRIES = 1 << 16  # entries per payload read here; more are left to lbparse
MAX_HEADERS = 1 << 10  # headers per entry


def _be(data: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian integers of `width` bytes at `pos` (all in bounds)."""
    if not len(pos):
        return np.zeros(0, dtype)
    idx = pos[:, None] + np.arange(width)
    return np.ascontiguousarray(data[idx]).view(dtype).ravel().astype(dtype[1:])


def _binary(data: np.ndarray, starts: np.ndarray, lens: np.ndarray, null: np.ndarray | None,
            typ: pa.DataType) -> pa.Array:
    return slices(data, starts, np.where(lens < 0, 0, lens), null, typ)


def decode_replication(arrow_type: pa.StructType, data: np.ndarray, starts: np.ndarray,
                       ends: np.ndarray) -> tuple[pa.StructArray, np.ndarray]:
    """The payloads as a struct column (null where left to lbparse), and `ok`."""
    k = len(starts)
    ok = (ends - starts) >= 16
    epoch = np.zeros(k, np.int64)
    hw = np.zeros(k, np.int64)
    epoch[ok] = _be(data, starts[ok], 8, ">u8").view(np.int64)
    hw[ok] = _be(data, starts[ok] + 8, 8, ">i8")
    # One entry of every live payload per step.
    rows = np.flatnonzero(ok)
    pos = starts[rows] + 16
    end = ends[rows]
    ent: dict[str, list[np.ndarray]] = {n: [] for n in (
        "row", "offset", "timestamp", "epoch", "size", "crc", "magic", "attributes",
        "kstart", "klen", "vstart", "vlen", "hstart", "hend", "body", "bend")}
    for _ in range(MAX_ENTRIES):
        live = pos < end
        rows, pos, end = rows[live], pos[live], end[live]
        if not rows.size:
            break
        fits = pos + 28 <= end
        size = np.zeros(len(rows), np.int64)
        size[fits] = _be(data, pos[fits] + 24, 4, ">u4")
        body = pos + 28
        bend = body + size
        good = fits & (bend <= end) & (size >= 16)
        bad = rows[~good]
        ok[bad] = False
        rows, pos, end, body, bend = rows[good], pos[good], end[good], body[good], bend[good]
        klen = _be(data, body + 6, 4, ">i4").astype(np.int64)
        p = body + 10
        good = (klen == -1) | ((klen >= 0) & (p + klen <= bend))
        kstart = p
        p = p + np.maximum(klen, 0)
        good &= p + 4 <= bend
        vlen = np.full(len(rows), -1, np.int64)
        vlen[good] = _be(data, p[good], 4, ">i4")
        p = p + 4
        good &= (vlen == -1) | ((vlen >= 0) & (p + vlen <= bend))
        vstart = p
        p = p + np.maximum(vlen, 0)
        good &= p + 2 <= bend
        hcount = np.zeros(len(rows), np.int64)
        hcount[good] = _be(data, p[good], 2, ">i2")
        hstart = p + 2
        ok[rows[~good]] = False
        keep = good
        ent["row"].append(rows[keep])
        ent["offset"].append(_be(data, pos[keep], 8, ">u8").view(np.int64))
        ent["timestamp"].append(_be(data, pos[keep] + 8, 8, ">i8"))
        ent["epoch"].append(_be(data, pos[keep] + 16, 8, ">u8").view(np.int64))
        ent["size"].append(bend[keep] - body[keep])
        ent["crc"].append(_be(data, body[keep], 4, ">u4").astype(np.int64))
        ent["magic"].append(data[body[keep] + 4].astype(np.int32))
        ent["attributes"].append(data[body[keep] + 5].astype(np.int32))
        for name, v in (("kstart", kstart), ("klen", klen), ("vstart", vstart), ("vlen", vlen),
                        ("hstart", hstart), ("body", body), ("bend", bend)):
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


def _headers(data: np.ndarray, e: dict[str, np.ndarray], ok: np.ndarray
             ) -> dict[str, np.ndarray]:
    """Every entry's headers (key and value ranges, by entry); marks payloads not ok."""
    count = e["hend"]
    p = e["hstart"].copy()
    bend = e["bend"]
    out: dict[str, list[np.ndarray]] = {"entry": [], "kstart": [], "klen": [], "vstart": [],
                                        "vlen": []}
    ents = np.flatnonzero(count > 0)
    for j in range(MAX_HEADERS):
        ents = ents[count[ents] > j]
        if not ents.size:
            break
        q = p[ents]
        good = q + 2 <= bend[ents]
        hk = np.zeros(len(ents), np.int64)
        hk[good] = _be(data, q[good], 2, ">i2")
        ks = q + 2
        good &= (hk >= 0) & (ks + hk + 4 <= bend[ents])
        hv = np.zeros(len(ents), np.int64)
        hv[good] = _be(data, (ks + hk)[good], 4, ">i4")
        vs = ks + hk + 4
        good &= (hv >= 0) & (vs + hv <= bend[ents])
        ok[e["row"][ents[~good]]] = False
        ents, ks, hk, vs, hv = ents[good], ks[good], hk[good], vs[good], hv[good]
        for name, v in (("entry", ents), ("kstart", ks), ("klen", hk), ("vstart", vs),
                        ("vlen", hv)):
            out[name].append(v)
        p[ents] = vs + hv
    else:
        ok[e["row"][ents]] = False
    # lbparse reads an entry's headers and stops: bytes after them are not
    # an error there, but they are unusual enough to leave to it.
    ok[e["row"][p != bend]] = False
    return {n: (np.concatenate(v) if v else np.zeros(0, np.int64)) for n, v in out.items()}


def _assemble(arrow_type: pa.StructType, data: np.ndarray, k: int, ok: np.ndarray,
              epoch: np.ndarray, hw: np.ndarray, e: dict[str, np.ndarray],
              h: dict[str, np.ndarray]) -> tuple[pa.StructArray, np.ndarray]:
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
        bad_entries = [int(he[i]) for i, v in enumerate(keys.to_pylist())
                       if _not_utf8(v)]
        ok[e["row"][bad_entries]] = False
        keys = pa.array([v.decode("utf-8", "replace") for v in keys.to_pylist()], pa.string())
    h_off = np.zeros(m + 1, np.int32)
    np.cumsum(np.bincount(he, minlength=m), out=h_off[1:])
    hstruct = headers_type.value_type
    headers = pa.ListArray.from_arrays(
        pa.array(h_off), pa.StructArray.from_arrays(
            [keys, _binary(data, h["vstart"], h["vlen"], None, pa.binary())],
            fields=[hstruct.field(0), hstruct.field(1)]), type=headers_type)
    mv = memoryview(data)
    crc_ok = np.fromiter(map(_crc32c.crc32c, map(mv.__getitem__, map(
        slice, (e["body"] + 4).tolist(), e["bend"].tolist()))), np.int64, count=m) == e["crc"]
    numbers = {
        "offset": e["offset"], "timestamp": e["timestamp"], "leader_epoch": e["epoch"],
        "size": e["size"], "crc32c": e["crc"], "crc_ok": crc_ok, "magic": e["magic"],
        "attributes": e["attributes"],
    }
    fields = [entry_type.field(i) for i in range(entry_type.num_fields)]
    # Every column typed by its field, not by numpy's dtype: a batch without
    # entries has empty int64 arrays where the schema says int32 (issue #12).
    cols = {f.name: pa.array(numbers[f.name], f.type) for f in fields if f.name in numbers}
    cols.update({
        "key": _binary(data, e["kstart"], e["klen"], e["klen"] < 0, pa.binary()),
        "value": _binary(data, e["vstart"], e["vlen"], e["vlen"] < 0, pa.binary()),
        "headers": headers,
    })
    entries = pa.StructArray.from_arrays([cols[f.name] for f in fields], fields=fields)
    e_off = np.zeros(k + 1, np.int32)
    np.cumsum(np.bincount(e["row"], minlength=k), out=e_off[1:])
    top = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
    values = {"leader_epoch": epoch, "high_watermark": hw}
    children = [pa.array(values[f.name], f.type) if f.name in values else
                pa.ListArray.from_arrays(pa.array(e_off), entries, type=entries_type)
                for f in top]
    arr = pa.StructArray.from_arrays(children, fields=top,
                                     mask=pa.array(~ok) if not ok.all() else None)
    return arr, ok


def _not_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False
