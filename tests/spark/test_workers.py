"""The Python workers import the lbparse the driver imported.

PySpark starts its workers with `python -m pyspark.daemon` in the driver's
directory, and -m puts that directory first on sys.path: run from a
checkout with lbparse installed (CI: the wheel in a fresh virtualenv), the
workers imported the checkout's source, without the C capture loop whose
cuts the driver had planned, and every task of a big capture failed.
"""

from __future__ import annotations

from typing import Any


def test_workers_keep_the_current_directory_off_their_path(spark: Any) -> None:
    def safe_path(_: int) -> bool:  # defined here: shipped by value
        import sys

        return bool(sys.flags.safe_path)  # -m does not put the directory first

    assert spark.sparkContext.parallelize([0], 1).map(safe_path).collect() == [True]
