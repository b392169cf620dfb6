"""The Kaitai parser, the construct schema (both generated from spec/) and
lbparse's hand-written fast path agree field by field, errors included."""

from __future__ import annotations

import crc32c
import pytest
from construct import ConstructError
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.examples import examples
from support.reference import PARSERS, commitlog_entries
from vectors import data, params

import lbparse
from lbparse.codec.enveloped import build_wire, schema_wire
from lbparse.codec.header import read_header
from lbparse.codec.wire import CRC_FLAG

LAYOUTS = list(lbparse.LAYOUTS)


def _agree(raw: bytes, layout: str) -> None:
    results = {name: parse(raw, layout) for name, parse in PARSERS.items()}
    first = results["lbparse"]
    for name, res in results.items():
        assert res == first, f"{name} says {res}, lbparse says {first}"


@pytest.mark.parametrize("v", params())
def test_header_parsers_agree_on_vector(v: dict) -> None:
    """Every vector under every layout, not just its own: errors included.
    (A test a vector, its layouts in it: a test a pair was 978 tests of
    under a millisecond, each costing pytest-xdist more than its work.)"""
    wrong = []
    for layout in LAYOUTS:
        try:
            _agree(data(v), layout)
        except AssertionError as exc:
            wrong.append(f"{layout}: {exc}")
    assert not wrong, wrong


@pytest.mark.parametrize("v", params(lambda v: v["expect"].get("payload_type") == "raw"))
def test_commitlog_parsers_agree(v: dict) -> None:
    env = lbparse.decode(data(v))
    got = {p: commitlog_entries(env.payload, p) for p in ("kaitai", "construct", "lbparse")}
    assert got["kaitai"] == got["construct"] == got["lbparse"]
    assert len(got["lbparse"]) == len(v["expect"]["commitlog_messages"])


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=300, deadline=None)
@given(
    raw=st.binary(max_size=24)
    | st.binary(min_size=1, max_size=16).map(lambda tail: bytes.fromhex("b90e43b4") + tail)
    | st.binary(max_size=6).map(lambda tail: b"LIFT" + tail)
)
@example(raw=bytes.fromhex("b90e43b4000c0000"))
@example(raw=bytes.fromhex("b90e43b4000c01"))
def test_header_parsers_agree_on_random_bytes(layout: str, raw: bytes) -> None:
    _agree(raw, layout)


@pytest.mark.slow
@pytest.mark.parametrize("layout", [n for n in LAYOUTS if lbparse.LAYOUTS[n].has_header])
@settings(max_examples=200, deadline=None)
@given(
    version=st.sampled_from([0, 0, 0, 1]),
    hl=st.sampled_from([0, 7, 8, 9, 12, 13, 40]),
    flags=st.integers(0, 255),
    byte7=st.integers(0, 20),
    tail=st.binary(max_size=20),
)
def test_header_parsers_agree_on_header_sweeps(
    layout: str, version: int, hl: int, flags: int, byte7: int, tail: bytes
) -> None:
    _agree(bytes.fromhex("b90e43b4") + bytes([version, hl, flags, byte7]) + tail, layout)


def _outcome(fn, raw: bytes) -> object:
    try:
        env = fn(raw)
    except lbparse.EnvelopeError as exc:
        return ("error", exc.kind, str(exc))
    return ("ok", env, env.to_json_dict())  # Envelope == compares every field


def _shortcut_agrees(raw: bytes) -> None:
    from lbparse.codec.dispatch import DECODERS

    full = DECODERS["v0"]
    assert _outcome(lbparse.decode, raw) == _outcome(lambda d: full(d, True, False, None), raw)


@pytest.mark.parametrize("v", params())
def test_decode_shortcut_equals_full_decoder_on_vectors(v: dict) -> None:
    """lbparse.decode's one-frame v0 shortcut gives what the full decoder gives."""
    _shortcut_agrees(data(v))


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    version=st.sampled_from([0, 0, 1]),
    hl=st.sampled_from([8, 8, 12, 12, 9, 40]),
    flags=st.integers(0, 255),
    byte7=st.integers(0, 16),
    tail=st.binary(max_size=24),
    fix_crc=st.booleans(),
)
def test_decode_shortcut_equals_full_decoder_on_sweeps(
    version: int, hl: int, flags: int, byte7: int, tail: bytes, fix_crc: bool
) -> None:
    import crc32c

    head = bytes.fromhex("b90e43b4") + bytes([version, hl, flags, byte7])
    if hl == 12:
        crc = crc32c.crc32c(tail) if fix_crc else 0
        head += crc.to_bytes(4, "big")
    _shortcut_agrees(head + tail)


