"""Output paths, checked and written the way coreutils treat them (issue #25).

Every command checks each output it will write before it does any work
(`check_files`, `check_dir`): a mistake is one line, exit 2, before a
capture is read or Spark starts. What each kind of path gets:

  -                   standard output
  absent              a new regular file, made whole (see below)
  regular file        replaced whole: a new file of a random name in the same
                      directory (O_CREAT | O_EXCL | O_NOFOLLOW, the old file's
                      permission bits), renamed over it; readers see the old
                      file or the new one, never half of it
  character device,   opened for writing and written in place, never renamed
  FIFO                over (`-o /dev/null` leaves /dev/null a device)
  symbolic link       followed only to a character device or a FIFO
                      (/dev/stdout, /dev/fd/N), and only where the kernel's
                      protected_symlinks rule would follow it (not another
                      user's link in a sticky world-writable directory),
                      whatever that sysctl says; a link to a regular file is
                      refused: lbparse neither replaces a link nor writes a
                      file through one (give the file itself)
  directory, block device, socket: refused
  an input            refused: the same file (device and inode) as an input;
                      for a directory output, one inside an input directory
                      or holding one

The checks are repeated where a race could matter: a device opened in
place is checked again on the open file (fstat), and a regular file is
replaced by a rename, which never writes through whatever the name has
become.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import stat
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO, Iterator, Sequence

from lbparse.scratch import replace_file

__all__ = ["STDOUT", "FileOutput", "StreamedOutput", "Interrupted", "OutputError", "check_dir", "check_file",
           "check_files", "follow_allowed", "inside", "signals_deferred"]

STDOUT = "-"


class OutputError(ValueError):
    """An output lbparse will not write (a usage error: exit status 2)."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a run. The code that was running says what it
    had done (`rows`) and what is on disk now (`kept`, `finished`)."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.rows = 0
        self.kept: list[str] = []
        self.finished = False  # the new output was already in place


@dataclass(frozen=True)
class FileOutput:
    """A checked output file: `kind` is "stdout", "in_place" (a device, a
    FIFO) or "replace" (a regular file, new or replaced whole)."""

    option: str
    path: str
    kind: str

    def write(self, data: bytes | str) -> None:
        if self.kind == "stdout":
            if isinstance(data, str):
                sys.stdout.write(data)
            else:
                sys.stdout.flush()
                sys.stdout.buffer.write(data)
            sys.stdout.flush()
        elif self.kind == "in_place":
            _write_in_place(self, data.encode("utf-8") if isinstance(data, str) else data)
        else:
            _replace(self, data)

    @property
    def describe(self) -> str:
        return "standard output" if self.kind == "stdout" else self.path


class StreamedOutput:
    """An output written as a stream (a command's records as they come):
    checked when made (`check_file`), then opened, then committed or
    discarded. A regular file (or a new name) is written as a new file of
    a random name beside it (O_EXCL | O_NOFOLLOW, the old file's permission
    bits) and renamed over it by `commit`; `discard` leaves the old file as
    it was. A device or FIFO is written in place. With `grow_new`, a name
    that is absent is made at once under its own name (O_EXCL | O_NOFOLLOW),
    so that `tail -f` follows a recording as it grows: there is no old file
    to keep, and `discard` removes it."""

    def __init__(self, path: str, option: str, inputs: Sequence[str] = (), *,
                 grow_new: bool = False) -> None:
        self.path = path
        self.temp: str | None = None
        self.option = option
        checked = check_file(path, option, inputs)
        self.in_place = checked.kind == "in_place"
        self.grow = False
        try:
            self.mode = 0 if self.in_place else stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            self.mode, self.grow = 0o666, grow_new

    def open(self) -> BinaryIO:
        if self.in_place:
            return self._open_in_place()
        if self.grow:
            return self._make(self.path)
        folder, name = os.path.split(self.path)
        for _ in range(100):
            temp = os.path.join(folder, f".{name}.{secrets.token_hex(8)}.tmp")
            try:
                return self._make(temp)
            except FileExistsError:
                continue
        raise OutputError(f"{self.option} {self.path}: cannot make a new file beside it")

    def _make(self, path: str) -> BinaryIO:
        """A new file at `path` (never one that exists, never through a link)."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, self.mode)
        except FileExistsError:
            if path == self.path:  # made by someone else since it was checked
                raise OutputError(f"{self.option} {self.path}: appeared after it was "
                                  "checked; not written") from None
            raise
        except OSError as exc:
            raise OutputError(f"{self.option} {self.path}: cannot write: "
                              f"{exc.strerror}") from None
        self.temp = path
        return os.fdopen(fd, "wb")

    def _open_in_place(self) -> BinaryIO:
        # No O_CREAT, no O_TRUNC: nothing is made or emptied through a link;
        # what was opened is checked, not what the name was a moment ago.
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NOCTTY)
        except OSError as exc:
            raise OutputError(f"{self.option} {self.path}: cannot write: {exc.strerror}") from None
        st = os.fstat(fd)
        if not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            os.close(fd)
            raise OutputError(f"{self.option} {self.path}: became {_kind(st.st_mode)} after it "
                              "was checked; not written")
        return os.fdopen(fd, "wb")

    def commit(self) -> None:
        if self.temp is not None and self.temp != self.path:
            os.replace(self.temp, self.path)
        self.temp = None

    def discard(self) -> None:
        if self.temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.temp)
            self.temp = None


def follow_allowed(path: str, link: os.stat_result) -> bool:
    """Whether the link `path` (its lstat: `link`) may be followed: the kernel's
    fs.protected_symlinks rule. Not another user's link in a sticky
    world-writable directory (/tmp), unless that user owns the directory."""
    if link.st_uid == os.getuid():
        return True
    try:
        d = os.stat(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    shared = d.st_mode & stat.S_ISVTX and d.st_mode & stat.S_IWOTH
    return not shared or d.st_uid == link.st_uid


def check_file(path: str, option: str, inputs: Sequence[str] = ()) -> FileOutput:
    """The output file `path` (given with `option`) as it will be written, or
    OutputError saying in one line why it will not be (see the module doc)."""
    if path == STDOUT:
        return FileOutput(option, path, "stdout")
    where = f"{option} {path}"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        _check_folder(path, where)
        return FileOutput(option, path, "replace")
    except OSError as exc:
        raise OutputError(f"{where}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        st = _followed(path, st, where)
    elif stat.S_ISREG(st.st_mode):
        _check_folder(path, where)
    _not_an_input(st, where, inputs)
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return FileOutput(option, path, "in_place")
    if stat.S_ISREG(st.st_mode):
        return FileOutput(option, path, "replace")
    raise OutputError(f"{where}: is {_kind(st.st_mode)}; lbparse writes files, devices "
                      "such as /dev/null, FIFOs or - (standard output)")


def check_files(outputs: Sequence[tuple[str, str | None]], inputs: Sequence[str] = ()
                ) -> dict[str, FileOutput]:
    """Each (option, path) given (None: not asked) checked, by option; two
    outputs at the same place are refused (devices aside: both write in place)."""
    checked: dict[str, FileOutput] = {}
    for option, path in outputs:
        if path is not None:
            checked[option] = check_file(path, option, inputs)
    seen: dict[object, FileOutput] = {}
    for out in checked.values():
        if out.kind == "in_place":
            continue
        key = "-" if out.kind == "stdout" else _identity(out.path)
        if key in seen:
            raise OutputError(f"{seen[key].option} and {out.option} both write to "
                              f"{out.describe}; give each its own")
        seen[key] = out
    return checked


def check_dir(path: str, option: str, inputs: Sequence[str] = ()) -> None:
    """An output directory: absent (it is made), a directory, or a link to one
    that may be followed; never an input, inside one, or holding one."""
    if "://" in path:
        return  # another filesystem (hdfs://, s3://): its own rules
    where = f"{option} {path}"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{where}: {exc.strerror}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        st = _link_target(path, st, where)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{where}: is {_kind(st.st_mode)}, not a directory")
    real = os.path.realpath(path)
    for inp in inputs:
        if "://" in inp or inp == STDOUT or not os.path.exists(inp):
            continue
        other = os.path.realpath(inp)
        if inside(real, other) and os.path.isdir(other):
            raise OutputError(f"{where}: is {'the input' if real == other else 'inside the input'}"
                              f" {inp}; write the output elsewhere")


def inside(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or under it (both absolute and resolved)."""
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:
        return False


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done (a swap of outputs must
    not stop half way), then take their course. Only the main thread
    receives Python's signal handlers; elsewhere the block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in saved:
        signal.signal(s, lambda n, _f: got.append(n))
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        if got:
            signal.raise_signal(got[0])  # now, to the handler the caller had


