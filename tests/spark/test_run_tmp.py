"""Spark's JVM keeps its temporary files in the run's own directory
(support/testrun.py, support/jvm.py): what a JVM a test kills leaves there
goes when the run ends, not into /tmp for good."""

from __future__ import annotations

import os
from typing import Any

from support import testrun


def test_the_jvm_and_sparks_local_directory_are_the_runs(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    assert os.path.isdir(testrun.PATH) and testrun.PATH != "/tmp"
    assert jvm.System.getProperty("java.io.tmpdir") == testrun.PATH
    local = jvm.org.apache.spark.util.Utils.getLocalDir(spark.sparkContext._jsc.sc().conf())
    assert local.startswith(testrun.PATH + os.sep), local
    assert os.path.isdir(local)
