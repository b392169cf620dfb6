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
  a name that cannot be written, refused before any input is read: '' (no
                      name), a file name ending in / (a directory's name), a
                      part longer than NAME_MAX or a path past PATH_MAX, a
                      parent directory that is missing, read-only (a
                      read-only mount, an immutable directory, no write
                      permission), an existing file that is immutable or
                      append-only (chattr +i, +a: no rename replaces it)

A temporary file never outlives the run: it is removed when the run fails,
is interrupted, or when the rename finds the name turned into something
else (a directory). Writing to an output that fails (a full disk: ENOSPC,
EDQUOT; an I/O error) raises OutputFailed, naming the output and the cause,
never an OSError that a command could take for its input's.

The checks are repeated where a race could matter: a device opened in
place is checked again on the open file (fstat), and a regular file is
replaced by a rename, which never writes through whatever the name has
become.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import signal
import stat
import struct
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO, ClassVar

from lbparse.errors import OperationalError

__all__ = [
    "STDOUT",
    "FileOutput",
    "StreamedOutput",
    "Interrupted",
    "OutputError",
    "OutputFailed",
    "check_dir",
    "check_file",
    "check_files",
    "check_folder",
    "follow_allowed",
    "inside",
    "signals_deferred",
    "temp_name",
    "write_failed",
]

STDOUT = "-"

# Linux's limits: a part of a path (NAME_MAX, unless the filesystem says
# less) and a whole path with its NUL (PATH_MAX). Past them the kernel
# says ENAMETOOLONG, at whatever step first meets the name.
NAME_MAX = 255
PATH_MAX = 4096
# What a temporary name beside an output adds to the shortest name it can
# be cut to: "." + "." + 16 hex digits + ".tmp".
_TEMP_MIN = 22
# chattr's flags (FS_IOC_GETFLAGS, _IOR('f', 1, long)): neither an
# immutable nor an append-only file can be renamed over, even by root.
_FS_IOC_GETFLAGS = (2 << 30) | (struct.calcsize("l") << 16) | (ord("f") << 8) | 1
_IMMUTABLE_FL, _APPEND_FL = 0x10, 0x20


class OutputError(OperationalError, ValueError):
    """An output lbparse will not write (a usage error: exit status 2).

    An operational error of the LbparseError family that stays a ValueError,
    as it was: callers catch it as one. Kinds: `refused` (checked before
    anything was written: a directory, a link, the input, too long a name) and
    `write_failed` (writing it failed)."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"refused", "write_failed"})


class OutputFailed(OutputError):
    """Writing an output failed (a full disk, an I/O error).

    Exit status 2, one line naming the output. Not an OSError on purpose: a
    command that takes an OSError for its input's (a file it cannot read)
    must not take this one for it.
    """

    KINDS: ClassVar[frozenset[str]] = frozenset({"write_failed"})


def write_failed(where: str, exc: OSError) -> OutputFailed:
    """The OutputFailed of `exc`, raised while writing the output `where`.

    Args:
        where: The output as the user named it (`-o out.json`, "standard
            output").
        exc: The OSError the write raised.

    Returns:
        An OutputFailed saying "WHERE: cannot write: CAUSE" (the errno's
        words), for the caller to raise.
    """
    code = exc.errno
    why = os.strerror(code) if isinstance(code, int) and code > 0 else (exc.strerror or str(exc))
    return OutputFailed("write_failed", f"{where}: cannot write: {why}")


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a run.

    The code that was running says what it had done (`rows`) and what is on
    disk now (`kept`, `finished`).

    Args:
        signum: The signal that stopped the run (its name is the message).
    """

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.rows = 0
        self.kept: list[str] = []
        self.finished = False  # the new output was already in place


@dataclass(frozen=True)
class FileOutput:
    """A checked output file, as `check_file` found it.

    Attributes:
        option: The option that named it (`-o`, `--json`).
        path: The path as given ("-" for standard output).
        kind: "stdout", "in_place" (a device, a FIFO) or "replace" (a regular
            file, new or replaced whole).
    """

    option: str
    path: str
    kind: str

    def write(self, data: bytes | str) -> None:
        """Write `data` as the whole output.

        Standard output is written and flushed; a device or FIFO is written in
        place; a regular file is replaced whole (`replace_file`'s way, with the
        old file's permission bits).

        Args:
            data: The output's content; text is written as UTF-8.

        Raises:
            OutputFailed: The write failed (a full disk, an I/O error), naming
                the output. A BrokenPipeError on standard output is raised as it
                is: the reader left, which is no failure.
            OutputError: The place changed since it was checked (a regular
                file became something else, a device is no longer one) or
                cannot be opened or replaced; nothing is written.
        """
        if self.kind == "stdout":
            try:
                if isinstance(data, str):
                    sys.stdout.write(data)
                else:
                    sys.stdout.flush()
                    sys.stdout.buffer.write(data)
                sys.stdout.flush()
            except BrokenPipeError:
                raise  # the reader left: the caller's to say (it is no failure)
            except OSError as exc:
                raise write_failed("standard output", exc) from None
        elif self.kind == "in_place":
            _write_in_place(self, data.encode("utf-8") if isinstance(data, str) else data)
        else:
            _replace(self, data)

    @property
    def describe(self) -> str:
        """The output for a message: "standard output" or its path."""
        return "standard output" if self.kind == "stdout" else self.path


class OutputFile(io.FileIO):
    """An output's open file whose write errors are OutputFailed, naming the
    output (BrokenPipeError stays what it is: the reader left). After one
    failure the rest is dropped: the failure was said once, and a buffer
    flushed again when it is collected must not say it twice."""

    def __init__(self, fd: int, where: str, closefd: bool = True) -> None:
        super().__init__(fd, "wb", closefd=closefd)
        self.where = where
        self.failed = False

    def write(self, data: object) -> int:
        if self.failed:
            return len(memoryview(data))  # type: ignore[arg-type]
        try:
            return super().write(data)  # type: ignore[arg-type]
        except BrokenPipeError:
            self.failed = True  # what a later flush (at exit) would write has no reader
            raise
        except OSError as exc:
            self.failed = True
            raise write_failed(self.where, exc) from None


def temp_name(path: str, suffix: str = ".tmp") -> str:
    """A new random name beside `path` for its temporary file (or directory).

    Args:
        path: The output the temporary file will be renamed over.
        suffix: The name's ending.

    Returns:
        `.NAME.<16 hex>SUFFIX` in `path`'s folder, NAME cut short so that the
        name fits NAME_MAX.
    """
    folder, name = os.path.split(path)
    room = _name_max(folder or ".") - (_TEMP_MIN - len(".tmp") + len(suffix))
    stem = os.fsdecode(os.fsencode(name)[: max(room, 0)])
    return os.path.join(folder, f".{stem}.{secrets.token_hex(8)}{suffix}")


def _new_beside(path: str, mode: int, where: str) -> tuple[str, int]:
    """A new file of a random name beside `path` (O_EXCL | O_NOFOLLOW), open."""
    for _ in range(100):
        temp = temp_name(path)
        try:
            return temp, os.open(
                temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode
            )
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputError(
                "write_failed", f"{where}: cannot make a file beside it: {exc.strerror}"
            ) from None
    raise OutputError("write_failed", f"{where}: cannot make a new file beside it")


def _rename_over(temp: str, path: str, where: str) -> None:
    """`temp` renamed over `path`; on failure `temp` is removed and the
    reason said in one line (a name turned into a directory meanwhile)."""
    try:
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        try:
            now = os.lstat(path)
        except OSError:
            now = None
        if now is not None and not stat.S_ISREG(now.st_mode):
            raise OutputError(
                "refused",
                f"{where}: became {_kind(now.st_mode)} after it was checked; "
                "not replaced, nothing written",
            ) from None
        raise OutputError(
            "write_failed", f"{where}: cannot replace it: {exc.strerror}; nothing written"
        ) from None


class StreamedOutput:
    """An output written as a stream (a command's records as they come).

    Checked when made (`check_file`), then opened, then committed or
    discarded. A regular file (or a new name) is written as a new file of a
    random name beside it (O_EXCL | O_NOFOLLOW, the old file's permission
    bits) and renamed over it by `commit`; `discard` leaves the old file as
    it was. A device or FIFO is written in place. With `grow_new`, a name
    that is absent is made at once under its own name (O_EXCL | O_NOFOLLOW),
    so that `tail -f` follows a recording as it grows: there is no old file
    to keep, and `discard` removes it. The open file's write errors are
    OutputFailed (OutputFile); a commit that fails removes the new file.

    Args:
        path: The output's path (not "-": standard output is no stream here).
        option: The option that named it, for messages.
        inputs: The run's inputs: the output may not be one of them.
        grow_new: Make an absent `path` under its own name at once, so that it
            can be followed while written.

    Raises:
        OutputError: `check_file` refuses `path` (one line saying why).
    """

    def __init__(
        self, path: str, option: str, inputs: Sequence[str] = (), *, grow_new: bool = False
    ) -> None:
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

    @property
    def where(self) -> str:
        """The output for a message: its option and path."""
        return f"{self.option} {self.path}"

    def open(self) -> BinaryIO:
        """Open the output for writing.

        Returns:
            A buffered binary file: the device or FIFO itself, the new file under
            `path` (`grow_new`), or a new file of a random name beside `path`.
            Its write errors are OutputFailed.

        Raises:
            OutputError: The place changed since it was checked (a name that
                appeared, a device that became something else) or cannot be
                opened.
        """
        if self.in_place:
            return self._open_in_place()
        if self.grow:
            return self._make(self.path)
        self.temp, fd = _new_beside(self.path, self.mode, self.where)
        return self._wrap(fd)

    def _wrap(self, fd: int) -> BinaryIO:
        return io.BufferedWriter(OutputFile(fd, self.where))

    def _make(self, path: str) -> BinaryIO:
        """A new file at `path` (never one that exists, never through a link)."""
        try:
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, self.mode
            )
        except FileExistsError:  # made by someone else since it was checked
            raise OutputError(
                "refused", f"{self.where}: appeared after it was checked; not written"
            ) from None
        except OSError as exc:
            raise OutputError(
                "write_failed", f"{self.where}: cannot write: {exc.strerror}"
            ) from None
        self.temp = path
        return self._wrap(fd)

    def _open_in_place(self) -> BinaryIO:
        # No O_CREAT, no O_TRUNC: nothing is made or emptied through a link;
        # what was opened is checked, not what the name was a moment ago.
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as exc:
            raise OutputError(
                "write_failed", f"{self.where}: cannot write: {exc.strerror}"
            ) from None
        st = os.fstat(fd)
        if not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            os.close(fd)
            raise OutputError(
                "refused",
                f"{self.where}: became {_kind(st.st_mode)} after it was checked; not written",
            )
        return self._wrap(fd)

    def commit(self) -> None:
        """Put the written output in place: rename the new file over `path`.

        Nothing to do for a device, a FIFO or a file grown under its own name.

        Raises:
            OutputError: The rename failed (the name became a directory
                meanwhile, a read-only place); the new file is removed.
        """
        temp, self.temp = self.temp, None
        if temp is not None and temp != self.path:
            _rename_over(temp, self.path, self.where)

    def discard(self) -> None:
        """Remove what was written, leaving an old file at `path` as it was."""
        if self.temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.temp)
            self.temp = None


