"""The batch decoder's C passes against their Python references, on any payloads.

`check_decoder(payloads)`: the whole batch decoder with its C passes
(`_kernels.headers`, `_kernels.group`, `_kernels.replication`, the
`_structs` reader) and with their Python references (`native = False`)
gives the same rows, errors included, for layouts v0 and auto, with and
without CRC checks. `check_headers`, `check_group`, `check_replication`,
`check_strings` and `check_binary` hold each pass equal to its reference alone.
tests/columnar/test_envelope_pass.py and the `native_pass` fuzz target
(fuzz/targets.py) run them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from lbparse.columnar import commitscan
from lbparse.columnar.decode_arrow import (
    BatchDecoder,
    DecodeOptions,
    _Names,
    _Rows,
    binary_array,
    binary_buffers,
    group_rows,
    native_available,
)
from lbparse.columnar.schema import arrow_output_schema, arrow_record_schema

RR_TYPE = arrow_output_schema().field("commitlog_ReplicationResponse").type


def records(payloads: list[bytes | None]) -> pa.RecordBatch:
    """Bare payloads as the decoder's input batch."""
    schema = arrow_record_schema()
    n = len(payloads)
    cols = [
        pa.array(payloads, pa.binary())
        if f.name == "payload"
        else pa.array(np.arange(n, dtype=np.int64))
        if f.name == "position"
        else pa.nulls(n, f.type)
        for f in schema
    ]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


@lru_cache(maxsize=16)
def decoders(options: DecodeOptions) -> tuple[BatchDecoder, BatchDecoder]:
    """(C, Python) decoders of `options`, strict: a failing reader raises."""
    pair = []
    for native in (True, False):
        d = BatchDecoder(options)
        d.strict = True
        d.native = native and native_available()
        pair.append(d)
    return pair[0], pair[1]


def _rows(batch: pa.RecordBatch) -> list[str]:
    # repr: NaN equals NaN, and -0.0 is not 0.0
    return [repr(r) for r in batch.to_pylist()]


def check_decoder(
    payloads: list[bytes | None] | pa.RecordBatch,
    layouts: tuple[str, ...] = ("v0", "auto"),
    crcs: tuple[bool, ...] = (True, False),
) -> None:
    """Bare payloads, or a record batch as the capture reader makes it."""
    batch = payloads if isinstance(payloads, pa.RecordBatch) else records(payloads)
    payloads = batch.column("payload").to_pylist()
    for layout in layouts:
        for verify in crcs:
            c, py = decoders(DecodeOptions(layout=layout, verify_crc=verify))
            got, want = c.decode(batch), py.decode(batch)
            assert set(got.structs) == set(want.structs), layout
            for name, (rows, _) in got.structs.items():
                assert rows.tolist() == want.structs[name][0].tolist(), name
            a, b = _rows(got.to_batch()), _rows(want.to_batch())
            for i, (x, y) in enumerate(zip(a, b)):
                assert x == y, (layout, verify, i, (payloads[i] or b"").hex())
            assert len(a) == len(b) == len(payloads)


def check_headers(
    payloads: list[bytes | None], todo: np.ndarray | None = None, verify_crc: bool = True
) -> None:
    """`_headers` + `_v0_rows` in C equal their numpy code, every field of every row."""
    arr = pa.array(payloads, pa.binary())
    starts, ends, data = binary_buffers(arr)
    n = len(payloads)
    if todo is None:
        todo = np.asarray(arr.is_valid())
    c, py = decoders(DecodeOptions(verify_crc=verify_crc))
    if not c.native:
        return
    rc, rp = _Rows(n), _Rows(n)
    got = c._headers(rc, starts, ends, data, todo)
    want = py._headers(rp, starts, ends, data, todo)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and got[k].tolist() == v.tolist(), k
    t1 = c._v0_rows(rc, todo, got, starts, ends, data)
    t2 = py._v0_rows(rp, todo, want, starts, ends, data)
    assert t1.tolist() == t2.tolist()
    assert rc.crc_ok.tolist() == rp.crc_ok.tolist()


def check_group(codes: list[int], ncodes: int) -> None:
    c = np.array(codes, np.int32)
    o1, b1 = group_rows(c, ncodes, native=True)
    o2, b2 = group_rows(c, ncodes, native=False)
    assert o1.dtype == o2.dtype == np.int64
    assert o1.tolist() == o2.tolist() and b1.tolist() == b2.tolist()


def check_strings(names: list[str], codes: list[int]) -> pa.Array:
    """A string column of codes (-1 null) built by _kernels.strings equals
    Arrow's take of the table, nulls and offsets included. Returns it."""
    table = _Names()
    for name in names:
        table(name)
    c = np.array(codes, np.int32)
    got, want = table.array(c, native=True), table.array(c, native=False)
    got.validate(full=True)
    assert got.equals(want), (got, want)
    assert got.to_pylist() == [names[k] if k >= 0 else None for k in codes]
    return got


def check_binary(items: list[Any]) -> pa.Array:
    """The binary column of a list of payloads built by _kernels.binary equals
    pyarrow's conversion, nulls and offsets included, for the list and the
    tuple. Returns it."""
    want = binary_array(items, native=False)
    for given in (items, tuple(items)):
        got = binary_array(given, native=True)
        got.validate(full=True)
        assert got.equals(want), (got, want)
        assert got.null_count == want.null_count
    assert got.to_pylist() == [
        None if x is None else x.encode() if isinstance(x, str) else bytes(x) for x in items
    ]
    return got


def check_replication(
    payloads: list[bytes], typ: pa.StructType = RR_TYPE
) -> tuple[Any, np.ndarray]:
    """The C walk of ReplicationResponse payloads equals the numpy walk: `ok`
    and every value of the rows it takes. Returns the C result."""
    starts, ends, data = binary_buffers(pa.array(payloads, pa.binary()))
    got, got_ok = commitscan.decode_replication(typ, data, starts, ends)
    want, want_ok = commitscan.decode_replication(typ, data, starts, ends, native=False)
    got.validate(full=True)
    assert got.type == want.type
    assert got_ok.tolist() == want_ok.tolist(), [
        p.hex() for p, a, b in zip(payloads, got_ok, want_ok) if a != b
    ]
    assert got.to_pylist() == want.to_pylist()
    return got, got_ok
