"""Liftbridge's files on disk: segments, indexes, checkpoints, the metadata Raft log.

    >>> from lbparse.storage import find_partitions, read_segment
    >>> for part in find_partitions(["DATA"]):            # a data directory, streams/, a partition
    ...     for seg in part.segments:
    ...         for position, entry in read_segment(seg.log):
    ...             print(part.stream, part.partition, entry.offset, entry.value)

Layouts come from the spec (spec/segment.ksy, segment_index.ksy,
checkpoint.ksy, bbolt.ksy) through `lbparse_generated.storage_layouts`.
Damaged files are read as far as they go; each problem is a `Finding`
(file, byte position, kind, message); bad input raises only `StorageError`.
"""

from lbparse.storage.checkpoints import LeaderEpoch, read_high_watermark, read_leader_epochs
from lbparse.storage.datadir import PartitionDir, SegmentFiles, find_partitions
from lbparse.storage.errors import FINDING_KINDS, KINDS, Finding, StorageError
from lbparse.storage.formats import SEGMENT_FORMATS_BY_NAME, SegmentFormat
from lbparse.storage.index import IndexEntry, IndexReading, read_index, read_index_bytes
from lbparse.storage.segment import (
    SegmentReading,
    detect_format,
    entry_json,
    read_segment,
    read_segment_bytes,
)
from lbparse.storage.verify import PartitionCheck, check_partition, compare_replicas

__all__ = [
    "Finding",
    "IndexEntry",
    "IndexReading",
    "FINDING_KINDS",
    "KINDS",
    "LeaderEpoch",
    "PartitionCheck",
    "PartitionDir",
    "SEGMENT_FORMATS_BY_NAME",
    "SegmentFiles",
    "SegmentFormat",
    "SegmentReading",
    "StorageError",
    "check_partition",
    "compare_replicas",
    "detect_format",
    "entry_json",
    "find_partitions",
    "read_high_watermark",
    "read_index",
    "read_index_bytes",
    "read_leader_epochs",
    "read_segment",
    "read_segment_bytes",
]