def _link_target(path: str, link: os.stat_result, where: str, missing: str = ""
                 ) -> os.stat_result:
    """What the link at `path` (its lstat: `link`) points to, if the kernel's
    rule lets it be followed; `missing`: said after a target that is not there."""
    if not follow_allowed(path, link):
        raise OutputError(f"{where}: a symbolic link of another user (uid {link.st_uid}) in a "
                          "shared sticky directory; not followed, not replaced")
    try:
        return os.stat(path)
    except OSError as exc:
        raise OutputError(f"{where}: a symbolic link to {os.readlink(path)!r}: "
                          f"{exc.strerror}{missing}") from None


def _followed(path: str, link: os.stat_result, where: str) -> os.stat_result:
    """What the link at `path` points to, if lbparse may write through it."""
    target = os.readlink(path)
    st = _link_target(path, link, where, "; lbparse does not make files through links")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return st
    raise OutputError(f"{where}: a symbolic link to {target!r} ({_kind(st.st_mode)}); lbparse "
                      "neither replaces a link nor writes a file through one: give "
                      f"{os.path.realpath(path)} itself, or - for standard output")


def _check_folder(path: str, where: str) -> None:
    """The directory a new file is made in (then renamed over `path`)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OutputError(f"{where}: no such directory {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{where}: cannot make a file in {folder} (permission denied)")


def _not_an_input(st: os.stat_result, where: str, inputs: Sequence[str]) -> None:
    for inp in inputs:
        if inp == STDOUT or "://" in inp:
            continue
        try:
            other = os.stat(inp)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            raise OutputError(f"{where}: is the input {inp}; refusing to overwrite an input")


def _identity(path: str) -> object:
    try:
        st = os.stat(path)
        return (st.st_dev, st.st_ino)
    except OSError:
        return os.path.abspath(path)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def _write_in_place(out: FileOutput, raw: bytes) -> None:
    # No O_CREAT: this never makes a file, and a device stays a device.
    fd = os.open(out.path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    with os.fdopen(fd, "wb") as f:
        st = os.fstat(fd)  # what was opened, whatever the name is now
        if not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            raise OutputError(f"{out.option} {out.path}: became {_kind(st.st_mode)} after it "
                              "was checked; not written")
        f.write(raw)


def _replace(out: FileOutput, data: bytes | str) -> None:
    keep = None
    try:
        st = os.lstat(out.path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):  # changed since it was checked
            raise OutputError(f"{out.option} {out.path}: became {_kind(st.st_mode)} after it "
                              "was checked; not replaced")
        keep = stat.S_IMODE(st.st_mode)  # as `>` keeps the file's permissions
    replace_file(out.path, data, chmod=keep)
