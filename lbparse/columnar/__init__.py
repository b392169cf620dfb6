"""The columnar core: many envelopes in, Arrow tables out. Imports nothing of Spark.

`lbparse.decode_tables` / `read_capture_tables` (narrow tables, `tables.py`)
and `lbparse.decode_arrow` / `read_capture_arrow` (one wide batch) are the
way in (`api.py`); every consumer (the Spark job and data source, the
report, `lbparse capture`) goes through them or through the batch decoder.
The pieces, each with one job:

  schema.py          the decoded columns as Arrow types (Spark's view:
                     lbparse.pipeline.spark_schema)
  decode_arrow.py    one Arrow batch of records in, decoded rows out (`decoder_for`)
  tables.py          a decoded batch as `messages` plus one narrow table per payload type
  wirescan.py        vectorized protobuf decoding (numpy), many messages at once
  wirescan_native.py the same in C (_structs.c), chosen there
  commitscan.py      vectorized ReplicationResponse (commit-log) decoding
  columns.py         decoded protobuf objects to Arrow columns (the per-row fallback)
  crc.py             CRC-32C over many ranges (_kernels.c, else crc32c per range)
  context.py         layout auto: a batch's generation proof applied
  trafficcols.py     Liftbridge's non-envelope traffic (Raft, inboxes) as columns
  sources.py         input files (captures, recordings, Parquet tables) cut into
                     units and read as Arrow record batches (the pipeline plans
                     its inputs with it: lbparse.pipeline.input_plan)
  units.py           what one unit is, and what reading it saw

This module imports nothing heavy: `import lbparse` stays light.
"""

# A batch ends at this many rows or this much input, whichever comes first:
# large batches spread numpy's per-call costs, the byte bound keeps a batch
# of large messages from filling the task's memory.
DEFAULT_BATCH_ROWS = 65536
BATCH_BYTES = 64 << 20
# The most rows a batch may be asked for: the C reader and Spark's JVM take
# it as a machine integer (10**20 rows failed in the task with an
# OverflowError); a batch is bounded by its bytes long before this.
MAX_BATCH_ROWS = 2**31 - 1
