"""The command line keeps the habits of tshark, jq and the nats CLI, every command.

Each test runs the real `lbparse` in a subprocess (tests/support/cli.py):
`--version`; `-` for stdin, a capture read from a pipe as it arrives; a
closed pipe ends the run quietly with status 0; a bad input line is reported
with its number and the run goes on; exit status 0 ok, 1 data problems, 2
usage, and never a traceback for a user's mistake; RFC 3339 times in tables.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from support.capwriter import ETHERNET, Conn, link, pub, write_pcap, write_pcapng
from support.cli import LBPARSE, run_cli
from support.net import free_port
from support.storage import (
    messages,
    short_data,  # noqa: F401 (a fixture)
    write_partition,
)
from vectors import VECTORS

import lbparse
from lbparse.capture import CaptureReader, record_writer
from lbparse.cli.output import rfc3339
from lbparse.codec import jsonform

GOOD = [v["hex"] for v in VECTORS if v["layout"] == "v0" and "error" not in v["expect"]]
TIMEOUT = 20.0  # seconds for any one wait on a process


@pytest.fixture(scope="module")
def examples() -> Iterator[Path]:
    """The example envelopes that ship with lbparse (one hex line each)."""
    with resources.as_file(resources.files("lbparse.examples") / "envelopes.hex") as path:
        yield path


def _frames(n: int) -> list[bytes]:
    """A client's TCP connection publishing n reference envelopes, Ethernet frames."""
    conn = Conn()
    frames = conn.handshake()
    for i in range(n):
        frames += conn.send("c", pub(f"lb.v{i % 3}", bytes.fromhex(GOOD[i % len(GOOD)])))
    return [link(ETHERNET, f) for f in frames]


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small capture in every format `lbparse capture` reads."""
    tmp = tmp_path_factory.mktemp("captures")
    frames = _frames(40)
    paths = {"pcap": tmp / "t.pcap", "pcapng": tmp / "t.pcapng"}
    write_pcap(str(paths["pcap"]), [(1_500_000_000.25 + i, f) for i, f in enumerate(frames)])
    write_pcapng(
        str(paths["pcapng"]),
        [(ETHERNET, 9, 65535)],
        [(0, 1_500_000_000.25 + i, f) for i, f in enumerate(frames)],
    )
    for ext in ("jsonl", "parquet"):
        paths[ext] = tmp / f"t.{ext}"
        with record_writer(str(paths[ext])) as w:
            for rec in CaptureReader(paths["pcap"], decode=False):
                w.write(rec)
    return paths


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A node's data directory: one partition of two segments, made per the spec."""
    node = tmp_path_factory.mktemp("data") / "node1"
    write_partition(
        node / "streams" / "s" / "0", [messages(5), messages(5, first=5)], hw=9, epochs=[(3, 0)]
    )
    return node


def assert_no_traceback(res: subprocess.CompletedProcess[bytes]) -> None:
    assert b"Traceback" not in res.stderr, res.stderr.decode(errors="replace")


# -- --version ---------------------------------------------------------------


@pytest.mark.slow
def test_version_names_the_lbparse_that_runs() -> None:
    res = run_cli("--version")
    assert res.returncode == 0 and res.stderr == b""
    m = re.fullmatch(r"lbparse (\S+) from (.+) \(Python [\d.]+, (.+)\)\n", res.stdout.decode())
    assert m, res.stdout
    assert m[1] == lbparse.__version__
    assert Path(m[2]) == Path(lbparse.__file__).parent
    assert m[3] in ("capture path compiled", "pure Python") or m[3].endswith(" compiled")


# -- a closed pipe -----------------------------------------------------------


def _closed_pipe_cases(
    examples: Path, captures: dict[str, Path], data_dir: Path
) -> list[list[str]]:
    return [
        ["--help"],
        ["--version"],
        ["decode", "--help"],
        ["spec"],
        ["spec", "--json"],
        ["decode", "--hex", str(examples)],
        ["decode", "--pretty", "--hex", str(examples)],
        ["check", "--hex", str(examples)],
        ["capture", str(captures["pcap"])],
        ["capture", "--format", "table", str(captures["pcapng"])],
        ["encode", "--type", "Ack", "--json", "{}"],
        ["demo", "--no-pipeline"],
        ["segments", str(data_dir)],
        ["segments", "--format", "jsonl", str(data_dir)],
        ["report", str(captures["pcap"]), "--json", "-", "-q"],
    ]


