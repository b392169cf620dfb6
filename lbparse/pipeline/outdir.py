"""The pipeline's output directory: checked before Spark starts, written beside
the old output, swapped in at the end (issue #25).

What a run writes under DIR: its tables, DIR/messages and one per payload
type (DIR/proto_Message, ...: `tables_written`), DIR/entries (only when a
Liftbridge data directory is among the inputs) and DIR/summary.json. A
table the run writes replaces the old one even when it has no rows (then
the old one is moved away and none is there after: its rows were not this
run's). Nothing else under DIR is touched: a table this run does not
write stays (`kept`), and a user's own files elsewhere in DIR stay.

Before any work (`check`): DIR is a directory or absent (lbparse.outputs:
not an input, not inside one; a directory it can write in, or one it can
make: not read-only, not immutable, its files' paths within PATH_MAX:
`check_location`, which `lbparse pipeline` calls before it reads any
input), and each name the run writes is absent, or
what an earlier run left. Without --overwrite an earlier run's table or
summary is refused; what a run that never finished left (a table holding
only _temporary, a summary saying "outcome": "failed") is replaced. With
--overwrite a table is replaced only if it holds nothing but what a run
writes (part-*.parquet, _SUCCESS; and what runs before one table per
type wrote: partition directories of part files, _common_metadata): a
user's file inside it makes the run refuse, rather than delete it. A
symbolic link at any of the names is refused, with or without
--overwrite: lbparse neither writes through it nor replaces it.

While it runs (`make_staging`, `swap`): everything new goes to a hidden
directory of DIR, `.lbparse-staging-PID-RANDOM`, and is moved into place by
renames once the summary is written: first the old summary moves out, then
each table, the new summary last; the old ones go to the staging directory,
which is removed after. The swap is a few renames on one filesystem, done
with SIGINT and SIGTERM held back; a failure in it moves everything back.
An interrupted or failed run removes its staging directory and leaves the
old output as it was, with its own summary. A staging directory of a run
that was killed (SIGKILL: nothing could clean up) is removed by the next
run into DIR once its process is gone.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from lbparse.columnar.tables import GRPC_TABLES, MESSAGES, table_names
from lbparse.outputs import OutputError, check_dir, inside

__all__ = [
    "ENTRIES_DIR",
    "MESSAGES_DIR",
    "SUMMARY_FILE",
    "OutPlan",
    "check",
    "check_location",
    "clear_stale",
    "make_staging",
    "swap",
    "tables_written",
]

MESSAGES_DIR = MESSAGES
ENTRIES_DIR = (
    "entries"  # lbparse.pipeline.datadir_entries.ENTRIES_DIR (not imported: it loads pyspark)
)
SUMMARY_FILE = "summary.json"
# The partition directories of the layout before one table per type (an
# earlier run's output, replaced with --overwrite like any other).
LEGACY_PARTITIONS = {MESSAGES_DIR: "msg_type_name", ENTRIES_DIR: "stream"}
STAGING_PREFIX = ".lbparse-staging-"
_STAGING = re.compile(re.escape(STAGING_PREFIX) + r"(\d+)-[0-9a-f]+")
_PART = re.compile(r"part-[\w.-]*\.parquet")


@dataclass
class OutPlan:
    """What a run will do to DIR.

    Attributes:
        out: DIR, as given (a local path or a URI).
        writes: The names the run writes in DIR: its tables, then the summary.
        replaces: The paths of an earlier run's output that it replaces
            (--overwrite).
        leftovers: The paths an unfinished run left, which it replaces.
        kept: The paths of tables it does not write, left as they are.
    """

    out: str
    writes: tuple[str, ...]
    replaces: list[str] = field(default_factory=list)  # an earlier run's, replaced (--overwrite)
    leftovers: list[str] = field(default_factory=list)  # an unfinished run's, replaced
    kept: list[str] = field(default_factory=list)  # tables this run does not write

    @property
    def previous(self) -> bool:
        """Whether DIR holds an earlier run's output (kept if this run stops)."""
        return bool(self.replaces or self.kept)

    def path(self, name: str) -> str:
        """The path (or URI) of a name in DIR.

        Args:
            name: A table or SUMMARY_FILE.

        Returns:
            DIR/name, a local DIR made absolute.
        """
        return _join(self.out, name)


def tables_written(writes_entries: bool) -> tuple[str, ...]:
    """The tables a run writes, whatever the rows (their rows come from the same inputs).

    Messages, every payload type's, the traffic tables and the gRPC ones,
    and entries with data directories.

    Args:
        writes_entries: Whether a Liftbridge data directory is among the
            inputs (then DIR/entries is written too).

    Returns:
        The tables' names, entries last.
    """
    tables = (*table_names(), *GRPC_TABLES)
    return (*tables, ENTRIES_DIR) if writes_entries else tables


