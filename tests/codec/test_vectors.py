"""Every reference vector decodes to exactly what its `expect` says."""

from __future__ import annotations

import pytest
from vectors import accepted_kinds, data, params

import lbparse
from lbparse.codec.dispatch import DECODERS

EXPECT_KEYS = (
    "version",
    "header_len",
    "flags",
    "crc32c",
    "msg_type",
    "msg_type_name",
    "payload_type",
    "payload_json",
    "commitlog_messages",
)


def _supported(v: dict) -> bool:
    return v["layout"] in DECODERS


def _decode(v: dict) -> lbparse.Envelope:
    layout = v["layout"]
    kwargs = {}
    if layout == "plain":
        layout = "v0"  # the vectors' verdict: a strict v0 decoder rejects plain payloads
    elif layout in ("legacy", "lift-cookie") and "payload_type" in v["expect"]:
        kwargs["payload_type"] = v["expect"]["payload_type"]
    return lbparse.decode(data(v), layout, **kwargs)


@pytest.mark.parametrize("v", params(lambda v: "error" not in v["expect"]))
def test_valid_vector_decodes_as_expected(v: dict) -> None:
    if not _supported(v):
        pytest.skip(f"layout {v['layout']} not implemented")
    got = _decode(v).to_json_dict()
    assert got["layout"] == v["layout"]
    want = {k: v["expect"][k] for k in EXPECT_KEYS if k in v["expect"]}
    assert {k: got.get(k) for k in want} == want


@pytest.mark.parametrize("v", params(lambda v: "error" in v["expect"]))
def test_bad_vector_fails_with_expected_kind(v: dict) -> None:
    if not _supported(v) and v["layout"] != "plain":
        pytest.skip(f"layout {v['layout']} not implemented")
    with pytest.raises(lbparse.EnvelopeError) as info:
        _decode(v)
    assert info.value.kind in accepted_kinds(v["expect"]), str(info.value)
    assert str(info.value)  # the message says what was found


@pytest.mark.parametrize(
    "v", params(lambda v: v["expect"].get("upstream_accepts") and v["layout"] == "v0")
)
def test_lenient_accepts_what_upstream_accepts(v: dict) -> None:
    """Upstream tolerates these; lenient mode does too, and says so."""
    d = data(v)
    if v["id"] == "edge_payload_invalid_utf8_string":
        pytest.skip("upstream accepts the bytes but proto3 forbids the string: bad_payload")
    env = lbparse.decode(d, lenient=True)
    assert env.warnings, "every tolerance is recorded"
    assert env.payload == d[d[5] :]


def test_header_len_beyond_data_is_truncated_not_a_crash() -> None:
    """Upstream panics on this (slice out of range); lbparse names it."""
    d = bytes.fromhex("b90e43b40028000a0a026964")
    for lenient in (False, True):
        with pytest.raises(lbparse.EnvelopeError) as info:
            lbparse.decode(d, lenient=lenient)
        assert info.value.kind in ("truncated", "bad_header_len")
    with pytest.raises(lbparse.EnvelopeError, match="only 12 bytes") as info:
        lbparse.decode(d, lenient=True)
    assert info.value.kind == "truncated"


def test_memoryview_and_bytearray_inputs() -> None:
    d = bytes.fromhex("b90e43b40008000b0a02733112126c6966746272696467652e6578616d706c6518cc48")
    base = lbparse.decode(d).to_json_dict()
    assert lbparse.decode(bytearray(d)).to_json_dict() == base
    assert lbparse.decode(memoryview(b"xx" + d)[2:]).to_json_dict() == base


def test_crc_check_can_be_skipped() -> None:
    v = bytes.fromhex(
        "b90e43b4000c010b000000000a02733112126c6966746272696467652e6578616d706c6518cc48"
    )
    with pytest.raises(lbparse.EnvelopeError, match="CRC-32C") as info:
        lbparse.decode(v)
    assert info.value.kind == "crc_mismatch"
    assert info.value.offset == 8
    assert lbparse.decode(v, verify_crc=False).message.id == "s1"


def test_decode_header_does_not_touch_payload() -> None:
    # A header with a payload that is not valid protobuf: the header is fine.
    d = bytes.fromhex("b90e43b40008000bffff")
    h = lbparse.decode_header(d)
    assert (h.msg_type, h.msg_type_name, h.payload_type) == (
        11,
        "ServerInfoResponse",
        "protocol.ServerInfoResponse",
    )
    with pytest.raises(lbparse.EnvelopeError) as info:
        lbparse.decode(d)
    assert info.value.kind == "bad_payload"


