"""The data pipeline: NATS captures and payload tables to Parquet, on Spark.

`lbparse pipeline` (lbparse/cli/pipeline_cmd.py) is the way in; the
pieces, each with one job:

  input_plan.py    the inputs planned into units on the driver (data directories,
                   captures, recordings, tables)
  datadir_entries.py  Liftbridge's data directories: segments as the `entries` table
  spark_schema.py  the Spark view of the decoded columns (lbparse.columnar.schema)
  output.py        Parquet written by the tasks, committed by the driver
  tasks.py         what one mapInArrow task runs
  summary.py       counts per input file, that add up
  session.py       the Spark session: local[*], a cluster, or spark-submit's
  worker_daemon.py Spark's Python daemon in a local session: the installed pyspark
  job.py           a run (spark-submit runs `lbparse pipeline`: tools/dist.py)

The reading of a unit (streamed in the tasks) and the decoding are the
columnar core's, lbparse.columnar.
(`make dist`, what a cluster needs, is build tooling: tools/dist.py.)

This module imports nothing heavy: `lbparse --help` must not start Spark.
"""

from lbparse.columnar import BATCH_BYTES, DEFAULT_BATCH_ROWS, MAX_BATCH_ROWS

__all__ = ["BATCH_BYTES", "DEFAULT_BATCH_ROWS", "MAX_BATCH_ROWS"]