def _deepest() -> int:
    """The most bytes a run adds to DIR's path: a task's file in the staging
    directory (STAGING-PID-HEX/_temporary/RUN/ATTEMPT/TABLE/part-HEX.parquet),
    with the largest pid and Spark ids there can be."""
    staging = f"/{STAGING_PREFIX}{2**22}-{'0' * 12}"
    attempt = f"/_temporary/{'0' * 12}/stage{2**31}-task{2**31}-attempt{2**31}"
    table = "/" + max(tables_written(True), key=len)
    return len(staging + attempt + table + f"/part-{'0' * 12}.parquet")


def check_location(out: str, inputs: Sequence[str], option: str = "-o/--output") -> None:
    """Check DIR as a place to write, before the pipeline reads any input.

    A writable directory, or one that can be made; its files' paths within
    PATH_MAX (lbparse.outputs.check_dir): what `check` looks at first. A URI
    is not checked here.

    Args:
        out: DIR, a local path or a URI.
        inputs: The input paths (DIR may not be one, nor inside one).
        option: The option that named DIR, as the error says it.

    Raises:
        OutputError: DIR cannot be written (one line).
    """
    if "://" not in out:
        check_dir(out, option, inputs, deepest=_deepest())


def check(
    out: str,
    overwrite: bool,
    inputs: Sequence[str],
    writes_entries: bool,
    option: str = "-o/--output",
) -> OutPlan:
    """What writing DIR would replace, checked before any work.

    Args:
        out: DIR, a local path or a URI.
        overwrite: Whether an earlier run's output may be replaced
            (--overwrite).
        inputs: The input paths: none may be inside what the run replaces.
        writes_entries: Whether the run writes DIR/entries (data directories
            among the inputs).
        option: The option that named DIR, as the error says it.

    Returns:
        The plan: what the run writes, replaces and keeps.

    Raises:
        OutputError: One line, before any work: DIR cannot be written, or a
            name the run writes is a symbolic link, is not a directory (a
            table) or a file (the summary), holds an input, is an earlier
            run's and `overwrite` is not given, or is a table holding files
            a run does not write.
    """
    plan = OutPlan(out, (*tables_written(writes_entries), SUMMARY_FILE))
    if "://" in out:
        _check_remote(plan, overwrite)
        return plan
    check_location(out, inputs, option)
    for name in plan.writes:
        path = plan.path(name)
        _not_an_input(path, inputs)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(
                "refused",
                f"{path} is a symbolic link (to {os.readlink(path)!r}); lbparse "
                "neither writes through nor replaces it: remove it first",
            )
        if name == SUMMARY_FILE:
            _check_summary(plan, path, st, overwrite)
        else:
            _check_table(plan, name, path, st, overwrite)
    if not writes_entries and os.path.lexists(plan.path(ENTRIES_DIR)):
        plan.kept.append(plan.path(ENTRIES_DIR))
    return plan


def _check_table(plan: OutPlan, name: str, path: str, st: os.stat_result, overwrite: bool) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError("refused", f"{path} exists and is not a directory; remove it first")
    names = set(os.listdir(path))
    if names <= {"_temporary"}:  # a run killed before it committed: nothing to keep
        plan.leftovers.append(path)
        return
    if not overwrite:
        raise OutputError("refused", f"{path} exists; remove it or pass --overwrite")
    foreign = _foreign(path, LEGACY_PARTITIONS.get(name))
    if foreign:
        shown = ", ".join(os.path.relpath(f, plan.out) for f in foreign[:3])
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise OutputError(
            "refused",
            f"{path} holds files lbparse pipeline does not write ({shown}{more}); "
            "--overwrite replaces only what a run writes: move them out first",
        )
    plan.replaces.append(path)


def _check_summary(plan: OutPlan, path: str, st: os.stat_result, overwrite: bool) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise OutputError("refused", f"{path} exists and is not a regular file; remove it first")
    if _failed_summary(path):  # says no data: nothing is lost by replacing it
        plan.leftovers.append(path)
    elif not overwrite:
        raise OutputError(
            "refused", f"{path} exists (an earlier run's summary); remove it or pass --overwrite"
        )
    else:
        plan.replaces.append(path)


