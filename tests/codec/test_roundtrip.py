"""Round trips of every codec and layout, checked the way construct's `common()` checks
a declaration: bytes -> object -> bytes, object -> bytes -> object and
JSON -> object -> JSON, over every reference vector, every envelope of a
real Liftbridge capture, and hypothesis-made values."""

from __future__ import annotations

import json

import pytest
from google.protobuf.message import Message as ProtoMessage
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import payloads
from support.examples import examples
from support.shared import shared_path
from vectors import VECTORS, data, params

import lbparse
from lbparse.codec import jsonform
from lbparse.codec.payloads import CODECS, REPLICATION_RESPONSE, codec_for, fits_cleanly
from lbparse.codec.wire import CRC_FLAG


def _pairs() -> list[tuple[str, str]]:
    return [
        (layout, ptype)
        for layout in lbparse.LAYOUTS
        for ptype in lbparse.LAYOUTS[layout].payload_types
    ]


@pytest.mark.slow
@pytest.mark.parametrize("layout,payload_type", _pairs())
@settings(max_examples=40, deadline=None)
@given(data=st.data(), crc=st.booleans())
def test_decode_encode_roundtrip(
    layout: str, payload_type: str, data: st.DataObject, crc: bool
) -> None:
    lay = lbparse.LAYOUTS[layout]
    crc = crc and lay.has_header
    message = data.draw(payloads(payload_type, layout))
    if layout == "lift-cookie" and payload_type not in lay.bare_payloads:
        assume(message.ByteSize() > 0)  # "LIFT" alone is refused (see next test)
    wire = lbparse.encode(message, layout=layout, crc=crc)
    env = lbparse.decode(wire, layout, payload_type=None if lay.has_msg_type else payload_type)
    assert env.message == message
    assert env.payload_type == payload_type
    assert (env.crc32c is not None) == crc
    assert lbparse.encode(env.message, layout=layout, crc=crc) == wire


def _has_multi_entry_map(message: object) -> bool:
    fields = getattr(message, "ListFields", lambda: [])()
    return any(
        f.message_type is not None and f.message_type.GetOptions().map_entry and len(value) > 1
        for f, value in fields
    )


@pytest.mark.parametrize(
    "v", params(lambda v: v["category"] == "valid" and v["layout"] in ("v0", "legacy"))
)
def test_encode_gives_upstream_bytes(v: dict) -> None:
    original = data(v)
    ptype = v["expect"]["payload_type"] if v["layout"] == "legacy" else None
    env = lbparse.decode(original, v["layout"], payload_type=ptype)
    wire = lbparse.encode(env.message, layout=v["layout"], crc=env.crc32c is not None)
    if _has_multi_entry_map(env.message):
        # Go emits map entries in random order (and drops empty values):
        # only the header and the decoded message can be compared.
        assert wire[:8] == original[:8]
        assert lbparse.decode(wire, v["layout"], payload_type=ptype).message == env.message
    else:
        assert wire == original


def test_msg_type_follows_from_message_type() -> None:
    for mt in lbparse.LAYOUTS["v0"].msg_types.values():
        if mt.payload_type == REPLICATION_RESPONSE:
            message = lbparse.ReplicationResponse(1, 2, [])
        else:
            message = CODECS[mt.payload_type].python_type()
        assert lbparse.decode(lbparse.encode(message)).msg_type == mt.value


def test_encode_refuses_a_type_the_layout_does_not_carry() -> None:
    with pytest.raises(ValueError, match="legacy layout carries"):
        lbparse.encode(lbparse.message_class("protocol.ServerInfoRequest")(), layout="legacy")
    with pytest.raises(ValueError, match="MsgType 1 does not carry"):
        lbparse.encode(lbparse.message_class("proto.Message")(), msg_type=1)


def test_lift_cookie_refuses_an_empty_message() -> None:
    with pytest.raises(ValueError, match="cookie 'LIFT' alone"):
        lbparse.encode(lbparse.message_class("proto.Message")(), layout="lift-cookie")
    with pytest.raises(lbparse.EnvelopeError) as info:
        lbparse.decode(b"LIFT", "lift-cookie")
    assert info.value.kind == "too_short"


# -- common(): the three round trips of one envelope ------------------------------

