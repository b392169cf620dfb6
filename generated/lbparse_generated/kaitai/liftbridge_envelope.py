# This is a generated file! Please edit source .ksy file and use kaitai-struct-compiler to rebuild
# type: ignore

import kaitaistruct
from kaitaistruct import KaitaiStruct, KaitaiStream, BytesIO
from enum import IntEnum


if getattr(kaitaistruct, 'API_VERSION', (0, 9)) < (0, 11):
    raise Exception("Incompatible Kaitai Struct Python API: 0.11 or later is required, but you have %s" % (kaitaistruct.__version__))

class LiftbridgeEnvelope(KaitaiStruct):
    """Liftbridge puts a small binary header (the "envelope") in front of every
    message and RPC it sends over NATS. The first seven bytes have kept their
    meaning since Liftbridge v1.0.0-alpha; byte 7 and the payload schemas have
    not, so the generation that wrote the bytes is a parameter (`layout`): the
    header alone cannot always tell (a legacy envelope holding a Message is
    byte-for-byte a v0 Publish).
    
    This file is the single source of truth for lbparse. `make generate` turns
    it into the Kaitai parsers, lbparse's own `construct` schema (which also
    builds envelopes) and the MsgType dispatch table. Keys starting with `-`
    are ignored by the Kaitai compiler and read by lbparse's generator:
    `-name` is the public name of a layout or MsgType, `-payload` the full
    name of the payload type (a protobuf message, `raw` for bytes with a
    layout of their own), `-byte7` what header byte 7 means in a layout,
    `-msg-types` which enum names that layout's MsgTypes, `-internal` marks
    server-to-server RPCs, `-payload-format` says how payloads are encoded
    (protobuf unless it says flatbuffers), `-recency` ranks the layouts from
    the newest (1), which auto-detection prefers when bytes fit several,
    `-bare-payloads` lists payload types that travel without the cookie,
    `-error` names the lbparse error kind (`EnvelopeError.kind`) a failed
    check of the field raises, and `-payload-kinds` (below) names the
    payload types that are not protobuf messages: `raw` is a
    ReplicationResponse (see commitlog.ksy; lbparse's code calls it
    REPLICATION_RESPONSE, `raw` stays its name in JSON and in the reference
    vectors) and `bytes` opaque bytes.
    
    lbparse's generator also reads the fixed facts its hand-written fast
    paths need from the declarations themselves: the magic and the cookie
    (`contents`), the header size (`size` of `header`, checked against its
    fields), the header lengths (`valid` of `header_len`), the CRC flag bit
    and the header length that goes with it (`has_crc` and the `valid` of
    `flags`), struct formats and offsets (field types).
    
    The checks declared with `valid` make this a strict parser: it accepts
    exactly what lbparse accepts by default. What it cannot express (the
    CRC-32C value over the payload) is left to the code that uses it.
    
    .. seealso::
       shared/wire/README.md, section 1 (envelope) and section 2 (bad input)
    """

    class FlatbuffersDraftMsgType(IntEnum):
        publish = 0
        replication = 1

    class FlatbuffersMsgType(IntEnum):
        publish = 0
        ack = 1
        replication = 2

    class Layout(IntEnum):
        v0 = 0
        legacy = 1
        flatbuffers = 2
        flatbuffers_draft = 3
        lift_cookie = 4
        plain = 5

    class V0MsgType(IntEnum):
        publish = 0
        ack = 1
        replication_request = 2
        replication_response = 3
        raft_join_request = 4
        raft_join_response = 5
        leader_epoch_offset_request = 6
        leader_epoch_offset_response = 7
        propagated_request = 8
        propagated_response = 9
        server_info_request = 10
        server_info_response = 11
        partition_status_request = 12
        partition_status_response = 13
        partition_notification = 14
    def __init__(self, layout, _io, _parent=None, _root=None):
        super(LiftbridgeEnvelope, self).__init__(_io)
        self._parent = _parent
        self._root = _root or self
        self.layout = layout
        self._read()

    def _read(self):
        if self.layout == LiftbridgeEnvelope.Layout.lift_cookie:
            pass
            self.cookie = self._io.read_bytes(4)
            if not self.cookie == b"\x4C\x49\x46\x54":
                raise kaitaistruct.ValidationNotEqualError(b"\x4C\x49\x46\x54", self.cookie, self._io, u"/seq/0")

        if self.has_header:
            pass
            self._raw_header = self._io.read_bytes(8)
            _io__raw_header = KaitaiStream(BytesIO(self._raw_header))
            self.header = LiftbridgeEnvelope.Header(_io__raw_header, self, self._root)

        if (self.header.has_crc if self.has_header else False):
            pass
            self.crc32c = self._io.read_u4be()

        self.payload = self._io.read_bytes_full()
        _ = self.payload
        if not  ((self.layout != LiftbridgeEnvelope.Layout.lift_cookie) or (len(_) > 0)) :
            raise kaitaistruct.ValidationExprError(self.payload, self._io, u"/seq/3")


    def _fetch_instances(self):
        pass
        if self.layout == LiftbridgeEnvelope.Layout.lift_cookie:
            pass

        if self.has_header:
            pass
            self.header._fetch_instances()

        if (self.header.has_crc if self.has_header else False):
            pass


    class Header(KaitaiStruct):
        """The fixed 8-byte envelope header; a CRC-32C may follow (see the
        top-level `crc32c`).
        """
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeEnvelope.Header, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.magic = self._io.read_bytes(4)
            if not self.magic == b"\xB9\x0E\x43\xB4":
                raise kaitaistruct.ValidationNotEqualError(b"\xB9\x0E\x43\xB4", self.magic, self._io, u"/types/header/seq/0")
            self.version = self._io.read_u1()
            if not self.version == 0:
                raise kaitaistruct.ValidationNotEqualError(0, self.version, self._io, u"/types/header/seq/1")
            self.header_len = self._io.read_u1()
            if not  ((self.header_len == 8) or (self.header_len == 12)) :
                raise kaitaistruct.ValidationNotAnyOfError(self.header_len, self._io, u"/types/header/seq/2")
            self.flags = self._io.read_u1()
            _ = self.flags
            if not (_ & 1 != 0) == (self.header_len == 12):
                raise kaitaistruct.ValidationExprError(self.flags, self._io, u"/types/header/seq/3")
            self.msg_type = self._io.read_u1()


        def _fetch_instances(self):
            pass

        @property
        def flatbuffers_draft_msg_type(self):
            """Byte 7 read with the FlatBuffers draft table."""
            if hasattr(self, '_m_flatbuffers_draft_msg_type'):
                return self._m_flatbuffers_draft_msg_type

            if self._root.layout == LiftbridgeEnvelope.Layout.flatbuffers_draft:
                pass
                self._m_flatbuffers_draft_msg_type = KaitaiStream.resolve_enum(LiftbridgeEnvelope.FlatbuffersDraftMsgType, self.msg_type)

            return getattr(self, '_m_flatbuffers_draft_msg_type', None)

        @property
        def flatbuffers_msg_type(self):
            """Byte 7 read with the FlatBuffers branch table."""
            if hasattr(self, '_m_flatbuffers_msg_type'):
                return self._m_flatbuffers_msg_type

            if self._root.layout == LiftbridgeEnvelope.Layout.flatbuffers:
                pass
                self._m_flatbuffers_msg_type = KaitaiStream.resolve_enum(LiftbridgeEnvelope.FlatbuffersMsgType, self.msg_type)

            return getattr(self, '_m_flatbuffers_msg_type', None)

        @property
        def has_crc(self):
            """Whether the header carries the CRC-32C field."""
            if hasattr(self, '_m_has_crc'):
                return self._m_has_crc

            self._m_has_crc = self.flags & 1 != 0
            return getattr(self, '_m_has_crc', None)

        @property
        def v0_msg_type(self):
            """Byte 7 read as a v0 MsgType. Values outside the enum are unknown."""
            if hasattr(self, '_m_v0_msg_type'):
                return self._m_v0_msg_type

            if self._root.layout == LiftbridgeEnvelope.Layout.v0:
                pass
                self._m_v0_msg_type = KaitaiStream.resolve_enum(LiftbridgeEnvelope.V0MsgType, self.msg_type)

            return getattr(self, '_m_v0_msg_type', None)


    @property
    def has_header(self):
        """Whether the layout starts with the 8-byte envelope header."""
        if hasattr(self, '_m_has_header'):
            return self._m_has_header

        self._m_has_header =  ((self.layout != LiftbridgeEnvelope.Layout.lift_cookie) and (self.layout != LiftbridgeEnvelope.Layout.plain)) 
        return getattr(self, '_m_has_header', None)


