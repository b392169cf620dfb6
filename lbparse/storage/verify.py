"""`lbparse segments --verify`: what must hold in a partition's files, checked.

Per partition (all its segments in offset order): every entry whole and its
CRC matching; offsets contiguous and increasing, within and across
segments; timestamps and leader epochs never going backwards, and the
epochs agreeing with `leader-epoch-checkpoint`; the high watermark of
`replication-offset-checkpoint` not past the last offset; every index entry
pointing at an entry that is there with that offset, timestamp, position
and size, every entry indexed, nothing but zeros after the index's zero
tail. Across nodes, replicas of a partition are compared up to the smallest
high watermark. Each problem is a `Finding` naming the file and position.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lbparse.codec.commitlog import CommitLogEntry
from lbparse.storage.checkpoints import LeaderEpoch, read_high_watermark, read_leader_epochs
from lbparse.storage.datadir import PartitionDir, SegmentFiles, unreadable_files
from lbparse.storage.errors import Finding, StorageError
from lbparse.storage.index import CURRENT_INDEX, IndexReading, read_index
from lbparse.storage.segment import SegmentReading, iter_segment

__all__ = ["PartitionCheck", "check_partition", "compare_replicas", "Digest"]

MAX_PER_KIND = 20  # findings of one kind in one file before they are counted instead

# What replicas must agree on for one offset: the entry header, the stored
# CRC and the body itself (a hash of its fields: two bodies with one stored
# CRC can still differ, one of them damaged).
Digest = tuple[int, int, int, int, int, int]  # offset, timestamp, epoch, size, crc, body
DIGEST_FIELDS = ("offset", "timestamp", "leader_epoch", "size", "stored crc", "body")


@dataclass
class PartitionCheck:
    """The findings of one partition, and what replica comparison needs.

    Attributes:
        part: The partition checked.
        findings: What does not hold, each naming the file and position.
        entries: The entries read.
        bytes: The bytes of its .log files.
        first_offset: The first offset read, None without entries.
        last_offset: The last offset read, None without entries.
        high_watermark: The replication-offset-checkpoint's, if read.
        epochs: The leader-epoch-checkpoint's epochs, if read.
        digests: One Digest per entry, for replica comparison (kept only when
            asked for).
        locations: (file, position) per digest.
        epoch_index: Made from `epochs`, for looking an offset's epoch up.
        unread: A .log whose reading failed: what it holds is unknown, so
            nothing that needs it (its index, the high watermark, replicas)
            is judged.
    """

    part: PartitionDir
    findings: list[Finding] = field(default_factory=list)
    entries: int = 0
    bytes: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    high_watermark: int | None = None
    epochs: list[LeaderEpoch] | None = None
    digests: list[Digest] = field(default_factory=list)
    locations: list[tuple[str, int]] = field(default_factory=list)  # (file, position) per digest
    epoch_index: _EpochIndex | None = field(default=None, repr=False)  # made from `epochs`
    # A .log whose reading failed: what it holds is unknown, so nothing that
    # needs it (its index, the high watermark, replicas) is judged.
    unread: bool = False


class _Limiter:
    """Keeps the findings of one kind in one file to MAX_PER_KIND, then counts."""

    def __init__(self, out: list[Finding]) -> None:
        self.out = out
        self.counts: dict[tuple[str, str], int] = {}

    def add(self, finding: Finding) -> None:
        key = (finding.path, finding.kind)
        n = self.counts.get(key, 0) + 1
        self.counts[key] = n
        if n <= MAX_PER_KIND:
            self.out.append(finding)

    def close(self) -> None:
        for (path, kind), n in self.counts.items():
            if n > MAX_PER_KIND:
                self.out.append(
                    Finding(
                        path, None, kind, f"{n - MAX_PER_KIND} more like the above ({n} in all)"
                    )
                )


@dataclass
class _Last:
    """The previous entry read in the partition, for order checks."""

    offset: int
    timestamp: int
    epoch: int
    path: str


def check_partition(
    part: PartitionDir, keep_digests: bool = False, progress: Callable[[int], None] | None = None
) -> PartitionCheck:
    """Read every file of a partition and check what must hold.

    A file that cannot be read is a finding (bad_file), not an error.

    Args:
        part: The partition.
        keep_digests: Keep each entry's Digest, for `compare_replicas`.
        progress: Called with the bytes of .log read since its last call.

    Returns:
        The PartitionCheck, its findings at most MAX_PER_KIND of a kind per
        file (the rest counted).
    """
    check = PartitionCheck(part)
    out = _Limiter(check.findings)
    for f in unreadable_files(part):
        out.add(f)
    if not part.only_files:
        _read_checkpoints(check, out)
    last: _Last | None = None
    for seg in part.segments:
        if seg.log is None:
            out.add(
                Finding(
                    str(seg.index),
                    None,
                    "missing_segment",
                    f"index of base offset {seg.base_offset} without its .log",
                )
            )
            continue
        located = _Located(str(seg.log))
        try:
            last = _check_segment(check, seg, located, last, out, keep_digests, progress)
        except (ValueError, OSError) as exc:  # one file that cannot be read: a finding
            detail = exc.detail if isinstance(exc, StorageError) else str(exc)
            out.add(Finding(str(seg.log), None, "bad_file", detail))
            # Not "0 bytes": its index is not compared with entries never read
            # (a 3 GB .log that could not be mapped gave one false finding
            # per index entry), nor the next segment's offsets with its.
            located.failed, check.unread, last = True, True, None
        check.bytes += located.size
        _check_index(seg, located, out)
    if not part.only_files and not check.unread:
        _check_high_watermark(check, out)
    out.close()
    return check


def _check_segment(
    check: PartitionCheck,
    seg: SegmentFiles,
    located: _Located,
    last: _Last | None,
    out: _Limiter,
    keep_digests: bool,
    progress: Callable[[int], None] | None,
) -> _Last | None:
    assert seg.log is not None
    done = 0
    for reading in iter_segment(seg.log):  # a part at a time: memory stays flat
        if progress:
            progress(max(reading.end_position - done, 0))
            done = max(done, reading.end_position)
        for f in reading.damage:
            out.add(f)
        first = not located.positions
        last = _check_entries(check, reading, seg, last, out, keep_digests, first)
        located.add(reading)
    return last


@dataclass
class _Located:
    """Where each entry of a segment is, and what the index must say of it."""

    path: str
    size: int = 0
    header_len: int = 0
    index_format: Any = None
    positions: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    failed: bool = False  # the .log's reading failed: its entries are not all known

    def add(self, reading: SegmentReading) -> None:
        self.size = reading.size
        self.header_len = reading.format.header_len
        self.index_format = reading.format.index
        self.positions += reading.positions
        for e in reading.entries:
            self.offsets.append(e.offset)
            self.timestamps.append(e.timestamp)
            self.sizes.append(e.size or 0)


def _check_entries(
    check: PartitionCheck,
    reading: SegmentReading,
    seg: SegmentFiles,
    last: _Last | None,
    out: _Limiter,
    keep: bool,
    first: bool,
) -> _Last | None:
    path = reading.path
    fmt = reading.format
    has_epoch = fmt.field_index("leader_epoch") is not None
    epochs = None
    if has_epoch and check.epochs is not None:
        if check.epoch_index is None:
            check.epoch_index = _EpochIndex(check.epochs)
        epochs = check.epoch_index
    if reading.entries and first:
        head = reading.entries[0]
        if last is not None and head.offset > last.offset + 1:
            out.add(
                Finding(
                    path,
                    reading.positions[0],
                    "missing_segment",
                    f"offsets {last.offset + 1}..{head.offset - 1} are in no segment "
                    f"(the previous one, {last.path}, ends at {last.offset})",
                )
            )
            last = _Last(head.offset - 1, last.timestamp, last.epoch, last.path)
        elif head.offset != seg.base_offset:
            out.add(
                Finding(
                    path,
                    reading.positions[0],
                    "offset_gap",
                    f"first entry has offset {head.offset}, the file name says the "
                    f"segment starts at {seg.base_offset}",
                )
            )
    for pos, e in reading:
        if not e.crc_ok:
            out.add(
                Finding(
                    path,
                    pos,
                    "crc_mismatch",
                    f"entry of offset {e.offset}: stored {fmt.crc_name} "
                    f"0x{e.crc32c or 0:08x} is not the body's",
                )
            )
        if last is not None:
            _check_order(path, pos, e, last, has_epoch, out)
        if epochs is not None:
            _check_epoch(path, pos, e, epochs, str(check.part.epoch_file), out)
        last = _Last(e.offset, e.timestamp, e.leader_epoch, path)
        if keep:
            body = hash((e.magic, e.attributes, e.key, e.value, tuple(e.headers)))
            check.digests.append(
                (e.offset, e.timestamp, e.leader_epoch, e.size or 0, e.crc32c or 0, body)
            )
            check.locations.append((path, pos))
    if reading.entries:
        check.entries += len(reading.entries)
        if check.first_offset is None:
            check.first_offset = reading.entries[0].offset
        check.last_offset = reading.entries[-1].offset
    return last


def _check_order(
    path: str, pos: int, e: CommitLogEntry, last: _Last, has_epoch: bool, out: _Limiter
) -> None:
    if e.offset != last.offset + 1:
        what = "goes backwards" if e.offset <= last.offset else "skips"
        out.add(Finding(path, pos, "offset_gap", f"offset {e.offset} {what} after {last.offset}"))
    if e.timestamp < last.timestamp:
        out.add(
            Finding(
                path,
                pos,
                "timestamp_backwards",
                f"offset {e.offset}: timestamp {e.timestamp} is before the previous "
                f"entry's {last.timestamp}",
            )
        )
    if has_epoch and e.leader_epoch < last.epoch:
        out.add(
            Finding(
                path,
                pos,
                "epoch_backwards",
                f"offset {e.offset}: leader epoch {e.leader_epoch} after {last.epoch}",
            )
        )


def _check_index(seg: SegmentFiles, located: _Located, out: _Limiter) -> None:
    if seg.index is None:
        if located.positions:
            out.add(
                Finding(
                    located.path,
                    None,
                    "index_missing",
                    f"no {seg.base_offset:020d}.index beside it",
                )
            )
        return
    try:
        index = read_index(seg.index, seg.base_offset, located.index_format or CURRENT_INDEX)
    except (ValueError, OSError) as exc:  # StorageError is a ValueError
        out.add(Finding(str(seg.index), None, "bad_file", str(exc)))
        return
    for f in index.damage:
        out.add(f)
    if not located.failed:
        _compare_index(index, located, out)


def _compare_index(index: IndexReading, located: _Located, out: _Limiter) -> None:
    hl = located.header_len
    seen: set[int] = set()
    for ie in index.entries:
        i = bisect.bisect_left(located.positions, ie.position)
        if i == len(located.positions) or located.positions[i] != ie.position:
            if ie.position >= located.size:
                out.add(
                    Finding(
                        index.path,
                        ie.index_position,
                        "index_past_end",
                        f"entry for offset {ie.offset} points at position "
                        f"{ie.position}, past the end of the .log ({located.size} bytes)",
                    )
                )
            else:
                out.add(
                    Finding(
                        index.path,
                        ie.index_position,
                        "index_mismatch",
                        f"entry for offset {ie.offset} points at position "
                        f"{ie.position}, where no entry of the .log starts",
                    )
                )
            continue
        seen.add(i)
        wrong = []
        if located.offsets[i] != ie.offset:
            wrong.append(f"offset {ie.offset} (the entry has {located.offsets[i]})")
        if ie.timestamp is not None and located.timestamps[i] != ie.timestamp:
            wrong.append(f"timestamp {ie.timestamp} (the entry has {located.timestamps[i]})")
        if ie.size is not None and ie.size != hl + located.sizes[i]:
            wrong.append(f"size {ie.size} (the entry has {hl + located.sizes[i]})")
        if wrong:
            out.add(
                Finding(
                    index.path,
                    ie.index_position,
                    "index_mismatch",
                    f"entry for position {ie.position} says " + ", ".join(wrong),
                )
            )
    missing = [i for i in range(len(located.positions)) if i not in seen]
    if missing:
        first = missing[0]
        out.add(
            Finding(
                located.path,
                located.positions[first],
                "index_missing",
                f"{len(missing)} entries (offsets {located.offsets[first]}"
                f"..{located.offsets[missing[-1]]}) have no index entry",
            )
        )


def _read_checkpoints(check: PartitionCheck, out: _Limiter) -> None:
    part = check.part
    if part.hw_file is not None:
        try:
            check.high_watermark = read_high_watermark(part.hw_file)
        except (ValueError, OSError) as exc:  # StorageError is a ValueError
            out.add(_unreadable(str(part.hw_file), exc))
    if part.epoch_file is not None:
        try:
            check.epochs = read_leader_epochs(part.epoch_file)
        except (ValueError, OSError) as exc:
            out.add(_unreadable(str(part.epoch_file), exc))


def _unreadable(path: str, exc: Exception) -> Finding:
    if isinstance(exc, StorageError):
        return Finding(path, exc.position, "bad_checkpoint", exc.detail)
    return Finding(path, None, "bad_checkpoint", str(exc))


def _check_high_watermark(check: PartitionCheck, out: _Limiter) -> None:
    hw = check.high_watermark
    last = check.last_offset if check.last_offset is not None else -1
    if hw is not None and hw > last:
        out.add(
            Finding(
                str(check.part.hw_file),
                0,
                "hw_past_end",
                f"high watermark {hw} is past the last offset on disk ({last})",
            )
        )


class _EpochIndex:
    """The checkpoint's epochs arranged so that an entry is checked against all
    of them in O(log lines): by start offset, the greatest epoch of those
    starting before each, and the least of those starting after (one scan of
    every line per entry made 1,000 entries x 100,000 lines take 30.9 s)."""

    def __init__(self, epochs: list[LeaderEpoch]) -> None:
        self.listed = {ep.epoch for ep in epochs}
        order = sorted(epochs, key=lambda ep: ep.start_offset)
        self.starts = [ep.start_offset for ep in order]
        self.max_before: list[LeaderEpoch] = []  # [i]: greatest epoch of order[:i + 1]
        for ep in order:
            best = self.max_before[-1] if self.max_before else ep
            self.max_before.append(ep if ep.epoch > best.epoch else best)
        self.min_after: list[LeaderEpoch] = list(order)  # [i]: least epoch of order[i:]
        for i in range(len(order) - 2, -1, -1):
            if self.min_after[i + 1].epoch < self.min_after[i].epoch:
                self.min_after[i] = self.min_after[i + 1]

    def against(self, offset: int, epoch: int) -> LeaderEpoch | None:
        """A line the entry disagrees with: one that starts a later epoch
        before the entry, or an epoch no later than the entry's after it."""
        before = bisect.bisect_left(self.starts, offset)  # lines starting before the offset
        if before and self.max_before[before - 1].epoch > epoch:
            return self.max_before[before - 1]
        after = bisect.bisect_right(self.starts, offset)  # the first line starting after it
        if after < len(self.starts) and self.min_after[after].epoch <= epoch:
            return self.min_after[after]
        return None


