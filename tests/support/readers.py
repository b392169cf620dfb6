"""The readers tests check outputs with (pandas, polars, DuckDB), imported when
a test first uses one.

`pd = reader("pandas")` at a module's top stands for the module: its first
attribute a test reads imports it, or skips the test when it is not
installed (pytest.importorskip). A file whose tests are all slow (Spark)
costs `make test-fast`, which collects it, nothing: polars and DuckDB take
about half a second to import in each of its workers.
"""

from __future__ import annotations

from typing import Any

import pytest


class _Reader:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        # pytest's collector asks every object of a module for its marks and
        # dunders: those are not the reader's
        if attr.startswith("_") or attr == "pytestmark":
            raise AttributeError(attr)
        return getattr(pytest.importorskip(self._name), attr)


def reader(name: str) -> Any:
    """The module `name`, imported when first used (the test skipped if it is missing).

    Args:
        name: The module's name: "pandas", "polars", "duckdb".

    Returns:
        A stand-in whose attributes are the module's.
    """
    return _Reader(name)
