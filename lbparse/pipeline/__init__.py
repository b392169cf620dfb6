"""The data pipeline: NATS captures and payload tables to Parquet, on Spark.

`lbparse pipeline` (lbparse/cli/pipeline_cmd.py) is the way in; the
pieces, each with one job:

  schema.py        the output schema: fixed columns, one struct per payload
                   type as Spark's from_protobuf derives it
  sources.py       inputs: planned into units on the driver, streamed in tasks
  wirescan.py      vectorized protobuf decoding (numpy), many messages at once
  commitscan.py    vectorized ReplicationResponse (commit-log) decoding
  columns.py       decoded protobuf objects to Arrow columns (the fallback)
  decode_arrow.py  one Arrow batch of records in, decoded rows out
  output.py        Parquet written by the tasks, committed by the driver
  tasks.py         what one mapInArrow task runs
  summary.py       counts per input file, that add up
  session.py       the Spark session: local[*], a cluster, or spark-submit's
  job.py           a run, and the entry point for spark-submit

(`make dist`, what a cluster needs, is build tooling: tools/dist.py.)

This module imports nothing heavy: `lbparse --help` must not start Spark.
"""

# A batch ends at this many rows or this much input, whichever comes first:
# large batches spread numpy's per-call costs, the byte bound keeps a batch
# of large messages from filling the task's memory.
DEFAULT_BATCH_ROWS = 65536
BATCH_BYTES = 64 << 20
