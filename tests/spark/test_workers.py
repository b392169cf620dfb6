"""The Python workers import the lbparse the driver imported.

PySpark starts its workers with `python -m pyspark.daemon` in the driver's
directory, and -m puts that directory first on sys.path: run from a
checkout with lbparse installed (CI: the wheel in a fresh virtualenv), the
workers imported the checkout's source, without the C capture loop whose
cuts the driver had planned, and every task of a big capture failed.
"""

from __future__ import annotations

from typing import Any

from lbparse.pipeline.session import session_active


def test_workers_keep_the_current_directory_off_their_path(spark: Any) -> None:
    def safe_path(_: int) -> bool:  # defined here: shipped by value
        import sys

        return bool(sys.flags.safe_path)  # -m does not put the directory first

    assert spark.sparkContext.parallelize([0], 1).map(safe_path).collect() == [True]


def test_workers_import_the_installed_pyspark_not_sparks_zip(spark: Any) -> None:
    """Spark puts pyspark.zip first on the workers' PYTHONPATH; Python compiles
    what it imports from a zip anew in each process (~1 s a worker). The
    session's daemon (lbparse.pipeline.worker_daemon) moves the zip after the
    installed pyspark of the same version: the workers' pyspark is that one."""
    import pyspark

    def where(_: int) -> tuple[str, str]:  # defined here: shipped by value
        import sys

        import pyspark

        return pyspark.__file__ or "", sys.modules["pyspark.worker"].__file__ or ""

    assert spark.conf.get("spark.python.daemon.module") == "lbparse.pipeline.worker_daemon"
    ((package, worker),) = spark.sparkContext.parallelize([0], 1).map(where).collect()
    assert ".zip" not in package and ".zip" not in worker, (package, worker)
    assert package == pyspark.__file__


def test_a_running_session_is_seen_as_active(spark: Any) -> None:
    """`lbparse pipeline` in a process whose session is up (a bench, a test)
    cuts its captures in place: no JVM start to overlap (pipeline.cutting)."""
    assert session_active()
