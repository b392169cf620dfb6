"""Scratch files no other local user can plant or change.

A file at a name another user can predict (`/tmp/lbparse-...-<uid>`) is
theirs to create first: lbparse would then hand their content to the
program that reads it (issue #19: a planted log4j2 configuration made the
victim's Spark JVM append chosen lines to a chosen file). So scratch files
live in a directory made for this process by `tempfile.mkdtemp` (mode
0700, a random name, created or failed atomically), each file is created
fresh with O_CREAT | O_EXCL | O_NOFOLLOW (never opened if it exists), and
the directory is checked (ours, 0700, not a link) before every use and
removed when the process exits. Nothing is ever reused from an earlier
process.

An output written whole or not at all (`replace_file`) goes through a
temporary file beside it, which may be a shared directory such as /tmp:
that file gets a random name and is made fresh (O_EXCL | O_NOFOLLOW), so
a file or link planted at a name like `<output>.tmp<pid>` is never
written through, nor moved into place as the output.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import stat
import tempfile
import threading
from typing import BinaryIO

__all__ = ["open_private", "private_dir", "read_own", "replace_file", "write_private"]

_lock = threading.Lock()
_dir: str | None = None


def _ours(path: str) -> bool:
    """A real directory (not a link) owned by us that nobody else may enter."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(st.st_mode)
        and st.st_uid == os.getuid()
        and stat.S_IMODE(st.st_mode) & 0o077 == 0
    )


def private_dir() -> str:
    """This process's private scratch directory (made on first use, removed at exit).

    Returns:
        The directory's path; a new one if the last was removed or is no
        longer ours alone.
    """
    global _dir
    with _lock:
        if _dir is None or not _ours(_dir):
            # Gone (a /tmp cleaner) or tampered with: a new one, never a repair.
            _dir = tempfile.mkdtemp(prefix="lbparse-")
            atexit.register(shutil.rmtree, _dir, True)
        return _dir


def write_private(name: str, text: str) -> str:
    """Make a new file `name` in the private directory holding `text`.

    Each call makes a new file (a numbered name if `name` was taken in this
    process's directory): a file found already there is never used.

    Args:
        name: The file's name (no folder); a number is added before its
            extension when taken.
        text: What the file holds, written as UTF-8.

    Returns:
        The new file's path.

    Raises:
        OSError: No new name could be made (1,000 taken), or the write failed.
    """
    base = private_dir()
    stem, dot, ext = name.rpartition(".")
    for i in range(1000):
        candidate = name if i == 0 else f"{stem}-{i}{dot}{ext}" if dot else f"{name}-{i}"
        path = os.path.join(base, candidate)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return path
    raise OSError(f"{base}: could not create a new scratch file named like {name!r}")


def open_private(name: str) -> BinaryIO:
    """A new, empty scratch file (read and write, binary), already unlinked.

    Only this open file reaches it, and nothing is left behind, whatever way
    the process ends.

    Args:
        name: The name it is made under (see `write_private`) before it is
            unlinked.

    Returns:
        The open file, at offset 0; closing it frees the space.
    """
    path = write_private(name, "")
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    os.unlink(path)
    return os.fdopen(fd, "w+b")


def replace_file(
    path: str | os.PathLike[str], data: bytes | str, mode: int = 0o666, chmod: int | None = None
) -> None:
    """Write `data` to `path` whole or not at all, through a new file beside it.

    Readers see the old file or the new one. The new file, of a random name,
    is created with O_EXCL | O_NOFOLLOW and `mode` less the umask, never
    opened if something is there already; os.replace then renames it over
    `path`, which replaces a link at `path` rather than writing through it.

    Args:
        path: The file to write.
        data: Its new content; text is written as UTF-8.
        mode: The new file's permission bits before the umask (0o666: as
            open() would make the output).
        chmod: These permission bits exactly, whatever the umask (an existing
            file's, kept as `>` keeps them); None to leave `mode`'s.

    Raises:
        OSError: No new temporary name could be made beside `path` (100
            tried), or the write or the rename failed (the temporary file is
            removed).
    """
    target = os.fspath(path)
    folder, name = os.path.split(target)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as f:
                if chmod is not None:
                    os.fchmod(fd, chmod)
                f.write(raw)
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return
    raise OSError(f"{folder or '.'}: could not create a new temporary file for {name!r}")


def read_own(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes of `path` if only this user can have written them.

    A cache file is used only when it is ours: a regular file (not a link)
    owned by us, writable by nobody else.

    Args:
        path: The file to read.

    Returns:
        Its bytes, or None when it is absent, not a regular file, planted by
        another user or writable by others.
    """
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())  # the file opened, not whatever the name is now
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid != os.getuid()
            or stat.S_IMODE(st.st_mode) & 0o022
        ):
            return None
        return f.read()
