"""Regression tests: each finding of the hardening campaigns (issue 7), with
the minimal input that showed it. The fix is in the module named."""

from __future__ import annotations

import pytest

import lbparse
from lbparse.reference import commitlog_result


def test_construct_commitlog_rejects_a_broken_last_entry() -> None:
    """tools/ksy_construct.py: `repeat: eos` became construct's GreedyRange,
    which stops quietly at an entry that fails to parse, so the construct
    parser read a ReplicationResponse with a cut entry as having none where
    Kaitai and lbparse reject it."""
    payload = bytes(16) + bytes(5)  # epoch, watermark, then 5 bytes of a 28-byte entry header
    assert {p: commitlog_result(payload, p) for p in ("kaitai", "construct", "lbparse")} == \
        dict.fromkeys(("kaitai", "construct", "lbparse"), "bad_payload")


def _entry(key_len: int = -1, value_len: int = 0, header_count: int = 0, tail: bytes = b"") -> bytes:
    """A ReplicationResponse payload with one entry of these lengths."""
    import struct

    import crc32c

    body = struct.pack(">BBi", 1, 0, key_len) + struct.pack(">i", value_len) \
        + struct.pack(">h", header_count) + tail
    body = struct.pack(">I", crc32c.crc32c(body)) + body
    return bytes(16) + struct.pack(">QqQI", 0, 5, 0, len(body)) + body


def test_construct_commitlog_repeats_a_negative_header_count_zero_times() -> None:
    """tools/ksy_construct.py: Kaitai (and lbparse) read a negative
    header_count as no headers; construct's Array raised on it."""
    got = {p: commitlog_result(_entry(header_count=-32768), p)
           for p in ("kaitai", "construct", "lbparse")}
    assert got["kaitai"] == got["construct"] == got["lbparse"] != "bad_payload"
    assert got["lbparse"][0]["headers"] == []


@pytest.mark.parametrize("lengths", [dict(key_len=-2), dict(value_len=-2),
                                     dict(key_len=-(2**31))])
def test_commitlog_lengths_below_minus_one_are_invalid_everywhere(lengths: dict) -> None:
    """spec/commitlog.ksy: key_len and value_len below -1 read as "nil" by
    the Kaitai and construct parsers, as an error by lbparse. Liftbridge
    slices the body by such a length (a Go panic), so the spec now says
    `valid: _ >= -1` and all three reject them."""
    payload = _entry(**lengths)
    assert {p: commitlog_result(payload, p) for p in ("kaitai", "construct", "lbparse")} == \
        dict.fromkeys(("kaitai", "construct", "lbparse"), "bad_payload")
