"""Every example of the manual (README.md, docs/pages/*.md) is run.

Each fenced block has an HTML comment right before it, visible in the
Markdown: `<!-- example: NAME -->`, run here (EXAMPLES); `<!-- KIND example:
NAME -->`, run by the test file of that kind (ELSEWHERE); or `<!-- not run:
REASON -->`. test_every_block_is_run_or_says_why fails for a block with none.

How a block is run, by its kind:
- a transcript (`$ command`, then what it prints): each command in bash, its
  stdout and stderr as a terminal shows them, held against the lines the
  manual shows (tests/support/docs.py says how `...` and `…` read);
- `sh`: the block as a bash script (`set -e`); `python`: the block in a fresh
  `python -P`, then EXAMPLES' `claims` (what its comments say it gives);
  `sql`: in DuckDB.
All run in a temporary directory, `lbparse` being the real command line
(`python -P -m lbparse`, support/cli.py's), whose inputs are the manual's
file names made there from the shared material (WORKSPACE, the one mapping).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from support.docs import Block, all_blocks, marked, printed_as_documented, transcript
from support.shared import shared_path
from support.storage import extract_short_data

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "data" / "vectors.jsonl"

# The manual's file names, and what each is here (under ../shared unless
# said). A block is given only those its text names.
WORKSPACE: dict[str, tuple[str, ...]] = {
    "nats.pcapng": ("liftbridge", "samples", "short.pcapng"),  # a real cluster's capture
    "short.pcapng": ("liftbridge", "samples", "short.pcapng"),
    "api-short.pcapng": ("liftbridge", "samples", "api-short.pcapng"),  # with the clients' gRPC
    "cluster.pcap": ("liftbridge", "samples", "short.pcapng"),
    "nats.pcap": ("captures", "nats_1000.pcap"),
    "nats_verbose20.pcap": ("captures", "nats_verbose20.pcap"),
    "nats_1000.pcapng": ("captures", "nats_1000.pcapng"),
    "data-short": ("liftbridge", "samples", "data-short.tar.gz"),  # extracted
    "data/": ("liftbridge", "samples", "data-short.tar.gz"),  # data-short, extracted
    "DATA": ("liftbridge", "samples", "data-short.tar.gz"),  # data-short/node1
    "captures/": ("captures", "nats_1000.pcap"),  # a folder holding it
    "a.pcapng": ("captures", "nats_1000.pcapng"),
    "b.pcap": ("captures", "nats_verbose20.pcap"),
    "b.pcapng": ("liftbridge", "samples", "short.pcapng"),
    "data-dir/": ("liftbridge", "samples", "data-short.tar.gz"),  # data-short, extracted
    "docs/examples/": (),  # the checkout's own: the files the README's examples ship with
}
EXAMPLES_DIR = ROOT / "docs" / "examples"
# ../shared is the shared material itself. The README's examples, and the
# manual's but for a few names above, make or ship everything they name
# (docs/examples/).


def _vector(name: str) -> str:
    for line in VECTORS.read_text().splitlines():
        vector = json.loads(line)
        if vector["id"] == name:
            return str(vector["hex"])
    raise KeyError(name)


@dataclass(frozen=True)
class Example:
    """How to run one marked block, beyond running it."""

    slow: bool = False
    spark: bool = False  # starts Spark (its own JVM: the user's command)
    claims: str = ""  # python: run after the block, what its comments say
    after: str = ""  # python: the example of the page it builds on, run first
    check: Callable[[str, Path], None] | None = None  # on what it printed, in its directory
    setup: Callable[[Path], None] | None = None  # more files the text says it has
    status: dict[int, int] = field(default_factory=dict)  # transcript step -> exit status
    timeout: float = 300
    loose: bool = False  # a transcript of a run that differs each time: check only
    cluster: str = ""  # a Liftbridge cluster run (conftest's fixture), as `full`
    tools: tuple[str, ...] = ()  # programs it runs besides lbparse: skipped without them


def _has(*needles: str) -> Callable[[str, Path], None]:
    def check(out: str, _: Path) -> None:
        for needle in needles:
            assert needle in out, f"{needle!r} not in:\n{out[-3000:]}"

    return check


def _files(*names: str) -> Callable[[str, Path], None]:
    def check(_: str, work: Path) -> None:
        for name in names:
            assert (work / name).exists(), f"{name} not written"

    return check


def _spec_tree(text: str, work: Path) -> None:
    """format.md's tree of the checkout: every file and folder it names is there."""
    folder = ""
    for line in text.splitlines():
        if not line.strip() or line.startswith(" " * 10):  # a description's next line
            continue
        names = re.split(r"\s{2,}", line.strip())[0].split(", ")
        if not line.startswith(" "):
            folder = names[0] if names[0].endswith("/") else ""
        for name in names:
            path = ROOT / name if not line.startswith(" ") else ROOT / folder / name
            assert path.exists(), f"format.md names {path.relative_to(ROOT)}, not in the checkout"


