"""Spark's classes archived once, and mapped by every later local run (JDK class-data sharing).

A local pipeline run is mostly Spark's start: its JVM reads, parses and
verifies some 15,000 classes, the same ones every time. The first local
session lbparse starts has its JVM write them to an archive as it exits
(`-XX:ArchiveClassesAtExit`); the starts after it map that archive
(`-XX:SharedArchiveFile`). Measured on `lbparse pipeline` over 10 MB of real
captures, local[2], two cores: Spark's start 6.1 -> 3.5 s and its first
job 5.9 -> 4.1 s; a run 14.6 -> 8.6 s (the run that writes the archive:
17.9 s).

Where: `spark-classes/` in lbparse's cache (`lbparse.resources.cache_dir`),
one archive per Java, Spark and JVM options (named by a digest of them),
~150 MB each, the KEEP last used kept. `LBPARSE_SPARK_CLASSES=off` turns
it off; `LBPARSE_SPARK_CLASSES=DIR` keeps it in DIR.

The JVM writes the archive as it exits, after the pipeline's own process
has ended (a dozen seconds, in the background, once), to
`spark-KEY.PID.partial`. The JDK writes an archive's header last, so a
partial file that starts with the archive's magic number is whole: the
next start renames it into place, its size and CRC-32C in its name, and
every start after checks them (the JDK crashes on an archive damaged
behind a whole header). A JVM is never given a partial or damaged file;
an archive of another class path it refuses and runs as without it,
silently (`-Xlog:cds*=off`: no JVM line on the pipeline's report).

Not used when the user's own JVM options (SPARK_SUBMIT_OPTS, JAVA_TOOL_OPTIONS,
JDK_JAVA_OPTIONS, _JAVA_OPTIONS) name a class archive of theirs, nor from a
folder another user could change: a planted archive would be classes the
JVM runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import crc32c

from lbparse.extras import need
from lbparse.resources import cache_dir, private_folder

__all__ = [
    "ENV",
    "KEEP",
    "ClassArchive",
    "archive_key",
    "folder",
    "java_binary",
    "java_options",
    "spark_home",
    "this_java",
    "writing_to",
]

ENV = "LBPARSE_SPARK_CLASSES"
# The first 4 bytes of a whole dynamic archive: the JDK's
# CDS_DYNAMIC_ARCHIVE_MAGIC in the machine's byte order. A file cut short
# (its JVM killed while writing) starts with zeros: the header comes last.
MAGIC = (0xF00BABA8).to_bytes(4, sys.byteorder)
KEEP = 2  # archives kept in the folder (another Java or Spark: one each)
# A partial file or a writing mark this old, without a whole archive: given up
# (its JVM killed, or one that cannot archive this class path).
STALE = 15 * 60.0
# Options that set up class archives of the user's own: theirs are used.
_THEIRS = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare", "AutoCreateSharedArchive")
_USER_OPTIONS = ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")
# A JVM that cannot map the archive says why on stdout: the pipeline's report.
_QUIET = "-Xlog:cds*=off"


@dataclass(frozen=True)
class ClassArchive:
    """The archive of one Java, Spark and set of JVM options (`key`), in `folder`.

    A whole archive is named `spark-KEY.SIZE.CRC.jsa`, its size and CRC-32C
    taken as it was renamed into place and checked before every start: the
    JDK maps an archive cut short or changed (its header whole) and crashes
    on it (measured: JDK 17, an hs_err file in the working directory), so a
    JVM is only ever given the bytes its own JVM wrote. ~40 ms a start.

    Attributes:
        folder: The directory of the archives (this user's alone).
        key: The digest naming this archive (`archive_key`).
    """

    folder: Path
    key: str

    def whole(self) -> Path | None:
        """The whole archive of this key, checked; others of it removed.

        Returns:
            Its path, or None when there is none (or none intact).

        Raises:
            OSError: The folder could not be read or written.
        """
        for found in sorted(self.folder.glob(f"spark-{self.key}.*")):
            if found.suffix != ".jsa":
                continue
            parts = found.name.split(".")
            try:
                size, crc = int(parts[1]), int(parts[2], 16)
                intact = found.stat().st_size == size and _crc(found) == crc
            except (ValueError, IndexError, FileNotFoundError):
                intact = False
            if intact:
                return found
            found.unlink(missing_ok=True)
        return None

    def options(self, now: float | None = None) -> str:
        """The JVM options of a start, the folder settled first.

        Settling: a partial file whose archive is whole is renamed into
        place, partial files and writing marks given up (STALE) are removed,
        and archives beyond the KEEP last used.

        Args:
            now: The time to judge ages by (time.time()).

        Returns:
            The options that map the archive when it is whole and intact;
            else those that write it at the JVM's exit, unless another start
            is writing it; else "" (this start runs without one).

        Raises:
            OSError: The folder could not be read or written.
        """
        now = time.time() if now is None else now
        writing = self._settle(now)
        found = self.whole()
        if found is not None:
            os.utime(found)  # the last used: the pruning keeps it
            return f"-XX:SharedArchiveFile={found} {_QUIET}"
        if writing:
            return ""
        pid = os.getpid()
        (self.folder / f"spark-{self.key}.{pid}.writing").touch()
        partial = self.folder / f"spark-{self.key}.{pid}.partial"
        return f"-XX:ArchiveClassesAtExit={partial} {_QUIET}"

    def _settle(self, now: float) -> bool:
        """Whether a start is writing this key's archive (after settling)."""
        writing = False
        for part in sorted(self.folder.glob("spark-*.partial")) + sorted(
            self.folder.glob("spark-*.writing")
        ):
            key = part.name[len("spark-") :].split(".", 1)[0]
            try:
                whole = part.suffix == ".partial" and _whole(part)
                age = now - part.stat().st_mtime
                if whole:
                    size, crc = part.stat().st_size, _crc(part)
                    os.replace(part, self.folder / f"spark-{key}.{size}.{crc:08x}.jsa")
            except FileNotFoundError:
                continue  # settled by another start meanwhile
            if whole:
                part.with_suffix(".writing").unlink(missing_ok=True)
            elif age > STALE:
                part.unlink(missing_ok=True)
            elif key == self.key:
                writing = True
        # This start's archive counts as the last used: it is touched next.
        others = sorted(
            (
                p
                for p in self.folder.glob("spark-*.jsa")
                if not p.name.startswith(f"spark-{self.key}.")
            ),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for old in others[KEEP - 1 :]:
            old.unlink(missing_ok=True)
        return writing


def _whole(partial: Path) -> bool:
    with open(partial, "rb") as f:
        return f.read(len(MAGIC)) == MAGIC


def _crc(path: Path) -> int:
    value = 0
    buf = bytearray(1 << 23)
    view = memoryview(buf)
    with open(path, "rb") as f:
        while n := f.readinto(buf):
            value = crc32c.crc32c(view[:n], value)
    return value


def folder() -> Path | None:
    """The archives' directory, made if missing.

    Returns:
        $LBPARSE_SPARK_CLASSES if set, else spark-classes/ in lbparse's cache;
        None when turned off (LBPARSE_SPARK_CLASSES=off), when its path holds
        whitespace, or when it (or its parent) is not this user's alone.
    """
    chosen = os.environ.get(ENV, "")
    if chosen.lower() in ("off", "0", "no", "false"):
        return None
    try:
        where = Path(chosen) if chosen else cache_dir() / "spark-classes"
    except RuntimeError:  # no home directory (a user without a passwd entry, no HOME)
        return None
    if any(c.isspace() for c in str(where)):
        return None  # Spark splits the JVM options at whitespace
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    if not (private_folder(where) and private_folder(where.parent)):
        return None
    return where


def archive_key(java: Path, spark_home: Path, jvm_options: str) -> str:
    """The digest that names the archive of a Java, a Spark and JVM options.

    An archive is good only for the JVM and class path that wrote it: the
    JVM's files (its launcher and libjvm) and Spark's jars, by name, size
    and time, are in the digest, so a new Java or Spark writes a new one.

    Args:
        java: The `java` the JVM is started with.
        spark_home: Spark's home (its `jars/` are the class path).
        jvm_options: The JVM options besides the archive's.

    Returns:
        16 hex digits.

    Raises:
        OSError: A file could not be read.
    """
    digest = hashlib.sha256(jvm_options.encode())
    real = Path(os.path.realpath(java))
    for f in (real, real.parent.parent / "lib" / "server" / "libjvm.so"):
        if f.exists():
            st = f.stat()
            digest.update(f"\0{f}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    for jar in sorted(os.scandir(spark_home / "jars"), key=lambda e: e.name):
        st = jar.stat()
        digest.update(f"\0{jar.name}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def java_binary() -> Path | None:
    """The `java` Spark's launcher starts, as it finds it.

    Returns:
        $JAVA_HOME/bin/java if there, else `java` on PATH; None if neither.
    """
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return Path(home) / "bin" / "java"
    found = shutil.which("java")
    return Path(found) if found else None


def spark_home() -> Path:
    """Spark's home: its `jars/` are the JVM's class path.

    Returns:
        $SPARK_HOME if set, else the pyspark package's folder.

    Raises:
        MissingExtra: pyspark is not installed.
    """
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home)
    # The session is being started: pyspark is there (spark_session needs it).
    return Path(need("pyspark").__file__ or "").parent


def writing_to(jvm_options: str) -> Path | None:
    """Where a JVM started with `jvm_options` writes the archive as it exits.

    Args:
        jvm_options: The JVM's options (spark.driver.extraJavaOptions).

    Returns:
        The folder of the partial file `ClassArchive.options` named; None
        when the options write no archive.
    """
    for option in jvm_options.split():
        if option.startswith("-XX:ArchiveClassesAtExit="):
            return Path(option.partition("=")[2]).parent
    return None


def this_java(jvm_options: str) -> ClassArchive | None:
    """The archive of the Java and Spark a local session starts here.

    Args:
        jvm_options: The JVM's other options (part of the archive's key).

    Returns:
        The ClassArchive in `folder()`, keyed by `java_binary()`, `spark_home()`
        and the options; None when the folder is off or unusable, or Java
        cannot be found.

    Raises:
        OSError: Spark's jars could not be read.
        MissingExtra: pyspark is not installed (and SPARK_HOME not set).
    """
    where, java = folder(), java_binary()
    if where is None or java is None:
        return None
    return ClassArchive(where, archive_key(java, spark_home(), jvm_options))


def java_options(jvm_options: str) -> str:
    """The class archive's options for a local session's JVM, or "".

    Args:
        jvm_options: The JVM's other options (part of the archive's key).

    Returns:
        "" when the user's JVM options set up archives of their own, when
        turned off, when Java cannot be found, or when the folder or Spark's
        jars cannot be read; else `ClassArchive.options`.

    Raises:
        MissingExtra: pyspark is not installed (and SPARK_HOME not set).
    """
    if any(t in os.environ.get(v, "") for v in _USER_OPTIONS for t in _THEIRS):
        return ""
    try:
        archive = this_java(jvm_options)
        return "" if archive is None else archive.options()
    except OSError:
        return ""  # a cache that cannot be used is a slower start, not a failed run
