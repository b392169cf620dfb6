"""What `lbparse pipeline` checks before Spark starts: errors a Spark user understands.

A bad `--master`, a bad `--conf`, a master nobody answers at, an input
that is not there, a payload column a table does not have: each is one
line (a ValueError, which the command line prints and exits 2 on) before
any work, instead of a JVM stack trace after Spark has started, or a
minute of the driver retrying a master that is not there.

Nothing here starts Spark or reads more than a Parquet footer.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable, Mapping, Sequence

from lbparse.capture.formats import UNKNOWN
from lbparse.columnar.sources import NOT_UTF8
from lbparse.digits import ascii_int
from lbparse.errors import InputError
from lbparse.textform import printable, utf8_text

__all__ = [
    "check_conf",
    "check_formats",
    "check_inputs",
    "check_master",
    "check_reachable",
    "check_units",
    "start_error",
]

# The master URLs Spark takes (SparkContext.createTaskScheduler, SparkSubmit).
_MASTERS = (
    re.compile(r"local"),
    re.compile(r"local\[(\*|[1-9]\d*)\]"),
    re.compile(r"local\[(\*|[1-9]\d*),\s*([1-9]\d*)\]"),  # threads, max task failures
    re.compile(r"local-cluster\[\s*[1-9]\d*\s*,\s*[1-9]\d*\s*,\s*[1-9]\d*\s*\]"),
    re.compile(r"spark://[^/\s]+"),
    re.compile(r"yarn"),
    re.compile(r"k8s://\S+"),
)
MASTER_FORMS = "local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL"
CONNECT_TIMEOUT = 5.0

# Settings whose values Spark parses as sizes ("4g", "512m") or counts; a
# bad one makes the JVM or SparkContext fail with a stack trace at start.
_SIZE = re.compile(r"\d+\s*([kmgtp]i?b?|b)?", re.I)
_SIZE_KEYS = re.compile(
    r"spark\.(driver|executor)\.(memory|memoryOverhead)|"
    r"spark\.driver\.maxResultSize|spark\.executor\.pyspark\.memory|"
    r"spark\.(kryoserializer\.buffer\.max|sql\.files\.maxPartitionBytes)"
)
_COUNT_KEYS = re.compile(
    r"spark\.(driver|executor|task)\.cores|spark\.executor\.instances|"
    r"spark\.cores\.max|spark\.default\.parallelism|"
    r"spark\.sql\.shuffle\.partitions"
)


def check_master(master: str | None) -> None:
    """Raise ValueError unless `master` is a Spark master URL.

    Args:
        master: The --master value: local, local[N], local[*],
            spark://HOST:PORT[,HOST:PORT...], yarn or k8s://URL; None:
            local[*], nothing to check.

    Raises:
        InputError: `master` is none of those forms, or a standalone master's
            HOST:PORT is not one (one line).
    """
    if master is None:
        return
    if not any(p.fullmatch(master) for p in _MASTERS):
        raise InputError(
            "bad_option", f"--master {master!r} is not a Spark master URL ({MASTER_FORMS})"
        )
    if master.startswith("spark://"):
        _spark_endpoints(master)


def _spark_endpoints(master: str) -> list[tuple[str, int]]:
    """HOST:PORT of each master of spark://H1:P1[,H2:P2...]."""
    out = []
    for item in master[len("spark://") :].split(","):
        host, sep, port = item.strip().rpartition(":")
        host = host.strip("[]")
        number = ascii_int(port, 65535)
        if not sep or not host or not number:
            raise InputError(
                "bad_option",
                f"--master {master!r}: {item!r} is not HOST:PORT "
                "(a standalone master is spark://HOST:PORT, port 7077 by default)",
            )
        out.append((host, number))
    return out


def check_reachable(master: str | None, timeout: float = CONNECT_TIMEOUT) -> None:
    """For a standalone master, raise ValueError unless one of its masters accepts a connection.

    Spark itself would retry for a minute, then fail with a stack trace.
    Other masters are not checked.

    Args:
        master: The --master value (None: local[*], not checked).
        timeout: Seconds each connection attempt may take.

    Raises:
        InputError: No master of a spark:// URL accepts a TCP connection, or
            one is not HOST:PORT.
    """
    if master is None or not master.startswith("spark://"):
        return
    reasons = []
    for host, port in _spark_endpoints(master):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    raise InputError(
        "bad_option",
        f"--master {master}: no Spark master answers ({'; '.join(reasons)}); "
        "is it started (spark-class org.apache.spark.deploy.master.Master)?",
    )


