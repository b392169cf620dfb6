"""The tasks' Parquet writer and the driver's commit: what Spark reads back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from lbparse.pipeline import output
from lbparse.pipeline.output import PartitionedWriter, commit, dataset_schema, partition_dir
from lbparse.pipeline.schema import PARTITION_COLUMN, arrow_output_schema


SCHEMA = dataset_schema(arrow_output_schema(), PARTITION_COLUMN)


def _rows(n: int, source: str) -> dict[str, pa.Array]:
    return {"source": pa.array([source] * n), "position": pa.array(range(n), pa.int64())}


def test_partition_directories_are_named_as_spark_names_them() -> None:
    assert partition_dir("m", "Publish") == "m=Publish"
    # Never Spark's __HIVE_DEFAULT_PARTITION__ (pandas fails on it): the summary's "(none)"
    assert partition_dir("m", None) == "m=(none)"
    assert partition_dir("m", "a/b=c%d:e") == "m=a%2Fb%3Dc%25d%3Ae"


def test_only_listed_files_are_committed(tmp_path: Path) -> None:
    fs = pafs.LocalFileSystem()
    tmp, dest = str(tmp_path / "d" / "_temporary" / "run"), str(tmp_path / "d")
    files = []
    for attempt in ("t0-a0", "t0-a1", "t1-a0"):  # t0-a0 failed: its files are not listed
        w = PartitionedWriter(fs, f"{tmp}/{attempt}", arrow_output_schema(), PARTITION_COLUMN)
        w.write("Ack", 3, _rows(3, attempt))
        for f in w.close():
            if attempt != "t0-a0":
                files.append((attempt, f.path))
    commit(fs, dest, tmp, files, SCHEMA)
    names = sorted(str(p.relative_to(dest)) for p in Path(dest).rglob("*") if p.is_file())
    assert len(names) == 4 and {"_SUCCESS", "_common_metadata"} <= set(names)
    assert all(n.startswith(f"{PARTITION_COLUMN}=Ack/part-") for n in names if "=" in n)
    assert not (Path(dest) / "_temporary").exists()


def test_spark_reads_what_the_tasks_wrote(spark: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(output, "ROW_GROUP_BYTES", 1)  # a row group per write
    fs = pafs.LocalFileSystem()
    tmp, dest = str(tmp_path / "_temporary" / "r"), str(tmp_path)
    w = PartitionedWriter(fs, f"{tmp}/a", arrow_output_schema(), PARTITION_COLUMN)
    for value in ("Publish", "odd/na=me", None, "Publish"):
        w.write(value, 2, _rows(2, str(value)))
    commit(fs, dest, tmp, [("a", f.path) for f in w.close()], SCHEMA)
    got = sorted((r.source, r.position, r.msg_type_name, r.proto_Message)
                 for r in spark.read.parquet(dest).collect())
    assert got == sorted([("Publish", i, "Publish", None) for i in (0, 1, 0, 1)]
                         + [("odd/na=me", i, "odd/na=me", None) for i in (0, 1)]
                         + [("None", i, "(none)", None) for i in (0, 1)])


def test_statistics_are_kept_for_numbers_times_source_and_subject(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from lbparse.columnar.decode_arrow import BatchDecoder, DecodeOptions
    from lbparse.pipeline.schema import arrow_record_schema
    import lbparse

    msg = lbparse.message_class("proto.Message")(offset=7, stream="s", subject="a.b", key=b"k")
    env = lbparse.encode(msg, crc=True)
    rec = arrow_record_schema()
    cols = {"payload": pa.array([env] * 3, pa.binary()), "subject": pa.array(["a.b"] * 3),
            "source": pa.array(["f.parquet"] * 3), "position": pa.array([0, 1, 2], pa.int64())}
    batch = pa.RecordBatch.from_arrays([cols.get(f.name, pa.nulls(3, f.type)) for f in rec],
                                       schema=rec)
    decoded = BatchDecoder(DecodeOptions("v0")).decode(batch)
    w = PartitionedWriter(pafs.LocalFileSystem(), str(tmp_path), arrow_output_schema(),
                          PARTITION_COLUMN)
    for value, n, columns in decoded.partitions(PARTITION_COLUMN):
        w.write(value, n, columns)
    (f,) = w.close()
    group = pq.ParquetFile(tmp_path / f.path).metadata.row_group(0)
    stats = {group.column(i).path_in_schema: group.column(i).is_stats_set
             for i in range(group.num_columns)}
    assert stats["position"] and stats["crc32c"] and stats["proto_Message.offset"]
    assert stats["source"] and stats["subject"]
    # Bytes and the strings inside payloads: no min/max (they cost, and serve no skipping).
    assert not stats["payload"] and not stats["proto_Message.key"]
    assert not stats["proto_Message.stream"] and not stats["payload_type"]