@settings(max_examples=examples(200), deadline=None)
@given(
    flags=st.sampled_from([0, 1, 3]),
    byte7=st.integers(0, 16),
    tail=st.binary(max_size=40),
    limits=st.sampled_from(
        [None, lbparse.Limits(), lbparse.Limits(max_payload=16), lbparse.Limits(max_depth=2)]
    ),
)
def test_decode_with_options_equals_full_decoder(
    flags: int, byte7: int, tail: bytes, limits: object
) -> None:
    """A call with options goes through decode's option path (and maybe back into the
    shortcut); it must give what the full decoder gives with the same options."""
    import crc32c

    from lbparse.codec.dispatch import DECODERS
    from lbparse.codec.limits import DEFAULT

    hl = 12 if flags & 1 else 8
    raw = bytes.fromhex("b90e43b4") + bytes([0, hl, flags, byte7])
    if hl == 12:
        raw += crc32c.crc32c(tail).to_bytes(4, "big")
    raw += tail
    full = DECODERS["v0"]
    assert _outcome(lambda d: lbparse.decode(d, limits=limits), raw) == _outcome(
        lambda d: full(d, True, False, None, limits or DEFAULT), raw
    )
    assert _outcome(lambda d: lbparse.decode(d, "v0", verify_crc=False), raw) == _outcome(
        lambda d: full(d, False, False, None), raw
    )


def test_decode_signature_is_the_documented_one() -> None:
    """decode's fast calling convention must not show or accept more than its contract."""
    import inspect

    sig = inspect.signature(lbparse.decode)
    kinds = {name: p.kind for name, p in sig.parameters.items()}
    assert list(kinds) == ["data", "layout", "verify_crc", "lenient", "payload_type", "limits"]
    assert kinds["layout"] is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(
        kinds[k] is inspect.Parameter.KEYWORD_ONLY
        for k in ("verify_crc", "lenient", "payload_type", "limits")
    )
    assert sig.parameters["layout"].default == "v0"
    raw = bytes.fromhex("b90e43b40008000b0a027331")
    with pytest.raises(TypeError, match=r"decode\(\) takes"):
        lbparse.decode(raw, "v0", False)  # verify_crc is keyword-only
    with pytest.raises(TypeError, match="verfy_crc"):
        lbparse.decode(raw, verfy_crc=False)
    with pytest.raises(TypeError, match="decode takes bytes"):
        lbparse.decode(12345)  # type: ignore[arg-type]
    assert lbparse.decode(data=raw, layout="v0").msg_type_name == lbparse.decode(raw).msg_type_name


@pytest.mark.parametrize("module", ["lbparse", "lbparse.codec.limits"])
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("layout", [n for n in LAYOUTS if lbparse.LAYOUTS[n].has_header])
@settings(max_examples=examples(60), deadline=None)
@given(
    msg_type=st.integers(0, 255),
    crc=st.booleans(),
    flags=st.integers(0, 255).map(lambda f: f & ~CRC_FLAG),
    payload=st.binary(max_size=40),
)
@example(msg_type=255, crc=True, flags=0xFE, payload=b"")
def test_header_build_equals_the_schemas(
    layout: str, msg_type: int, crc: bool, flags: int, payload: bytes
) -> None:
    """encode's fast path (one struct call) builds what the construct schema builds."""
    lay = lbparse.LAYOUTS[layout]
    wire = build_wire(lay, msg_type, crc, flags, payload)
    assert wire == schema_wire(lay, msg_type, crc, flags, payload)
    hl, got_flags, got_crc, byte7, _ = read_header(wire, lay, False)  # and reads back
    assert (wire[hl:], got_flags & ~CRC_FLAG, byte7) == (payload, flags, msg_type)
    assert got_crc == (crc32c.crc32c(payload) if crc else None)


@pytest.mark.parametrize("msg_type, flags", [(-1, 0), (256, 0), (0, CRC_FLAG), (0, 256)])
def test_a_header_the_spec_refuses_is_refused_by_both_builds(msg_type: int, flags: int) -> None:
    """A byte 7 or flags out of range, or the CRC flag without the CRC."""
    lay = lbparse.LAYOUTS["legacy"]
    with pytest.raises(ValueError, match="one byte"):
        build_wire(lay, msg_type, False, flags, b"")
    with pytest.raises(ConstructError):
        schema_wire(lay, msg_type, False, flags, b"")
