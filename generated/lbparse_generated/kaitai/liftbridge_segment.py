# This is a generated file! Please edit source .ksy file and use kaitai-struct-compiler to rebuild
# type: ignore

import kaitaistruct
from kaitaistruct import KaitaiStruct, KaitaiStream, BytesIO
from . import liftbridge_commitlog
from enum import IntEnum


if getattr(kaitaistruct, 'API_VERSION', (0, 9)) < (0, 11):
    raise Exception("Incompatible Kaitai Struct Python API: 0.11 or later is required, but you have %s" % (kaitaistruct.__version__))

class LiftbridgeSegment(KaitaiStruct):
    """A Liftbridge stream partition is a commit log cut into segments. Each
    segment is a pair of files named by the offset of its first entry,
    zero-padded to 20 digits: `<base offset>.log` (this file: the entries back
    to back, nothing before, between or after them) and `<base offset>.index`
    (see segment_index.ksy). All integers are big-endian.
    
    The entry layout changed four times before Liftbridge v1.0, so the
    generation that wrote a file is a parameter (`format`, enum
    `entry_format`); lbparse tells them apart by which one reads the first
    entries cleanly with a matching CRC. The current layout (since Jul 2019,
    28-byte entry header; CRC-32C since Feb 2020) is the one of commitlog.ksy,
    imported here: a ReplicationResponse carries entries exactly as they sit
    in this file.
    
    Keys starting with `-` are ignored by the Kaitai compiler and read by
    lbparse's generator (tools/ksy_storage.py): on each `entry_format`, `-crc`
    names the body checksum (`crc32` = IEEE, `crc32c` = Castagnoli), `-entry`
    the type of one entry, `-index-format` the layout of the segment's index
    (segment_index.ksy), `-since` the upstream commit that introduced it and
    `-recency` ranks the formats from the newest (1); `-files` how
    segment files are named and `-data-dir` where they sit in a node's
    data directory.
    
    The CRC is over the body after the CRC field (never over the entry
    header); Kaitai cannot compute it, the code that uses this spec does.
    
    .. seealso::
       shared/wire/README.md section 3; shared/liftbridge/README.md "What a node
       keeps on disk"; upstream liftbridge-io/liftbridge server/commitlog
       (message_set.go, message.go, segment.go) and server/proto/message.go at
       the commits named in `entry_format`.
    """

    class EntryFormat(IntEnum):
        v2018_04 = 1
        v2018_06 = 2
        v2018_08 = 3
        v2019_07 = 4
        v2020_02 = 5
    def __init__(self, format, _io, _parent=None, _root=None):
        super(LiftbridgeSegment, self).__init__(_io)
        self._parent = _parent
        self._root = _root or self
        self.format = format
        self._read()

    def _read(self):
        if self.format == LiftbridgeSegment.EntryFormat.v2018_04:
            pass
            self.entries_v2018_04 = []
            i = 0
            while not self._io.is_eof():
                self.entries_v2018_04.append(LiftbridgeSegment.EntryV201804(self._io, self, self._root))
                i += 1


        if self.format == LiftbridgeSegment.EntryFormat.v2018_06:
            pass
            self.entries_v2018_06 = []
            i = 0
            while not self._io.is_eof():
                self.entries_v2018_06.append(LiftbridgeSegment.EntryV201806(self._io, self, self._root))
                i += 1


        if self.format == LiftbridgeSegment.EntryFormat.v2018_08:
            pass
            self.entries_v2018_08 = []
            i = 0
            while not self._io.is_eof():
                self.entries_v2018_08.append(LiftbridgeSegment.EntryV201808(self._io, self, self._root))
                i += 1


        if  ((self.format == LiftbridgeSegment.EntryFormat.v2019_07) or (self.format == LiftbridgeSegment.EntryFormat.v2020_02)) :
            pass
            self.entries = []
            i = 0
            while not self._io.is_eof():
                self.entries.append(liftbridge_commitlog.LiftbridgeCommitlog.Entry(self._io))
                i += 1




    def _fetch_instances(self):
        pass
        if self.format == LiftbridgeSegment.EntryFormat.v2018_04:
            pass
            for i in range(len(self.entries_v2018_04)):
                pass
                self.entries_v2018_04[i]._fetch_instances()


        if self.format == LiftbridgeSegment.EntryFormat.v2018_06:
            pass
            for i in range(len(self.entries_v2018_06)):
                pass
                self.entries_v2018_06[i]._fetch_instances()


        if self.format == LiftbridgeSegment.EntryFormat.v2018_08:
            pass
            for i in range(len(self.entries_v2018_08)):
                pass
                self.entries_v2018_08[i]._fetch_instances()


        if  ((self.format == LiftbridgeSegment.EntryFormat.v2019_07) or (self.format == LiftbridgeSegment.EntryFormat.v2020_02)) :
            pass
            for i in range(len(self.entries)):
                pass
                self.entries[i]._fetch_instances()



    class BodyV201804(KaitaiStruct):
        """The message as server/proto/message.go encoded it until Jun 2018: the
        timestamp only when magic > 0, headers only when magic > 1. The server
        wrote magic 0 (e277570), 1 (2173cd6) and 2 (42c3e0e, headers added).
        """
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeSegment.BodyV201804, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.crc32 = self._io.read_u4be()
            self.magic = self._io.read_u1()
            self.attributes = self._io.read_u1()
            if self.magic > 0:
                pass
                self.timestamp_ms = self._io.read_s8be()

            self.key_len = self._io.read_s4be()
            _ = self.key_len
            if not _ >= -1:
                raise kaitaistruct.ValidationExprError(self.key_len, self._io, u"/types/body_v2018_04/seq/4")
            if self.key_len >= 0:
                pass
                self.key = self._io.read_bytes(self.key_len)

            self.value_len = self._io.read_s4be()
            _ = self.value_len
            if not _ >= -1:
                raise kaitaistruct.ValidationExprError(self.value_len, self._io, u"/types/body_v2018_04/seq/6")
            if self.value_len >= 0:
                pass
                self.value = self._io.read_bytes(self.value_len)

            if self.magic > 1:
                pass
                self.header_count = self._io.read_s2be()

            if self.magic > 1:
                pass
                self.headers = []
                for i in range(self.header_count):
                    self.headers.append(liftbridge_commitlog.LiftbridgeCommitlog.Header(self._io))




        def _fetch_instances(self):
            pass
            if self.magic > 0:
                pass

            if self.key_len >= 0:
                pass

            if self.value_len >= 0:
                pass

            if self.magic > 1:
                pass

            if self.magic > 1:
                pass
                for i in range(len(self.headers)):
                    pass
                    self.headers[i]._fetch_instances()




    class BodyV201806(KaitaiStruct):
        """The message as server/proto/message.go encoded it from Jun to Aug 2018."""
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeSegment.BodyV201806, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.crc32 = self._io.read_u4be()
            self.magic = self._io.read_u1()
            self.attributes = self._io.read_u1()
            self.timestamp_ms = self._io.read_s8be()
            self.key_len = self._io.read_s4be()
            _ = self.key_len
            if not _ >= -1:
                raise kaitaistruct.ValidationExprError(self.key_len, self._io, u"/types/body_v2018_06/seq/4")
            if self.key_len >= 0:
                pass
                self.key = self._io.read_bytes(self.key_len)

            self.value_len = self._io.read_s4be()
            _ = self.value_len
            if not _ >= -1:
                raise kaitaistruct.ValidationExprError(self.value_len, self._io, u"/types/body_v2018_06/seq/6")
            if self.value_len >= 0:
                pass
                self.value = self._io.read_bytes(self.value_len)

            self.header_count = self._io.read_s2be()
            self.headers = []
            for i in range(self.header_count):
                self.headers.append(liftbridge_commitlog.LiftbridgeCommitlog.Header(self._io))



        def _fetch_instances(self):
            pass
            if self.key_len >= 0:
                pass

            if self.value_len >= 0:
                pass

            for i in range(len(self.headers)):
                pass
                self.headers[i]._fetch_instances()



    class EntryV201804(KaitaiStruct):
        """One entry of the first layout (upstream e277570, Apr 2018, to 85e6356,
        Jun 2018): a 12-byte header (offset, size) and a body whose timestamp
        and headers depend on the body's magic byte.
        """
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeSegment.EntryV201804, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.offset = self._io.read_u8be()
            self.size = self._io.read_u4be()
            self._raw_body = self._io.read_bytes(self.size)
            _io__raw_body = KaitaiStream(BytesIO(self._raw_body))
            self.body = LiftbridgeSegment.BodyV201804(_io__raw_body, self, self._root)


        def _fetch_instances(self):
            pass
            self.body._fetch_instances()


    class EntryV201806(KaitaiStruct):
        """One entry of the second layout (upstream 85e6356, Jun 2018, to 76ec118,
        Aug 2018): the 12-byte header, and a body that always carries the
        timestamp and the headers, whatever its magic byte (the server wrote
        2, then 1 from d33870d).
        """
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeSegment.EntryV201806, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.offset = self._io.read_u8be()
            self.size = self._io.read_u4be()
            self._raw_body = self._io.read_bytes(self.size)
            _io__raw_body = KaitaiStream(BytesIO(self._raw_body))
            self.body = LiftbridgeSegment.BodyV201806(_io__raw_body, self, self._root)


        def _fetch_instances(self):
            pass
            self.body._fetch_instances()


    class EntryV201808(KaitaiStruct):
        """One entry of the third layout (upstream 76ec118, Aug 2018, to 250f40b,
        Jul 2019): the timestamp moved from the body into a 20-byte entry
        header; the body is today's (commitlog.ksy) with a CRC-32 (IEEE).
        """
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeSegment.EntryV201808, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.offset = self._io.read_u8be()
            self.timestamp = self._io.read_s8be()
            self.size = self._io.read_u4be()
            self._raw_body = self._io.read_bytes(self.size)
            _io__raw_body = KaitaiStream(BytesIO(self._raw_body))
            self.body = liftbridge_commitlog.LiftbridgeCommitlog.Body(_io__raw_body)


        def _fetch_instances(self):
            pass
            self.body._fetch_instances()



