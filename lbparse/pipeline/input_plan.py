"""The pipeline's inputs, planned on the driver: every path given as the units
its tasks read.

A Liftbridge data directory is planned by datadir_entries.py (one unit per
segment file); any other path is files, cut into units by the columnar
core's reader (lbparse.columnar.sources.plan_files), which reads them in the
tasks. The Spark data source and `lbparse report` plan their inputs here
too, so that their rows are the pipeline's.
"""

from __future__ import annotations

from lbparse.columnar.sources import Skipped, SourceOptions, cut_captures, plan_files
from lbparse.columnar.units import Unit
from lbparse.pipeline.datadir_entries import plan_storage

__all__ = ["cut_captures", "plan"]


def plan(
    paths: list[str],
    options: SourceOptions,
    skipped: Skipped | None = None,
    *,
    cut: bool = True,
) -> list[Unit]:
    """Every input file as units, in the order given (directories sorted).

    A Liftbridge data directory (or its streams/, a stream, a partition, a
    .log file) is planned as one unit per segment file
    (pipeline/datadir_entries.py); anything else by `plan_files`.

    Args:
        paths: Files and directories, as given.
        options: Which columns hold what, and the units' sizes.
        skipped: Gets what a directory holds and is not read (names with a
            leading . or _, links to directories, folders that cannot be
            listed), with why; None to drop that.
        cut: Cut large captures into ranges now; False leaves each one unit,
            for `cut_captures` to cut later (the pipeline does that beside
            Spark's start: the index pass reads each large capture whole).

    Returns:
        The units: a file that cannot be read is a unit with its problem.
    """

    units: list[Unit] = []
    for given in paths:
        segments = plan_storage(given)
        if segments is not None:
            units += segments
        else:
            units += plan_files([given], options, skipped, cut=cut)
    return units