def _failed_summary(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            return bool(json.loads(f.read(1 << 20)).get("outcome") == "failed")
    except (OSError, ValueError, AttributeError):
        return False


def _foreign(path: str, column: str | None) -> list[str]:
    """Files in a table directory that a pipeline run does not make (`column`:
    the table's partition column in the layout before, if it had one)."""
    out: list[str] = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if entry.name in ("_SUCCESS", "_common_metadata") and entry.is_file(follow_symlinks=False):
            continue
        if entry.name == "_temporary" and entry.is_dir(follow_symlinks=False):
            continue
        if _PART.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            continue
        if (
            column is not None
            and entry.name.startswith(column + "=")
            and entry.is_dir(follow_symlinks=False)
        ):
            out += [
                f.path
                for f in sorted(os.scandir(entry.path), key=lambda e: e.name)
                if not (_PART.fullmatch(f.name) and f.is_file(follow_symlinks=False))
            ]
            continue
        out.append(entry.path)
    return out


def _not_an_input(path: str, inputs: Sequence[str]) -> None:
    """An input inside what this run replaces would be deleted with it."""
    real = os.path.realpath(path)
    for inp in inputs:
        if "://" not in inp and inside(os.path.realpath(inp), real):
            raise OutputError(
                "refused",
                f"the input {inp} is inside {path}, which this run replaces; "
                "write the output elsewhere",
            )


def _check_remote(plan: OutPlan, overwrite: bool) -> None:
    fs, base = pafs.FileSystem.from_uri(plan.out)
    for name in plan.writes:
        info = fs.get_file_info(f"{str(base).rstrip('/')}/{name}")
        if info.type == pafs.FileType.NotFound:
            continue
        if not overwrite:
            raise OutputError("refused", f"{plan.path(name)} exists; remove it or pass --overwrite")
        plan.replaces.append(plan.path(name))


def clear_stale(fs: pafs.FileSystem, out: str) -> None:
    """Remove staging directories of runs into `out` whose process is gone.

    Those are runs killed with SIGKILL; any other end removes its own. Local
    only: a pid means nothing on another filesystem's machine.

    Args:
        fs: DIR's filesystem (nothing is done unless it is the local one).
        out: DIR, as a path in `fs`.
    """
    if not isinstance(fs, pafs.LocalFileSystem) or not os.path.isdir(out):
        return
    for entry in os.scandir(out):
        m = _STAGING.fullmatch(entry.name)
        if not m or not entry.is_dir(follow_symlinks=False):
            continue
        if entry.stat(follow_symlinks=False).st_uid != os.getuid() or _alive(int(m.group(1))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)


def remove_own(out: str) -> None:
    """Remove this process's staging directories in `out`, once Spark is
    stopped: a task still running when the run was stopped (a SIGTERM to the
    driver alone) may have written into one after the run removed it."""
    if "://" in out or not os.path.isdir(out):
        return
    mine = f"{STAGING_PREFIX}{os.getpid()}-"
    for entry in os.scandir(out):
        if entry.name.startswith(mine) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def make_staging(fs: pafs.FileSystem, out: str) -> str:
    """A new directory in `out` (made if needed) for this run's output.

    Args:
        fs: DIR's filesystem.
        out: DIR, as a path in `fs`.

    Returns:
        The new directory's path, `out/.lbparse-staging-PID-RANDOM`.

    Raises:
        OSError: No new directory could be made (after 100 names), or `out`
            cannot be made.
    """
    fs.create_dir(out, recursive=True)
    for _ in range(100):
        path = f"{out}/{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        if isinstance(fs, pafs.LocalFileSystem):
            try:
                os.mkdir(path, 0o777)  # fails on anything already there, a planted link too
            except FileExistsError:
                continue
        else:
            if fs.get_file_info(path).type != pafs.FileType.NotFound:
                continue
            fs.create_dir(path)
        return path
    raise OSError(f"{out}: could not make a new staging directory")


def swap(fs: pafs.FileSystem, staging: str, out: str, names: Sequence[str]) -> None:
    """Move each of `names` from `staging` to `out`, the ones there before into staging/previous.

    All of it is moved back if a move fails. The old summary goes first and
    the new one comes last, so that a summary never describes tables that are
    not its own.

    Args:
        fs: DIR's filesystem.
        staging: The run's staging directory (make_staging()'s).
        out: DIR, as a path in `fs`.
        names: The names to move in (OutPlan.writes): tables and
            SUMMARY_FILE.

    Raises:
        OSError: A move failed (the moves done are undone first).
    """
    previous = f"{staging}/previous"
    fs.create_dir(previous)
    done: list[tuple[str, str]] = []

    def move(src: str, dst: str) -> None:
        fs.move(src, dst)
        done.append((src, dst))

    try:
        tables = [n for n in names if n != SUMMARY_FILE]
        if SUMMARY_FILE in names and _exists(fs, f"{out}/{SUMMARY_FILE}"):
            move(f"{out}/{SUMMARY_FILE}", f"{previous}/{SUMMARY_FILE}")
        for name in tables:
            # A table this run writes replaces the old one even when it has no
            # rows (then it is not written): the old rows are not this run's.
            if _exists(fs, f"{out}/{name}"):
                move(f"{out}/{name}", f"{previous}/{name}")
            if _exists(fs, f"{staging}/{name}"):
                move(f"{staging}/{name}", f"{out}/{name}")
        if SUMMARY_FILE in names:
            move(f"{staging}/{SUMMARY_FILE}", f"{out}/{SUMMARY_FILE}")
    except BaseException:
        for src, dst in reversed(done):
            try:
                fs.move(dst, src)
            except OSError:
                pass  # the first error is the one to report
        raise


def _exists(fs: pafs.FileSystem, path: str) -> bool:
    return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)


def _join(location: str, name: str) -> str:
    base = location.rstrip("/") if "://" in location else os.path.abspath(location)
    return f"{base}/{name}"
