"""The two checkpoint files of a partition directory (spec/checkpoint.ksy).

They are a few bytes of text each, so they are read with the parser Kaitai
generates from the spec (no fast path of our own); this module turns its
answers and its errors into lbparse's terms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import kaitaistruct
from kaitaistruct import KaitaiStream

from lbparse.storage.errors import StorageError
from lbparse_generated.kaitai.liftbridge_checkpoint import LiftbridgeCheckpoint
from lbparse_generated.storage_layouts import CHECKPOINTS

__all__ = [
    "LeaderEpoch",
    "HW_FILE",
    "EPOCH_FILE",
    "read_high_watermark",
    "read_leader_epochs",
    "parse_high_watermark",
    "parse_leader_epochs",
]

HW_FILE: str = CHECKPOINTS["files"]["replication_offset"]
EPOCH_FILE: str = CHECKPOINTS["files"]["leader_epoch"]
_KIND = LiftbridgeCheckpoint.CheckpointKind
_DECIMAL = re.compile(r"[+-]?[0-9]+")
# The longest decimal a signed 64-bit integer has ("-9223372036854775808"):
# longer text is refused before int() reads it (which, past 4,300 digits,
# raises a ValueError of its own instead of a finding).
_INT64_CHARS = 20


@dataclass(frozen=True)
class LeaderEpoch:
    """One line of leader-epoch-checkpoint: an epoch and the first offset written in it.

    Attributes:
        epoch: The leader epoch.
        start_offset: The first offset written in it.
    """

    epoch: int
    start_offset: int


def _parse(
    data: bytes, kind: LiftbridgeCheckpoint.CheckpointKind, path: str
) -> LiftbridgeCheckpoint:
    try:
        return LiftbridgeCheckpoint(kind, KaitaiStream(BytesIO(data)))
    except kaitaistruct.ValidationFailedError as exc:
        raise StorageError(
            "bad_checkpoint",
            f"version is not {CHECKPOINTS['leader_epoch_version']} ({exc.__class__.__name__})",
            path=path,
            position=0,
        ) from None
    except (EOFError, kaitaistruct.KaitaiStructError, UnicodeDecodeError) as exc:
        raise StorageError(
            "bad_checkpoint",
            f"not a {kind.name} checkpoint: a line is cut short ({exc})",
            path=path,
            position=len(data),
        ) from None


def _number(text: str, what: str, path: str, position: int) -> int:
    # What Go's strconv.ParseInt(s, 10, 64) takes (Python's int() also
    # takes spaces and underscores).
    if (
        len(text) > _INT64_CHARS
        or not _DECIMAL.fullmatch(text)
        or not -(1 << 63) <= int(text) < (1 << 63)
    ):
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text):,} characters)"
        raise StorageError(
            "bad_checkpoint",
            f"{what} is {shown!r}, not a decimal 64-bit integer",
            path=path,
            position=position,
        )
    return int(text)


def parse_high_watermark(data: bytes, path: str = "<bytes>") -> int:
    """The high watermark a replication-offset-checkpoint holds.

    Args:
        data: The file's bytes.
        path: How errors name the file.

    Returns:
        The high watermark (a signed 64-bit offset).

    Raises:
        StorageError: The bytes are not such a checkpoint, or the number is
            not a decimal 64-bit integer (kind bad_checkpoint).
    """
    cp = _parse(data, _KIND.replication_offset, path)
    return _number(cp.high_watermark, "the high watermark", path, 0)


def parse_leader_epochs(data: bytes, path: str = "<bytes>") -> list[LeaderEpoch]:
    """The epochs a leader-epoch-checkpoint lists, in file order.

    Args:
        data: The file's bytes.
        path: How errors name the file.

    Returns:
        The LeaderEpochs, in file order.

    Raises:
        StorageError: The bytes are not such a checkpoint (wrong version, a
            line cut short, a number that is not a decimal 64-bit integer),
            or the entry count disagrees with the lines (kind bad_checkpoint).
    """
    cp = _parse(data, _KIND.leader_epoch, path)
    pos = len(cp.version) + 1
    count = _number(cp.count, "the entry count", path, pos)
    pos += len(cp.count) + 1
    epochs = []
    for line in cp.epochs:
        epoch = _number(line.leader_epoch, "a leader epoch", path, pos)
        start = _number(line.start_offset, "a start offset", path, pos + len(line.leader_epoch) + 1)
        epochs.append(LeaderEpoch(epoch, start))
        pos += len(line.leader_epoch) + len(line.start_offset) + 2
    if count != len(epochs):
        raise StorageError(
            "bad_checkpoint",
            f"says {count} entries, has {len(epochs)}",
            path=path,
            position=len(cp.version) + 1,
        )
    return epochs


def read_high_watermark(path: str | Path) -> int:
    """The high watermark of a replication-offset-checkpoint file.

    Args:
        path: The file.

    Returns:
        The high watermark.

    Raises:
        StorageError: As `parse_high_watermark`.
        OSError: The file cannot be read.
    """
    return parse_high_watermark(Path(path).read_bytes(), str(path))


def read_leader_epochs(path: str | Path) -> list[LeaderEpoch]:
    """The epochs of a leader-epoch-checkpoint file, in file order.

    Args:
        path: The file.

    Returns:
        The LeaderEpochs.

    Raises:
        StorageError: As `parse_leader_epochs`.
        OSError: The file cannot be read.
    """
    return parse_leader_epochs(Path(path).read_bytes(), str(path))
