# This is a generated file! Please edit source .ksy file and use kaitai-struct-compiler to rebuild
# type: ignore

import kaitaistruct
from kaitaistruct import KaitaiStruct, KaitaiStream, BytesIO
from enum import IntEnum


if getattr(kaitaistruct, 'API_VERSION', (0, 9)) < (0, 11):
    raise Exception("Incompatible Kaitai Struct Python API: 0.11 or later is required, but you have %s" % (kaitaistruct.__version__))

class LiftbridgeCheckpoint(KaitaiStruct):
    """Beside its segments, every partition directory holds two small text
    files that Liftbridge rewrites atomically (natefinch/atomic WriteFile):
    
    - `replication-offset-checkpoint`: the high watermark, the offset of the
      last committed message, as a decimal integer with no newline (-1 when
      nothing is committed); written every 5 s and on close
      (commitlog.go `checkpointHW`, read back with strconv.ParseInt).
    - `leader-epoch-checkpoint`: the version (0), the number of entries,
      then one line "<leader epoch> <start offset>" per epoch, each line
      ending in a newline (leader_epoch_cache.go `flush`, since Jul 2019).
      A start offset of -1 is an epoch whose leader had not written yet.
    
    `kind` selects the file. Numbers stay text here, as Kaitai reads them;
    the code that uses this spec turns them into integers.
    
    .. seealso::
       shared/liftbridge/README.md "What a node keeps on disk"; upstream
       liftbridge-io/liftbridge v1.9.0 (22034a8) server/commitlog/commitlog.go
       (hwFileName, checkpointHW) and leader_epoch_cache.go (leaderEpochFileName,
       flush, readLeaderEpochOffsets).
    """

    class CheckpointKind(IntEnum):
        replication_offset = 1
        leader_epoch = 2
    def __init__(self, kind, _io, _parent=None, _root=None):
        super(LiftbridgeCheckpoint, self).__init__(_io)
        self._parent = _parent
        self._root = _root or self
        self.kind = kind
        self._read()

    def _read(self):
        if self.kind == LiftbridgeCheckpoint.CheckpointKind.replication_offset:
            pass
            self.high_watermark = (self._io.read_bytes_full()).decode(u"ASCII")

        if self.kind == LiftbridgeCheckpoint.CheckpointKind.leader_epoch:
            pass
            self.version = (self._io.read_bytes_term(10, False, True, True)).decode(u"ASCII")
            if not self.version == u"0":
                raise kaitaistruct.ValidationNotEqualError(u"0", self.version, self._io, u"/seq/1")

        if self.kind == LiftbridgeCheckpoint.CheckpointKind.leader_epoch:
            pass
            self.count = (self._io.read_bytes_term(10, False, True, True)).decode(u"ASCII")

        if self.kind == LiftbridgeCheckpoint.CheckpointKind.leader_epoch:
            pass
            self.epochs = []
            i = 0
            while not self._io.is_eof():
                self.epochs.append(LiftbridgeCheckpoint.EpochLine(self._io, self, self._root))
                i += 1




    def _fetch_instances(self):
        pass
        if self.kind == LiftbridgeCheckpoint.CheckpointKind.replication_offset:
            pass

        if self.kind == LiftbridgeCheckpoint.CheckpointKind.leader_epoch:
            pass

        if self.kind == LiftbridgeCheckpoint.CheckpointKind.leader_epoch:
            pass

        if self.kind == LiftbridgeCheckpoint.CheckpointKind.leader_epoch:
            pass
            for i in range(len(self.epochs)):
                pass
                self.epochs[i]._fetch_instances()



    class EpochLine(KaitaiStruct):
        """One "<leader epoch> <start offset>" line of `leader-epoch-checkpoint`."""
        def __init__(self, _io, _parent=None, _root=None):
            super(LiftbridgeCheckpoint.EpochLine, self).__init__(_io)
            self._parent = _parent
            self._root = _root
            self._read()

        def _read(self):
            self.leader_epoch = (self._io.read_bytes_term(32, False, True, True)).decode(u"ASCII")
            self.start_offset = (self._io.read_bytes_term(10, False, True, True)).decode(u"ASCII")


        def _fetch_instances(self):
            pass



