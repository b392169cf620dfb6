"""How pandas should read the tables: the `pandas` schema metadata every table
carries, in memory (read_capture_tables, decode_tables) and in every file
lbparse writes (the pipeline, `capture --tables`), so that `to_pandas()` and
`pandas.read_parquet` alike read integers as integers."""

from __future__ import annotations

import json
from functools import lru_cache

import pyarrow as pa
from pyarrow.pandas_compat import get_logical_type

__all__ = ["dataset_schema", "pandas_metadata"]


def dataset_schema(schema: pa.Schema) -> pa.Schema:
    """A table's files' schema: `schema` with what pandas needs to read integers as integers.

    Args:
        schema: The table's Arrow schema.

    Returns:
        The schema with its `pandas` metadata (`pandas_metadata`) added.
    """
    return schema.with_metadata({**(schema.metadata or {}), b"pandas": pandas_metadata(schema)})


@lru_cache(maxsize=8)
def pandas_metadata(schema: pa.Schema) -> bytes:
    """The `pandas` schema metadata (Arrow's pandas_compat format).

    Nullable integer and boolean columns as pandas' Int32, Int64 and boolean
    dtypes. Without it pandas.read_parquet turns an integer column with a
    null into float64 (version, msg_type, crc32c...); with it the columns
    keep Spark's int and bigint. Nested values are pandas' business (dicts
    and arrays; `dtype_backend="pyarrow"` keeps them as Arrow, exactly).

    Args:
        schema: The table's Arrow schema.

    Returns:
        The metadata's JSON, as bytes.
    """
    columns = []
    for f in schema:
        numpy_type, extra = "object", None
        if pa.types.is_integer(f.type):
            numpy_type = f"Int{f.type.bit_width}" if f.nullable else str(f.type)
        elif pa.types.is_boolean(f.type):
            numpy_type = "boolean" if f.nullable else "bool"
        elif pa.types.is_floating(f.type):
            numpy_type = str(f.type.to_pandas_dtype().__name__)  # NaN is its null
        elif pa.types.is_timestamp(f.type):
            numpy_type = f"datetime64[{f.type.unit}]"
            extra = {"timezone": f.type.tz} if f.type.tz else None
        columns.append(
            {
                "name": f.name,
                "field_name": f.name,
                "pandas_type": get_logical_type(f.type),
                "numpy_type": numpy_type,
                "metadata": extra,
            }
        )
    return json.dumps(
        {
            "index_columns": [],
            "column_indexes": [],
            "columns": columns,
            "attributes": {},
            "creator": {"library": "lbparse"},
        }
    ).encode()
