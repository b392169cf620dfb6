"""Finding the partitions in what the user names: data directories, a node's
`streams/`, one stream, one partition, or single segment files.

The layout (spec/segment.ksy `-data-dir`, `-files`):
`DATA/streams/<stream>/<partition>/<20-digit base offset>.log|.index` and
the two checkpoint files beside them; `DATA/liftbridge` holds the server id;
`DATA/raft/raft.db` the metadata Raft log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from lbparse.codec.payloads import message_class
from lbparse.digits import ascii_int
from lbparse.storage.checkpoints import EPOCH_FILE, HW_FILE
from lbparse.storage.errors import Finding, StorageError
from lbparse.storage.formats import INDEX_SUFFIX, LOG_SUFFIX, NAME_DIGITS
from lbparse_generated.storage_layouts import DATA_DIR

__all__ = [
    "SegmentFiles",
    "PartitionDir",
    "find_partitions",
    "node_name",
    "is_data_dir",
    "looks_like_partition",
    "partition_number",
    "segment_name",
    "locate",
    "STREAMS",
    "RAFT_DB",
    "STATE_FILE",
]

STREAMS: str = DATA_DIR["streams"]
RAFT_DB: str = DATA_DIR["raft_db"]
STATE_FILE: str = DATA_DIR["state_file"]


@dataclass
class SegmentFiles:
    """The two files of one segment (either may be missing).

    Attributes:
        base_offset: The segment's base offset (its files' names).
        log: Its `.log` file, None if missing.
        index: Its `.index` file, None if missing.
    """

    base_offset: int
    log: Path | None = None
    index: Path | None = None


@dataclass
class PartitionDir:
    """One stream partition of one node, and what its directory holds.

    Attributes:
        node: The node's name (its server id, else its folder's name).
        stream: The stream's name.
        partition: The partition number, None when the folder's name is not
            one.
        path: The partition's directory.
        segments: Its segments, by base offset.
        hw_file: Its replication-offset-checkpoint, None if missing.
        epoch_file: Its leader-epoch-checkpoint, None if missing.
        other_files: Anything else in the directory (not read).
        only_files: Named file by file: no checkpoints, no whole-partition
            checks.
    """

    node: str
    stream: str
    partition: int | None
    path: Path
    segments: list[SegmentFiles] = field(default_factory=list)
    hw_file: Path | None = None
    epoch_file: Path | None = None
    other_files: list[Path] = field(default_factory=list)
    only_files: bool = False  # named file by file: no checkpoints, no whole-partition checks

    @property
    def key(self) -> tuple[str, int | None]:
        """(stream, partition): which partition it is, whatever the node."""
        return (self.stream, self.partition)


def node_name(data_dir: Path) -> str:
    """The server id in DATA/liftbridge (protocol.ServerState), else the folder's name.

    Args:
        data_dir: A node's data directory.

    Returns:
        The server id, or the directory's name when the state file is
        missing, unreadable or holds none.
    """
    state = data_dir / STATE_FILE
    try:
        msg = message_class(DATA_DIR["state_type"])()
        msg.ParseFromString(state.read_bytes())
        server_id = getattr(msg, "serverID", "")
        if server_id:
            return str(server_id)
    except Exception:
        pass
    return data_dir.resolve().name


def is_data_dir(path: Path) -> bool:
    """Whether `path` looks like a node's data directory.

    Args:
        path: A directory.

    Returns:
        True if it holds `streams/`, the state file or the Raft database.
    """
    return (path / STREAMS).is_dir() or (path / STATE_FILE).is_file() or (path / RAFT_DB).is_file()


def segment_name(name: str) -> tuple[int, str] | None:
    """(base offset, suffix) of a segment file name, None for other names.

    Args:
        name: A file name.

    Returns:
        (base offset, LOG_SUFFIX or INDEX_SUFFIX), or None.
    """
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            base = ascii_int(stem) if len(stem) == NAME_DIGITS else None
            if base is not None:
                return base, suffix
    return None


def looks_like_partition(path: Path) -> bool:
    """Whether `path` is a directory holding segment or checkpoint files.

    Args:
        path: A path.

    Returns:
        True if it is a directory holding a segment or checkpoint file.
    """
    names = [p.name for p in path.iterdir()] if path.is_dir() else []
    return any(segment_name(n) or n in (HW_FILE, EPOCH_FILE) for n in names)


def partition_number(name: str) -> int | None:
    """The partition number a folder name gives (a partition is an int32).

    Args:
        name: A partition folder's name.

    Returns:
        The number, or None when the name is not a decimal int32.
    """
    return ascii_int(name, 2**31 - 1)  # a partition is an int32


def read_partition_dir(path: Path, node: str, stream: str) -> PartitionDir:
    part = PartitionDir(node, stream, partition_number(path.name), path)
    segments: dict[int, SegmentFiles] = {}
    for child in sorted(path.iterdir()):
        parsed = segment_name(child.name)
        if not child.is_file():
            # A FIFO (or socket, device) named like one of Liftbridge's files:
            # never opened, opening it blocks until someone writes (issue #19).
            part.other_files.append(child)
        elif parsed:
            seg = segments.setdefault(parsed[0], SegmentFiles(parsed[0]))
            if parsed[1] == LOG_SUFFIX:
                seg.log = child
            else:
                seg.index = child
        elif child.name == HW_FILE:
            part.hw_file = child
        elif child.name == EPOCH_FILE:
            part.epoch_file = child
        else:
            part.other_files.append(child)
    part.segments = [segments[k] for k in sorted(segments)]
    return part


def locate(path: Path) -> tuple[str, str]:
    """(node, stream) of a partition directory, from the folders above it.

    Args:
        path: A partition directory.

    Returns:
        (the node's name, the stream's name).
    """
    stream_dir = path.parent
    streams = stream_dir.parent
    data = streams.parent if streams.name == STREAMS else None
    node = node_name(data) if data is not None else (streams.name or "?")
    return node, stream_dir.name


def _from_data_dir(path: Path) -> list[PartitionDir]:
    streams = path / STREAMS
    if not streams.is_dir():
        return []
    return _from_streams_dir(streams, node_name(path))


def _from_streams_dir(path: Path, node: str) -> list[PartitionDir]:
    out = []
    for stream in sorted(p for p in path.iterdir() if p.is_dir()):
        out.extend(_from_stream_dir(stream, node))
    return out


def _from_stream_dir(path: Path, node: str) -> list[PartitionDir]:
    parts = sorted(
        (p for p in path.iterdir() if p.is_dir()),
        key=lambda p: (partition_number(p.name) is None, partition_number(p.name) or 0, p.name),
    )
    return [read_partition_dir(p, node, path.name) for p in parts]


def _from_file(path: Path) -> PartitionDir:
    parsed = segment_name(path.name)
    if parsed is None:
        raise StorageError(
            "bad_file",
            f"not a segment file (expected a {NAME_DIGITS}-digit base offset "
            f"and {LOG_SUFFIX} or {INDEX_SUFFIX})",
            path=path,
        )
    node, stream = locate(path.parent)
    part = PartitionDir(
        node, stream, partition_number(path.parent.name), path.parent, only_files=True
    )
    seg = SegmentFiles(parsed[0])
    if parsed[1] == LOG_SUFFIX:
        seg.log = path
    else:
        seg.index = path
    part.segments = [seg]
    return part


def _from_dir(path: Path) -> list[PartitionDir]:
    if is_data_dir(path):
        return _from_data_dir(path)
    if path.name == STREAMS:
        parent = path.parent
        return _from_streams_dir(path, node_name(parent) if is_data_dir(parent) else parent.name)
    if looks_like_partition(path):
        node, stream = locate(path)
        return [read_partition_dir(path, node, stream)]
    children = sorted(p for p in path.iterdir() if p.is_dir())
    if children and any(looks_like_partition(c) for c in children):
        node, _ = locate(children[0])
        return _from_stream_dir(path, node)
    # A folder of data directories (several nodes side by side).
    out = []
    for child in children:
        if is_data_dir(child):
            out.extend(_from_data_dir(child))
    return out


def find_partitions(paths: Iterable[str | Path]) -> list[PartitionDir]:
    """Every partition under `paths`; single files come as one-segment partitions.

    Args:
        paths: Data directories, a node's `streams/`, streams, partitions,
            or segment files (several nodes side by side too).

    Returns:
        The partitions found, single files of one partition merged into one.

    Raises:
        StorageError: A path does not exist, a file is not a segment file, or
            a directory holds no partition.
    """
    out: list[PartitionDir] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise StorageError("bad_file", "no such file or directory", path=path)
        found = [_from_file(path)] if path.is_file() else _from_dir(path)
        if not found and path.is_dir() and not is_data_dir(path):
            raise StorageError(
                "bad_file", "holds no Liftbridge data directory, stream or partition", path=path
            )
        out.extend(found)
    return _merge_files(out)


def _merge_files(parts: list[PartitionDir]) -> list[PartitionDir]:
    """Single files of one partition named one by one make one partition."""
    merged: list[PartitionDir] = []
    by_dir: dict[Path, PartitionDir] = {}
    for part in parts:
        if not part.only_files:
            merged.append(part)
            continue
        known = by_dir.get(part.path)
        if known is None:
            by_dir[part.path] = part
            merged.append(part)
            continue
        for seg in part.segments:
            mine = next((s for s in known.segments if s.base_offset == seg.base_offset), None)
            if mine is None:
                known.segments.append(seg)
            else:
                mine.log = mine.log or seg.log
                mine.index = mine.index or seg.index
        known.segments.sort(key=lambda s: s.base_offset)
    return merged


def unexpected_files(part: PartitionDir) -> list[Finding]:
    """Files in a partition directory that Liftbridge does not leave there."""
    return [
        Finding(
            str(p),
            None,
            "bad_file",
            "not a segment or checkpoint file (an interrupted compaction or "
            "truncation leaves .cleaned/.truncated files)"
            if p.is_file() or p.is_dir()
            else _NOT_REGULAR,
        )
        for p in part.other_files
    ]


_NOT_REGULAR = "not a regular file (a FIFO, socket or device); not read"


def unreadable_files(part: PartitionDir) -> list[Finding]:
    """Files of a partition that are not regular files (a FIFO named like a
    segment): never opened, since opening a FIFO blocks until someone writes."""
    return [
        Finding(str(p), None, "bad_file", _NOT_REGULAR)
        for p in part.other_files
        if not p.is_file() and not p.is_dir()
    ]