# Vectors whose payload is not in its encoder's canonical form: no encoder
# writes these bytes back (the message does come back, and its own bytes are
# stable). Listed so that the set cannot grow unnoticed.
NON_CANONICAL = {
    "v0_publish_headers_multi": "Go writes map entries in random order",
    "v0_publish_headers_multi_crc": "Go writes map entries in random order",
    "edge_payload_duplicate_scalar": "a scalar field written twice (the last one wins)",
    "edge_payload_unpacked_repeated": "a repeated scalar written unpacked (proto2 style)",
    "edge_legacy_ack_as_v0_publish": "Ack fields kept as unknown fields of a Message, "
    "written back in field order",
}


def _json_text(obj: object) -> str:
    return jsonform.dumps(obj)


def _json_value(obj: object) -> object:
    """What JSON text of `obj` reads back as (maps compare without their order)."""
    return json.loads(jsonform.dumps(obj))


def common(
    data: bytes, layout: str, payload_type: str | None = None, canonical: bool = True
) -> lbparse.Envelope:
    """construct's `common()` for an envelope: decode, then close every loop."""
    kw = {"payload_type": payload_type} if payload_type else {}
    env = lbparse.decode(data, layout, **kw)  # bytes -> object
    wire = lbparse.encode_envelope(env)  # object -> bytes
    if canonical:
        assert wire == data, f"{wire.hex()} != {data.hex()}"
        assert lbparse.decode(wire, layout, **kw) == env  # ... -> object
    else:
        again = lbparse.decode(wire, layout, **kw)
        assert again.message == env.message
        assert lbparse.encode_envelope(again) == wire  # stable from here on
    # JSON -> object -> JSON: the payload's JSON builds the message back,
    # and the message's JSON is the same JSON.
    d = env.to_json_dict()
    text = _json_text(d)
    back = json.loads(text)
    ptype = env.payload_type
    message = lbparse.payload_from_json(ptype, back["payload_json"], layout=env.layout)
    assert (
        _json_value(codec_for(lbparse.LAYOUTS[env.layout].codec_key(ptype)).to_json(message))
        == back["payload_json"]
    )
    if isinstance(message, ProtoMessage) and not fits_cleanly(env.message):
        # Fields the type does not declare: protobuf's JSON mapping has no
        # place for them, so JSON gives back the declared fields only.
        return env
    assert message == env.message
    # ... and the envelope's JSON, its header fields and payload, builds the bytes.
    lay = lbparse.LAYOUTS[env.layout]
    rebuilt = lbparse.encode(
        message,
        layout=env.layout,
        msg_type=back["msg_type"] if lay.has_msg_type else None,
        crc=back["crc32c"] is not None,
        flags=(back["flags"] or 0) & ~CRC_FLAG,
    )
    assert rebuilt == wire
    return env


def _vector_kwargs(v: dict) -> dict[str, str]:
    if v["layout"] in ("legacy", "lift-cookie") and "payload_type" in v["expect"]:
        return {"payload_type": v["expect"]["payload_type"]}
    return {}


@pytest.mark.parametrize("v", params(lambda v: "error" not in v["expect"]))
def test_common_on_every_vector(v: dict) -> None:
    env = common(data(v), v["layout"], canonical=v["id"] not in NON_CANONICAL, **_vector_kwargs(v))
    assert env.to_json_dict()["payload_json"] == v["expect"]["payload_json"]


def test_non_canonical_vectors_are_the_listed_ones() -> None:
    found = set()
    for v in VECTORS:
        if "error" in v["expect"]:
            continue
        env = lbparse.decode(data(v), v["layout"], **_vector_kwargs(v))
        codec = codec_for(lbparse.LAYOUTS[env.layout].codec_key(env.payload_type))
        if codec.encode(env.message) != env.payload:
            found.add(v["id"])
    assert found == set(NON_CANONICAL)


def _capture_envelopes() -> list[bytes]:
    from lbparse.capture import CaptureReader

    path = shared_path("liftbridge", "samples", "short.pcapng")
    seen: dict[bytes, None] = {}
    for rec in CaptureReader(path, decode=False):
        seen.setdefault(rec.payload)
    return list(seen)


def test_common_on_every_envelope_of_a_real_capture() -> None:
    """Every distinct NATS payload of a capture of a real Liftbridge v1.9.0
    cluster: whatever auto makes of it closes every loop."""
    payloads = _capture_envelopes()
    layouts: dict[str, int] = {}
    for payload in payloads:
        env = lbparse.decode(payload, "auto")
        layouts[env.layout] = layouts.get(env.layout, 0) + 1
        ptype = env.payload_type if not lbparse.LAYOUTS[env.layout].has_msg_type else None
        codec = codec_for(lbparse.LAYOUTS[env.layout].codec_key(env.payload_type))
        common(payload, env.layout, ptype, canonical=codec.encode(env.message) == env.payload)
    assert layouts.get("v0", 0) > 100, layouts