def _data_dir_layout(text: str, work: Path) -> None:
    """storage.md's layout of a data directory, against a real one (data-short/node1)."""
    node = work / "DATA"
    assert (node / "liftbridge").is_file() and (node / "raft" / "raft.db").is_file()
    partition = node / "streams" / "orders" / "0"
    for name in ("leader-epoch-checkpoint", "replication-offset-checkpoint"):
        assert (partition / name).is_file() and name in text
    for suffix in (".log", ".index"):
        (segment,) = partition.glob(f"*{suffix}")
        assert re.fullmatch(r"\d{20}", segment.stem) and f"<20-digit base offset>{suffix}" in text
    assert (partition / "00000000000000000000.index").stat().st_size == 10 * 2**20


def _hex_lines(out: str, work: Path) -> None:
    """The README's three generations of one Ack, each told apart by `auto`."""
    rows = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    assert [r.get("layout") for r in rows] == ["v0", "legacy", "flatbuffers"], out[-2000:]
    assert all(
        r["payload_type"] == "proto.Ack" and r["payload_json"] == {"stream": "s"} for r in rows
    ), rows


def _latencies(out: str, _: Path) -> None:
    """The README's SQL: a row per stream with acked publishes and their times."""
    rows = {
        line.split("│")[1].strip(): line
        for line in out.splitlines()
        if line.count("│") >= 4 and "stream" not in line and "varchar" not in line
    }
    assert {"orders", "events", "scratch"} <= set(rows), out[-2000:]
    for line in rows.values():
        acked, median = (float(c) for c in line.split("│")[2:4])
        assert acked > 0 and 0 < median < 1000, line