def _check_epoch(
    path: str, pos: int, e: CommitLogEntry, epochs: _EpochIndex, epoch_file: str, out: _Limiter
) -> None:
    """An entry agrees with the epoch checkpoint.

    A leader records an epoch with the offset of the last message before
    it (commitLog.NewLeaderEpoch: NewestOffset), a follower with the first
    message of the epoch (append): either way, every message after that
    offset has that epoch or a later one, and every message before it an
    earlier one; and every epoch that has messages is listed.
    """
    if e.leader_epoch not in epochs.listed:
        out.add(
            Finding(
                path,
                pos,
                "epoch_checkpoint",
                f"offset {e.offset} has leader epoch {e.leader_epoch}, which "
                f"{epoch_file} does not list",
            )
        )
        return
    ep = epochs.against(e.offset, e.leader_epoch)
    if ep is not None:
        out.add(
            Finding(
                path,
                pos,
                "epoch_checkpoint",
                f"offset {e.offset} has leader epoch {e.leader_epoch}, but "
                f"{epoch_file} starts epoch {ep.epoch} at {ep.start_offset}",
            )
        )


def compare_replicas(checks: Iterable[PartitionCheck]) -> list[Finding]:
    """Replicas of each partition, compared up to the smallest high watermark.

    The first replica (in node order) is the reference; for each other one
    the first offset whose entry differs, or is missing, is named.

    Args:
        checks: The partition checks of every node, made with keep_digests
            (single files and unread partitions are left out).

    Returns:
        One replica_mismatch Finding per replica that differs from the
        reference.
    """
    groups: dict[tuple[str, int | None], list[PartitionCheck]] = {}
    for c in checks:
        if not c.part.only_files and not c.unread:
            groups.setdefault(c.part.key, []).append(c)
    findings = []
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda c: c.part.node)
        hws = [
            c.high_watermark
            if c.high_watermark is not None
            else (c.last_offset if c.last_offset is not None else -1)
            for c in group
        ]
        upto = min(hws)
        ref = group[0]
        for other in group[1:]:
            f = _first_difference(ref, other, upto)
            if f is not None:
                findings.append(f)
    return findings


def _first_difference(ref: PartitionCheck, other: PartitionCheck, upto: int) -> Finding | None:
    a = {d[0]: (d, loc) for d, loc in zip(ref.digests, ref.locations) if d[0] <= upto}
    b = {d[0]: (d, loc) for d, loc in zip(other.digests, other.locations) if d[0] <= upto}
    for offset in sorted(set(a) | set(b)):
        da, db = a.get(offset), b.get(offset)
        if da is not None and db is not None and da[0] == db[0]:
            continue
        path, pos = (db or da)[1]  # type: ignore[index]
        if db is None:
            what = f"is missing on {other.part.node} (present on {ref.part.node})"
        elif da is None:
            what = f"is on {other.part.node} but missing on {ref.part.node}"
        else:
            diff = [
                n if n == "body" else f"{n} {x} vs {y}"
                for n, x, y in zip(DIGEST_FIELDS, db[0], da[0])
                if x != y
            ]
            what = f"differs from {ref.part.node}'s ({', '.join(diff)})"
        return Finding(
            path,
            pos,
            "replica_mismatch",
            f"{other.part.stream}/{other.part.partition}: offset {offset} {what}; "
            f"replicas must be identical up to the smallest high watermark ({upto})",
        )
    return None
