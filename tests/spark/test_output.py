"""The tasks' Parquet writer and the driver's commit: what Spark reads back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from lbparse.columnar.tables import MESSAGES
from lbparse.pipeline import output
from lbparse.pipeline.output import TableWriter, commit
from lbparse.pipeline.tasks import schema_of


def _rows(n: int, source: str) -> dict[str, pa.Array]:
    return {"source": pa.array([source] * n), "position": pa.array(range(n), pa.int64())}


def test_only_listed_files_are_committed(tmp_path: Path) -> None:
    fs = pafs.LocalFileSystem()
    tmp, dest = str(tmp_path / "d" / "_temporary" / "run"), str(tmp_path / "d")
    files = []
    for attempt in ("t0-a0", "t0-a1", "t1-a0"):  # t0-a0 failed: its files are not listed
        w = TableWriter(fs, f"{tmp}/{attempt}", schema_of)
        w.write(MESSAGES, 3, _rows(3, attempt))
        w.write("proto_Ack", 2, _rows(2, attempt))
        for f in w.close():
            assert f.path.startswith(f"{f.table}/part-") and f.rows == {"proto_Ack": 2}.get(
                f.table, 3
            )
            if attempt != "t0-a0":
                files.append((attempt, f.path))
    assert commit(fs, dest, tmp, files) == [MESSAGES, "proto_Ack"]
    names = sorted(str(p.relative_to(dest)) for p in Path(dest).rglob("*") if p.is_file())
    assert len(names) == 6 and {"messages/_SUCCESS", "proto_Ack/_SUCCESS"} <= set(names)
    assert all(n.split("/")[1].startswith("part-") for n in names if "_SUCCESS" not in n)
    assert not (Path(dest) / "_temporary").exists()


def test_spark_reads_what_the_tasks_wrote(spark: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """Rows of several writes (a row group each), a null msg_type_name read as null."""
    monkeypatch.setattr(output, "ROW_GROUP_BYTES", 1)  # a row group per write
    fs = pafs.LocalFileSystem()
    tmp, dest = str(tmp_path / "_temporary" / "r"), str(tmp_path)
    w = TableWriter(fs, f"{tmp}/a", schema_of)
    for value in ("Publish", "odd/na=me", None, "Publish"):
        w.write(
            MESSAGES,
            2,
            {**_rows(2, str(value)), "msg_type_name": pa.array([value] * 2, pa.string())},
        )
    commit(fs, dest, tmp, [("a", f.path) for f in w.close()])
    got = sorted(
        (
            (r.source, r.position, r.msg_type_name)
            for r in spark.read.parquet(f"{dest}/{MESSAGES}").collect()
        ),
        key=str,
    )
    assert got == sorted(
        [("Publish", i, "Publish") for i in (0, 1, 0, 1)]
        + [("odd/na=me", i, "odd/na=me") for i in (0, 1)]
        + [("None", i, None) for i in (0, 1)],
        key=str,
    )


def test_statistics_are_kept_for_numbers_times_source_and_subject(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    import lbparse
    from lbparse.columnar.decode_arrow import BatchDecoder, DecodeOptions
    from lbparse.columnar.schema import arrow_record_schema
    from lbparse.columnar.tables import tables_of

    msg = lbparse.message_class("proto.Message")(offset=7, stream="s", subject="a.b", key=b"k")
    env = lbparse.encode(msg, crc=True)
    rec = arrow_record_schema()
    cols = {
        "payload": pa.array([env] * 3, pa.binary()),
        "subject": pa.array(["a.b"] * 3),
        "source": pa.array(["f.parquet"] * 3),
        "position": pa.array([0, 1, 2], pa.int64()),
    }
    batch = pa.RecordBatch.from_arrays(
        [cols.get(f.name, pa.nulls(3, f.type)) for f in rec], schema=rec
    )
    decoded = BatchDecoder(DecodeOptions("v0")).decode(batch)
    w = TableWriter(pafs.LocalFileSystem(), str(tmp_path), schema_of)
    for name, table in tables_of(decoded).items():
        w.write_table(name, table)
    stats = {}
    for f in w.close():
        group = pq.ParquetFile(tmp_path / f.path).metadata.row_group(0)
        stats.update(
            {
                f"{f.table}.{group.column(i).path_in_schema}": group.column(i).is_stats_set
                for i in range(group.num_columns)
            }
        )
    assert stats["messages.position"] and stats["messages.crc32c"]
    assert stats["proto_Message.offset"] and stats["proto_Message.position"]
    assert stats["messages.source"] and stats["messages.subject"]
    assert stats["messages.msg_type_name"]  # what the MsgType partitions were for
    # Bytes and the strings inside payloads: no min/max (they cost, and serve no skipping).
    assert not stats["messages.payload"] and not stats["proto_Message.key"]
    assert not stats["proto_Message.stream"] and not stats["messages.payload_type"]
