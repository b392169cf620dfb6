"""Standard input (`-`) read by the capture reader as it reads a file.

`tcpdump -U -w - | lbparse capture -`: the readers of pcap and pcapng read a
block, parse the whole packets in it, then seek back to the first byte they
did not use and read on. A pipe cannot seek, so `PipeReader` keeps the
bytes read since the reader's last seek and serves a seek forward into them
(the readers never seek further back than that: each seek is at or past
the previous one). Memory stays one block, as with a file.

So that a live capture streams, a large read (a reader's block) returns
what the pipe has, at least one byte, instead of waiting for the whole
block; a small read (a file header) waits for all its bytes, as a file read
does. Parquet cannot be read from a stream (its index is at its end): it
is spooled to a temporary file first.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from typing import BinaryIO, cast

__all__ = ["STDIN", "PipeReader", "input_name", "input_size", "open_input", "spool"]

STDIN = "-"
# Reads up to this size are headers: they wait for every byte. Larger ones
# are the readers' blocks: they return what has arrived.
EXACT_MAX = 1 << 16


def input_name(path: str) -> str:
    """How messages name an input.

    Args:
        path: A file path, or `-` for stdin.

    Returns:
        "stdin" for `-`, else the path.
    """
    return "stdin" if path == STDIN else path


def input_size(path: str) -> int:
    """The size of a file, 0 for stdin (not known in advance).

    Args:
        path: A file path, or `-` for stdin.

    Returns:
        Its size in bytes (0 for stdin).
    """
    return 0 if path == STDIN else os.path.getsize(path)


def open_input(path: str) -> BinaryIO:
    """The file at `path` opened for reading, or stdin for `-`.

    Args:
        path: A file path, or `-` for stdin.

    Returns:
        A binary file; for stdin a PipeReader (forward seeks only) that
        leaves stdin open when closed.
    """
    if path == STDIN:
        return cast(BinaryIO, PipeReader(sys.stdin.buffer))
    return open(path, "rb")


class PipeReader:
    """A stream read as a file with forward seeks (see the module doc).

    Args:
        raw: The binary stream to read (stdin's buffer).
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._kept = bytearray()  # the bytes from offset _start on, read since the last seek
        self._start = 0
        self._pos = 0  # offset of the next byte read
        self._eof = False

    def _pull(self, n: int) -> bytes:
        """One read of the stream, at most n bytes (fewer when fewer have arrived)."""
        if self._eof:
            return b""
        read1 = getattr(self._raw, "read1", None)
        chunk = read1(n) if read1 is not None else self._raw.read(n)
        if not chunk:
            self._eof = True
        return bytes(chunk)

    def read(self, n: int = -1) -> bytes:
        """Read up to `n` bytes, as a file read does.

        A small read (up to EXACT_MAX) waits for all its bytes; a larger one
        returns what has arrived, at least one byte, so that a live capture
        streams.

        Args:
            n: The most bytes to read; negative: to the end of the stream.

        Returns:
            The bytes read; empty at the end of the stream.
        """
        out = bytearray()
        want = n if n >= 0 else sys.maxsize
        at = self._pos - self._start
        if at < len(self._kept):
            out += self._kept[at : at + want]
        while len(out) < want:
            if out and want > EXACT_MAX:
                break  # a block read: what has arrived is enough
            chunk = self._pull(min(want - len(out), EXACT_MAX * 16))
            if not chunk:
                break
            self._kept += chunk  # out has served every kept byte: chunk follows them
            out += chunk
        self._pos += len(out)
        return bytes(out)

    def readline(self) -> bytes:
        """Read one line, up to and including its LF (or to the stream's end).

        Returns:
            The line; empty at the end of the stream.
        """
        at = self._pos - self._start
        end = self._kept.find(b"\n", at)
        if end >= 0:
            line = bytes(self._kept[at : end + 1])
        else:
            line = bytes(self._kept[at:]) + (b"" if self._eof else self._raw.readline())
        self._pos += len(line)
        # Lines are read forward only: nothing before the next one is kept.
        del self._kept[: self._pos - self._start]
        self._start = self._pos
        return line

    def __iter__(self) -> Iterator[bytes]:
        while True:
            line = self.readline()
            if not line:
                return
            yield line

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Seek forward into the bytes kept since the last seek.

        Args:
            offset: The absolute offset to seek to, within the kept bytes.
            whence: Must be os.SEEK_SET.

        Returns:
            The new offset.

        Raises:
            OSError: `whence` is not SEEK_SET, or `offset` lies outside the bytes
                kept (a pipe is read forward).
        """
        if whence != os.SEEK_SET or not self._start <= offset <= self._start + len(self._kept):
            raise OSError(
                f"stdin: cannot seek to {offset} (whence {whence}): a pipe is read "
                f"forward; bytes {self._start}..{self._start + len(self._kept)} are kept"
            )
        del self._kept[: offset - self._start]
        self._start = offset
        self._pos = offset
        return offset

    def tell(self) -> int:
        """The offset of the next byte read.

        Returns:
            The stream position, in bytes from its start.
        """
        return self._pos

    def seekable(self) -> bool:
        """Whether the stream can seek freely (io's question).

        Returns:
            False: only the forward seeks described above work.
        """
        return False

    def close(self) -> None:
        """Do nothing: stdin belongs to the process."""
        pass  # stdin belongs to the process


def spool(f: BinaryIO, suffix: str = "") -> str:
    """The rest of `f` in a new temporary file; its path (the caller removes it).

    Args:
        f: The stream to copy from its position to its end.
        suffix: The temporary file's suffix (`.parquet`, so readers know it).

    Returns:
        The temporary file's path; the file is removed if the copy fails.
    """
    fd, path = tempfile.mkstemp(prefix="lbparse-stdin-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := f.read(EXACT_MAX + 1):  # a block read: what has arrived
                out.write(chunk)
                f.seek(f.tell())  # a PipeReader keeps nothing behind this point
    except BaseException:
        os.unlink(path)
        raise
    return path