@pytest.mark.slow
def test_a_reader_that_never_reads_ends_the_run_quietly(
    examples: Path, captures: dict[str, Path], data_dir: Path
) -> None:
    """Every command that writes to stdout, its reader gone before the first line."""
    for args in _closed_pipe_cases(examples, captures, data_dir):
        proc = subprocess.Popen([*LBPARSE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        proc.stdout.close()
        _, err = proc.communicate(timeout=60)
        assert (proc.returncode, err) == (0, b""), (args, err.decode(errors="replace"))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["table", "jsonl"])
def test_raft_to_a_closed_pipe_is_quiet(short_data: Path, fmt: str) -> None:
    """lbparse raft of a real raft.db (the shared `short` run), its reader gone."""
    proc = subprocess.Popen(
        [*LBPARSE, "raft", "--format", fmt, str(short_data / "node1")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (0, b""), err.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["decode", "capture"])
def test_head_takes_one_line_and_the_run_ends_quietly(
    tmp_path: Path, captures: dict[str, Path], command: str
) -> None:
    """`lbparse decode --hex BIG | head -n 1`: as head does, read a line and leave."""
    if command == "decode":
        big = tmp_path / "big.hex"
        big.write_text("\n".join(GOOD * (3_000 // len(GOOD) + 1)) + "\n")  # ~1 MB out
        args = ["decode", "--hex", str(big)]
    else:
        big = tmp_path / "big.pcap"
        frames = _frames(3_000)  # ~1.5 MB of records, far more than a pipe holds
        write_pcap(str(big), [(1.0 + i, f) for i, f in enumerate(frames)])
        args = ["capture", str(big)]
    proc = subprocess.Popen([*LBPARSE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert json.loads(first)
    assert (proc.returncode, err) == (0, b""), err.decode(errors="replace")


# -- bad lines ---------------------------------------------------------------


@pytest.mark.slow
def test_a_bad_hex_line_is_reported_with_its_number_and_the_run_goes_on() -> None:
    lines = [GOOD[0], "zz not hex", "", "# a comment", GOOD[1], "\udcff", GOOD[2]]
    data = "\n".join(lines).encode("utf-8", "surrogateescape") + b"\n"
    res = run_cli("decode", "--hex", stdin=data)
    assert_no_traceback(res)
    assert res.returncode == 1  # a data problem
    out = [json.loads(line) for line in res.stdout.splitlines()]
    assert [o["payload_json"] for o in out] == [
        lbparse.decode(bytes.fromhex(h)).to_json_dict()["payload_json"] for h in GOOD[:3]
    ]
    err = res.stderr.decode().splitlines()
    assert len(err) == 2
    assert err[0].startswith("lbparse decode: stdin:2: not hex") and "'zz not hex'" in err[0]
    assert err[1] == "lbparse decode: stdin:6: not ASCII text (byte 0xff at column 1)"


@pytest.mark.slow
def test_a_bad_base64_line_in_a_file_is_reported_with_file_and_line(tmp_path: Path) -> None:
    import base64

    f = tmp_path / "in.b64"
    good = base64.b64encode(bytes.fromhex(GOOD[0])).decode()
    f.write_text(f"{good}\n!!!\n{good}\n")
    for command in ("decode", "check"):
        res = run_cli(command, "--base64", str(f), *(["--json"] if command == "check" else []))
        assert_no_traceback(res)
        assert res.returncode == 1
        assert len(res.stdout.splitlines()) == (2 if command == "decode" else 2)
        assert res.stderr.decode().startswith(f"lbparse {command}: {f}:2: not base64")


@pytest.mark.slow
def test_check_goes_on_past_a_bad_line_and_reports_crashes() -> None:
    crashing = "b90e43b40028000a0a026964"  # header_len 40 past the data: panics a server
    res = run_cli("check", "--hex", "--json", stdin=f"{GOOD[0]}\nxyz\n{crashing}\n".encode())
    assert_no_traceback(res)
    assert res.returncode == 1
    out = [json.loads(line) for line in res.stdout.splitlines()]
    assert [o["input"] for o in out] == ["stdin:1", "stdin:3"]
    assert [o["crashes_a_server"] for o in out] == [False, True]
    assert "stdin:2: not hex" in res.stderr.decode()


# -- exit statuses, one line, no traceback -----------------------------------


def _usage_cases(tmp: Path, captures: dict[str, Path]) -> list[tuple[list[str], str]]:
    not_capture = tmp / "notes.txt"
    not_capture.write_bytes(b"\x01\x02\x03\x04 not a capture")
    dead = f"nats://127.0.0.1:{free_port()}"
    return [
        ([], "the following arguments are required: COMMAND"),
        (["nosuchcommand"], "invalid choice: 'nosuchcommand'"),
        (["spec", "--bogus"], "unrecognized arguments: --bogus"),
        (["decode", "no-such-file.bin"], "argument 'no-such-file.bin' is neither a file nor hex"),
        (["decode", str(tmp)], "is a directory"),
        (["decode", "--hex", str(tmp / "none.txt")], "none.txt: cannot open: No such file"),
        (["decode", "--layout", "v9", "00"], "invalid choice: 'v9'"),
        (["decode", "--max-payload", "0", "00"], "would refuse everything"),
        (["check", "--hex", str(tmp / "none.txt")], "cannot open"),
        (["encode", "--type", "Nope", "--json", "{}"], "unknown type 'Nope'"),
        (["encode", "--type", "Ack", "--json", "{"], "--json is not JSON"),
        (["encode", "--type", "Ack", "--json-file", str(tmp / "none.json")], "No such file"),
        (["encode", "--type", "Ack", "--layout", "v9", "--json", "{}"], "invalid choice: 'v9'"),
        (["capture", str(tmp / "none.pcap")], "none.pcap: cannot read: No such file"),
        (["capture", str(not_capture)], "neither pcap, pcapng, JSON Lines nor Parquet"),
        (["capture", "-", "-"], "'-' (stdin) can be read only once"),
        (["capture", "--max-frame", "1x", str(captures["pcap"])], "--max-frame"),
        (["tap", "a b"], "invalid server URL 'a b'"),
        (["tap", dead], "the following arguments are required: SUBJECT"),
        (["tap", dead, "a b"], "invalid subject 'a b'"),
        (["tap", dead, "a..b"], "invalid subject 'a..b'"),
        (["tap", dead, "a.>.b"], "'>' may only be the last token"),
        (["tap", "http://127.0.0.1:4222", "x"], "invalid server URL"),
        (["tap", "nats://127.0.0.1:99999", "x"], "invalid server URL"),
        (["tap", dead, "x", "--count", "0"], "--count must be at least 1"),
        (["record", dead, "x", "-o", str(tmp / "out.txt")], "must end in .jsonl or .parquet"),
        (["record", dead, "x", "y z", "-o", str(tmp / "o.jsonl")], "invalid subject 'y z'"),
        (["generate", "--lang", "cobol", "-o", str(tmp / "gen")], "unknown language 'cobol'"),
        (["pipeline", "-", "--out", str(tmp / "p")], "'-' (stdin) cannot be a pipeline input"),
        (
            ["pipeline", str(captures["pcap"]), "--out", str(tmp / "p"), "--conf", "x"],
            "--conf takes KEY=VALUE",
        ),
        (
            ["pipeline", str(captures["pcap"]), "--out", str(tmp / "p"), "--batch-rows", "0"],
            "--batch-rows must be at least 1",
        ),
        (
            [
                "pipeline",
                str(captures["pcap"]),
                "--out",
                str(tmp / "p"),
                "--batch-rows",
                "1" + "0" * 20,
            ],
            "--batch-rows must be at least 1 and at most 2,147,483,647, "
            "not 100,000,000,000,000,000,000",
        ),
        (["segments", str(tmp / "none")], "no such file or directory"),
        (["segments", str(tmp)], "holds no Liftbridge data directory"),
        (["segments", "--partition", "x", str(tmp)], "invalid int value: 'x'"),
        (["raft", str(tmp / "none")], "no such file"),
        (
            ["report", str(tmp / "none.pcap"), "-o", str(tmp / "r.html")],
            "none.pcap: no such file or directory",
        ),
        (["report", "-", "-", "-o", str(tmp / "r.html")], "'-' (stdin) can be read only once"),
        (
            [
                "report",
                str(captures["pcap"]),
                "--json",
                str(tmp / "r.json"),
                "--screenshot",
                str(tmp / "r.png"),
            ],
            "--screenshot needs the page",
        ),
        (["report", str(not_capture), "-o", str(tmp / "r.html")], "neither pcap, pcapng"),
    ]


def _by_command(cases: list[tuple[list[str], str]]) -> tuple[list[Any], list[Any]]:
    """(the first case of each command, the others)."""
    seen: set[str] = set()
    first, rest = [], []
    for case in cases:
        command = case[0][0] if case[0] else ""
        (rest if command in seen else first).append(case)
        seen.add(command)
    return first, rest


def _check_usage_errors(cases: list[tuple[list[str], str]]) -> None:
    with ThreadPoolExecutor(4) as pool:  # one process each: their start-ups overlap
        results = list(pool.map(lambda case: run_cli(*case[0]), cases))
    for (args, said), res in zip(cases, results):
        err = res.stderr.decode()
        assert res.returncode == 2, (args, res.returncode, err)
        assert len(err.splitlines()) == 1 and err.startswith("lbparse"), (args, err)
        assert said in err, (args, err)


@pytest.mark.slow
def test_usage_errors_are_one_line_and_status_2(tmp_path: Path, captures: dict[str, Path]) -> None:
    """One usage error of every command (the first of its cases below)."""
    _check_usage_errors(_by_command(_usage_cases(tmp_path, captures))[0])


@pytest.mark.slow  # ~25 more processes; the fast loop runs one case per command (above)
def test_every_usage_error_is_one_line_and_status_2(
    tmp_path: Path, captures: dict[str, Path]
) -> None:
    _check_usage_errors(_by_command(_usage_cases(tmp_path, captures))[1])


@pytest.mark.slow
def test_data_problems_are_status_1(tmp_path: Path) -> None:
    res = run_cli("decode", "b90e43b4000c01")
    assert res.returncode == 1 and res.stderr == b""
    assert json.loads(res.stdout)["error"] == "too_short"
    conn = Conn()
    frames = conn.handshake() + conn.send(
        "c", b"".join(pub(f"s.{i}", bytes(50)) for i in range(10)), 60
    )
    del frames[5]
    gap = tmp_path / "gap.pcap"
    write_pcap(str(gap), [(i, link(ETHERNET, f)) for i, f in enumerate(frames)])
    res = run_cli("capture", str(gap))
    assert_no_traceback(res)
    assert res.returncode == 1 and b"60 bytes missing" in res.stderr


@pytest.mark.slow
def test_an_unreachable_server_is_one_line_and_status_1() -> None:
    res = run_cli("tap", f"nats://127.0.0.1:{free_port()}", "x", "--timeout", "0.5")
    err = res.stderr.decode()
    assert res.returncode == 1, err
    assert len(err.splitlines()) == 1 and err.startswith("lbparse tap: "), err
    assert "127.0.0.1" in err


@pytest.mark.slow
def test_record_to_an_unreachable_server_leaves_status_1(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    res = run_cli(
        "record", f"nats://127.0.0.1:{free_port()}", "x", "--timeout", "0.5", "-o", str(out)
    )
    assert_no_traceback(res)
    assert res.returncode == 1
    assert res.stderr.decode().splitlines()[0].startswith("lbparse record: ")


# -- stdin ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["pcap", "pcapng", "jsonl", "parquet"])
def test_capture_reads_stdin_as_it_reads_the_file(captures: dict[str, Path], fmt: str) -> None:
    path = captures[fmt]
    from_file = run_cli("capture", str(path))
    from_stdin = run_cli("capture", "-", stdin=path.read_bytes())
    assert from_file.returncode == from_stdin.returncode == 0, from_stdin.stderr
    # Parsed: the order of a protobuf map's keys in JSON differs between processes.
    records = [json.loads(line) for line in from_stdin.stdout.splitlines()]
    assert records == [json.loads(line) for line in from_file.stdout.splitlines()]
    assert len(records) == 40


@pytest.mark.slow
def test_problems_on_stdin_are_named_stdin(captures: dict[str, Path]) -> None:
    data = captures["pcap"].read_bytes()
    res = run_cli("capture", "-", stdin=data[:-30])  # the last packet cut short
    assert res.returncode == 1
    assert res.stderr.decode().startswith("lbparse capture: stdin: ")
    res = run_cli("capture", "-", stdin=b"\x01\x02\x03\x04 not a capture")
    assert res.returncode == 2
    assert res.stderr.decode().startswith("lbparse capture: stdin: neither pcap")


@pytest.mark.slow
def test_decode_and_encode_read_stdin_for_dash() -> None:
    res = run_cli("decode", "-", stdin=bytes.fromhex(GOOD[0]))
    assert res.returncode == 0 and json.loads(res.stdout)["layout"] == "v0"
    res = run_cli(
        "encode", "--type", "Ack", "--json-file", "-", stdin=b'{"stream": "foo", "offset": "42"}'
    )
    assert res.returncode == 0 and res.stdout.startswith(b"b90e43b4")


@pytest.mark.slow
def test_report_reads_a_capture_from_stdin(captures: dict[str, Path], tmp_path: Path) -> None:
    """`lbparse report -`: the same model as the file read by the record path
    (the columnar path, a file's default, leaves NATS control lines uncounted)."""
    from lbparse.report import build_model
    from lbparse.report.inputs import ReadOptions

    out = tmp_path / "r.json"
    res = run_cli("report", "-", "--json", str(out), "-q", stdin=captures["pcapng"].read_bytes())
    assert (res.returncode, res.stderr) == (0, b""), res.stderr.decode(errors="replace")
    got = json.loads(out.read_text())
    want = json.loads(
        jsonform.dumps(build_model([str(captures["pcapng"])], ReadOptions(fast=False)))
    )
    assert [i.pop("path") for i in got["inputs"]] == ["-"]
    assert [i.pop("path") for i in want["inputs"]] == [str(captures["pcapng"])]
    assert got == want and got["totals"]["messages"] == 40


def _read_line(proc: subprocess.Popen[bytes], timeout: float = TIMEOUT) -> bytes:
    """One line of the process's stdout, waiting at most `timeout` seconds.
    The process must be started with bufsize=0: a buffered reader would take
    the next lines too, out of select's sight."""
    assert proc.stdout is not None
    r, _, _ = select.select([proc.stdout], [], [], timeout)
    assert r, "no record within the time allowed: the capture is not streamed"
    return proc.stdout.readline()


def _packet_end(data: bytes, fmt: str, n: int) -> int:
    """The offset just past the n-th packet of a little-endian pcap or pcapng file."""
    import struct

    if fmt == "pcap":
        pos = 24
        for _ in range(n):
            pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
        return pos
    pos, seen = 0, 0
    while seen < n:
        btype, blen = struct.unpack_from("<II", data, pos)
        pos += blen
        seen += btype == 6  # an enhanced packet block
    return pos


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_capture_from_a_pipe_streams(captures: dict[str, Path], fmt: str) -> None:
    """Each record comes out as soon as its packet went in, the pipe still open."""
    data = captures[fmt].read_bytes()
    # The file up to the end of the first packet carrying a message (the 4th,
    # after the handshake), then the rest.
    cut = _packet_end(data, fmt, 4)
    # --layout v0: under auto a Publish (also a legacy Message) waits for the
    # capture's proof of its generation (lbparse.codec.generation) before it is written.
    proc = subprocess.Popen(
        [*LBPARSE, "capture", "-", "--layout", "v0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(data[:cut])
        proc.stdin.flush()
        first = json.loads(_read_line(proc))
        assert first["subject"] == "lb.v0" and first["envelope"]["layout"] == "v0"
        out, err = proc.communicate(data[cut:], timeout=TIMEOUT)  # and the end of input
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert proc.returncode == 0, err
    assert len(out.splitlines()) == 39


TCPDUMP = shutil.which("tcpdump")


@pytest.mark.slow
@pytest.mark.skipif(TCPDUMP is None or os.geteuid() != 0, reason="needs tcpdump and root")
def test_tcpdump_into_capture_dash(nats_server: str) -> None:
    """`tcpdump -U -w - | lbparse capture -`, live: records while tcpdump runs."""
    import asyncio

    import nats

    port = nats_server.rsplit(":", 1)[1]
    dump = subprocess.Popen(
        [
            TCPDUMP,
            "-i",
            "lo",
            "--immediate-mode",
            "-U",
            "-B",
            "32768",
            "-n",
            "-s",
            "0",
            "-w",
            "-",
            f"tcp port {port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    cap = subprocess.Popen(
        [*LBPARSE, "capture", "-", "--layout", "v0"],
        stdin=dump.stdout,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert dump.stdout is not None and dump.stderr is not None
    dump.stdout.close()  # the capture process holds the pipe now
    try:
        r, _, _ = select.select([dump.stderr], [], [], TIMEOUT)
        assert r and b"listening on" in dump.stderr.readline()

        async def publish() -> None:
            nc = await nats.connect(nats_server, allow_reconnect=False, connect_timeout=5)
            for i in range(5):
                await nc.publish(f"lb.live.{i}", bytes.fromhex(GOOD[i]))
            await nc.flush(timeout=5)
            await nc.close()

        asyncio.run(publish())
        subjects = [json.loads(_read_line(cap))["subject"] for _ in range(5)]
        assert subjects == [f"lb.live.{i}" for i in range(5)]  # tcpdump still running
    finally:
        dump.send_signal(signal.SIGINT)
        for proc in (dump, cap):
            try:
                proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
    assert cap.returncode == 0, cap.stderr.read() if cap.stderr else ""


# -- times in tables, and the command line's own JSON --------------------------


@pytest.mark.slow
def test_tables_show_rfc3339_times(captures: dict[str, Path]) -> None:
    res = run_cli("capture", "--format", "table", str(captures["pcap"]))
    first = res.stdout.decode().splitlines()[0]
    # The first message is in the 4th packet (after the handshake): 1.5e9 + 3.25 s.
    want = datetime.datetime(2017, 7, 14, 2, 40, 3, 250000, datetime.UTC)
    # Capture times are integer nanoseconds: all nine digits of the fraction.
    assert first.startswith(want.strftime("%Y-%m-%dT%H:%M:%S.%f000Z  ")), first


def test_rfc3339() -> None:
    assert rfc3339(1_500_000_003_250_000_001) == "2017-07-14T02:40:03.250000001Z"
    assert rfc3339(0) == "1970-01-01T00:00:00.000000000Z"
    assert rfc3339(-500_000_000) == "1969-12-31T23:59:59.500000000Z"
    assert rfc3339(10**29) == "1e+20s"  # no calendar date: the number, in seconds
    assert rfc3339(-(10**29)) == "-1e+20s"


def _keys(obj: Any) -> Iterator[str]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _keys(v)


@pytest.mark.slow
def test_the_command_lines_own_json_is_snake_case() -> None:
    check = json.loads(run_cli("check", "--json", GOOD[0]).stdout)
    spec = json.loads(run_cli("spec", "--json").stdout)
    for key in [*_keys(check), *_keys(spec)]:
        if key not in lbparse.codec.layouts.LAYOUTS:  # layout names are names, not fields
            assert re.fullmatch(r"[a-z0-9_]+", key), key


# -- one set of habits (issue #25) -------------------------------------------


def _parsers() -> dict[str, Any]:
    """Each subcommand's argparse parser, by name."""
    import argparse

    from lbparse.cli import build_parser

    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _option(parser: Any, flag: str) -> Any:
    return next((a for a in parser._actions if flag in a.option_strings), None)


# Their output options belong to the work on outputs (issue #25, item 1).
OUTPUTS_ELSEWHERE = {"pipeline", "demo", "report"}


def test_every_output_is_dash_o_or_dash_dash_output() -> None:
    parsers = _parsers()
    for name, p in parsers.items():
        if name in OUTPUTS_ELSEWHERE:
            continue
        o = _option(p, "-o")
        assert o is not None and o.option_strings == ["-o", "--output"], name


@pytest.mark.parametrize(
    "args",
    [
        ["decode", GOOD[0], GOOD[1]],
        ["decode", "--pretty", GOOD[0]],
        ["check", "--json", GOOD[0]],
        ["encode", "--type", "Ack", "--payload", '{"stream": "foo", "offset": "42"}', "--raw"],
        ["spec", "--json"],
        ["capture", "CAPTURE", "--format", "table"],
        ["segments", "DATA", "--format", "jsonl"],
        ["raft", "RAFT", "--format", "jsonl"],
    ],
)
@pytest.mark.slow
def test_dash_o_writes_what_stdout_shows(
    args: list[str], tmp_path: Path, data_dir: Path, captures: dict[str, Path], short_data: Path
) -> None:
    real = {
        "CAPTURE": str(captures["pcap"]),
        "DATA": str(data_dir),
        "RAFT": str(short_data / "node1"),
    }
    args = [real.get(a, a) for a in args]
    shown = run_cli(*args)
    assert shown.returncode == 0 and shown.stdout, shown.stderr
    for out in (tmp_path / "out.txt", tmp_path / "again.txt"):
        out.write_bytes(b"old")  # replaced, not appended to
        res = run_cli(*args, "-o", str(out))
        assert res.returncode == 0 and res.stdout == b"", res.stderr
        assert out.read_bytes() == shown.stdout
    assert run_cli(*args, "--output", "-").stdout == shown.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.txt", "out.txt"]  # no temp left


@pytest.mark.slow
def test_dash_o_never_clobbers_an_input_a_link_or_a_directory(
    tmp_path: Path, captures: dict[str, Path]
) -> None:
    cap = tmp_path / "t.pcap"
    cap.write_bytes(captures["pcap"].read_bytes())
    before = cap.read_bytes()
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    link = tmp_path / "link.txt"
    link.symlink_to(precious)
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "nowhere")
    cases = [
        (["capture", str(cap), "-o", str(cap)], "is the input"),
        (["capture", str(cap), "-o", str(link)], "a symbolic link to"),
        (["capture", str(cap), "-o", str(dangling)], "does not make files through links"),
        (["capture", str(cap), "-o", str(tmp_path)], "is a directory"),
        (["decode", str(cap), "-o", str(cap)], "is the input"),
        (["segments", str(tmp_path), "-o", str(tmp_path / "x.txt")], "inside the input"),
    ]
    for args, said in cases:
        res = run_cli(*args)
        assert res.returncode == 2, (args, res.stderr)
        assert (
            res.stderr.decode().startswith(f"lbparse {args[0]}: ") and said in res.stderr.decode()
        ), (args, res.stderr)
    assert cap.read_bytes() == before and precious.read_text() == "keep me"
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "x.txt").exists()
    # A device is written in place (not replaced by a file), as is standard output's name.
    res = run_cli("capture", str(cap), "-o", os.devnull)
    assert res.returncode == 0 and os.path.exists(os.devnull) and not os.path.isfile(os.devnull)
    res = run_cli("spec", "-o", "/dev/stdout")
    assert res.returncode == 0 and res.stdout.startswith(b"layout v0")
    # A run that fails leaves the old file as it was.
    old = tmp_path / "old.txt"
    old.write_text("previous")
    res = run_cli("encode", "--type", "Nope", "--payload", "{}", "-o", str(old))
    assert res.returncode == 2 and old.read_text() == "previous"
    res = run_cli("capture", str(tmp_path / "typo.pcap"), "-o", str(old))  # status 2, no raise
    assert res.returncode == 2 and old.read_text() == "previous"
    assert res.stderr.decode().splitlines()[-1] == f"lbparse capture: {old} left as it was"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dangling.txt",
        "link.txt",
        "old.txt",
        "precious.txt",
        "t.pcap",
    ]


@pytest.mark.slow
def test_json_means_json_output_wherever_it_is_an_option(
    captures: dict[str, Path], data_dir: Path
) -> None:
    """--json takes no value and asks for JSON (Lines) output, in every command
    but report (whose --json FILE is the outputs' work: see the README)."""
    import argparse

    for name, p in _parsers().items():
        flag = _option(p, "--json")
        if flag is None or name == "report":
            continue
        if name == "encode":  # its input, --payload now: the old name hidden, and said
            assert flag.help == argparse.SUPPRESS
            continue
        assert flag.nargs == 0, name  # store_true / store_const: a flag, not a value
    same = [
        (["capture", str(captures["pcap"])], "--format", "jsonl"),
        (["segments", str(data_dir)], "--format", "jsonl"),
        (["raft", str(data_dir.parent)], "--format", "jsonl"),
    ]
    for args, *fmt in same:
        a, b = run_cli(*args, "--json"), run_cli(*args, *fmt)
        assert _lines(a.stdout) == _lines(b.stdout) and a.returncode == b.returncode, args
    assert json.loads(run_cli("check", "--json", GOOD[0]).stdout.splitlines()[0])["input"]
    tables = run_cli("spec", "--json").stdout.splitlines()  # JSON Lines: one object, one line
    assert len(tables) == 1 and "v0" in json.loads(tables[0])


@pytest.mark.slow
def test_encode_takes_payload_and_the_old_json_still_works(tmp_path: Path) -> None:
    msg = '{"stream": "foo", "offset": "42"}'
    new = run_cli("encode", "--type", "Ack", "--payload", msg, "--crc")
    assert new.returncode == 0 and new.stdout == b"b90e43b4000c010160a44fa00a03666f6f202a\n"
    assert new.stderr == b""
    old = run_cli("encode", "--type", "Ack", "--json", msg, "--crc")
    assert old.stdout == new.stdout and old.returncode == 0
    assert old.stderr.decode().splitlines() == [
        "lbparse encode: --json is now --payload (--json still works, for now)"
    ]
    f = tmp_path / "m.json"
    f.write_text(msg)
    assert (
        run_cli("encode", "--type", "Ack", "--payload-file", str(f), "--crc").stdout == new.stdout
    )
    bad = run_cli("encode", "--type", "Ack", "--payload", "{")
    assert bad.returncode == 2 and bad.stderr.decode().startswith(
        "lbparse encode: --payload is not JSON"
    )


def test_usage_errors_name_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    """An option a command does not know is that command's usage error
    (`lbparse capture: unrecognized arguments`), as every other one is."""
    from lbparse.cli import COMMANDS, main

    for name in COMMANDS:
        with pytest.raises(SystemExit) as exc:
            main([name, "--no-such-option", "x", "y"])
        err = capsys.readouterr().err
        assert exc.value.code == 2, name
        assert err.startswith(f"lbparse {name}: ") and err.count("\n") == 1, (name, err)
    with pytest.raises(SystemExit):
        main(["capture", "-c", "5"])  # -c is --count now: FILE is what is missing
    assert capsys.readouterr().err.startswith(
        "lbparse capture: the following arguments are required: FILE"
    )
    with pytest.raises(SystemExit):
        main(["capture", "x.pcap", "-c", "5", "--bogus"])
    assert capsys.readouterr().err.startswith("lbparse capture: unrecognized arguments: --bogus")


@pytest.mark.slow
def test_every_exit_status_is_documented() -> None:
    """0, 1, 2, 3 and 130 in lbparse.cli.status, `lbparse --help` and the README;
    and no command returns a status outside them."""
    import ast

    from lbparse.cli import status

    assert (status.OK, status.DATA, status.USAGE, status.JOB_FAILED, status.INTERRUPTED) == (
        0,
        1,
        2,
        3,
        130,
    )
    assert set(status.EXIT_STATUSES) == {0, 1, 2, 3, 130}
    # the pipeline's failed job ends with 3 through the one table every command uses
    from lbparse.pipeline.job import JobFailed

    assert status.exit_status(JobFailed("failed", "x", summary_path=None)) == status.JOB_FAILED
    helped = run_cli("--help").stdout.decode()
    tail = helped.split("exit status", 1)[1]
    for code in status.EXIT_STATUSES:
        assert re.search(rf"^\s+{code}\s+\S", tail, re.M), code
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Command line", 1)[1].split("\n## ", 1)[0]
    for code in status.EXIT_STATUSES:
        assert re.search(rf"^\| `{code}` \|", section, re.M), code
    cli = Path(status.__file__).parent
    for path in cli.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Return)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, int)
                and not isinstance(node.value.value, bool)
            ):
                assert node.value.value in status.EXIT_STATUSES, (path.name, node.lineno)


def _lines(out: bytes) -> list[Any]:
    """JSON Lines as values: a protobuf map's keys come in any order from one
    process to the next (the protobuf runtime's hash tables)."""
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.slow
def test_capture_count_stops_after_n_messages(captures: dict[str, Path]) -> None:
    everything = _lines(
        run_cli("capture", str(captures["pcap"]), str(captures["pcapng"]), "--layout", "v0").stdout
    )
    assert len(everything) == 80
    for n in (1, 5, 40, 41, 79):
        res = run_cli(
            "capture",
            str(captures["pcap"]),
            str(captures["pcapng"]),
            "--layout",
            "v0",
            "-c",
            str(n),
        )
        assert res.returncode == 0 and _lines(res.stdout) == everything[:n], n
    long = run_cli("capture", str(captures["pcap"]), "--count", "1000", "--layout", "v0")
    assert _lines(long.stdout) == everything[:40]
    for bad in ("0", "-1", "x"):
        res = run_cli("capture", str(captures["pcap"]), "-c", bad)
        assert res.returncode == 2 and b"lbparse capture: argument -c/--count" in res.stderr


@pytest.mark.slow
def test_capture_count_stops_a_live_pipe(captures: dict[str, Path]) -> None:
    """From a pipe still open (tcpdump -U -w -), -c N ends the run at the N-th
    message, as tshark -c does, without waiting for the end of input."""
    data = captures["pcap"].read_bytes()
    cut = _packet_end(data, "pcap", 6)  # the handshake, then three messages
    proc = subprocess.Popen(
        [*LBPARSE, "capture", "-", "--layout", "v0", "-c", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(data[:cut])
        proc.stdin.flush()  # and the pipe stays open
        proc.wait(timeout=TIMEOUT)
        assert proc.stdout is not None
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        proc.stdin.close()
    assert proc.returncode == 0
    assert [json.loads(line)["subject"] for line in out.splitlines()] == ["lb.v0", "lb.v1"]


@pytest.mark.slow
def test_capture_takes_lenient_and_no_verify_crc_as_decode(tmp_path: Path) -> None:
    by_id = {v["id"]: bytes.fromhex(v["hex"]) for v in VECTORS}
    payloads = [by_id["bad_header_len_255_long"], by_id["bad_crc_zero"]]
    conn = Conn()
    frames = conn.handshake()
    for i, p in enumerate(payloads):
        frames += conn.send("c", pub(f"lb.{i}", p))
    cap = tmp_path / "odd.pcap"
    write_pcap(str(cap), [(1_500_000_000 + i, link(ETHERNET, f)) for i, f in enumerate(frames)])

    def outcome(*options: str) -> list[str]:
        res = run_cli("capture", str(cap), "--layout", "v0", *options)
        recs = [json.loads(line) for line in res.stdout.splitlines()]
        return [
            r["error"]["kind"] if "error" in r else r["envelope"]["msg_type_name"] for r in recs
        ]

    def decoded(**options: Any) -> list[str]:
        out = []
        for p in payloads:
            try:
                out.append(str(lbparse.decode(p, "v0", **options).msg_type_name))
            except lbparse.EnvelopeError as exc:
                out.append(exc.kind)
        return out

    assert outcome() == decoded() == ["bad_header_len", "crc_mismatch"]
    assert outcome("--no-verify-crc") == decoded(verify_crc=False)
    assert outcome("--lenient") == decoded(lenient=True)
    assert outcome("--lenient", "--no-verify-crc") == decoded(lenient=True, verify_crc=False)
    assert outcome("--no-verify-crc") != outcome() != outcome("--lenient")
    res = run_cli("capture", str(cap), "--lenient")  # the default layout is auto
    assert res.returncode == 2 and b"--lenient needs a named --layout" in res.stderr


@pytest.mark.slow
def test_an_empty_selection_is_said_with_status_1(data_dir: Path, tmp_path: Path) -> None:
    cases = [
        (
            ["segments", str(data_dir), "--stream", "nosuch"],
            1,
            "no partition matches --stream nosuch (found: s/0)",
        ),
        (
            ["segments", str(data_dir), "--partition", "7", "--verify"],
            1,
            "no partition matches --partition 7 (found: s/0)",
        ),
        (["segments", str(data_dir), "--from-offset", "100"], 1, "no entry in offsets 100.."),
        (["segments", str(data_dir), "--partition", "-1"], 2, "partitions are numbered from 0"),
        (
            ["segments", str(data_dir), "--from-offset", "10", "--to-offset", "5"],
            2,
            "--from-offset 10 is past --to-offset 5",
        ),
        (
            ["raft", str(data_dir.parent), "--from-index", "5", "--to-index", "2"],
            2,
            "--from-index 5 is past --to-index 2",
        ),
    ]
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    cases += [
        (["capture", str(empty)], 1, "empty.pcap: empty (0 bytes): nothing to read"),
        (["capture", "-"], 1, "stdin: empty (0 bytes)"),
        (
            ["report", str(empty), "-q", "-o", str(tmp_path / "r.html")],
            1,
            "empty.pcap: empty (0 bytes): nothing to read",
        ),
    ]
    for args, code, said in cases:
        res = run_cli(*args, stdin=b"")
        err = res.stderr.decode()
        assert res.returncode == code, (args, res.returncode, err)
        assert err.startswith(f"lbparse {args[0]}: ") and said in err, (args, err)
    ok = run_cli("segments", str(data_dir), "--from-offset", "3", "--to-offset", "4")
    assert ok.returncode == 0 and ok.stderr == b""


@pytest.mark.slow
def test_raft_takes_what_segments_takes(short_data: Path) -> None:
    """A cluster's folder of data directories, a data directory, raft.db itself."""
    nodes = sorted(p for p in short_data.iterdir() if (p / "raft" / "raft.db").is_file())
    assert len(nodes) == 3
    whole = run_cli("raft", str(short_data), "--json")
    assert whole.returncode == 0, whole.stderr
    parts = b"".join(run_cli("raft", str(n), "--json").stdout for n in nodes)
    assert whole.stdout == parts
    files = {json.loads(line)["file"] for line in whole.stdout.splitlines()}
    assert files == {str(n / "raft" / "raft.db") for n in nodes}
    one = run_cli("raft", str(nodes[0] / "raft" / "raft.db"), "--json")
    assert one.stdout == run_cli("raft", str(nodes[0]), "--json").stdout
    assert run_cli("segments", str(short_data), "-q").returncode == 0  # what segments takes


@pytest.mark.slow
def test_dash_o_keeps_what_was_written_at_ctrl_c(captures: dict[str, Path], tmp_path: Path) -> None:
    """As tshark keeps its -w file: `capture - -o FILE` from a live pipe, stopped
    by SIGINT, leaves FILE with every record written before, says so, status 130."""
    data = captures["pcap"].read_bytes()
    out = tmp_path / "live.jsonl"
    out.write_text("previous run\n")
    proc = subprocess.Popen(
        [*LBPARSE, "capture", "-", "--layout", "v0", "-o", str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(data[: _packet_end(data, "pcap", 6)])  # three messages; open pipe
        proc.stdin.flush()
        deadline = time.monotonic() + TIMEOUT
        temp: list[Path] = []
        while time.monotonic() < deadline and not temp:  # the new file beside the old
            temp = [p for p in tmp_path.iterdir() if p.name.startswith(".live.jsonl.")]
            time.sleep(0.05)
        assert temp and out.read_text() == "previous run\n"
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and temp[0].read_bytes().count(b"\n") < 3:
            time.sleep(0.05)  # the pipe's records are flushed as they come
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert proc.returncode == 130
    assert err.decode().splitlines() == [
        f"lbparse capture: interrupted: {out} holds what was written before"
    ]
    assert [json.loads(line)["subject"] for line in out.read_text().splitlines()] == [
        "lb.v0",
        "lb.v1",
        "lb.v2",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live.jsonl"]


@pytest.mark.slow
def test_generate_refuses_a_file_or_a_device_as_its_folder_before_any_work(tmp_path: Path) -> None:
    """`generate -o` names a folder: a file or a device there is said in one line
    (it was a raw errno after the work, from deep inside the writer)."""
    f = tmp_path / "f.txt"
    f.write_text("keep me")
    for out, kind in ((f, "a regular file"), (Path(os.devnull), "a character device")):
        res = run_cli("generate", "--lang", "graphviz", "-o", str(out))
        err = res.stderr.decode()
        assert (
            res.returncode == 2
            and err == f"lbparse generate: -o {out}: is {kind}, not a directory\n"
        ), err
    assert f.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_every_help_line_fits_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--help` of lbparse and of each command, as a terminal of 80 columns
    shows it: no line past 80 (21 were: long choice lists in the usage, raw
    text and examples not wrapped)."""
    import argparse
    import contextlib
    import io

    from lbparse.cli import build_parser

    monkeypatch.setenv("COLUMNS", "80")
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    helps = {"lbparse": top.format_help()}
    for name in sub.choices:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            build_parser(name).parse_args([name, "--help"])
        helps[name] = out.getvalue()
    assert len(helps) > 10
    long = [
        f"{name}: {line}"
        for name, text in helps.items()
        for line in text.splitlines()
        if len(line) > 80
    ]
    assert long == []