def test_errors_say_where() -> None:
    with pytest.raises(lbparse.EnvelopeError) as info:
        lbparse.decode(bytes.fromhex("b90e43b40108000b"))
    e = info.value
    assert (e.kind, e.offset, e.expected, e.actual) == ("unknown_version", 4, 0, 1)
    assert "offset 4" in str(e)
    with pytest.raises(lbparse.EnvelopeError, match=r"MsgType \(offset 7\) is 15"):
        lbparse.decode(bytes.fromhex("b90e43b40008000f"))


def test_unknown_layout_is_a_usage_error() -> None:
    with pytest.raises(ValueError, match="unknown layout 'v9'"):
        lbparse.decode(b"\xb9\x0e\x43\xb4\x00\x08\x00\x00", "v9")


@pytest.mark.parametrize("v", params(lambda v: v["layout"] == "legacy"))
def test_legacy_payload_type_is_inferred(v: dict) -> None:
    env = lbparse.decode(data(v), "legacy")  # no payload_type: wire types decide
    assert env.payload_type == v["expect"]["payload_type"]
    assert env.to_json_dict()["payload_json"] == v["expect"]["payload_json"]
    if env.ambiguous:
        assert env.payload_type == "proto.Message"  # kept, and said to be a guess
        assert set(env.payload_type_candidates) == {"proto.Message", "proto.Ack"}


def test_legacy_ambiguity_is_reported() -> None:
    # field 3 length-delimited: Message.value (bytes) or Ack.msgSubject (string)
    env = lbparse.decode(bytes.fromhex("b90e43b4000800001a026869"), "legacy")
    assert env.ambiguous and env.payload_type == "proto.Message"
    assert env.to_json_dict()["payload_type_candidates"] == ["proto.Message", "proto.Ack"]


def test_bare_lift_era_ack() -> None:
    ack = lbparse.message_class("proto.Ack")(stream="foo", offset=7)
    env = lbparse.decode(ack.SerializeToString(), "lift-cookie", payload_type="proto.Ack")
    assert env.message == ack and env.payload_type == "proto.Ack"
    assert lbparse.encode(ack, layout="lift-cookie") == ack.SerializeToString()


@pytest.mark.parametrize("v", params(lambda v: v["layout"] == "plain"))
def test_plain_layout_keeps_the_bytes(v: dict) -> None:
    env = lbparse.decode(data(v), "plain")
    assert (env.layout, env.payload, env.message, env.payload_type) == (
        "plain",
        data(v),
        data(v),
        "bytes",
    )
    assert env.to_json_dict()["payload_json"] == {"hex": v["hex"]}


# The one vector whose bytes say otherwise than its label: the vector's own
# note calls it "legacy Ack (byte7=0) read with the v0 MsgType 0", and auto
# finds exactly that (the Ack fits by wire types, a Message does not).
AUTO_RELABELLED = {"edge_legacy_ack_as_v0_publish": "legacy"}


@pytest.mark.parametrize("v", params(lambda v: "error" not in v["expect"]))
def test_auto_names_the_layout(v: dict) -> None:
    env = lbparse.decode(data(v), "auto")
    want = AUTO_RELABELLED.get(v["id"], v["layout"])
    assert env.reasons, "auto always gives its evidence"
    assert 0 < env.confidence <= 1
    if env.layout != want:
        assert env.ambiguous and want in env.layout_candidates, (env.layout, env.reasons)
        assert env.layout == env.layout_candidates[0]  # the most recent layout wins
    got = env.to_json_dict()
    assert got["layout"] == env.layout
    if env.ambiguous and env.layout_candidates:
        assert got["layout_candidates"] == list(env.layout_candidates)


@pytest.mark.parametrize("v", params(lambda v: "error" in v["expect"]))
def test_auto_on_bad_bytes(v: dict) -> None:
    """Magic-bearing bytes no layout accepts keep their error; the rest is
    plain, as upstream stores such bytes as a plain message."""
    try:
        env = lbparse.decode(data(v), "auto")
    except lbparse.EnvelopeError as exc:
        assert exc.kind in accepted_kinds(v["expect"])
        return
    assert env.layout == "plain", env.reasons
    assert v["expect"]["error"] in ("bad_magic", "too_short", "bad_payload")
    assert data(v)[:4] != bytes.fromhex("b90e43b4")


def test_auto_plain_and_lift() -> None:
    env = lbparse.decode(b"hello world", "auto")
    assert env.layout == "plain" and env.payload == b"hello world" and env.reasons
    env = lbparse.decode(bytes.fromhex("4c4946541a0568656c6c6f"), "auto")
    assert env.layout == "lift-cookie" and env.message.value == b"hello"


def test_every_declared_layout_decodes() -> None:
    assert set(lbparse.LAYOUTS) | {"auto"} == set(DECODERS)
