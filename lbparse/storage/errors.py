"""What lbparse says about a file on disk it cannot read, and where.

`StorageError` is the one exception lbparse.storage raises for bad bytes or
a path that is not what was asked for; `Finding` is one problem found while
reading on (damaged files are read as far as they go). Both name the file
and the byte position.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from lbparse.errors import InputError

# Kinds of findings, in the order `--verify` explains them in the README.
FINDING_KINDS: tuple[str, ...] = (
    "crc_mismatch",  # an entry's stored CRC is not the CRC of its body
    "bad_entry",  # an entry's body is not well formed (lengths past its end ...)
    "torn_entry",  # the last entry of a segment is cut short (a crash mid-write)
    "garbage",  # bytes between entries that are no entry
    "zeros",  # a run of zero bytes where entries should be
    "offset_gap",  # offsets not contiguous and increasing
    "timestamp_backwards",
    "epoch_backwards",
    "epoch_checkpoint",  # leader epochs disagree with leader-epoch-checkpoint
    "hw_past_end",  # replication-offset-checkpoint past the last offset
    "index_mismatch",  # an index entry that does not point at its entry
    "index_missing",  # an entry with no index entry (or an index file missing)
    "index_tail",  # something other than zeros after the index's zero tail
    "index_past_end",  # an index entry pointing past the end of the .log
    "missing_segment",  # a .index without its .log, or offsets missing between segments
    "bad_checkpoint",  # a checkpoint file that does not parse
    "bad_file",  # a file that is not what its name says
    "replica_mismatch",  # replicas differ below the smallest high watermark
    "bad_page",  # bbolt: a page that is not what it should be
    "bad_log_entry",  # raft: a log entry that does not decode
    "limit",  # a resource limit (lbparse.codec.limits) reached: nothing past it read
)
KINDS = FINDING_KINDS  # the older name, kept for callers (lbparse.storage.KINDS)


class StorageError(InputError):
    """A file (or bytes) that cannot be read as the Liftbridge file it should be.

    Built as every LbparseError is, `StorageError(kind, message, *, path=...,
    position=...)`; the older `StorageError(message, *, path, position,
    kind="bad_file")` still works. `str(exc)` is `path:position: message`,
    `.message` (and the JSON's) the message alone. Its kinds are the findings'
    (`FINDING_KINDS`): a file that cannot be read at all is the finding its
    reader would have reported.

    Args:
        *args: `kind, message` (or the older `message` alone).
        offset: The byte offset the error concerns, if any.
        position: The byte position in the file (the older name of offset).
        path: The file.
        kind: The older way of giving the kind (default "bad_file").

    Raises:
        TypeError: Neither (kind, message) nor (message,) was given.
    """

    KINDS: ClassVar[frozenset[str]] = frozenset(FINDING_KINDS)

    def __init__(
        self,
        *args: str,
        offset: int | None = None,
        position: int | None = None,
        path: str | Path | None = None,
        kind: str | None = None,
    ) -> None:
        if len(args) == 2 and kind is None:
            kind, message = args
        elif len(args) == 1:
            message, kind = args[0], "bad_file" if kind is None else kind
        else:
            raise TypeError("StorageError(kind, message, *, path=..., position=...)")
        super().__init__(
            kind,
            message,
            offset=offset,
            position=position,
            path=None if path is None else str(path),
        )
        where = "" if path is None else f"{path}"
        if position is not None:
            where += f"{':' if where else ''}{position}"
        # str() names the file and position, as the command line prints it
        self.args = (f"{where}: {message}" if where else message,)

    @property
    def detail(self) -> str:
        """The message without the path and position (the older name of `.message`)."""
        return self.message

    def _json_extra(self) -> dict[str, Any]:
        # path and position at the top level are the older place, kept for readers
        return {"path": self.path, "position": self.position}


@dataclass(frozen=True)
class Finding:
    """One problem: which file, which byte position, what kind, what was seen.

    Attributes:
        path: The file.
        position: The byte position in it, None for the file as a whole.
        kind: One of FINDING_KINDS.
        message: What was seen, for people.
    """

    path: str
    position: int | None
    kind: str
    message: str

    def __post_init__(self) -> None:
        if self.kind not in FINDING_KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")

    def line(self) -> str:
        """One line naming the file and position, as `--verify` prints it.

        Returns:
            `path:position: kind: message`.
        """
        where = self.path if self.position is None else f"{self.path}:{self.position}"
        return f"{where}: {self.kind}: {self.message}"

    def to_json_dict(self) -> dict[str, Any]:
        """The finding as `--verify --json` writes it.

        Returns:
            {"file", "position", "kind", "message"}.
        """
        return {
            "file": self.path,
            "position": self.position,
            "kind": self.kind,
            "message": self.message,
        }