def follow_allowed(path: str, link: os.stat_result) -> bool:
    """Whether the link `path` may be followed: the kernel's fs.protected_symlinks rule.

    Not another user's link in a sticky world-writable directory (/tmp),
    unless that user owns the directory.

    Args:
        path: The link.
        link: Its lstat.

    Returns:
        True when the link is ours, or its directory is not sticky and
        world-writable, or the link's owner owns the directory.
    """
    if link.st_uid == os.getuid():
        return True
    try:
        d = os.stat(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    shared = d.st_mode & stat.S_ISVTX and d.st_mode & stat.S_IWOTH
    return not shared or d.st_uid == link.st_uid


def check_file(path: str, option: str, inputs: Sequence[str] = ()) -> FileOutput:
    """Check the output file `path` before anything is read.

    Nothing is read, made or opened for writing: this is what every command
    calls before it reads any input (the module's docstring says what each
    kind of path gets).

    Args:
        path: The output as given; "-" is standard output.
        option: The option that named it, for messages.
        inputs: The run's inputs: the output may not be one of them.

    Returns:
        The output as it will be written.

    Raises:
        OutputError: It will not be written, with one line saying why (a
            directory, a link to a regular file, an input, a missing or
            read-only folder, a name too long, an immutable file...).
    """
    if path == STDOUT:
        return FileOutput(option, path, "stdout")
    where = _where(option, path)
    _check_name(path, where)
    if path.endswith("/") and not os.path.isdir(path):
        raise OutputError(
            "refused", f"{where}: ends in '/', the name of a directory; give the file's name"
        )
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        check_folder(path, where)
        return FileOutput(option, path, "replace")
    except OSError as exc:
        raise OutputError("refused", f"{where}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        st = _followed(path, st, where)
    elif stat.S_ISREG(st.st_mode):
        check_folder(path, where)
        _check_replaceable(path, st, where)
    _not_an_input(st, where, inputs)
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        if not _access(path, os.W_OK):
            raise OutputError("refused", f"{where}: cannot write: {_why_not_writable(path)}")
        return FileOutput(option, path, "in_place")
    if stat.S_ISREG(st.st_mode):
        return FileOutput(option, path, "replace")
    raise OutputError(
        "refused",
        f"{where}: is {_kind(st.st_mode)}; lbparse writes files, devices "
        "such as /dev/null, FIFOs or - (standard output)",
    )


def check_files(
    outputs: Sequence[tuple[str, str | None]], inputs: Sequence[str] = ()
) -> dict[str, FileOutput]:
    """Check each output a command was given, and that no two are the same place.

    Args:
        outputs: (option, path) pairs; a path of None was not asked for.
        inputs: The run's inputs: no output may be one of them.

    Returns:
        Each checked output by its option.

    Raises:
        OutputError: An output is refused (`check_file`), or two outputs
            write to the same file or both to standard output (devices aside:
            both write in place).
    """
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
            raise OutputError(
                "refused",
                f"{seen[key].option} and {out.option} both write to "
                f"{out.describe}; give each its own",
            )
        seen[key] = out
    return checked


def check_dir(path: str, option: str, inputs: Sequence[str] = (), deepest: int = 0) -> None:
    """Check an output directory before anything is read.

    It may be absent (it is made, with the directories it needs, in the
    nearest one that exists, which must be writable), a writable directory, or
    a link to one that may be followed; never an input, inside one, or holding
    one. A URL (hdfs://, s3://) is another filesystem's to judge: not checked.

    Args:
        path: The directory as given.
        option: The option that named it, for messages.
        inputs: The run's inputs.
        deepest: The bytes the run adds to the directory's absolute path at
            most (its files' names), which must fit PATH_MAX; 0 not to check.

    Raises:
        OutputError: It will not be written, with one line saying why.
    """
    if "://" in path:
        return  # another filesystem (hdfs://, s3://): its own rules
    where = _where(option, path)
    _check_name(path, where, "give a directory's name (. for this one)")
    full = len(os.fsencode(os.path.abspath(path))) + deepest
    if deepest and full >= PATH_MAX:
        raise OutputError(
            "refused",
            f"{where}: too long: what the run writes in it would have paths of "
            f"{full} bytes, past PATH_MAX ({PATH_MAX - 1}); give a shorter one",
        )
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError("refused", f"{where}: {exc.strerror}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        st = _link_target(path, st, where)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise OutputError("refused", f"{where}: is {_kind(st.st_mode)}, not a directory")
    if st is not None:
        if not _access(path, os.W_OK | os.X_OK):
            raise OutputError("refused", f"{where}: cannot write in it: {_why_not_writable(path)}")
    else:
        _check_ancestor(path, where)
    real = os.path.realpath(path)
    for inp in inputs:
        if "://" in inp or inp == STDOUT or not os.path.exists(inp):
            continue
        other = os.path.realpath(inp)
        if inside(real, other) and os.path.isdir(other):
            raise OutputError(
                "refused",
                f"{where}: is {'the input' if real == other else 'inside the input'}"
                f" {inp}; write the output elsewhere",
            )


def _check_ancestor(path: str, where: str) -> None:
    """The nearest directory of `path` that exists: where the missing ones are made."""
    parent = path.rstrip("/") or "/"
    for _ in range(parent.count("/") + 2):  # one step a part of the path
        parent = os.path.dirname(parent) or "."
        try:
            st = os.stat(parent)
        except FileNotFoundError:
            if parent in (".", "/"):
                break
            continue
        except OSError as exc:
            raise OutputError("refused", f"{where}: {parent}: {exc.strerror}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise OutputError(
                "refused", f"{where}: {parent} is {_kind(st.st_mode)}, not a directory"
            )
        if not _access(parent, os.W_OK | os.X_OK):
            raise OutputError(
                "refused",
                f"{where}: cannot make it in {os.path.abspath(parent)}: "
                f"{_why_not_writable(parent)}",
            )
        return


def inside(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or under it.

    Args:
        path: An absolute, resolved path.
        folder: An absolute, resolved path.

    Returns:
        True when `path` is `folder` or below it (False across drives or
        when one is relative).
    """
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:
        return False


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block is done, then let them take their course.

    A swap of outputs must not stop half way. Only the main thread receives
    Python's signal handlers; elsewhere the block just runs.

    Yields:
        None, once: the block runs with the signals held; the first one that
        came is raised again, to the caller's handler, when it ends.
    """
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


def _link_target(path: str, link: os.stat_result, where: str, missing: str = "") -> os.stat_result:
    """What the link at `path` (its lstat: `link`) points to, if the kernel's
    rule lets it be followed; `missing`: said after a target that is not there."""
    if not follow_allowed(path, link):
        raise OutputError(
            "refused",
            f"{where}: a symbolic link of another user (uid {link.st_uid}) in a "
            "shared sticky directory; not followed, not replaced",
        )
    try:
        return os.stat(path)
    except OSError as exc:
        raise OutputError(
            "refused", f"{where}: a symbolic link to {os.readlink(path)!r}: {exc.strerror}{missing}"
        ) from None


def _followed(path: str, link: os.stat_result, where: str) -> os.stat_result:
    """What the link at `path` points to, if lbparse may write through it."""
    target = os.readlink(path)
    st = _link_target(path, link, where, "; lbparse does not make files through links")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return st
    raise OutputError(
        "refused",
        f"{where}: a symbolic link to {target!r} ({_kind(st.st_mode)}); lbparse "
        "neither replaces a link nor writes a file through one: give "
        f"{os.path.realpath(path)} itself, or - for standard output",
    )


def check_folder(path: str, where: str) -> None:
    """Check the directory the output file `path` is made in.

    The output is a new file of a random name there, renamed over `path`: the
    directory must be there, a directory, writable, with room in PATH_MAX for
    that new file's name. Its name is taken as the kernel will take it
    (`nodir/..` is not `.` while nodir is missing).

    Args:
        path: The output file.
        where: The output as the user named it, for messages.

    Raises:
        OutputError: The directory is missing, not a directory, not writable,
            or too long for the new file's name.
    """
    folder = os.path.dirname(path) or "."
    shown = os.path.abspath(folder)
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        raise OutputError("refused", f"{where}: no such directory {shown}") from None
    except OSError as exc:
        raise OutputError("refused", f"{where}: {shown}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError("refused", f"{where}: {shown} is {_kind(st.st_mode)}, not a directory")
    if not _access(folder, os.W_OK | os.X_OK):
        raise OutputError(
            "refused", f"{where}: cannot make a file in {shown}: {_why_not_writable(folder)}"
        )
    if len(os.fsencode(folder)) + 1 + _TEMP_MIN >= PATH_MAX:
        raise OutputError(
            "refused",
            f"{where}: too long: no room in PATH_MAX ({PATH_MAX - 1} bytes) for "
            "the new file written beside it; give a shorter path",
        )


def _where(option: str, path: str) -> str:
    return f"{option} {path if path else repr(path)}"


def _check_name(
    path: str, where: str, empty: str = "give a name, or - for standard output"
) -> None:
    """A name the kernel takes: not empty (`empty`: what to give instead), no
    NUL, each part within NAME_MAX, the whole within PATH_MAX (said here,
    rather than ENAMETOOLONG later)."""
    if not path:
        raise OutputError("refused", f"{where}: an empty name; {empty}")
    raw = os.fsencode(path)
    if b"\0" in raw:
        raise OutputError("refused", f"{where}: a name with a NUL byte in it")
    if len(raw) >= PATH_MAX:
        raise OutputError(
            "refused",
            f"{where}: too long: a path of {len(raw)} bytes, past PATH_MAX ({PATH_MAX - 1})",
        )
    limit = _name_max(_existing_dir(path))
    for part in raw.split(b"/"):
        if len(part) > limit:
            raise OutputError(
                "refused",
                f"{where}: too long: a name of {len(part)} bytes in it, past "
                f"NAME_MAX ({limit} bytes a name)",
            )


def _existing_dir(path: str) -> str:
    """The nearest directory above `path` that exists (for its limits)."""
    parent = path
    for _ in range(path.count("/") + 2):
        parent = os.path.dirname(parent.rstrip("/")) or ("/" if path.startswith("/") else ".")
        if os.path.isdir(parent):
            return parent
        if parent in (".", "/"):
            break
    return "."


def _name_max(folder: str) -> int:
    try:
        return min(os.pathconf(folder, "PC_NAME_MAX"), NAME_MAX)
    except (OSError, ValueError):
        return NAME_MAX


def _access(path: str, mode: int) -> bool:
    """os.access as the process is (its effective ids, where the OS says so).
    The kernel answers for a read-only mount and an immutable inode too,
    for root as well."""
    effective = os.access in os.supports_effective_ids
    return os.access(path, mode, effective_ids=effective)


def _why_not_writable(path: str) -> str:
    """Why `path` (found not writable) is not: the mount, chattr, or permissions."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "Read-only file system"
    except OSError:
        pass
    flags = _inode_flags(path)
    if flags & _IMMUTABLE_FL:
        return "immutable (chattr +i)"
    if flags & _APPEND_FL:
        return "append-only (chattr +a)"
    return "Permission denied"


def _inode_flags(path: str) -> int:
    """chattr's flags of `path` (0 where they cannot be read). Opened without
    following a link and without blocking: a FIFO is never waited on."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        import fcntl

        got = fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8))
        return int.from_bytes(got[:4], sys.byteorder)
    except OSError:
        return 0
    finally:
        os.close(fd)


def _check_replaceable(path: str, st: os.stat_result, where: str) -> None:
    """An existing file a rename can replace: not immutable or append-only,
    not another user's in a sticky directory (unless we may: root, or the
    directory is ours)."""
    flags = _inode_flags(path)
    if flags & (_IMMUTABLE_FL | _APPEND_FL):
        kind = "immutable (chattr +i)" if flags & _IMMUTABLE_FL else "append-only (chattr +a)"
        raise OutputError("refused", f"{where}: is {kind}; it cannot be replaced")
    uid = os.geteuid()
    if uid == 0 or st.st_uid == uid:
        return
    try:
        d = os.stat(os.path.dirname(path) or ".")
    except OSError:
        return
    if d.st_mode & stat.S_ISVTX and d.st_uid != uid:
        raise OutputError(
            "refused",
            f"{where}: belongs to uid {st.st_uid} in a sticky directory; "
            "only its owner can replace it",
        )


def _not_an_input(st: os.stat_result, where: str, inputs: Sequence[str]) -> None:
    for inp in inputs:
        if inp == STDOUT or "://" in inp:
            continue
        try:
            other = os.stat(inp)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            raise OutputError(
                "refused", f"{where}: is the input {inp}; refusing to overwrite an input"
            )


def _identity(path: str) -> object:
    try:
        st = os.stat(path)
        return (st.st_dev, st.st_ino)
    except OSError:
        return os.path.abspath(path)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _write_in_place(out: FileOutput, raw: bytes) -> None:
    # No O_CREAT: this never makes a file, and a device stays a device.
    where = _where(out.option, out.path)
    try:
        fd = os.open(out.path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise OutputError("write_failed", f"{where}: cannot write: {exc.strerror}") from None
    with OutputFile(fd, where) as f:
        st = os.fstat(fd)  # what was opened, whatever the name is now
        if not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            raise OutputError(
                "refused", f"{where}: became {_kind(st.st_mode)} after it was checked; not written"
            )
        _write_all(f, raw)


def _write_all(f: OutputFile, raw: bytes) -> None:
    view = memoryview(raw)
    while view:
        view = view[f.write(view) :]


def _replace(out: FileOutput, data: bytes | str) -> None:
    """`data` to the file `out.path`, whole or not at all: a new file of a
    random name beside it (O_EXCL | O_NOFOLLOW: nothing planted there is
    written through), renamed over it, removed on any failure."""
    where = _where(out.option, out.path)
    keep = None
    try:
        st = os.lstat(out.path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):  # changed since it was checked
            raise OutputError(
                "refused", f"{where}: became {_kind(st.st_mode)} after it was checked; not replaced"
            )
        keep = stat.S_IMODE(st.st_mode)  # as `>` keeps the file's permissions
    raw = data.encode("utf-8") if isinstance(data, str) else data
    temp, fd = _new_beside(out.path, 0o666, where)
    try:
        with OutputFile(fd, where) as f:
            if keep is not None:
                os.fchmod(fd, keep)
            _write_all(f, raw)
        _rename_over(temp, out.path, where)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
