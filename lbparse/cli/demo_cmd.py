"""Decode the bundled examples: envelopes one by one, then a capture on Spark.

First the example envelopes (lbparse/examples/envelopes.hex), a table per
MsgType: publishes, acks and server-to-server RPCs, with and without
CRC-32C, and one corrupt envelope. Then the data pipeline, as
`lbparse pipeline` runs it, in local mode on every core: on a capture of
real NATS traffic (lbparse/examples/sample.pcap, 196 messages of every
MsgType, a few damaged on purpose, recorded from a real nats-server with
tcpdump), printing the summary, where the Parquet went, and a look at
the decoded columns (messages joined to their payload tables). Last, the
report of that capture (`lbparse report`): one HTML page of charts,
written beside the pipeline's output (its path is printed). --no-pipeline
skips Spark (the envelopes and the report remain).

The output directory (-o DIR, default out/demo) is checked before
anything runs, as `lbparse pipeline --overwrite` checks it: each run
replaces the pipeline's tables (DIR/messages, DIR/proto_Message, ...),
DIR/summary.json and DIR/report.html, and nothing else in DIR.
"""

from __future__ import annotations

import argparse
import os
from collections import defaultdict
from importlib import resources
from typing import Any

from lbparse.capture import default_layout
from lbparse.cli.pipeline_cmd import add_output_argument, print_report
from lbparse.codec.api import decode
from lbparse.columnar.decode_arrow import DecodeOptions
from lbparse.errors import EnvelopeError
from lbparse.extras import need
from lbparse.outputs import FileOutput, check_dir, check_file
from lbparse.pipeline import outdir
from lbparse.pipeline.session import TEST_CONF, run_session
from lbparse.report.build import build_model
from lbparse.scratch import replace_file
from lbparse.textform import msg_type_word

NAME = "demo"
MAX_COLUMNS = 5
MAX_WIDTH = 24


def example_lines() -> list[str]:
    """The bundled example envelopes (lbparse/examples/envelopes.hex), one hex string each.

    Returns:
        The hex lines, blank lines and # comments left out.
    """
    text = resources.files("lbparse.examples").joinpath("envelopes.hex").read_text()
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add `lbparse demo`'s options to its parser.

    Args:
        p: The command's parser.
    """
    p.add_argument(
        "--no-pipeline",
        dest="pipeline",
        action="store_false",
        help="only decode the example envelopes (no Spark)",
    )
    add_output_argument(
        p,
        required=False,
        default="out/demo",
        help="where the pipeline and the report write (default: out/demo; "
        "DIR/messages, DIR/summary.json and DIR/report.html replaced each run)",
    )


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_WIDTH else text[: MAX_WIDTH - 1] + "…"


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    """Print rows as an aligned table under a title (at most MAX_COLUMNS columns).

    Args:
        title: The line above the table.
        rows: The rows; their keys, in first-seen order, are the columns.
    """
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    columns = columns[:MAX_COLUMNS]
    cells = [[_cell(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(title)
    print("  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for r in cells:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    print()


def decode_examples() -> None:
    """Decode the bundled example envelopes and print them by MsgType, then the rejected ones."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    errors: list[tuple[int, EnvelopeError]] = []
    lines = example_lines()
    for i, line in enumerate(lines, 1):
        try:
            env = decode(bytes.fromhex(line))
        except EnvelopeError as exc:
            errors.append((i, exc))
            continue
        crc = "none" if env.crc32c is None else f"{env.crc32c:08x}"
        row = {"#": i, "crc32c": crc, **env.to_json_dict()["payload_json"]}
        groups[
            f"MsgType {env.msg_type} {msg_type_word(env.msg_type_name)} ({env.payload_type})"
        ].append(row)
    print(
        f"Decoded {len(lines)} example envelopes: {len(lines) - len(errors)} ok, "
        f"{len(errors)} rejected\n"
    )
    for title in sorted(groups, key=lambda t: int(t.split()[1])):
        print_table(title, groups[title])
    for i, err in errors:
        print(f"#{i} rejected: {err.kind}: {err.message}")