@pytest.mark.parametrize("layout,payload_type", _pairs())
@settings(max_examples=examples(25), deadline=None)
@given(data=st.data(), crc=st.booleans(), flags=st.sampled_from([0, 0x80, 0x06]))
def test_common_on_generated_values(
    layout: str, payload_type: str, data: st.DataObject, crc: bool, flags: int
) -> None:
    """object -> bytes -> object -> bytes for made-up messages of every type
    of every layout, with and without CRC and unassigned flag bits."""
    lay = lbparse.LAYOUTS[layout]
    crc = crc and lay.has_header
    flags = flags if lay.has_header else 0
    message = data.draw(payloads(payload_type, layout))
    if layout == "lift-cookie" and payload_type not in lay.bare_payloads:
        assume(message.ByteSize() > 0)
    wire = lbparse.encode(message, layout=layout, crc=crc, flags=flags)
    common(wire, layout, None if lay.has_msg_type else payload_type)


def test_flatbuffers_encode_by_msg_type_name() -> None:
    for layout, name, obj in (
        ("flatbuffers", "Ack", {"stream": "foo", "offset": "42"}),
        ("flatbuffers", "Publish", {"stream": "foo", "value": "aGk="}),
        ("flatbuffers-draft", "Publish", {"subject": "a.b"}),
        ("flatbuffers-draft", "Replication", {"hex": "00ff"}),
    ):
        message = lbparse.payload_from_json(name, obj, layout=layout)
        wire = lbparse.encode(message, layout=layout, msg_type=name, crc=True)
        env = common(wire, layout)
        assert env.msg_type_name == name
        assert lbparse.encode(message, layout=layout, crc=True) == wire  # MsgType from the type


def test_a_protobuf_message_is_refused_by_a_flatbuffers_layout() -> None:
    ack = lbparse.message_class("proto.Ack")(stream="foo")
    with pytest.raises(TypeError, match="FlatTable"):
        lbparse.encode(ack, layout="flatbuffers")


def test_bytes_json_says_what_it_wants() -> None:
    with pytest.raises(ValueError, match='"hex"'):
        lbparse.payload_from_json("Replication", {"data": 1}, layout="flatbuffers-draft")


def test_replication_response_json_round_trip() -> None:
    """to_json_dict writes data_hex; from_json_dict reads it (and `entries`)."""
    v = next(v for v in VECTORS if v["id"] == "v0_replication_response_two_msgs")
    env = lbparse.decode(data(v))
    d = json.loads(jsonform.dumps(env.to_json_dict()))
    rr = lbparse.ReplicationResponse.from_json_dict(d["payload_json"])
    assert rr == env.message and rr.entries
    by_entries = lbparse.ReplicationResponse.from_json_dict(
        {
            "leader_epoch": d["payload_json"]["leader_epoch"],
            "high_watermark": d["payload_json"]["high_watermark"],
            "entries": d["commitlog_messages"],
        }
    )
    assert by_entries == env.message
    assert lbparse.encode(by_entries) == data(v)
    with pytest.raises(ValueError, match="disagree"):
        lbparse.ReplicationResponse.from_json_dict({**d["payload_json"], "entries": []})


@pytest.mark.slow
def test_encode_cli_builds_every_layout_by_msg_type_name() -> None:
    """`lbparse encode --layout L --type NAME --json ...` for the FlatBuffers
    layouts too; what it prints decodes to that MsgType."""
    import subprocess

    from support.cli import LBPARSE

    for layout, name, obj in (
        ("flatbuffers", "Ack", '{"stream": "foo", "offset": "42"}'),
        ("flatbuffers", "Publish", '{"stream": "foo"}'),
        ("flatbuffers-draft", "Replication", '{"hex": "00ff"}'),
        (
            "v0",
            "ReplicationResponse",
            '{"leader_epoch": "3", "high_watermark": "41", "data_hex": ""}',
        ),
    ):
        out = subprocess.run(
            [*LBPARSE, "encode", "--layout", layout, "--type", name, "--json", obj],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        env = lbparse.decode(bytes.fromhex(out.stdout.strip()), layout)
        assert env.msg_type_name == name
