"""Regression tests: each finding of the hardening campaigns (issue 7), with
the minimal input that showed it. The fix is in the module named."""

from __future__ import annotations

import tracemalloc

import flatbuffers
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
