# This is a generated file! Please edit source .ksy file and use kaitai-struct-compiler to rebuild
# type: ignore

import kaitaistruct
from kaitaistruct import KaitaiStruct, KaitaiStream, BytesIO
from enum import IntEnum


if getattr(kaitaistruct, 'API_VERSION', (0, 9)) < (0, 11):
    raise Exception("Incompatible Kaitai Struct Python API: 0.11 or later is required, but you have %s" % (kaitaistruct.__version__))

class LiftbridgeSegmentIndex(KaitaiStruct):
    """The index of one segment: one fixed-size entry per message of the
    segment's `.log`, in order, locating it by offset. Liftbridge maps the
    file into memory and, for a new segment, first truncates it to 10 MiB
    (server/commitlog/index.go `newIndex`, opts.bytes 10 * 1024 * 1024,
    rounded down to whole entries), so the unused tail of the active
    segment's index reads as zeros; the file is truncated to its entries
    only when the segment is sealed or closed cleanly (`shrink`), and grows
    by another 10 MiB when an entry would not fit (`writeAt`). An entry whose
    position, timestamp and size are all zero is where Liftbridge's own
    `InitializePosition` stops reading (the first entry of a segment has
    position 0 too, but a timestamp). All integers are big-endian
    (protocol.Encoding).
    
    `format` (enum `index_format`) selects the generation: the timestamp and
    size came with the 20-byte entry in Aug 2018.
    
    .. seealso::
       shared/liftbridge/README.md "What a node keeps on disk"; shared/wire/README.md
       section 3; upstream liftbridge-io/liftbridge server/commitlog/index.go
       (relEntry) at e277570 and 76ec118, and v1.9.0 (22034a8).
    """

    class IndexFormat(IntEnum):
        v2018_04 = 1
        v2018_08 = 2
    def __init__(self, format, _io, _parent=None, _root=None):
        super(LiftbridgeSegmentIndex, self).__init__(_io)
        self._parent = _parent
        self._root = _root or self
        self.format = format
        self._read()

    def _read(self):
        if self.format == LiftbridgeSegmentIndex.IndexFormat.v2018_04:
            pass
            self.entries_v2018_04 = []
            i = 0
            while not self._io.is_eof():
                self.entries_v2018_04.append(LiftbridgeSegmentIndex.IndexEntryV201804(self._io, self, self._root))
                i += 1


        if self.format == LiftbridgeSegmentIndex.IndexFormat.v2018_08:
            pass
            self.entries = []
            i = 0
            while not self._io.is_eof():
                self.entries.append(LiftbridgeSegmentIndex.IndexEntry(self._io, self, self._root))
                i += 1




    def _fetch_instances(self):
        pass
        if self.format == LiftbridgeSegmentIndex.IndexFormat.v2018_04:
            pass
            for i in range(len(self.entries_v2018_04)):
                pass
                self.entries_v2018_04[i]._fetch_instances()


        if self.format == LiftbridgeSegmentIndex.IndexFormat.v2018_08:
            pass
            for i in range(len(self.entries)):
                pass
                self.entries[i]._fetch_instances()



    class IndexEntry(KaitaiStruct):
        """One entry of the index layout written since Aug 2018 (relEntry at
        76ec118 and in v1.9.0: offsetWidth 4, timestampWidth 8,
        positionWidth 4, sizeWidth 4).
        """
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeSegmentIndex.IndexEntry, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.rel_offset = self._io.read_s4be()
            self.timestamp = self._io.read_s8be()
            self.position = self._io.read_s4be()
            self.size = self._io.read_s4be()


        def _fetch_instances(self):
            pass


    class IndexEntryV201804(KaitaiStruct):
        """One entry of the first index layout (relEntry at e277570)."""
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeSegmentIndex.IndexEntryV201804, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.rel_offset = self._io.read_s4be()
            self.position = self._io.read_s4be()


        def _fetch_instances(self):
            pass



