"""The data pipeline: NATS captures and payload tables to Parquet, on Spark.

`lbparse pipeline` (lbparse/cli/pipeline_cmd.py) is the way in; the
pieces, each with one job:

  schema.py        the Spark view of the decoded columns (lbparse.columnar.schema)
  sources.py       inputs: planned into units on the driver, streamed in tasks
  output.py        Parquet written by the tasks, committed by the driver
  tasks.py         what one mapInArrow task runs
  summary.py       counts per input file, that add up
  session.py       the Spark session: local[*], a cluster, or spark-submit's
  job.py           a run (spark-submit runs `lbparse pipeline`: tools/dist.py)

The decoding itself is the columnar core, lbparse.columnar.
(`make dist`, what a cluster needs, is build tooling: tools/dist.py.)

This module imports nothing heavy: `lbparse --help` must not start Spark.
"""

# A batch ends at this many rows or this much input, whichever comes first:
# large batches spread numpy's per-call costs, the byte bound keeps a batch
# of large messages from filling the task's memory.
DEFAULT_BATCH_ROWS = 65536
BATCH_BYTES = 64 << 20
