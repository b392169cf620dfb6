"""CRC-32C of many byte ranges of one buffer: the batch's envelopes, at once.

`crc32c_ranges(data, starts, ends)` is what the pipeline's fast path checks
CRCs with. setup.py builds `_kernels` (a small C module: one call per batch,
SSE 4.2's crc32 instruction where the CPU has it) when it can; without it,
the same function calls crc32c.crc32c once per range, about 0.4 us a row
more. tests/columnar/test_kernels.py holds the two equal.
"""

from __future__ import annotations

from typing import Any

import crc32c as _crc32c
import numpy as np

from lbparse.errors import InputError

_native: Any
try:
    from lbparse.columnar import _kernels as _native  # type: ignore[attr-defined,no-redef]
except ImportError:  # not built (no C compiler, LBPARSE_PURE_PYTHON, a --py-files zip)
    _native = None

__all__ = ["crc32c_ranges", "crc32c_ranges_python", "implementation"]


def crc32c_ranges(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """CRC-32C of `data[starts[i]:ends[i]]` for every i, as int64.

    Args:
        data: A uint8 array.
        starts: Each range's start.
        ends: Each range's end (excluded).

    Returns:
        An int64 array of the CRCs, one per range.

    Raises:
        ValueError: A range lies outside `data`.
    """
    if _native is None:
        return crc32c_ranges_python(data, starts, ends)
    s = np.ascontiguousarray(starts, np.int64)
    e = np.ascontiguousarray(ends, np.int64)
    out = np.empty(len(s), np.uint32)
    _native.ranges(np.ascontiguousarray(data, np.uint8), s, e, out)
    return out.astype(np.int64)


def crc32c_ranges_python(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The same, one crc32c.crc32c call per range (the fallback, and the reference).

    Args:
        data: A uint8 array.
        starts: Each range's start.
        ends: Each range's end (excluded).

    Returns:
        An int64 array of the CRCs, one per range.

    Raises:
        InputError: A range lies outside `data`.
    """
    s, e = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    bad = (s < 0) | (e < s) | (e > len(data))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            "bad_option", f"range {i} is [{s[i]}, {e[i]}), outside the {len(data)} bytes of data"
        )
    mv = memoryview(np.ascontiguousarray(data, np.uint8).data)
    crc = _crc32c.crc32c
    return np.fromiter(
        map(crc, map(mv.__getitem__, map(slice, s.tolist(), e.tolist()))), np.int64, count=len(s)
    )


def implementation() -> str:
    """Which code computes the CRCs.

    Returns:
        'sse4.2' or 'slicing-by-8' (C), or 'python'.
    """
    return "python" if _native is None else _native.implementation()
