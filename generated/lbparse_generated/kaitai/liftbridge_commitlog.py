# This is a generated file! Please edit source .ksy file and use kaitai-struct-compiler to rebuild
# type: ignore

import kaitaistruct
from kaitaistruct import KaitaiStruct, KaitaiStream, BytesIO


if getattr(kaitaistruct, 'API_VERSION', (0, 9)) < (0, 11):
    raise Exception("Incompatible Kaitai Struct Python API: 0.11 or later is required, but you have %s" % (kaitaistruct.__version__))

class LiftbridgeCommitlog(KaitaiStruct):
    """The payload of a v0 ReplicationResponse (MsgType 3), the one envelope
    payload that is not protobuf: the leader's epoch and high watermark, then
    the commit-log entries the follower asked for, byte for byte as the leader
    keeps them in its `.log` segment files. All integers are big-endian.
    
    The entry layout is the one written since Jul 2019 (28-byte entry header)
    with a CRC-32C body checksum (since Feb 2020). Older segment files used a
    12-byte header (offset, size) until mid-2018 and a 20-byte one (offset,
    timestamp, size) until Jul 2019, and CRC-32 (IEEE) until Feb 2020; those
    are not declared here.
    
    .. seealso::
       shared/wire/README.md, section 3
    """
    def __init__(self, _io, _parent=None, _root=None):
        super(LiftbridgeCommitlog, self).__init__(_io)
        self._parent = _parent
        self._root = _root or self
        self._read()

    def _read(self):
        self.leader_epoch = self._io.read_u8be()
        self.high_watermark = self._io.read_s8be()
        self.entries = []
        i = 0
        while not self._io.is_eof():
            self.entries.append(LiftbridgeCommitlog.Entry(self._io, self, self._root))
            i += 1



    def _fetch_instances(self):
        pass
        for i in range(len(self.entries)):
            pass
            self.entries[i]._fetch_instances()


    class Body(KaitaiStruct):
        """The stored message; `crc32c` covers everything after itself."""
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeCommitlog.Body, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.crc32c = self._io.read_u4be()
            self.magic = self._io.read_u1()
            self.attributes = self._io.read_u1()
            self.key_len = self._io.read_s4be()
            _ = self.key_len
            if not _ >= -1:
                raise kaitaistruct.ValidationExprError(self.key_len, self._io, u"/types/body/seq/3")
            if self.key_len >= 0:
                pass
                self.key = self._io.read_bytes(self.key_len)

            self.value_len = self._io.read_s4be()
            _ = self.value_len
            if not _ >= -1:
                raise kaitaistruct.ValidationExprError(self.value_len, self._io, u"/types/body/seq/5")
            if self.value_len >= 0:
                pass
                self.value = self._io.read_bytes(self.value_len)

            self.header_count = self._io.read_s2be()
            self.headers = []
            for i in range(self.header_count):
                self.headers.append(LiftbridgeCommitlog.Header(self._io, self, self._root))



        def _fetch_instances(self):
            pass
            if self.key_len >= 0:
                pass

            if self.value_len >= 0:
                pass

            for i in range(len(self.headers)):
                pass
                self.headers[i]._fetch_instances()



    class Entry(KaitaiStruct):
        """One message of the commit log, a 28-byte header then its body."""
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeCommitlog.Entry, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.offset = self._io.read_u8be()
            self.timestamp = self._io.read_s8be()
            self.leader_epoch = self._io.read_u8be()
            self.size = self._io.read_u4be()
            self._raw_body = self._io.read_bytes(self.size)
            _io__raw_body = KaitaiStream(BytesIO(self._raw_body))
            self.body = LiftbridgeCommitlog.Body(_io__raw_body, self, self._root)


        def _fetch_instances(self):
            pass
            self.body._fetch_instances()


    class Header(KaitaiStruct):
        """One message header, a string key and a byte-string value."""
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeCommitlog.Header, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.key_len = self._io.read_s2be()
            _ = self.key_len
            if not _ >= 0:
                raise kaitaistruct.ValidationExprError(self.key_len, self._io, u"/types/header/seq/0")
            self.key = self._io.read_bytes(self.key_len)
            self.value_len = self._io.read_s4be()
            _ = self.value_len
            if not _ >= 0:
                raise kaitaistruct.ValidationExprError(self.value_len, self._io, u"/types/header/seq/2")
            self.value = self._io.read_bytes(self.value_len)


        def _fetch_instances(self):
            pass