def check_outputs(out: str, pipeline: bool) -> FileOutput:
    """The demo's outputs, checked before any work (lbparse.outputs); the report's.

    Args:
        out: The output directory (-o).
        pipeline: Whether the pipeline writes there too (its dataset is checked
            as `lbparse pipeline` checks it).

    Returns:
        The report page's checked output (DIR/report.html).
    """
    with resources.as_file(resources.files("lbparse.examples").joinpath("sample.pcap")) as sample:
        inputs = [str(sample)]
        if pipeline:
            outdir.check(out, True, inputs, writes_entries=False)
        else:
            check_dir(out, "-o", inputs)
        page = os.path.join(out, "report.html")
        if not os.path.isdir(out):  # made by the run: nothing there to check
            return FileOutput("-o", page, "replace")
        return check_file(page, "-o", inputs)


def run_pipeline(out: str) -> int:
    """Run the Spark pipeline on the bundled capture into `out`, and show some rows.

    Args:
        out: The output directory.

    Returns:
        0 if the pipeline's checks pass, else 1.
    """
    job = need("lbparse.pipeline.job")  # Spark's: the spark extra
    layout = default_layout()
    with resources.as_file(resources.files("lbparse.examples").joinpath("sample.pcap")) as sample:
        print(f"\n== lbparse pipeline {sample} -o {out} --layout {layout} --overwrite")
        print("   (Spark in local mode on every core; the first start takes a few seconds)\n")
        with run_session(conf=TEST_CONF) as spark:
            summary = job.run(
                spark,
                job.PipelineOptions(
                    inputs=(str(sample),),
                    out=out,
                    overwrite=True,
                    decode=DecodeOptions(layout=layout),
                ),
            )
            print_report(summary, out)
            peek(spark, out)
    return 0 if not summary.checks() else 1


def peek(spark: Any, out: str) -> None:
    """A few rows of the tables, joined by (source, position), to show the typed columns.

    Args:
        spark: The running SparkSession.
        out: The pipeline's output directory.
    """
    F = need("pyspark.sql.functions")

    def table(name: str) -> Any:
        return spark.read.parquet(os.path.join(out, name))

    key = ["source", "position"]
    messages = table("messages").where("direction = 'client_to_server'")
    rows = (
        messages.where("msg_type_name = 'Publish'")
        .join(table("proto_Message"), key)
        .orderBy("position")
        .limit(4)
        .select(
            "position",
            messages["subject"],
            "stream",
            "offset",
            F.col("value").cast("string").alias("value"),
        )
        .collect()
    )
    print_table(
        f"\nDIR/messages joined to DIR/proto_Message on (source, position), "
        f"DIR = {out!r}: Publish rows, typed columns",
        [r.asDict() for r in rows],
    )
    counts = (
        messages.where("msg_type_name = 'Ack'")
        .join(table("proto_Ack"), key)
        .groupBy("stream", "ackError")
        .count()
        .orderBy("stream", "ackError")
        .collect()
    )
    print_table(
        "Acks per stream and proto_Ack.ackError (OK is enum value 0: a value, as the data has it)",
        [r.asDict() for r in counts],
    )


def write_report(out: str, page: FileOutput | None = None) -> str:
    """The report of the bundled capture, as `lbparse report` writes it.

    Args:
        out: The output directory (made if missing).
        page: The page's output, as checked before the run; None: DIR/report.html
            replaced whole, whatever is there.

    Returns:
        The page's path.
    """
    render_html = need("lbparse.report.render").render_html  # Altair's: the report extra
    path = page.path if page is not None else os.path.join(out, "report.html")
    with resources.as_file(resources.files("lbparse.examples").joinpath("sample.pcap")) as sample:
        print(f"\n== lbparse report {sample} -o {path}")
        model = build_model([str(sample)])
    os.makedirs(out, exist_ok=True)
    # Through a fresh file renamed over it (a link there was refused when
    # checked, and one planted since is replaced, never written through).
    if page is not None:
        page.write(render_html(model))
    else:  # unchecked: whatever is at the name is replaced by a rename
        replace_file(path, render_html(model))
    t = model["totals"]
    print(
        f"{t['messages']} messages, {model['latency']['acked']} publishes paired with their "
        f"acks, {model['problems']['total']} problems shown"
    )
    print(f"report: {path}  (one self-contained page: open it in any browser)")
    return path


def run(args: argparse.Namespace) -> int:
    """Run `lbparse demo`: decode the examples, run the pipeline, write the report.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 ok, 1 if the pipeline's checks failed.
    """
    page = check_outputs(args.out, args.pipeline)
    decode_examples()
    status = run_pipeline(args.out) if args.pipeline else 0
    write_report(args.out, page)
    return status