def check_conf(conf: Mapping[str, str]) -> None:
    """Raise ValueError for a setting that is not Spark's or whose value Spark cannot read.

    Args:
        conf: The --conf settings, key to value.

    Raises:
        InputError: A key not starting with "spark.", or a size (memory,
            buffer) or count (cores, instances, partitions) setting whose value
            is not one (one line).
    """
    for key, value in conf.items():
        if not key.startswith("spark."):
            raise InputError(
                "bad_option",
                f"--conf {key}={value}: not a Spark setting (Spark's start with "
                "'spark.'; spark-submit ignores others)",
            )
        if _SIZE_KEYS.fullmatch(key) and not _SIZE.fullmatch(value.strip()):
            raise InputError("bad_option", f"--conf {key}={value}: not a size (e.g. 512m, 4g)")
        if _COUNT_KEYS.fullmatch(key) and ascii_int(value.strip()) is None:
            raise InputError("bad_option", f"--conf {key}={value}: not a whole number")


def check_inputs(paths: Sequence[str]) -> None:
    """Raise ValueError for an input that is not there or that rows cannot name.

    Checked before Spark starts for it.

    Args:
        paths: The input paths; URIs are not checked.

    Raises:
        InputError: One or more local inputs do not exist (all named), or an
            input's name is not UTF-8 (the rows could not name it).
    """
    missing = [p for p in paths if "://" not in p and not os.path.exists(p)]
    if missing:
        raise InputError("no_input", f"no such input: {', '.join(map(utf8_text, missing))}")
    for p in paths:
        if utf8_text(p) != p:
            raise InputError("bad_input", f"{utf8_text(p)}: {NOT_UTF8}")


def check_units(units: Iterable[object], column: str) -> None:
    """Raise ValueError if a Parquet table lacks the payload column (--column).

    A table that has it in a type that holds no bytes is refused too: nothing
    of that table could be decoded.

    Args:
        units: The planned units (lbparse.columnar.sources.Unit).
        column: The payload column (--column) the units were planned with
            (their errors name it).

    Raises:
        InputError: A unit's error is input:bad_column; the error's message.
    """
    for u in units:
        error = getattr(u, "error", None)
        if error is not None and error[0] == "input:bad_column":
            raise InputError("bad_input", error[1])


# Formats people hand over by mistake, by their first bytes: what the line says
# instead of the bytes in hex.
_PACKED = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"PK\x03\x04", "zip"),
)
_SHOWN_BYTES = 40  # of a text file's start, its first line quoted


def check_formats(paths: Sequence[str], units: Iterable[object]) -> None:
    """Raise ValueError for a file named as an input that is in no format the pipeline reads.

    As `lbparse capture` and `lbparse report` refuse it: a mistake on the
    command line, said before Spark starts rather than as a problem row after
    it. A file of that kind inside an input directory is the directory's
    business and stays a row (input:unknown_format).

    Args:
        paths: The inputs as given on the command line.
        units: The planned units (lbparse.columnar.sources.Unit).

    Raises:
        InputError: Each such file named, with what its first bytes look like
            (gzip-compressed, text, ...).
    """
    given = {os.path.abspath(p): p for p in paths if "://" not in p}
    bad: dict[str, None] = {}
    for u in units:
        path = getattr(u, "path", "")
        if getattr(u, "format", None) == UNKNOWN and path in given:
            bad[given[path]] = None
    if bad:
        raise InputError(
            "bad_input",
            "; ".join(
                f"{p}: neither pcap, pcapng, JSON Lines nor Parquet ({_found(p)})" for p in bad
            ),
        )


def _found(path: str) -> str:
    """What the file's first bytes look like, in a few words."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SHOWN_BYTES)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    for magic, name in _PACKED:
        if head.startswith(magic):
            return f"{name}-compressed: uncompress it first"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A character cut by the end of the head is still text.
        text = head[: exc.start].decode("utf-8") if exc.start >= len(head) - 3 else ""
    if text and all(c.isprintable() or c in "\t\r\n" for c in text):
        return f"text: '{printable(text.splitlines()[0])}'"
    return f"first bytes {head[:8].hex()}"


def start_error(exc: BaseException) -> str:
    """One line of why Spark did not start (the JVM's own message, not its trace).

    Args:
        exc: The exception the session's start raised (py4j's wraps the Java
            exception).

    Returns:
        The Java exception's message, else the exception's first line (its
        class name when it has no text).
    """
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        # py4j wraps the Java exception: "An error occurred while calling ...",
        # then "java.lang.IllegalArgumentException: the reason".
        m = re.match(r"(?:[\w.$]+(?:Exception|Error)):\s*(.+)", line)
        if m:
            return m.group(1)
    first = text.splitlines()[0] if text else type(exc).__name__
    return first
