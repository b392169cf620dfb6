"""The pipeline on Spark against a plain Spark scan-and-write, on local[2].

    make bench-spark            (python bench/bench_spark.py --run)

1. Writes 5 million envelopes of mixed MsgTypes (Publish 45%, Ack 40%,
   ReplicationRequest 5%, ReplicationResponse with 1-5 commit-log entries
   3%, other server RPCs 7%; CRC-32C on most) into Parquet (payload,
   subject, ts), from a pool of 100,000 distinct envelopes made by
   lbparse.encode.
2. Measures, in one Spark session on local[2], interleaved, three times
   each after a warm-up: a plain scan-and-write of that table
   (spark.read.parquet(...).write.parquet(...)), and `lbparse pipeline` on
   it with `--layout v0` (header, CRC, protobuf into typed columns,
   Parquet) and with the default `--layout auto` (the same, once each
   row's layout is known). Prints rows/s of each (medians) and the ratios
   pipeline / plain; target: >= 0.5.
3. Prints where each layout's pipeline time went (reading, decoding,
   writing, as the tasks measured them).
4. Writes a pcap of at least 1 GB (NATS PUB and MSG frames carrying the
   same envelopes over one TCP connection) and measures the pipeline on it
   (one capture file is one task: TCP is reassembled front to back); then
   deletes it.

Timings are printed, never asserted; the machine may be shared, so the
runs are interleaved and the medians compared. Without --run (as `make
bench` calls every bench/bench_*.py) it only says how to run it: it takes
minutes and ~3 GB of disk.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import lbparse
from lbparse.commitlog import CommitLogEntry, ReplicationResponse

T0 = 1_763_700_000_000_000_000
MIX = (("Publish", 0.45), ("Ack", 0.40), ("ReplicationRequest", 0.05),
       ("ReplicationResponse", 0.03), ("other RPCs", 0.07))
RPCS = (("protocol.ServerInfoResponse", lambda i: dict(id="s1", host="10.0.0.1", port=9292)),
        ("protocol.PartitionStatusRequest", lambda i: dict(stream="orders", partition=i % 8)),
        ("protocol.LeaderEpochOffsetResponse", lambda i: dict(endOffset=i)),
        ("protocol.RaftJoinRequest", lambda i: dict(nodeID=f"n{i}", nodeAddr="10.0.0.3:9293")),
        ("protocol.PartitionNotification", lambda i: dict(stream="orders", partition=i % 8)),
        ("protocol.PropagatedResponse", lambda i: dict(op=i % 10)))


def envelope_pool(n: int, seed: int = 1) -> tuple[list[bytes], list[str]]:
    """n distinct envelopes in the MIX, and their NATS subjects."""
    rnd = random.Random(seed)
    M = lbparse.message_class
    bounds = np.cumsum([share for _, share in MIX])
    payloads, subjects = [], []
    for i in range(n):
        kind = MIX[int(np.searchsorted(bounds, rnd.random()))][0]
        if kind == "Publish":
            stream = rnd.choice(("orders", "payments", "audit"))
            msg = M("proto.Message")(
                offset=i, key=b"%s-%d" % (stream.encode(), i), stream=stream,
                value=b'{"amount": %d, "sku": "A-%d"}' % (rnd.randrange(1000), i % 97),
                partition=i % 8, subject=f"{stream}.eu", timestamp=T0 + i,
                ackInbox=f"_INBOX.acks.{i % 16}", correlationId=f"c-{i}", ackPolicy=i % 3,
                headers={"content-type": b"application/json"} if i % 3 == 0 else {})
            payloads.append(lbparse.encode(msg, crc=i % 2 == 0))
            subjects.append(f"{stream}.eu")
        elif kind == "Ack":
            msg = M("proto.Ack")(stream="orders", partitionSubject=f"orders.eu.{i % 8}",
                                 msgSubject="orders.eu", offset=i, ackInbox=f"_INBOX.acks.{i % 16}",
                                 correlationId=f"c-{i}", ackPolicy=1, receptionTimestamp=T0 + i,
                                 commitTimestamp=T0 + i + 5000)
            payloads.append(lbparse.encode(msg, crc=True))
            subjects.append(f"_INBOX.acks.{i % 16}")
        elif kind == "ReplicationRequest":
            msg = M("protocol.ReplicationRequest")(replicaID=f"s{i % 3}", offset=i, leaderEpoch=4)
            payloads.append(lbparse.encode(msg, crc=True))
            subjects.append("liftbridge-default.replicate.orders.0")
        elif kind == "ReplicationResponse":
            entries = [CommitLogEntry(i + j, T0 + j, 4, key=b"k%d" % j, value=b"v" * 40,
                                      headers=[("subject", b"orders.eu")])
                       for j in range(1 + i % 5)]
            payloads.append(lbparse.encode(ReplicationResponse(4, i, entries), crc=True))
            subjects.append("liftbridge-default.replicate.orders.0.reply")
        else:
            name, fields = RPCS[i % len(RPCS)]
            payloads.append(lbparse.encode(M(name)(**fields(i)), crc=True))
            subjects.append("liftbridge-default.rpc")
    return payloads, subjects


def write_table(pool: tuple[list[bytes], list[str]], rows: int, out: Path, files: int = 4) -> int:
    """`rows` envelopes drawn from the pool into `files` Parquet files; bytes written."""
    payloads, subjects = pa.array(pool[0], pa.binary()), pa.array(pool[1])
    pick = np.random.default_rng(2).integers(0, len(payloads), rows)
    out.mkdir(parents=True)
    for f in range(files):
        sl = pa.array(pick[f * rows // files:(f + 1) * rows // files])
        ts = 1_763_700_000.0 + np.arange(len(sl)) * 1e-4 + f * 1e3
        pq.write_table(pa.table({"payload": payloads.take(sl), "subject": subjects.take(sl),
                                 "ts": pa.array(ts)}),
                       out / f"part-{f}.parquet", row_group_size=128 * 1024)
    return sum(p.stat().st_size for p in out.iterdir())


# -- a pcap of NATS traffic -----------------------------------------------------

def _frames(pool: tuple[list[bytes], list[str]], verb: str, n: int) -> bytes:
    out = []
    for p, s in zip(pool[0][:n], pool[1][:n]):
        head = f"PUB {s}  {len(p)}\r\n" if verb == "PUB" else f"MSG {s} 1 {len(p)}\r\n"
        out.append(head.encode() + p + b"\r\n")
    return b"".join(out)


def write_pcap(pool: tuple[list[bytes], list[str]], path: Path, min_bytes: int) -> int:
    """One TCP connection on loopback: the client publishes, the server delivers.

    The same frames repeat until the file holds `min_bytes`; segments are
    64 KB (as on loopback), so frames are cut across segments. Returns the
    number of NATS messages in it.
    """
    streams = {"c": _frames(pool, "PUB", len(pool[0])), "s": _frames(pool, "MSG", len(pool[0]))}
    per_stream = len(pool[0])  # frames in each stream
    ends = {"c": (b"\x7f\x00\x00\x01", 40000), "s": (b"\x7f\x00\x00\x01", 4222)}
    seq = {"c": 1000, "s": 5000}
    mss = 65_000
    messages = written = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        ts = 1_763_700_000.0
        while written < min_bytes:
            for side in ("c", "s"):
                data = streams[side]
                (src, sport), (dst, dport) = ends[side], ends["s" if side == "c" else "c"]
                for off in range(0, len(data), mss):
                    seg = data[off:off + mss]
                    tcp = struct.pack("!HHIIHHHH", sport, dport, seq[side] & 0xFFFFFFFF, 0,
                                      (5 << 12) | 0x18, 65535, 0, 0)
                    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(seg), 0,
                                     0x4000, 64, 6, 0, src, dst)
                    frame = b"\0" * 12 + b"\x08\x00" + ip + tcp + seg
                    ts += 1e-5
                    f.write(struct.pack("<IIII", int(ts), int(ts % 1 * 1e6), len(frame),
                                        len(frame)) + frame)
                    seq[side] += len(seg)
                    written += 16 + len(frame)
                messages += per_stream
    return messages


# -- what the narrow tables save ----------------------------------------------------

def table_cost(table: Path, rows: int, rounds: int) -> None:
    """The task's own loop (read, decode, write: tasks.process_unit) on `rows` rows of
    the table, in this process, writing one table per message type (what the
    pipeline writes) and, for comparison, decode_arrow's one wide row (~150 leaf
    columns, mostly null: what it wrote before issue #24), interleaved; prints both."""
    import pyarrow.fs as pafs

    from lbparse.columnar.decode_arrow import DecodeOptions
    from lbparse.columnar.schema import arrow_output_schema
    from lbparse.pipeline.output import TableWriter, _options, dataset_schema
    from lbparse.pipeline.sources import SourceOptions, plan
    from lbparse.pipeline.tasks import (TaskOptions, decode_unit, new_counts, process_unit,
                                        schema_of)

    first = sorted(table.iterdir())[0]
    small = table.parent / "table-cost.parquet"
    pq.write_table(pq.read_table(first).slice(0, rows), small, row_group_size=128 * 1024)
    units = plan([str(small)], SourceOptions())
    options = TaskOptions(DecodeOptions(layout="v0"), SourceOptions())
    out = table.parent / "table-cost"

    def narrow() -> None:
        w = TableWriter(pafs.LocalFileSystem(), str(out), schema_of)
        for u in units:
            process_unit(u, options, w)
        w.close()

    def wide() -> None:
        schema = dataset_schema(arrow_output_schema())
        out.mkdir()
        with pq.ParquetWriter(out / "wide.parquet", schema, **_options(schema)) as w:
            for u in units:
                for decoded in decode_unit(u, options, new_counts()):
                    w.write_batch(decoded.to_batch().replace_schema_metadata(schema.metadata))

    times: dict[str, list[float]] = {"one table per type": [], "one wide row": []}
    for _ in range(rounds):
        for name, fn in (("one table per type", narrow), ("one wide row", wide)):
            shutil.rmtree(out, ignore_errors=True)
            times[name].append(timed(fn)[0])
    shutil.rmtree(out, ignore_errors=True)
    small.unlink()
    med = {k: statistics.median(v) for k, v in times.items()}
    n = sum(u.rows or 0 for u in units)
    print(f"one task's loop on {n:,} rows (read, decode v0, write), in this process, "
          f"medians of {rounds} interleaved rounds:")
    for k, v in med.items():
        print(f"  {k:20} {v / n * 1e6:.2f} us a row")
    print(f"  one table per type: {med['one table per type'] / med['one wide row']:.2f}x "
          "the wide row's loop\n")


