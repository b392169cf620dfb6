"""The data source's options, named as `lbparse pipeline`'s flags.

    spark.read.format("liftbridge").option("layout", "auto").option("column", "data")

| option | flag | |
|---|---|---|
| `layout` | `--layout` | v0, legacy, ..., auto (the default, as the CLI's) |
| `lenient` | `--lenient` | true/false |
| `verifyCrc` | `--no-verify-crc` | true (default) / false |
| `emitDefaultValues` | `--emit-default-values` | true/false |
| `column` | `--column` | a Parquet table's payload column (default: payload) |
| `subjectColumn` | `--subject-column` | its subject column |
| `timestampColumn` | `--timestamp-column` | its capture-time column |
| `batchRows` | `--batch-rows` | rows per Arrow batch |
| `table` | | `messages` or a payload table (`proto_Message`, ...): lbparse.decode_tables' tables; none: the wide rows |

Spark's options are case-insensitive; an option that is none of these is
refused (a typo would otherwise be silently ignored).
"""

from __future__ import annotations

import json
from typing import Mapping

from lbparse.pipeline import DEFAULT_BATCH_ROWS
from lbparse.columnar.decode_arrow import DecodeOptions
from lbparse.pipeline.sources import SourceOptions
from lbparse.pipeline.tasks import TaskOptions

__all__ = ["ENTRIES", "KNOWN", "STREAM_ONLY", "paths", "table", "task_options"]

# The table of Liftbridge data directories (their stored entries).
ENTRIES = "entries"

KNOWN = ("layout", "lenient", "verifycrc", "emitdefaultvalues", "column", "subjectcolumn",
         "timestampcolumn", "batchrows", "table", "path", "paths")
# Options of readStream alone (lbparse.spark.stream).
STREAM_ONLY = ("maxfilespertrigger", "minfileage")


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"option {key}: {value!r} is not true or false")
    return value.strip().lower() == "true"


def _check_names(options: Mapping[str, str], stream: bool) -> None:
    allowed = KNOWN + (STREAM_ONLY if stream else ())
    unknown = sorted(k for k in options if k.lower() not in allowed)
    if unknown:
        raise ValueError(f"liftbridge data source: unknown option(s) {', '.join(unknown)} "
                         "(options are lbparse pipeline's flags: layout, lenient, verifyCrc, "
                         "emitDefaultValues, column, subjectColumn, timestampColumn, batchRows, "
                         "and table"
                         + (", maxFilesPerTrigger, minFileAge" if stream else "") + ")")


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def task_options(options: Mapping[str, str], stream: bool = False) -> TaskOptions:
    """The pipeline's options from the data source's (ValueError for bad ones)."""
    from lbparse.capture import default_layout

    _check_names(options, stream)
    o = _lower(options)
    rows = o.get("batchrows", str(DEFAULT_BATCH_ROWS))
    if not rows.isdigit() or int(rows) < 1:
        raise ValueError(f"option batchRows: {rows!r} is not a positive whole number")
    decode = DecodeOptions(layout=o.get("layout", default_layout()),
                           verify_crc=_bool(o, "verifycrc", True),
                           lenient=_bool(o, "lenient", False),
                           emit_defaults=_bool(o, "emitdefaultvalues", False))
    decode.check()
    source = SourceOptions(column=o.get("column", "payload"),
                           subject_column=o.get("subjectcolumn"),
                           timestamp_column=o.get("timestampcolumn"), batch_rows=int(rows))
    return TaskOptions(decode, source)


def table(options: Mapping[str, str], storage: bool) -> str | None:
    """The table named by the `table` option (None: the wide rows), checked
    against the tables of the inputs: data directories have `entries`;
    captures, recordings and payload tables have `messages`, one table per
    payload type and the traffic tables (lbparse.columnar.tables)."""
    from lbparse.columnar.tables import table_names

    name = _lower(options).get("table")
    if name is None:
        return None
    known = [ENTRIES] if storage else list(table_names())
    if name not in known:
        raise ValueError(f"liftbridge data source: option table: no table {name!r} in "
                         f"{'data directories' if storage else 'captures'}; the tables are "
                         f"{', '.join(known)}")
    return name


def paths(options: Mapping[str, str]) -> list[str]:
    """The paths given to load(): `path` for one, `paths` (a JSON list) for several."""
    o = _lower(options)
    out: list[str] = []
    if o.get("paths"):
        out += json.loads(o["paths"])
    if o.get("path"):
        out.append(o["path"])
    if not out:
        raise ValueError("liftbridge data source: no path (load(path) or load([paths]))")
    return out
