"""`spark.readStream.format("liftbridge")`: new capture and recording files of a
directory, as they appear, with Spark's offsets and checkpointing.

    (spark.readStream.format("liftbridge").option("layout", "auto").load("incoming/")
          .writeStream.format("parquet").option("checkpointLocation", "chk/")
          .start("out/"))

A recorder (`lbparse record`, tcpdump -w) writes files into a directory;
each micro-batch reads the files that appeared since the last one, through
the same pieces as the batch reader (one input partition per unit).

The offset is the list of files taken so far, in the order taken (the
oldest modification time first); a micro-batch reads the files its end
offset lists and its start does not. Spark keeps the offsets in the
checkpoint and replays an unfinished micro-batch with the same ones, so a
restarted query reads nothing twice and skips nothing.

A file is taken once it is whole: names starting with "." or "_" are not
data (Spark's rule: write `.x.pcap`, then rename it), and a file is left
until it has not changed for `minFileAge` seconds (default 2), so a file a
recorder is still writing waits. `maxFilesPerTrigger` bounds a micro-batch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles

from lbparse.columnar.sources import Unit
from lbparse.pipeline.preflight import check_inputs
from lbparse.spark.input_partitions import plan_partitions, read_units
from lbparse.spark.options import paths, stream_options, table, task_options

__all__ = ["DEFAULT_MIN_FILE_AGE", "FileStreamReader", "ready_files"]

DEFAULT_MIN_FILE_AGE = 2.0


def _visible_files(inputs: Sequence[str]) -> Iterator[str]:
    """The files under `inputs`, absolute (the tasks run elsewhere), directories
    walked in name order; names starting with "." or "_" are not data (Spark's
    rule, and lbparse.pipeline.input_plan.plan's)."""
    for p in map(os.path.abspath, inputs):
        if not os.path.isdir(p):
            yield p
            continue
        for root, dirs, names in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            yield from (
                os.path.join(root, n) for n in sorted(names) if not n.startswith((".", "_"))
            )


def ready_files(inputs: Sequence[str], min_age: float, now: float | None = None) -> list[str]:
    """The files under `inputs` that are whole, oldest first (then by name).

    Whole: visible names (not starting with "." or "_"), unchanged for
    `min_age` seconds. A file gone meanwhile is left out.

    Args:
        inputs: Files and directories (walked in name order, hidden ones
            skipped).
        min_age: Seconds since its last modification a file must have.
        now: The time to measure from (Unix seconds); None: now.

    Returns:
        The files' absolute paths, by modification time, then by name.
    """
    now = time.time() if now is None else now
    found = []
    for path in _visible_files(inputs):
        try:
            mtime = os.stat(path).st_mtime
        except OSError:  # gone meanwhile
            continue
        if now - mtime >= min_age:
            found.append((mtime, path))
    return [p for _, p in sorted(found)]


class FileStreamReader(DataSourceStreamReader):
    """The streaming reader: new capture and recording files as they appear.

    Its offsets are {"files": [every file taken so far, in order]}.

    Args:
        options: The data source's options: the inputs, how to decode them,
            `table`, and readStream's minFileAge and maxFilesPerTrigger.

    Raises:
        ValueError: A bad option or a missing input.
    """

    def __init__(self, options: dict[str, str]) -> None:
        self.inputs = paths(options)
        check_inputs(self.inputs)
        self.task = task_options(options, stream=True)
        self.table = table(options, storage=False)  # data directories are refused before
        self.min_age, self.max_files = stream_options(options, DEFAULT_MIN_FILE_AGE)

    def initialOffset(self) -> dict[str, list[str]]:
        """The offset a new query starts from: no file taken.

        Returns:
            {"files": []}.
        """
        return {"files": []}

    def getDefaultReadLimit(self) -> ReadLimit:
        """The micro-batch's bound: maxFilesPerTrigger files, or all that are ready.

        Returns:
            ReadMaxFiles of maxFilesPerTrigger when given, else ReadAllAvailable.
        """
        return ReadMaxFiles(self.max_files) if self.max_files else ReadAllAvailable()

    def latestOffset(self, start: dict[str, list[str]], limit: ReadLimit) -> dict[str, list[str]]:
        """The offset after the files that are ready now, `limit` of them at most.

        Args:
            start: The offset the micro-batch starts from.
            limit: Spark's read limit (ReadMaxFiles bounds the new files).

        Returns:
            `start`'s files followed by the new ready ones, oldest first.
        """
        taken = list(start["files"])
        seen = set(taken)
        new = [p for p in ready_files(self.inputs, self.min_age) if p not in seen]
        if isinstance(limit, ReadMaxFiles):
            new = new[: limit.max_files]
        return {"files": taken + new}

    def partitions(
        self, start: dict[str, list[str]], end: dict[str, list[str]]
    ) -> Sequence[InputPartition]:
        """The input partitions of the files `end` lists and `start` does not.

        A file listed by an offset and gone since is a row of its own
        (input:unreadable), not a failed query.

        Args:
            start: The micro-batch's start offset.
            end: Its end offset.

        Returns:
            One partition per unit of the new files (none when there are none).
        """
        before = set(start["files"])
        new = [p for p in end["files"] if p not in before]
        if not new:
            return []
        # A file listed by an offset and gone since is a row of its own
        # (input:unreadable), not a failed query: planned without the check.
        present = [p for p in new if os.path.exists(p)]
        parts = plan_partitions(present, self.task) if present else []
        return parts + [
            InputPartition(
                Unit(
                    p, "missing", 0, 0, error=("input:unreadable", f"{p}: gone before it was read")
                ).to_json()
            )
            for p in new
            if p not in present
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read and decode one partition's unit, in a task.

        Args:
            partition: One of partitions()'s.

        Yields:
            Arrow record batches in the rows' schema; empty ones left out.
        """
        yield from read_units([Unit.from_json(partition.value)], self.task, self.table)

    def commit(self, end: dict[str, list[str]]) -> None:
        """Nothing to release when Spark commits an offset: the files stay where they are.

        Args:
            end: The offset committed.
        """
        pass  # nothing to release: the files stay where they are

    def stop(self) -> None:
        """Nothing to stop: the reader holds no resource."""
        pass