# -- measuring ------------------------------------------------------------------

def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def breakdown(what: str, wall: float, tt: dict[str, Any], rows: int) -> str:
    """Where a run's task time went, in seconds and per row."""
    busy = tt["read_seconds"] + tt["decode_seconds"] + tt["write_seconds"]
    per = {k: tt[f"{k}_seconds"] / rows * 1e6 for k in ("read", "decode", "write")}
    return (f"{what}: {wall:.1f} s on 2 cores; its tasks spent {tt['read_seconds']:.1f} s "
            f"reading Parquet, {tt['decode_seconds']:.1f} s decoding, {tt['write_seconds']:.1f} s "
            f"writing Parquet ({busy:.1f} s of {2 * wall:.1f} core-seconds; per row: "
            f"{per['read']:.2f} / {per['decode']:.2f} / {per['write']:.2f} us)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true", help="run it (takes minutes, ~3 GB of disk)")
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--pcap-gb", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    args = ap.parse_args()
    if not args.run:
        print("bench_spark: skipped (minutes, ~3 GB of disk): run `make bench-spark`")
        return 0
    from pyspark import __version__ as spark_version

    from lbparse.columnar.decode_arrow import DecodeOptions
    from lbparse.pipeline.job import PipelineOptions, run
    from lbparse.pipeline.session import TEST_CONF, spark_session

    work = Path(args.dir or tempfile.mkdtemp(prefix="lbparse-bench-spark-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        print(f"lbparse pipeline benchmark: local[2], Spark {spark_version}, Python "
              f"{platform.python_version()}, {os.cpu_count()} CPUs, work dir {work}")
        t, pool = timed(lambda: envelope_pool(100_000))
        print(f"envelope pool: 100,000 distinct envelopes in {t:.1f} s; mix: "
              + ", ".join(f"{name} {share:.0%}" for name, share in MIX))
        table = work / "table"
        t, size = timed(lambda: write_table(pool, args.rows, table))
        print(f"table: {args.rows:,} envelopes, 4 Parquet files, {size / 1e6:,.0f} MB "
              f"(written in {t:.1f} s)\n")

        table_cost(table, min(args.rows, 1_000_000), args.rounds)
        spark = spark_session("local[2]", conf=TEST_CONF)

        def plain() -> None:
            spark.read.parquet(str(table)).write.mode("overwrite").parquet(str(work / "plain"))

        def pipeline(layout: str = "v0", inputs: tuple[str, ...] = (str(table),)) -> Any:
            return run(spark, PipelineOptions(inputs=inputs, out=str(work / "pipe"),
                                              overwrite=True, decode=DecodeOptions(layout=layout)))

        warm = work / "warm"
        write_table(pool, 200_000, warm, files=2)
        spark.read.parquet(str(warm)).write.mode("overwrite").parquet(str(work / "plain"))
        layouts = ("v0", "auto")
        for layout in layouts:
            pipeline(layout, (str(warm),))
        results: dict[str, list[float]] = {"plain scan+write": []}
        results.update({f"pipeline --layout {lay}": [] for lay in layouts})
        last: dict[str, Any] = {}
        for _ in range(args.rounds):
            results["plain scan+write"].append(timed(plain)[0])
            for layout in layouts:
                t, last[layout] = timed(lambda lay=layout: pipeline(lay))
                results[f"pipeline --layout {layout}"].append(t)
        for summary in last.values():
            assert not summary.checks(), summary.checks()
        print(f"{'':26}" + "".join(f"{'run ' + str(i + 1):>12}" for i in range(args.rounds))
              + f"{'median':>14}")
        med = {}
        for name, times in results.items():
            med[name] = statistics.median(times)
            print(f"{name:26}" + "".join(f"{args.rows / t:>12,.0f}" for t in times)
                  + f"{args.rows / med[name]:>14,.0f}  rows/s")
        print()
        for layout in layouts:
            name = f"pipeline --layout {layout}"
            ratio = med["plain scan+write"] / med[name]
            print(f"ratio {name} / plain (medians): {ratio:.2f}   (target: at least 0.50)")
        for layout in layouts:
            wall = results[f"pipeline --layout {layout}"][-1]
            print(breakdown(f"last --layout {layout} run", wall, last[layout].totals(), args.rows))

        shutil.rmtree(table)
        shutil.rmtree(work / "plain", ignore_errors=True)
        pcap = work / "nats.pcap"
        t, messages = timed(lambda: write_pcap(pool, pcap, int(args.pcap_gb * 1e9)))
        gb = pcap.stat().st_size / 1e9
        print(f"\npcap: {gb:.2f} GB, {messages:,} NATS messages (PUB and MSG), written in {t:.1f} s")
        t, summary = timed(lambda: pipeline(inputs=(str(pcap),)))
        assert not summary.checks(), summary.checks()
        tt = summary.totals()
        print(f"pipeline on the pcap: {t:.1f} s: {gb / t:.3f} GB/s, {tt['rows'] / t:,.0f} rows/s "
              f"(one file, one task: read {tt['read_seconds']:.1f} s, decode "
              f"{tt['decode_seconds']:.1f} s, write {tt['write_seconds']:.1f} s; the Python "
              f"worker peaked at {tt['peak_rss_mb']:,.0f} MB)")
        pcap.unlink()
        spark.stop()
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
