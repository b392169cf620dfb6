"""`lbparse segments`: the table, JSON Lines with the issue's keys, the
filters, --deep, --verify's exit status and one line per finding, usage
errors, and a closed pipe."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from support.cli import LBPARSE
from support.storage import Msg, lbtruth, messages, short_data, write_partition  # noqa: F401 (a fixture)

import lbparse

KEYS = {
    "file",
    "stream",
    "partition",
    "segment",
    "position",
    "offset",
    "timestamp",
    "leader_epoch",
    "size",
    "crc32c",
    "crc_ok",
    "magic",
    "attributes",
    "key_hex",
    "value_hex",
    "headers_hex",
}


def _lbparse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LBPARSE, "segments", *args], capture_output=True, text=True, timeout=120
    )


def _jsonl(*args: str) -> list[dict]:
    res = _lbparse("--format", "jsonl", *args)
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


@pytest.mark.slow
def test_jsonl_has_every_key_and_equals_lbtruth(short_data: Path) -> None:
    rows = _jsonl(str(short_data / "node1"))
    assert len(rows) == 85 and all(KEYS <= set(r) for r in rows)
    log = short_data / "node1" / "streams" / "events" / "0" / "00000000000000000000.log"
    truth = [json.loads(line) for line in lbtruth("segment", str(log))]
    mine = [r for r in rows if r["file"] == str(log)]
    # lbparse's JSON: 64-bit offsets, timestamps and epochs as decimal strings.
    int64 = ("offset", "timestamp", "leader_epoch")
    assert all(isinstance(r[k], str) for r in mine for k in int64)
    assert [{k: int(r[k]) if k in int64 else r[k] for k in truth[0]} for r in mine] == truth
    assert {(r["stream"], r["partition"], r["segment"]) for r in mine} == {("events", 0, "0")}


@pytest.mark.slow
def test_table_is_readable(short_data: Path) -> None:
    res = _lbparse(str(short_data / "node1" / "streams" / "orders" / "0"), "--to-offset", "2")
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert lines[0] == "== node1 orders/0  segment 0 (3,227 bytes)"
    assert lines[1].split() == [
        "position",
        "offset",
        "timestamp",
        "epoch",
        "size",
        "crc",
        "key",
        "value",
        "headers",
    ]
    assert len(lines) == 5 and lines[2].split()[:2] == ["0", "0"] and "cust-000" in lines[2]
    assert "Z " in lines[2]  # RFC 3339 times


@pytest.mark.slow
def test_filters(short_data: Path) -> None:
    rows = _jsonl(
        str(short_data),
        "--stream",
        "orders",
        "--partition",
        "1",
        "--from-offset",
        "3",
        "--to-offset",
        "5",
    )
    assert sorted({r["file"].split("/data-short/")[1].split("/")[0] for r in rows}) == [
        "node1",
        "node2",
        "node3",
    ]
    assert {(r["stream"], r["partition"]) for r in rows} == {("orders", 1)}
    assert sorted({r["offset"] for r in rows}) == ["3", "4", "5"]


@pytest.mark.slow
def test_deep_decodes_known_values(short_data: Path, tmp_path: Path) -> None:
    act = _jsonl(str(short_data / "node1" / "streams" / "__activity"), "--deep")
    assert act[0]["value_decoded"]["type"] == "proto.ActivityStreamEvent"
    assert act[0]["value_decoded"]["json"]["createStreamOp"]["stream"] == "__activity"
    cur = _jsonl(str(short_data / "node1" / "streams" / "__cursors"), "--deep")
    assert cur[0]["value_decoded"] == {
        "type": "protocol.Cursor",
        "json": {"stream": "orders", "cursorId": "reader-1", "offset": "5"},
    }
    ack = lbparse.encode(lbparse.message_class("proto.Ack")(stream="s", offset=7))
    write_partition(
        tmp_path / "D" / "streams" / "plain" / "0",
        [[Msg(0, value=ack), Msg(1, value=b"just bytes")]],
        hw=1,
        epochs=[(3, 0)],
    )
    rows = _jsonl(str(tmp_path / "D"), "--deep")
    assert rows[0]["value_decoded"]["json"]["msg_type_name"] == "Ack"
    assert rows[1]["value_decoded"] is None


@pytest.mark.slow
def test_verify_clean_real_data(short_data: Path) -> None:
    res = _lbparse("--verify", *(str(short_data / n) for n in ("node1", "node2", "node3")))
    assert res.returncode == 0, res.stdout
    assert res.stdout == ""
    assert (
        "verified 21 partition(s), 255 entries, replicas compared across node1, node2, "
        "node3: 0 finding(s)" in res.stderr
    )


@pytest.mark.slow
def test_verify_reports_each_finding_on_one_line(short_data: Path, tmp_path: Path) -> None:
    for n in ("node1", "node2"):
        shutil.copytree(short_data / n, tmp_path / n)
    log = tmp_path / "node2" / "streams" / "orders" / "0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[data.find(b'"i":12') + 5] ^= 0x01  # a value byte of offset 4
    log.write_bytes(bytes(data))
    res = _lbparse("--verify", str(tmp_path / "node1"), str(tmp_path / "node2"))
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{log}:626: crc_mismatch: entry of offset 4: stored crc32c 0x")
    assert lines[1] == (
        f"{log}:626: replica_mismatch: orders/0: offset 4 differs from node1's "
        "(body); replicas must be identical up to the smallest high watermark "
        "(23)"
    )
    res = _lbparse("--verify", "--format", "jsonl", str(tmp_path / "node2"))
    assert [json.loads(x)["kind"] for x in res.stdout.splitlines()] == ["crc_mismatch"]


@pytest.mark.slow
def test_damage_is_reported_while_listing(tmp_path: Path) -> None:
    folder = write_partition(
        tmp_path / "D" / "streams" / "s" / "0", [messages(4)], hw=3, epochs=[(3, 0)]
    )
    log = folder / "00000000000000000000.log"
    log.write_bytes(log.read_bytes()[:-5])
    res = _lbparse("--format", "jsonl", str(tmp_path / "D"))
    assert res.returncode == 1
    assert f"{log}:" in res.stderr and "torn_entry" in res.stderr
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r.get("offset") for r in rows] == ["0", "1", "2", "3"]  # the torn one's too
    assert rows[-1]["error"] == "torn_entry" and rows[-1]["size"] > 0


@pytest.mark.slow
def test_usage_errors_exit_2(tmp_path: Path) -> None:
    res = _lbparse(str(tmp_path / "missing"))
    assert res.returncode == 2 and "no such file" in res.stderr and "Traceback" not in res.stderr
    (tmp_path / "empty").mkdir()
    res = _lbparse(str(tmp_path / "empty"))
    assert res.returncode == 2 and "holds no Liftbridge" in res.stderr
    res = _lbparse("--from-offset", "x", str(tmp_path))
    assert res.returncode == 2


@pytest.mark.slow
def test_closed_pipe_is_quiet(short_data: Path) -> None:
    cmd = (
        f"{shlex.join(LBPARSE)} segments --format jsonl {short_data} | head -1; "
        "exit ${PIPESTATUS[0]}"
    )
    res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stderr == "" and len(res.stdout.splitlines()) == 1