def _raft_record(text: str, work: Path) -> None:
    """captures.md's `liftbridge` member: a record of the real cluster's capture has it."""
    from support.docs import _doc_json, _within

    doc = _doc_json("{" + " ".join(text.split()) + "}")
    assert doc is not None, text
    capture = str(shared_path("liftbridge", "samples", "short.pcapng"))
    done = subprocess.run(
        [sys.executable, "-P", "-m", "lbparse", "capture", capture, "--format", "jsonl"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert any(
        _within(doc[0], json.loads(line), True)
        for line in done.stdout.splitlines()
        if '"raft_request"' in line
    ), "no record holds the manual's"


def _publishes(out: str, work: Path) -> None:
    """The query printed a row for each Publish of the run's messages."""
    import duckdb

    ((n,),) = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{work}/out/messages/*.parquet') "
        "WHERE msg_type_name = 'Publish'"
    ).fetchall()
    assert n and re.search(rf"\b{n} rows\b", out), out


def _pipeline_tables(text: str, work: Path) -> None:
    """pipeline.md's listing of DIR, against the run above (no data directory in it)."""
    out = work / "out"
    for table in ("messages", "proto_Message"):
        assert f"out/{table}/part-….parquet" in text and list((out / table).glob("part-*.parquet"))
    summary = json.loads((out / "summary.json").read_text())
    assert (
        "tables" in summary and "skipped" in summary and '"tables"' in text and '"skipped"' in text
    )
    others = {p.name for p in out.iterdir() if p.is_dir()} - {"messages", "proto_Message"}
    assert all(
        re.match(r"(proto|protocol|commitlog)_", n) or n in summary["tables"] for n in others
    ), others


def _report_outputs(out: str, work: Path) -> None:
    page = (work / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "vega" in page
    model = json.loads((work / "report.json").read_text())
    assert {"report", "inputs", "totals", "traffic", "latency"} <= set(model)
    assert len(model["inputs"]) == 3  # docs/examples/captures/'s two, recording.jsonl
    assert (work / "report.png").read_bytes().startswith(b"\x89PNG")


def _shrink_isr(out: str, work: Path) -> None:
    """A `full` run's ShrinkISR (its index, term, nodes and epoch differ from run to run)."""
    assert re.search(
        r'^\s+\d+\s+\d+\s+LogCommand\s+ShrinkISR \{"stream":"orders",'
        r'"replicaToRemove":"node\d","leader":"node\d","leaderEpoch":"\d+"\}$',
        out,
        re.M,
    ), out


EXAMPLES: dict[str, Example] = {
    # README.md
    "readme-decode": Example(),
    "readme-python": Example(
        claims="assert (env.msg_type_name, env.message.stream) == "
        "('Publish', 'stream-\u00fc')\n"
        "assert {'messages', 'proto_Message'} <= set(tables)"
    ),
    "readme-layouts": Example(check=_hex_lines),
    "readme-capture": Example(slow=True, check=_has("per MsgType:", "Publish")),
    # exit 0: a Subscribe cancelled by its client (RST_STREAM) is a note, not a problem
    "readme-grpc": Example(
        slow=True, check=_has("CALL PublishAsync", "CALL Subscribe", "status=0")
    ),
    "readme-storage": Example(check=_has("LogConfiguration", "0 finding(s)")),
    "readme-report": Example(slow=True, check=_files("report.html")),
    "readme-generate": Example(
        tools=("node",),
        check=_files(
            "parsers/go",
            "parsers/java",
            "parsers/rust",
            "home/.local/lib/wireshark/plugins/liftbridge.lua",
        ),
    ),
    "readme-pipeline": Example(spark=True, check=_files("out/messages", "out/summary.json")),
    "readme-sql": Example(spark=True, after="readme-pipeline", check=_latencies),
    # After the SQL, as the page reads: one test, one run of readme-pipeline (a
    # JVM's start and a job) for both, each checked as before.
    "readme-datasource": Example(
        spark=True,
        after="readme-sql",
        claims=(
            "envs = df.select(lbparse.spark.from_envelope('payload').alias('env'))"
            ".select('env.msg_type_name').collect()\n"
            "assert 'Publish' in {r[0] for r in envs}"
        ),
    ),
    # captures.md
    "capture-table": Example(),
    "capture-cluster": Example(),
    "capture-raft-record": Example(slow=True, check=_raft_record),
    # cli.md
    "cli-decode": Example(),
    "cli-bad-subject": Example(),
    # format.md
    "spec-tree": Example(check=_spec_tree),
    # languages.md
    "generate": Example(
        tools=("node",),
        check=_files(
            "out/js/LiftbridgeEnvelope.js",
            "out/javascript/LiftbridgeEnvelope.js",
            "out/wireshark/liftbridge.lua",
            "out/go/go.mod",
        ),
    ),
    "wireshark": Example(tools=("tshark",)),
    # layouts.md
    "layouts-auto": Example(),
    "check": Example(),
    # pipeline.md
    "pipeline-commands": Example(
        spark=True, check=_files("out/summary.json", "tables/summary.json")
    ),
    "pipeline-tables": Example(spark=True, after="pipeline-commands", check=_pipeline_tables),
    "pipeline-sql": Example(spark=True, after="pipeline-tables", check=_publishes),
    "pipeline-readers": Example(
        spark=True,
        after="pipeline-sql",
        claims=(
            "n = spark.read.parquet('out/messages').count()\n"
            "assert n == len(pandas.read_parquet('out/messages')) == "
            "pyarrow.dataset.dataset('out/messages').count_rows() == "
            "len(polars.read_parquet('out/messages'))\n"
            "assert duckdb.sql(\"SELECT count(*) FROM read_parquet('out/messages/*.parquet')\")"
            ".fetchall() == [(n,)]"
        ),
    ),
    "pipeline-entries": Example(spark=True),
    "pipeline-entries-spark": Example(spark=True, after="pipeline-entries"),
    "datasource": Example(
        spark=True,
        claims=(
            "assert entries.count() == 255 and msgs.count() > 0\n"
            "assert 'Publish' in {r[0] for r in kafka.select(lbparse.spark.from_envelope('value')"
            ".alias('env')).select('env.msg_type_name').collect()}\n"
            "query.processAllAvailable()\n"
            "query.stop()\n"
            "assert spark.read.parquet('out/').count() == "
            "spark.read.format('liftbridge').load('incoming/').count() > 0"
        ),
    ),
    # python-api.md
    "python-api": Example(
        claims="assert (env.msg_type_name, env.message.stream) == "
        "('Publish', 'stream-\u00fc')\n"
        "assert wire.hex() == 'b90e43b4000c0101ce9b24fc0a066f7264657273202a'\n"
        "assert lbparse.encode_envelope(env) == data"
    ),
    "envelope-error": Example(),
    "arrow": Example(
        after="python-api",
        claims="assert list(df['msg_type_name'])[:2] == ['Publish', 'Ack']\n"
        "assert df['error_kind'][2] == 'bad_magic'",
    ),
    # report.md
    "report": Example(tools=("chromium",), check=_report_outputs),
    # storage.md
    "data-dir-layout": Example(check=_data_dir_layout),
    "segments": Example(),
    "verify": Example(status={5: 1}),
    "raft": Example(),
    "raft-full": Example(cluster="liftbridge_full", loose=True, check=_shrink_isr),
    "storage-python": Example(),
}

# Marked in the manual, not yet run by a test: each is a block still to run
# (test_no_example_is_pending says so, as an expected failure, until none is).
PENDING = {"readme-live", "tap", "record-reconnect"}

# Kinds run by other test files, by the marker they look for.
ELSEWHERE = {
    "dataframe": "tests/project/test_readme_dataframes.py",
    "sql": "tests/columnar/test_capture_tables_cli.py",
    "js": "tests/codegen/test_langs.py",
    "streams": "tests/spark/test_streams_source.py",
}


# --- the manual's blocks: each run or saying why not ---


def test_every_block_is_run_or_says_why() -> None:
    unaccounted = []
    names: list[str] = []
    for block in all_blocks():
        mark = block.mark or ""
        kind, _, name = mark.partition("example: ")
        kind = kind.strip()
        if mark.startswith("not run: ") and len(mark) > len("not run: ") + 10:
            continue
        if name and not kind and (name in EXAMPLES or name in PENDING):
            names.append(name)
            continue
        if (
            name
            and kind in ELSEWHERE
            and f"<!-- {kind} example: " in (ROOT / ELSEWHERE[kind]).read_text()
        ):
            names.append(f"{kind}:{name}")
            continue
        unaccounted.append(f"{block.where} ({block.lang or 'no language'}): {mark or 'no mark'}")
    assert not unaccounted, (
        "blocks neither run nor marked `<!-- not run: REASON -->`:\n" + "\n".join(unaccounted)
    )
    assert len(names) == len(set(names)), "an example name twice"
    assert set(EXAMPLES) | PENDING <= set(names), (
        f"examples not in the manual: {(set(EXAMPLES) | PENDING) - set(names)}"
    )
    assert not PENDING & set(EXAMPLES), "an example both run and pending"


@pytest.mark.xfail(strict=True, reason="examples marked in the manual that no test runs yet")
def test_no_example_is_pending() -> None:
    assert not PENDING, sorted(PENDING)


def test_the_not_run_marks_are_few() -> None:
    """Only what cannot run in a test: installs, the whole suite, a cluster."""
    reasons = [b.mark for b in all_blocks() if (b.mark or "").startswith("not run: ")]
    assert len(reasons) <= 8, reasons


# --- running them ---


def _workspace(block: Block, tmp: Path, short_data: Callable[[], Path]) -> Path:
    """A directory holding what the block's text names (WORKSPACE), and ../shared."""
    work = tmp / "work"
    (work / "home").mkdir(parents=True)
    if "../shared" in block.text:
        (tmp / "shared").symlink_to(shared_path())
    for key, parts in WORKSPACE.items():
        end = "" if key.endswith("/") else r"(?![\w.-])"  # a folder's files follow its name
        if not re.search(rf"(?<![\w/.-]){re.escape(key)}{end}", block.text):
            continue
        name = key.rstrip("/")
        if name == "data-short" and "docs/examples/data-short.tar.gz" in block.text:
            continue  # the block extracts its own
        if name == "docs/examples":
            (work / "docs").mkdir()
            (work / name).symlink_to(EXAMPLES_DIR)
            continue
        source = shared_path(*parts)
        if name in ("data-short", "data", "data-dir"):
            (work / name).symlink_to(short_data())
        elif name == "DATA":
            (work / name).symlink_to(short_data() / "node1")
        elif name == "captures":
            (work / name).mkdir()
            (work / name / source.name).symlink_to(source)
        else:
            (work / name).symlink_to(source)
    return work


def _env(work: Path) -> dict[str, str]:
    """`lbparse` on PATH is the lbparse under test, as support/cli.py starts it;
    `python3` is this interpreter, as in the virtualenv a reader has activated
    (Spark's workers run `python3` when PYSPARK_PYTHON is not set: the system's
    has no lbparse, and the examples passed only after a test of the same
    worker had set PYSPARK_PYTHON in the environment they inherit)."""
    bin_dir = work / "home" / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "lbparse"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -P -m lbparse "$@"\n')
    wrapper.chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("XDG_CONFIG_HOME", "WIRESHARK_CONFIG_DIR", "PYSPARK_PYTHON")
    }
    return {
        **env,
        "PATH": os.pathsep.join(
            [str(bin_dir), os.path.dirname(sys.executable), env.get("PATH", "")]
        ),
        "HOME": str(work / "home"),
        "COLUMNS": "200",
        # Spark's workers connect back to the driver: on loopback, the only network here
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def _bash(script: str, work: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env=_env(work),
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        errors="replace",
    )


def _run_transcript(block: Block, example: Example, work: Path) -> str:
    steps = transcript(block.text)
    assert steps, f"{block.where}: no `$ ` command"
    everything = []
    for i, step in enumerate(steps):
        done = _bash(step.command, work, example.timeout)
        assert done.returncode == example.status.get(i, 0), (
            f"{block.where}: `{step.command}` exited {done.returncode}:\n{done.stdout[-3000:]}"
        )
        problem = (
            None if example.loose else printed_as_documented(step.printed, done.stdout.splitlines())
        )
        assert problem is None, f"{block.where}: `{step.command}`: {problem}"
        everything.append(done.stdout)
    return "".join(everything)


# `>>> ` lines as the interpreter shows them: a value's repr, or an error as
# its last traceback line (the class's own name).
REPL = """
import sys
names = {"lbparse": lbparse}
for statement in sys.argv[1:]:
    try:
        try:
            code = compile(statement, "<stdin>", "eval")
        except SyntaxError:
            exec(statement, names)
            continue
        value = eval(code, names)
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}")
    else:
        if value is not None:
            print(repr(value))
"""


def _run_repl(block: Block, example: Example, work: Path) -> str:
    statements: list[str] = []
    printed: list[str] = []
    for line in block.text.splitlines():
        if line.startswith(">>> "):
            statements.append(line[4:])
        elif line.startswith("... "):
            statements[-1] += "\n" + line[4:]
        elif line.strip():
            printed.append(line)
    setup = "import lbparse"
    done = subprocess.run(
        [sys.executable, "-P", "-c", setup + REPL, *statements],
        cwd=work,
        env=_env(work),
        text=True,
        capture_output=True,
        timeout=example.timeout,
    )
    assert done.returncode == 0, f"{block.where}:\n{done.stderr[-3000:]}"
    problem = printed_as_documented(printed, done.stdout.splitlines())
    assert problem is None, f"{block.where}: {problem}"
    return done.stdout


def _run_python(block: Block, example: Example, work: Path) -> str:
    code = block.text + "\n" + example.claims
    done = subprocess.run(
        [sys.executable, "-P", "-c", code],
        cwd=work,
        env=_env(work),
        text=True,
        capture_output=True,
        timeout=example.timeout,
    )
    assert done.returncode == 0, f"{block.where}:\n{done.stderr[-3000:]}"
    return done.stdout


def _run_sql(block: Block, example: Example, work: Path) -> str:
    code = "import sys, duckdb; print(duckdb.sql(sys.stdin.read()))"
    done = subprocess.run(
        [sys.executable, "-P", "-c", code],
        input=block.text,
        cwd=work,
        env=_env(work),
        text=True,
        capture_output=True,
        timeout=example.timeout,
    )
    assert done.returncode == 0, f"{block.where}:\n{done.stderr[-3000:]}"
    return done.stdout


def _execute(block: Block, example: Example, work: Path) -> str:
    """Run one block by its kind; what it printed."""
    if block.text.startswith("$ "):
        return _run_transcript(block, example, work)
    if block.lang == "python" and block.text.startswith(">>> "):
        return _run_repl(block, example, work)
    if block.lang == "python":
        return _run_python(block, example, work)
    if block.lang == "sh":
        done = _bash("set -e -o pipefail\n" + block.text, work, example.timeout)
        assert done.returncode == example.status.get(0, 0), f"{block.where}:\n{done.stdout[-3000:]}"
        return done.stdout
    if block.lang == "sql":
        return _run_sql(block, example, work)
    if example.check is not None:  # a listing: its check holds it against what is there
        return block.text
    raise AssertionError(f"{block.where}: no way to run a {block.lang or 'plain'} block")


def _chain(name: str) -> list[str]:
    """The examples a block builds on, first to last, then the block."""
    names = [name]
    while EXAMPLES[names[0]].after:
        names.insert(0, EXAMPLES[names[0]].after)
    return names


def _run(
    name: str, tmp_path: Path, short_data: Callable[[], Path], request: pytest.FixtureRequest
) -> None:
    chain = _chain(name)
    blocks = [marked(n) for n in chain]
    missing = [t for n in chain for t in EXAMPLES[n].tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{blocks[-1].where} runs {', '.join(missing)}, not installed (`make install`)")
    last = blocks[-1]
    work = _workspace(
        Block(last.page, last.line, last.lang, "".join(b.text for b in blocks), last.mark),
        tmp_path,
        short_data,
    )
    for n in chain:
        example = EXAMPLES[n]
        if example.setup is not None:
            example.setup(work)
        if example.cluster:
            (work / example.cluster.removeprefix("liftbridge_")).symlink_to(
                request.getfixturevalue(example.cluster).out
            )
    # Python blocks a python block builds on run in its interpreter (their
    # names are its names); any other block before it runs first, on its own.
    python = [
        i for i, b in enumerate(blocks) if b.lang == "python" and not b.text.startswith(">>> ")
    ]
    joined = (
        python[0] if python and python == list(range(python[0], len(blocks))) else len(blocks) - 1
    )
    for n, block in zip(chain[:joined], blocks[:joined]):
        out = _execute(block, EXAMPLES[n], work)
        check = EXAMPLES[n].check
        if check is not None:
            check(out, work)
    head = blocks[joined]
    text = "\n".join(b.text + EXAMPLES[n].claims for n, b in zip(chain[joined:], blocks[joined:]))
    example = EXAMPLES[name]
    out = _execute(
        Block(head.page, head.line, head.lang, text, head.mark), replace(example, claims=""), work
    )
    if example.check is not None:
        example.check(out, work)


@pytest.fixture(scope="module")
def short_data_once(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], Path]:
    """The shared `short` run's data directories, extracted on first use."""
    made: list[Path] = []

    def get() -> Path:
        if not made:
            made.append(extract_short_data(tmp_path_factory.mktemp("data-short")))
        return made[0]

    return get


def _params() -> list[object]:
    params: list[object] = []
    built_on = {e.after for e in EXAMPLES.values()}
    for name, example in EXAMPLES.items():
        if name in built_on:
            continue  # run, with its check, in the test of the block built on it
        marks = []
        # Each starts a process (an interpreter: a second or more), and the
        # fast loop stays under a minute: slow, but a listing held to the checkout.
        if (
            example.check is None
            or marked(name).lang
            or marked(name).text.startswith("$ ")
            or example.slow
            or example.spark
            or example.cluster
        ):
            marks.append(pytest.mark.slow)
        # The cluster is conftest's, made once a run whichever worker asks; a
        # Spark example starts its own JVM (the user's command).
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("name", _params())
def test_example(
    name: str, tmp_path: Path, short_data_once: Callable[[], Path], request: pytest.FixtureRequest
) -> None:
    _run(name, tmp_path, short_data_once, request)
