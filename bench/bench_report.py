"""lbparse report at scale: a capture of 300,000 messages (BENCH_REPORT_MESSAGES:
a million took 17 minutes of `make bench` on a loaded machine), read,
aggregated, rendered; the page's size.

The capture is generated here (a temporary directory): Liftbridge traffic
shaped like a cluster's, one NATS message per packet, each sent as a PUB
and delivered as a MSG: publishes with AckPolicy LEADER/ALL/NONE and their
acks, followers' ReplicationRequests and the leader's ReplicationResponses
on four partitions (with a leader change half-way), a few 503s, spread
over ten minutes. Interleaved runs, medians, in one process:

  read      CaptureReader with decoding (--layout v0 and auto): the record
            path's floor
  records   build_model through the record path (CaptureReader, Aggregator.add
            per record: the reference) and render_html
  columns   build_model through the columnar path (report/fast_path.py: the
            pipeline's decoded Arrow batches, the C capture reader where this
            lbparse has it) and render_html

and the ratios columns/records and records/read, the rate in messages/s,
the HTML size.
Target: a million messages in seconds, the page a few MB at most.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_capture import PcapWriter
from benchdoc import Section, pin_one_core

import lbparse
from lbparse.capture import HOT_MODULES, CaptureReader, compiled_modules
from lbparse.codec.commitlog import ReplicationResponse
from lbparse.report import build_model, render_html
from lbparse.report.inputs import ReadOptions

MESSAGES = int(os.environ.get("BENCH_REPORT_MESSAGES", 300_000))
RUNS = 3
NS = "liftbridge-default"


def make_capture(path: str, n: int) -> int:
    w = PcapWriter(path)
    w.ts = 1_790_000_000.0
    step = 600.0 / n  # ten minutes in all
    Message, Ack = lbparse.message_class("proto.Message"), lbparse.message_class("proto.Ack")
    Req = lbparse.message_class("protocol.ReplicationRequest")
    sent = 0
    i = 0

    def send(subject: str, payload: bytes, reply: str = "", hdr: bytes = b"") -> None:
        nonlocal sent
        r = f" {reply}" if reply else ""
        if hdr:
            w.send(
                1,
                b"HMSG %s 1%s %d %d\r\n"
                % (subject.encode(), r.encode(), len(hdr), len(hdr) + len(payload))
                + hdr
                + payload
                + b"\r\n",
            )
            sent += 1
        else:
            w.send(
                0,
                b"PUB %s%s %d\r\n" % (subject.encode(), r.encode(), len(payload))
                + payload
                + b"\r\n",
            )
            w.send(
                1,
                b"MSG %s 1%s %d\r\n" % (subject.encode(), r.encode(), len(payload))
                + payload
                + b"\r\n",
            )
            sent += 2
        w.ts += step * (1 if not hdr else 0.5) - 0.00001 * (1 if hdr else 2)

    while sent < n:
        part = i % 4
        epoch = 5 if sent < n // 2 else 9
        policy = i % 3
        cid = f"c{i}"
        send(
            f"orders.{part}",
            lbparse.encode(
                Message(
                    stream="orders",
                    partition=part,
                    value=b"x" * 40,
                    ackInbox="acks.bench",
                    correlationId=cid,
                    ackPolicy=policy,
                )
            ),
        )
        if policy != 2 and i % 50:
            send(
                "acks.bench",
                lbparse.encode(
                    Ack(
                        stream="orders",
                        ackInbox="acks.bench",
                        correlationId=cid,
                        ackPolicy=policy,
                        offset=i,
                    )
                ),
            )
        reply = f"_INBOX.f{part}.{i}"
        send(
            f"{NS}.orders.{part}.replicate",
            lbparse.encode(Req(replicaID=f"node{part % 3 + 1}", offset=i, leaderEpoch=epoch)),
            reply,
        )
        if i % 1000 == 999:
            send(reply, b"", hdr=b"NATS/1.0 503\r\n\r\n")
        else:
            send(reply, lbparse.encode(ReplicationResponse(epoch, i + 3, [])))
        i += 1
    w.close()
    return sent


def read_only(path: str, layout: str) -> int:
    n = 0
    for _ in CaptureReader(path, layout=layout):
        n += 1
    return n


def report(path: str, layout: str, fast: bool) -> int:
    model = build_model([path], ReadOptions(layout=layout, fast=fast))
    return len(render_html(model).encode())


def main() -> None:
    section = Section(
        "report", "lbparse report at scale", "python bench/bench_report.py (make bench)"
    )
    section.cpu = pin_one_core()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.pcap")
        t = time.perf_counter()
        n = make_capture(path, MESSAGES)
        print(f"capture modules compiled: {len(compiled_modules())} of {len(HOT_MODULES)}")
        print(
            f"capture: {n:,} messages, {os.path.getsize(path) / 1e6:.0f} MB "
            f"(made in {time.perf_counter() - t:.0f} s)"
        )
        made = time.perf_counter() - t
        try:
            from lbparse.report.fast_path import native_reader

            native = f"{native_reader()}"
        except ImportError:  # the columnar path reads through lbparse's public core now
            native = "(not said)"
        print(f"columnar path reads with the C capture reader: {native}")
        report(path, "v0", True)  # warm: imports, the Vega bundle's cache, the decoder
        times: dict[str, list[float]] = {}
        size = 0
        for _ in range(RUNS):
            for layout in ("v0", "auto"):
                t = time.perf_counter()
                read_only(path, layout)
                times.setdefault(f"read {layout}", []).append(time.perf_counter() - t)
                for fast, name in ((False, "records"), (True, "columns")):
                    t = time.perf_counter()
                    size = report(path, layout, fast)
                    times.setdefault(f"{name} {layout}", []).append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        rows = []
        for layout in ("v0", "auto"):
            r, rec, col = (med[f"{k} {layout}"] for k in ("read", "records", "columns"))
            print(
                f"--layout {layout:<5} read {r:6.1f} s   records {rec:6.1f} s   "
                f"columns {col:6.1f} s ({n / col:,.0f} messages/s)   "
                f"columns/records {col / rec:.2f}x   records/read {rec / r:.2f}x"
            )
            rows.append(
                [
                    f"`--layout {layout}`",
                    f"{r:.1f}",
                    f"{rec:.1f}",
                    f"{col:.1f} ({n / col:,.0f} messages/s)",
                    f"{col / rec:.2f}x",
                    f"{rec / r:.2f}x",
                ]
            )
        print(f"page: {size / 1e6:.2f} MB (medians of {RUNS} interleaved runs)")
        section.para(
            f"A generated capture of {n:,} messages ({os.path.getsize(path) / 1e6:.0f} MB, made "
            f"in {made:.0f} s), Liftbridge-shaped: publishes of every AckPolicy and their acks, "
            "replication requests and responses on four partitions with a leader change, 503s, "
            "over ten minutes. `read`: `CaptureReader` with decoding alone; `records`: the "
            "report through the record path (the reference); `columns`: through the columnar "
            f"path (C capture reader: {native}); both with `render_html`. Wall clock, pinned to "
            f"one core, medians of {RUNS} interleaved runs in one process (seconds). The page: "
            f"{size / 1e6:.2f} MB. Capture modules compiled: {len(compiled_modules())} of "
            f"{len(HOT_MODULES)}."
        )
        section.table(
            ["", "read", "records", "columns", "columns / records", "records / read"], rows
        )
    section.write()


if __name__ == "__main__":
    main()
