"""The data source's options, named as `lbparse pipeline`'s flags.

    spark.read.format("liftbridge").option("layout", "auto").option("column", "data")

| option | flag | |
|---|---|---|
| `layout` | `--layout` | v0, legacy, ..., auto (the default, as the CLI's) |
| `lenient` | `--lenient` | true/false |
| `verifyCrc` | `--no-verify-crc` | true (default) / false |
| `emitDefaultValues` | `--emit-default-values` | true/false |
| `jsonColumns` | `--json-columns` | true/false (default): the traffic tables' JSON text columns |
| `column` | `--column` | a Parquet table's payload column (default: payload) |
| `subjectColumn` | `--subject-column` | its subject column |
| `timestampColumn` | `--timestamp-column` | its capture-time column |
| `batchRows` | `--batch-rows` | rows per Arrow batch |
| `table` | | a table of lbparse.decode_tables (`messages`, `proto_Message`, ...); none: wide rows |

Spark's options are case-insensitive; an option that is none of these is
refused (a typo would otherwise be silently ignored), and each value is
checked here, on the driver, before any task runs: a bad one is a
ValueError of one line naming the option.

The inputs are load()'s: `path` (one) and `paths` (load([...]) writes a JSON
list; a JSON string or a plain path is one input). Each is a local path or a
`file:` URI, and a glob where it is not a file itself (`*`, `?`, `[...]` and
`{a,b}`, as Spark's Hadoop globs): its matches in name order, none matching
being a missing input.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
from collections.abc import Mapping
from urllib.parse import unquote, urlparse

from lbparse.capture import default_layout
from lbparse.columnar.decode_arrow import DecodeOptions
from lbparse.columnar.sources import SourceOptions
from lbparse.columnar.tables import GRPC_TABLES, table_names
from lbparse.digits import ascii_int
from lbparse.errors import InputError
from lbparse.pipeline import DEFAULT_BATCH_ROWS, MAX_BATCH_ROWS
from lbparse.pipeline.tasks import TaskOptions

__all__ = [
    "ENTRIES",
    "KNOWN",
    "MAX_COUNT",
    "STREAM_ONLY",
    "paths",
    "stream_options",
    "table",
    "task_options",
]

# The table of Liftbridge data directories (their stored entries).
ENTRIES = "entries"

KNOWN = (
    "layout",
    "lenient",
    "verifycrc",
    "emitdefaultvalues",
    "jsoncolumns",
    "column",
    "subjectcolumn",
    "timestampcolumn",
    "batchrows",
    "table",
    "path",
    "paths",
)
# Options of readStream alone (lbparse.spark.file_stream).
STREAM_ONLY = ("maxfilespertrigger", "minfileage")
# The largest batchRows and maxFilesPerTrigger (machine integers, as
# --batch-rows is bounded: lbparse.columnar.MAX_BATCH_ROWS).
MAX_COUNT = MAX_BATCH_ROWS
_GLOB = re.compile(r"[*?\[{]")


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise InputError("bad_option", f"option {key}: {value!r} is not true or false")
    return value.strip().lower() == "true"


def _check_names(options: Mapping[str, str], stream: bool) -> None:
    allowed = KNOWN + (STREAM_ONLY if stream else ())
    unknown = sorted(k for k in options if k.lower() not in allowed)
    if unknown:
        raise InputError(
            "bad_option",
            f"liftbridge data source: unknown option(s) {', '.join(unknown)} "
            "(options are lbparse pipeline's flags: layout, lenient, verifyCrc, "
            "emitDefaultValues, jsonColumns, column, subjectColumn, timestampColumn, batchRows, "
            "and table" + (", maxFilesPerTrigger, minFileAge" if stream else "") + ")",
        )


def _count(options: Mapping[str, str], name: str, default: int) -> int:
    """A whole number option in 1..MAX_COUNT (`options` lower-cased)."""
    value = options.get(name.lower())
    if value is None:
        return default
    text = value.strip()
    count = ascii_int(text, MAX_COUNT)
    if not count:
        raise InputError(
            "bad_option",
            f"liftbridge data source: option {name}: {value!r} is not a whole "
            f"number from 1 to {MAX_COUNT}",
        )
    return count


def stream_options(options: Mapping[str, str], default_age: float) -> tuple[float, int | None]:
    """readStream's own options: minFileAge and maxFilesPerTrigger.

    Args:
        options: The data source's options (any case).
        default_age: The minFileAge taken when the option is not given, in
            seconds.

    Returns:
        (minFileAge, maxFilesPerTrigger): how long a file must have stayed
        unchanged before it is read, in seconds (0 or more); the most files one
        micro-batch reads, None for no bound.

    Raises:
        InputError: minFileAge is not a number of seconds (0 or more), or
            maxFilesPerTrigger is not a whole number from 1 to MAX_COUNT.
    """
    o = _lower(options)
    age = o.get("minfileage")
    seconds = default_age
    if age is not None:
        try:
            seconds = float(age)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds >= 0):
            raise InputError(
                "bad_option",
                f"liftbridge data source: option minFileAge: {age!r} is not a "
                "number of seconds (0 or more)",
            )
    most = _count(o, "maxFilesPerTrigger", 0) or None
    return seconds, most


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def task_options(options: Mapping[str, str], stream: bool = False) -> TaskOptions:
    """The pipeline's options made of the data source's.

    Args:
        options: The data source's options (any case): layout, lenient,
            verifyCrc, emitDefaultValues, jsonColumns, column, subjectColumn,
            timestampColumn, batchRows, table, path and paths.
        stream: Whether the options are readStream's, which also takes
            maxFilesPerTrigger and minFileAge.

    Returns:
        The decode and source options a task reads its units with.

    Raises:
        ValueError: An option that is none of the known ones (a typo), or a bad
            value (one line naming the option).
    """
    _check_names(options, stream)
    o = _lower(options)
    rows = _count(o, "batchRows", DEFAULT_BATCH_ROWS)
    decode = DecodeOptions(
        layout=o.get("layout", default_layout()),
        verify_crc=_bool(o, "verifycrc", True),
        lenient=_bool(o, "lenient", False),
        emit_defaults=_bool(o, "emitdefaultvalues", True),
        json_columns=_bool(o, "jsoncolumns", False),
    )
    decode.check()
    source = SourceOptions(
        column=o.get("column", "payload"),
        subject_column=o.get("subjectcolumn"),
        timestamp_column=o.get("timestampcolumn"),
        batch_rows=rows,
    )
    return TaskOptions(decode, source)


def table(options: Mapping[str, str], storage: bool) -> str | None:
    """The table named by the `table` option, checked against the inputs' tables.

    Data directories have `entries`; captures, recordings and payload tables
    have `messages`, one table per payload type and the traffic tables
    (lbparse.columnar.tables), captures the gRPC tables too.

    Args:
        options: The data source's options (any case).
        storage: Whether the inputs are data directories (storage_inputs()).

    Returns:
        The table's name, or None when the option is not given (the wide rows).

    Raises:
        InputError: The inputs have no table of that name (the error lists
            those they have).
    """
    name = _lower(options).get("table")
    if name is None:
        return None
    known = [ENTRIES] if storage else [*table_names(), *GRPC_TABLES]
    if name not in known:
        raise InputError(
            "bad_option",
            f"liftbridge data source: option table: no table {name!r} in "
            f"{'data directories' if storage else 'captures'}; the tables are "
            f"{', '.join(known)}",
        )
    return name


def paths(options: Mapping[str, str]) -> list[str]:
    """The paths given to load(), as local paths, globs expanded.

    `path` is one, `paths` several (a JSON list, what load([...]) writes, a
    JSON string, or one plain path); `file:` URIs become local paths; a glob
    (`*`, `?`, `[...]`, `{a,b}`) that is not a file itself becomes its matches
    in name order, one matching nothing stays as it is (a missing input, for
    the checks after).

    Args:
        options: The data source's options (any case).

    Returns:
        The input paths, `paths`' first, then `path`.

    Raises:
        InputError: No path is given, `paths` is not JSON of strings, or a
            path is a URI other than `file:` (the tasks read local files).
    """
    o = _lower(options)
    given: list[str] = []
    if o.get("paths", "").strip():
        given += _paths_option(o["paths"])
    if o.get("path"):
        given.append(o["path"])
    if not given:
        raise InputError(
            "bad_option", "liftbridge data source: no path (load(path) or load([paths]))"
        )
    return [found for p in given for found in _expand(_local(p))]


def _paths_option(text: str) -> list[str]:
    """`paths`: a JSON list of strings (what load([...]) writes), a JSON string, or
    one plain path."""
    if not text.lstrip().startswith(("[", '"')):
        return [text]
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            "bad_option",
            f"liftbridge data source: option paths: {text[:200]!r} is not JSON "
            f"({exc.msg} at character {exc.pos}); give a JSON list of paths "
            "or one path",
        ) from None
    items = value if isinstance(value, list) else [value]
    wrong = [v for v in items if not isinstance(v, str) or not v]
    if wrong:
        raise InputError(
            "bad_option",
            f"liftbridge data source: option paths: {wrong[0]!r} in "
            f"{text[:200]!r} is not a path (paths are strings)",
        )
    return items


def _local(path: str) -> str:
    """A local path for a `file:` URI (the tasks open inputs as local files);
    other URIs are refused."""
    if not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", path) or os.path.exists(path):
        return path
    uri = urlparse(path)
    if uri.scheme == "file" and uri.netloc in ("", "localhost"):
        return unquote(uri.path)
    if len(uri.scheme) > 1:  # (C:\x is a path)
        raise InputError(
            "bad_option",
            f"liftbridge data source: {path}: not a local file; the tasks read "
            "local paths and file: URIs",
        )
    return path


def _expand(path: str) -> list[str]:
    """The files a glob matches, in name order (the path itself when it is there
    or has no glob characters; a glob matching nothing stays, a missing input)."""
    if os.path.exists(path) or not _GLOB.search(path):
        return [path]
    found = sorted({m for pattern in _braces(path) for m in glob.glob(pattern)})
    return found or [path]


def _braces(pattern: str) -> list[str]:
    """{a,b} alternatives expanded (Hadoop's globs have them; Python's do not)."""
    depth, start = 0, -1
    for i, c in enumerate(pattern):
        if c == "{":
            depth += 1
            start = i if depth == 1 else start
        elif c == "}" and depth:
            depth -= 1
            if depth == 0:
                head, body, tail = pattern[:start], pattern[start + 1 : i], pattern[i + 1 :]
                return [head + alt + rest for alt in _top_level(body) for rest in _braces(tail)]
    return [pattern]


def _top_level(body: str) -> list[str]:
    """The comma-separated alternatives of a brace's body, nested braces expanded."""
    parts, depth, cur = [], 0, ""
    for c in body:
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (c == "{") - (c == "}")
        cur += c
    parts.append(cur)
    return [e for part in parts for e in _braces(part)]
