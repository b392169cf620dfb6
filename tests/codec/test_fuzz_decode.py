"""Hostile bytes never crash a decoder (issue 7): random bytes, and
structure-aware mutations of well-formed envelopes of every layout (bit
flips, truncation at every header boundary, header length and MsgType
sweeps, CRC corruption). The invariants are tests/support/hostile.py's,
the same the atheris targets check: only EnvelopeError escapes, successes
render as JSON, decode's shortcut agrees with the full decoder, and the
Kaitai, construct and lbparse parsers agree, errors included."""

from __future__ import annotations

from datetime import timedelta

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.hostile import check_decode, check_differential, check_headers_agree, seed_envelopes

SEEDS = seed_envelopes()
# Generous: a hang (a loop not bounded by the input) shows as a deadline
# failure, a slow shared machine does not.
FUZZ = settings(
    max_examples=500, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A seed envelope with one to three structure-aware mutations."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(
            st.sampled_from(
                [
                    "flip",
                    "truncate",
                    "header_len",
                    "msg_type",
                    "crc",
                    "fix_crc",
                    "splice",
                    "insert",
                    "delete",
                ]
            )
        )
        n = len(data)
        if op == "flip" and n:
            i = draw(st.integers(0, n - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[draw(st.integers(0, n)) :]
        elif op == "header_len" and n > 5:
            data[5] = draw(st.sampled_from([0, 4, 7, 8, 9, 11, 12, 13, 16, 64, 255]))
        elif op == "msg_type" and n > 7:
            data[7] = draw(st.integers(0, 255))
        elif op == "crc" and n >= 12:
            data[8:12] = draw(st.binary(min_size=4, max_size=4))
        elif op == "fix_crc" and n >= 12 and data[6] & 1:
            # A correct CRC over a damaged payload: the damage reaches the payload parser.
            data[8:12] = crc32c.crc32c(bytes(data[12:])).to_bytes(4, "big")
        elif op == "splice" and n:
            i = draw(st.integers(0, n - 1))
            data[i : i + 8] = draw(st.binary(min_size=1, max_size=8))
        elif op == "insert":
            i = draw(st.integers(0, n))
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and n:
            i = draw(st.integers(0, n - 1))
            del data[i : i + draw(st.integers(1, 8))]
    return bytes(data)


@pytest.mark.slow
@FUZZ
@given(st.binary(max_size=96))
def test_random_bytes(data: bytes) -> None:
    check_decode(data)
    check_differential(data)


@pytest.mark.slow
@FUZZ
@given(st.binary(max_size=40).map(lambda t: bytes.fromhex("b90e43b4") + t))
def test_random_bytes_after_the_magic(data: bytes) -> None:
    check_decode(data)
    check_differential(data)


@pytest.mark.slow
@FUZZ
@given(mutated())
def test_mutated_envelopes(data: bytes) -> None:
    check_decode(data)
    check_differential(data)


def _cuts(data: bytes) -> list[bytes]:
    """Every cut through the header and the first payload bytes, and the
    last byte of the payload."""
    return [data[:cut] for cut in sorted({*range(min(len(data), 20)), len(data) - 1})]


# Half the seeds' cuts are another seed's too (the same header, another
# payload): each is checked by the first seed that makes it, whatever runs,
# and a seed that makes none is no test.
_FIRST_SEED: dict[bytes, int] = {}
for _i, _seed in enumerate(SEEDS):
    for _cut in _cuts(_seed):
        _FIRST_SEED.setdefault(_cut, _i)


@pytest.mark.parametrize("seed", sorted(set(_FIRST_SEED.values())), ids=lambda i: f"seed{i}")
def test_truncation_at_every_header_boundary(seed: int) -> None:
    """Each cut of the seed: too_short/truncated/bad_payload, never a crash,
    the header parsers agreeing."""
    for data in _cuts(SEEDS[seed]):
        if _FIRST_SEED[data] == seed:
            check_decode(data)
            check_headers_agree(data)


@pytest.mark.slow
@settings(max_examples=150, deadline=timedelta(seconds=5))
@given(
    version=st.sampled_from([0, 0, 0, 1, 255]),
    hl=st.integers(0, 255),
    flags=st.integers(0, 255),
    byte7=st.integers(0, 255),
    payload=st.sampled_from(SEEDS),
    crc=st.sampled_from(["right", "wrong", "none"]),
)
def test_header_sweeps(
    version: int, hl: int, flags: int, byte7: int, payload: bytes, crc: str
) -> None:
    """Every header length and MsgType over real payloads, the CRC right,
    wrong or absent."""
    body = payload[12:] if payload[6:7] == b"\x01" else payload[8:]
    head = bytes.fromhex("b90e43b4") + bytes([version, hl, flags, byte7])
    if crc != "none":
        value = crc32c.crc32c(body) if crc == "right" else crc32c.crc32c(body) ^ 1
        head += value.to_bytes(4, "big")
    check_decode(head + body)
    check_differential(head + body)
