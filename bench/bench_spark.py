"""The pipeline on Spark against a plain Spark scan-and-write of the same rows, on local[2].

    make bench-spark            (python bench/bench_spark.py --run [--rows N] [--rounds R])

1. Writes ROWS (5 million) envelopes of mixed MsgTypes (Publish 45%, Ack
   40%, ReplicationRequest 5%, ReplicationResponse with 1-5 commit-log
   entries 3%, other server RPCs 7%; CRC-32C on most) into Parquet
   (payload, subject, ts), from a pool of 100,000 distinct envelopes made by
   lbparse.encode (seeded: the same table at every run).
2. Starts one Spark session on local[2] and measures in it, interleaved,
   ROUNDS times each after a warm-up: a plain scan-and-write of that table
   (spark.read.parquet(...).write.parquet(...)), and `lbparse pipeline` on
   it with `--layout v0` and with the default `--layout auto`, each run
   through the command's own entry point (lbparse.cli.main, which runs in
   the session already there): whatever tables the pipeline writes, it is
   timed whole, from its arguments to its summary.
3. Prints rows/s of each (medians), the ratios plain / pipeline (target:
   >= 0.8), and where the pipeline's time went as its summary.json says
   (the tasks' reading, decoding and writing), and writes its section of
   docs/pages/benchmarks.md.

Timings are printed, never asserted. Without --run (as `make bench` calls
every bench/bench_*.py) it only says how to run it: it takes minutes and
~2 GB of disk (a temporary directory, removed after). bench_big.py uses
its session and pipeline helpers (its capture is real traffic scaled up).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdoc import Section

import lbparse
from lbparse.codec.commitlog import CommitLogEntry, ReplicationResponse

T0 = 1_763_700_000_000_000_000
MIX = (
    ("Publish", 0.45),
    ("Ack", 0.40),
    ("ReplicationRequest", 0.05),
    ("ReplicationResponse", 0.03),
    ("other RPCs", 0.07),
)
RPCS = (
    ("protocol.ServerInfoResponse", lambda i: dict(id="s1", host="10.0.0.1", port=9292)),
    ("protocol.PartitionStatusRequest", lambda i: dict(stream="orders", partition=i % 8)),
    ("protocol.LeaderEpochOffsetResponse", lambda i: dict(endOffset=i)),
    ("protocol.RaftJoinRequest", lambda i: dict(nodeID=f"n{i}", nodeAddr="10.0.0.3:9293")),
    ("protocol.PartitionNotification", lambda i: dict(stream="orders", partition=i % 8)),
    ("protocol.PropagatedResponse", lambda i: dict(op=i % 10)),
)


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
                offset=i,
                key=b"%s-%d" % (stream.encode(), i),
                stream=stream,
                value=b'{"amount": %d, "sku": "A-%d"}' % (rnd.randrange(1000), i % 97),
                partition=i % 8,
                subject=f"{stream}.eu",
                timestamp=T0 + i,
                ackInbox=f"_INBOX.acks.{i % 16}",
                correlationId=f"c-{i}",
                ackPolicy=i % 3,
                headers={"content-type": b"application/json"} if i % 3 == 0 else {},
            )
            payloads.append(lbparse.encode(msg, crc=i % 2 == 0))
            subjects.append(f"{stream}.eu")
        elif kind == "Ack":
            msg = M("proto.Ack")(
                stream="orders",
                partitionSubject=f"orders.eu.{i % 8}",
                msgSubject="orders.eu",
                offset=i,
                ackInbox=f"_INBOX.acks.{i % 16}",
                correlationId=f"c-{i}",
                ackPolicy=1,
                receptionTimestamp=T0 + i,
                commitTimestamp=T0 + i + 5000,
            )
            payloads.append(lbparse.encode(msg, crc=True))
            subjects.append(f"_INBOX.acks.{i % 16}")
        elif kind == "ReplicationRequest":
            msg = M("protocol.ReplicationRequest")(replicaID=f"s{i % 3}", offset=i, leaderEpoch=4)
            payloads.append(lbparse.encode(msg, crc=True))
            subjects.append("liftbridge-default.replicate.orders.0")
        elif kind == "ReplicationResponse":
            entries = [
                CommitLogEntry(
                    i + j,
                    T0 + j,
                    4,
                    key=b"k%d" % j,
                    value=b"v" * 40,
                    headers=[("subject", b"orders.eu")],
                )
                for j in range(1 + i % 5)
            ]
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
        sl = pa.array(pick[f * rows // files : (f + 1) * rows // files])
        ts = 1_763_700_000.0 + np.arange(len(sl)) * 1e-4 + f * 1e3
        pq.write_table(
            pa.table(
                {"payload": payloads.take(sl), "subject": subjects.take(sl), "ts": pa.array(ts)}
            ),
            out / f"part-{f}.parquet",
            row_group_size=128 * 1024,
        )
    return sum(p.stat().st_size for p in out.iterdir())


# -- a pcap of NATS traffic -----------------------------------------------------


# -- measuring ------------------------------------------------------------------

MASTER = "local[2]"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


@contextlib.contextmanager
def session(master: str = MASTER) -> Iterator[Any]:
    """A plain Spark session: the one the plain scan-and-write runs in, and the
    one `lbparse pipeline` finds already active and runs in."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(master)
        .appName("lbparse bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()


def pipeline(inputs: list[str], out: Path, *args: str) -> dict[str, Any]:
    """`lbparse pipeline INPUTS -o OUT --overwrite ARGS` by its entry point, in
    this process (so in the active session); its summary.json. Its printed
    report is kept from the bench's output; a failed run stops the bench."""
    from lbparse.cli import main as lbparse_main

    argv = [
        "pipeline",
        *inputs,
        "-o",
        str(out),
        "--overwrite",
        "--quiet",
        "--master",
        MASTER,
        *args,
    ]
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        status = lbparse_main(argv)
    if status != 0:
        raise SystemExit(f"lbparse {' '.join(argv)}: exit status {status}\n{said.getvalue()}")
    return json.loads((out / "summary.json").read_text())


def where(summary: dict[str, Any], wall: float, cores: int = 2) -> str:
    """Where a run's task time went, as its summary.json says (if it says)."""
    t = summary.get("totals", {})
    parts = [(k, t.get(f"{k}_seconds")) for k in ("read", "decode", "write")]
    if any(v is None for _, v in parts):
        return "(summary.json gives no task times)"
    rows = t.get("rows") or 1
    busy = sum(v for _, v in parts)
    return (
        ", ".join(f"{k} {v:.1f} s ({v / rows * 1e6:.2f} us a row)" for k, v in parts)
        + f": {busy:.1f} of {cores * wall:.1f} core-seconds"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true", help="run it (takes minutes, ~2 GB of disk)")
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not args.run:
        print("bench_spark: skipped (minutes, ~2 GB of disk): run `make bench-spark`")
        return 0
    section = Section(
        "spark",
        "The pipeline against a plain Spark scan-and-write",
        f"make bench-spark (python bench/bench_spark.py --run --rows {args.rows} "
        f"--rounds {args.rounds})",
    )
    work = Path(tempfile.mkdtemp(prefix="lbparse-bench-spark-"))
    try:
        t, pool = timed(lambda: envelope_pool(100_000))
        print(
            f"envelope pool: 100,000 distinct envelopes in {t:.1f} s; mix: "
            + ", ".join(f"{name} {share:.0%}" for name, share in MIX)
        )
        table, warm = work / "table", work / "warm"
        t, size = timed(lambda: write_table(pool, args.rows, table))
        write_table(pool, 200_000, warm, files=2)
        print(
            f"table: {args.rows:,} envelopes, 4 Parquet files, {size / 1e6:,.0f} MB "
            f"(written in {t:.1f} s)",
            flush=True,
        )
        layouts = ("v0", "auto")
        names = ["plain scan-and-write", *(f"lbparse pipeline --layout {lay}" for lay in layouts)]
        times: dict[str, list[float]] = {n: [] for n in names}
        last: dict[str, dict[str, Any]] = {}
        with session() as spark:

            def plain(src: Path) -> None:
                spark.read.parquet(str(src)).write.mode("overwrite").parquet(str(work / "plain"))

            plain(warm)  # warm: the JVM's scan and write paths, the Python workers
            for layout in layouts:
                pipeline([str(warm)], work / "pipe", "--layout", layout)
            for r in range(args.rounds):
                times[names[0]].append(timed(lambda: plain(table))[0])
                for name, layout in zip(names[1:], layouts):
                    t, last[name] = timed(
                        lambda lay=layout: pipeline([str(table)], work / "pipe", "--layout", lay)
                    )
                    times[name].append(t)
                print(
                    f"round {r + 1}: " + ", ".join(f"{n} {times[n][-1]:.1f} s" for n in names),
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {n: statistics.median(v) for n, v in times.items()}
    rows = []
    for n in names:
        ratio = med[names[0]] / med[n]
        per_round = [p / q for p, q in zip(times[names[0]], times[n])]
        rows.append(
            [
                n,
                " / ".join(f"{args.rows / t:,.0f}" for t in times[n]),
                f"{args.rows / med[n]:,.0f}",
                f"{med[n]:.1f}",
                "" if n == names[0] else f"**{ratio:.2f}**",
                "" if n == names[0] else f"{min(per_round):.2f}–{max(per_round):.2f}",
            ]
        )
        print(
            f"{n:32} {args.rows / med[n]:>12,.0f} rows/s  ({med[n]:.1f} s)"
            + ("" if n == names[0] else f"  plain / this = {ratio:.2f}")
        )
    for n in names[1:]:
        section.target(
            f"{n}: plain scan-and-write's time / its time",
            med[names[0]] / med[n],
            ">=",
            0.8,
            "{:.2f}",
        )
        print(f"{n}, last round: {where(last[n], times[n][-1])}")
    section.para(
        f"{args.rows:,} envelopes of mixed MsgTypes in 4 Parquet files ({size / 1e6:,.0f} MB: "
        + ", ".join(f"{name} {share:.0%}" for name, share in MIX)
        + "; CRC-32C on most), drawn from 100,000 distinct envelopes made by `lbparse.encode`. "
        f"One Spark session on {MASTER} (not pinned: two cores), warmed up, then {args.rounds} "
        "interleaved rounds of: a plain `spark.read.parquet(...).write.parquet(...)` of the "
        "table, and `lbparse pipeline TABLE -o OUT --overwrite --layout v0` and `--layout "
        "auto` run by the command's entry point in that session (whatever tables it writes), "
        "each timed whole (wall clock). The ratio is the plain scan-and-write's median time "
        "over the pipeline's: 1.0 would be decoding for free."
    )
    section.table(
        ["", "rows/s, each round", "rows/s, median", "seconds", "plain / this", "per round"], rows
    )
    section.para(
        "Where the pipeline's last runs spent their time, as their summary.json "
        "says (the tasks' own clocks): "
        + "; ".join(
            f"`--layout {lay}`: {where(last[n], times[n][-1])}"
            for n, lay in zip(names[1:], layouts)
        )
        + "."
    )
    section.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
