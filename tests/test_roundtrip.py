"""encode then decode gives the message back; encode gives upstream's bytes."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings, strategies as st

import lbparse
from lbparse.payloads import CODECS, REPLICATION_RESPONSE
from strategies import payloads
from vectors import data, params

def _pairs() -> list[tuple[str, str]]:
    return [(layout, ptype) for layout in lbparse.LAYOUTS
            for ptype in lbparse.LAYOUTS[layout].payload_types]


@pytest.mark.parametrize("layout,payload_type", _pairs())
@settings(max_examples=40, deadline=None)
@given(data=st.data(), crc=st.booleans())
def test_decode_encode_roundtrip(layout: str, payload_type: str, data: st.DataObject,
                                 crc: bool) -> None:
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
    return any(f.message_type is not None and f.message_type.GetOptions().map_entry
               and len(value) > 1 for f, value in fields)


@pytest.mark.parametrize("v", params(lambda v: v["category"] == "valid"
                                     and v["layout"] in ("v0", "legacy")))
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
