"""One output convention for every command (issue #25, item 4).

- Every JSON writer passes a real `jq -c .` round trip with its 64-bit values
  intact: they are decimal strings (jq 1.6 printed 1795680664773570907 as
  1795680664773570800), on real inputs and on crafted ones near 2**63.
- Text from the input reaches the terminal escaped: a capture whose subjects
  hold `ESC ]0;TITLE BEL` (retitles the window), `ESC [2J` (clears the
  screen), NUL and, in a status text, a newline; a data directory whose
  stream name and header keys hold the same.
- No MsgType is one word, `(none)`, in every table and chart; never `None`.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.capwriter import ETHERNET, Conn, link, pub, write_pcap
from support.cli import run_cli
from support.shared import LIFTBRIDGE
from support.storage import (
    Msg,
    short_data,  # noqa: F401 (a fixture)
    write_partition,
)

import lbparse

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"
# Near 2**63 and 2**64: JSON numbers this large lose digits in jq and JavaScript.
BIG_OFFSET = 2**63 - 2
BIG_TIME = 2**63 - 1
BIG_EPOCH = 2**64 - 2
T0 = 1_700_000_000_123_456_789  # the crafted capture's first packet, ns: past 2**53 too
# A terminal acts on these: window title, clear screen, NUL, and CSI as one C1 byte.
TITLE = "\x1b]0;TITLE\x07"
CLEAR = "\x1b[2J"
EVIL_SUBJECT = f"a.{TITLE}.{CLEAR}.\x00x.\x9b2J"
# HTML: a comment opener that hides the next </script>, and a tag that runs code.
HTML_SUBJECTS = (
    "<!--<script>",
    "</script><img/src='x'/onerror=\"document.body.dataset.rendered='pwned'\">",
)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what may not reach a terminal


def _encode(msg_type: str, payload: dict[str, Any]) -> bytes:
    res = run_cli("encode", "--type", msg_type, "--json", json.dumps(payload))
    assert res.returncode == 0, res.stderr
    return bytes.fromhex(res.stdout.decode().strip())


def _big_replication_response() -> bytes:
    return _encode(
        "ReplicationResponse",
        {
            "leader_epoch": str(BIG_EPOCH),
            "high_watermark": str(BIG_OFFSET + 1),
            "entries": [
                {
                    "offset": str(BIG_OFFSET),
                    "timestamp": str(BIG_TIME),
                    "leader_epoch": str(BIG_EPOCH),
                    "key_hex": "6b",
                    "value_hex": "76",
                    "headers_hex": {},
                }
            ],
        },
    )


def _encode_flatbuffers_ack() -> bytes:
    """A FlatBuffers-layout Ack: decode_arrow has no struct column for it, so its
    `payload_json` is JSON text (lbparse.codec.flatbuf's fields; the offset 64-bit)."""
    res = run_cli(
        "encode",
        "--layout",
        "flatbuffers",
        "--type",
        "Ack",
        "--json",
        json.dumps({"stream": "s", "offset": str(BIG_OFFSET)}),
    )
    assert res.returncode == 0, res.stderr
    return bytes.fromhex(res.stdout.decode().strip())


def _status(inbox: str, text: str) -> bytes:
    """An HMSG carrying only a NATS status line, as nats-server sends a 503."""
    hdr = f"NATS/1.0 {text}\r\n\r\n".encode()
    return f"HMSG {inbox} 1 {len(hdr)} {len(hdr)}\r\n".encode() + hdr + b"\r\n"


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture: a client named with controls, subjects holding controls and
    HTML, requests answered by 503s (one with a newline in its text), a
    ReplicationResponse whose offset, time and epoch are near 2**63 and 2**64."""
    conn = Conn()
    frames = conn.handshake()
    client = (
        b'CONNECT {"name":"\\u001b]0;TITLE\\u0007"}\r\n'
        + pub(EVIL_SUBJECT, b"hi", reply=f"_INBOX.{CLEAR}")
        + pub("lb.big", _big_replication_response())
        + b"".join(pub(s, b"q", reply=f"_INBOX.r{i}") for i, s in enumerate(HTML_SUBJECTS))
    )
    frames += conn.send("c", client)
    frames += conn.send(
        "s",
        _status(f"_INBOX.{CLEAR}", f"503 no{CLEAR}\nresponders")
        + b"".join(_status(f"_INBOX.r{i}", "503") for i in range(2)),
    )
    path = tmp_path_factory.mktemp("crafted") / "crafted.pcap"
    write_pcap(
        str(path), [(T0 + i * 1000, link(ETHERNET, f)) for i, f in enumerate(frames)], nanos=True
    )
    return path


@pytest.fixture(scope="module")
def crafted_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory: a stream whose name and header keys hold controls, its
    one entry at offset 2**63-2 with time 2**63-1 and leader epoch 2**64-2."""
    node = tmp_path_factory.mktemp("crafted-data") / "node1"
    write_partition(
        node / "streams" / f"s{TITLE}" / "0",
        [
            [
                Msg(
                    BIG_OFFSET,
                    BIG_TIME,
                    BIG_EPOCH,
                    b"k",
                    b"v",
                    [(f"key{CLEAR}\n\x00", b"v"), ("subject", TITLE.encode())],
                )
            ]
        ],
    )
    return node


# --- every JSON writer through jq --------------------------------------------


def _values(text: str) -> list[Any]:
    """Every JSON value of `text` (JSON Lines, or one document over many lines)."""
    dec, out, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return out
        value, i = dec.raw_decode(text, i)
        out.append(value)


def _numbers(value: Any) -> list[int]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, int) and not isinstance(value, bool) else []


def assert_jq_round_trip(text: str) -> list[Any]:
    """`jq -c .` gives back the same values; no JSON number past 2**53."""
    mine = _values(text)
    assert mine, "no JSON written"
    jq = subprocess.run(["jq", "-c", "."], input=text, capture_output=True, text=True, timeout=120)
    assert jq.returncode == 0, jq.stderr
    assert [json.loads(x) for x in jq.stdout.splitlines()] == mine
    assert [n for v in mine for n in _numbers(v) if abs(n) >= 2**53] == []
    return mine


def _stdout(*args: str) -> str:
    res = run_cli(*args, timeout=300)
    assert res.returncode in (0, 1), res.stderr
    return res.stdout.decode()


def _json_writers(short: Path, capture: Path, data: Path, tmp: Path) -> dict[str, str]:
    """Command -> what it wrote as JSON (stdout, or the file it was asked to write)."""
    rr = _big_replication_response().hex()
    torn = tmp / "torn" / "node1"
    write_partition(torn / "streams" / "s" / "0", [[Msg(BIG_OFFSET), Msg(BIG_OFFSET + 1)]])
    log = next(torn.glob("streams/s/0/*.log"))
    log.write_bytes(log.read_bytes()[:-3])
    out = {
        "capture short": _stdout("capture", str(SHORT)),
        "capture crafted": _stdout("capture", str(capture)),
        "segments short (C)": _stdout("segments", "--format", "jsonl", str(short / "node1")),
        "segments crafted (C)": _stdout("segments", "--format", "jsonl", str(data)),
        "segments crafted --deep": _stdout("segments", "--format", "jsonl", "--deep", str(data)),
        "segments torn": _stdout("segments", "--format", "jsonl", str(torn)),
        "segments --verify": _stdout("segments", "--verify", "--format", "jsonl", str(torn)),
        "raft short": _stdout("raft", "--format", "jsonl", str(short / "node1")),
        "decode crafted": _stdout("decode", rr),
        "check": _stdout("check", "--json", rr),
        "spec": _stdout("spec", "--json"),
        "decode_arrow payload_json": "\n".join(
            lbparse.decode_arrow([_encode_flatbuffers_ack()], layout="flatbuffers")
            .column("payload_json")
            .to_pylist()
        ),
    }
    for name, inputs in (("short", [str(SHORT), str(short)]), ("crafted", [str(capture)])):
        page = tmp / f"{name}.html"
        out[f"report {name}"] = _stdout("report", *inputs, "-o", str(page), "--json", "-", "-q")
    return out


@pytest.mark.slow
def test_every_json_writer_passes_jq_with_64_bit_values(
    short_data: Path, crafted: Path, crafted_data: Path, tmp_path: Path
) -> None:
    outputs = _json_writers(short_data, crafted, crafted_data, tmp_path)
    for name, text in outputs.items():
        values = assert_jq_round_trip(text)
        if (
            "crafted" in name or "torn" in name or "decode_arrow" in name
        ):  # values past 2**59 came out whole
            assert re.search(r'"\d{19,20}"', json.dumps(values)), name
    # The values themselves, where they were put
    seg = json.loads(outputs["segments crafted (C)"])
    assert (seg["offset"], seg["timestamp"], seg["leader_epoch"]) == (
        str(BIG_OFFSET),
        str(BIG_TIME),
        str(BIG_EPOCH),
    )
    assert json.loads(outputs["segments crafted --deep"])["offset"] == str(BIG_OFFSET)
    assert [json.loads(x)["offset"] for x in outputs["segments torn"].splitlines()] == [
        str(BIG_OFFSET),
        str(BIG_OFFSET + 1),
    ]  # the torn entry's header too
    entry = json.loads(outputs["decode crafted"])["payload_json"]
    assert entry["leader_epoch"] == str(BIG_EPOCH)


# --- the terminal -------------------------------------------------------------


def _terminal(*args: str) -> str:
    res = run_cli(*args, timeout=120)
    assert res.returncode in (0, 1), res.stderr
    text = (res.stdout + res.stderr).decode("utf-8")
    assert CONTROL.findall(text) == [], args
    return text


@pytest.mark.slow
def test_terminal_tables_escape_control_characters(
    crafted: Path, crafted_data: Path, short_data: Path, tmp_path: Path
) -> None:
    table = _terminal("capture", str(crafted), "--format", "table")
    assert "a.\\u001b]0;TITLE\\u0007.\\u001b[2J.\\u0000x.\\u009b2J" in table
    assert "reply=_INBOX.\\u001b[2J" in table
    assert "status 503 no\\u001b[2J\\u000aresponders" in table
    assert len(table.splitlines()) == 7  # one line per message: the newline did not break one
    for stats in (
        _terminal("capture", str(crafted), "-q", "--stats"),
        _terminal("capture", str(crafted), "-q", "--stats", "--all"),
    ):
        assert "a.\\u001b]0;TITLE\\u0007.\\u001b[2J.\\u0000x.\\u009b2J" in stats
        assert "503 no\\u001b[2J\\u000aresponders to a.\\u001b]0;TITLE" in stats
        assert "\\u001b]0;TITLE\\u0007  127.0.0.1:40000" in stats  # the CONNECT name
    seg = _terminal("segments", str(crafted_data))
    assert "== node1 s\\u001b]0;TITLE\\u0007/0" in seg
    assert (
        "key\\u001b[2J\\u000a\\u0000=v" in seg and "subject=0x1b5d30" in seg
    )  # a value: hex when not printable
    _terminal("segments", "--verify", str(crafted_data))
    # A raft.db whose server id node2 is ESC [2J BEL (same length: the file stays whole)
    db = tmp_path / "raft" / "raft.db"
    db.parent.mkdir()
    db.write_bytes(
        (short_data / "node1" / "raft" / "raft.db")
        .read_bytes()
        .replace(b"node2", CLEAR.encode() + b"\x07")
    )
    raft = _terminal("raft", str(tmp_path))
    assert "\\u001b[2J\\u0007=\\u001b[2J\\u0007 (Voter)" in raft
    # ... and whose stable store lacks LastVoteCand (the key renamed): "-", not None
    db.write_bytes(db.read_bytes().replace(b"LastVoteCand", b"LastVoteCanX"))
    raft = _terminal("raft", str(tmp_path))
    assert "LastVoteCand -" in raft and "None" not in raft
    _terminal("report", str(crafted), "-o", str(crafted.with_suffix(".html")))


@pytest.mark.slow
def test_no_msg_type_is_one_word(tmp_path: Path) -> None:
    table = _terminal("capture", str(SHORT), "--format", "table")
    assert " plain (none)" in table and "None" not in table
    stats = _terminal("capture", str(SHORT), "-q", "--stats")
    assert re.search(r"^  \(none\) +2466$", stats, re.M) and "None" not in stats
    model = json.loads(
        _stdout("report", str(SHORT), "-o", str(tmp_path / "r.html"), "--json", "-", "-q")
    )
    assert model["totals"]["per_msg_type"]["(none)"] == 2466
    names = {r["msg_type"] for r in model["traffic"]["by_msg_type"]}
    assert "(none)" in names and not names & {"None", "(plain)"}


@pytest.mark.slow
def test_no_none_in_the_page(short_data: Path, tmp_path: Path) -> None:
    """An empty partition has no first or last offset: the page says —, not None."""
    page = tmp_path / "r.html"
    assert run_cli("report", str(short_data), "-o", str(page), "-q", timeout=300).returncode == 0
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page.read_text())
    assert cells and "None" not in cells and "—" in cells


# --- the page ----------------------------------------------------------------


@pytest.mark.slow  # a headless Chromium (about 3 s)
def test_no_subject_can_change_the_report_page(crafted: Path, tmp_path: Path) -> None:
    """Subjects `<!--<script>` (which made the parser skip the data's closing
    </script>: the page was blank) and `</script><img onerror=...>` are shown
    as text in the page drawn by a real Chromium, and change nothing."""
    from lbparse.report.browser import chromium, look

    if chromium() is None:
        pytest.skip("Chromium is not installed (make install-system)")
    page = tmp_path / "report.html"
    res = run_cli("report", str(crafted), "-o", str(page), "-q", timeout=300)
    assert res.returncode in (0, 1), res.stderr
    html = page.read_text()
    # the data inside <script>: no < or > at all
    for data in re.findall(r"<script type='application/json'[^>]*>(.*?)</script>", html, re.S):
        assert "<" not in data and ">" not in data
    seen = look(page)
    assert seen.rendered == "ok", seen.rendered  # not 'pwned', not a timeout of a blank page
    assert seen.errors == []
    assert [u for u in seen.requests if not u.startswith("file://")] == []
    for s in HTML_SUBJECTS:
        assert s in seen.text  # the 503s' request subjects, as text


# --- the writers that need a server or Spark -----------------------------------


def _listening(cmd: list[str]) -> subprocess.Popen[bytes]:
    """Start `cmd` (tap or record) and wait, bounded, for its "listening on" line."""
    import select
    import time

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if select.select([proc.stderr], [], [], 0.2)[0]:
            line = proc.stderr.readline()  # type: ignore[union-attr]
            if b"listening on" in line:
                return proc
            if not line:
                break
    proc.kill()
    proc.wait(timeout=5)
    raise AssertionError(f"{cmd[3]} did not start listening")


@pytest.mark.slow  # a real nats-server, and a Spark run of the pipeline
def test_tap_record_and_pipeline_json_pass_jq(
    nats_server: str, crafted: Path, tmp_path: Path
) -> None:
    import asyncio

    import nats
    import pyarrow.parquet as pq
    from support.cli import LBPARSE

    big = _big_replication_response()
    recording = tmp_path / "rec.jsonl"
    tap = _listening([*LBPARSE, "tap", nats_server, "lb.>", "--count", "2", "--duration", "30"])
    record = _listening(
        [
            *LBPARSE,
            "record",
            nats_server,
            "lb.>",
            "--count",
            "2",
            "--duration",
            "30",
            "-o",
            str(recording),
        ]
    )

    async def publish() -> None:
        nc = await nats.connect(nats_server, allow_reconnect=False, connect_timeout=5)
        try:
            await nc.publish("lb.big", big)
            await nc.publish("lb.small", b"x")
            await nc.flush(timeout=5)
        finally:
            await nc.close()

    try:
        asyncio.run(publish())
        tapped, _ = tap.communicate(timeout=60)
        record.communicate(timeout=60)
    finally:
        for proc in (tap, record):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
    for text in (tapped.decode(), recording.read_text()):
        values = assert_jq_round_trip(text)
        assert len(values) == 2
        assert values[0]["envelope"]["payload_json"]["leader_epoch"] == str(BIG_EPOCH)
    # The pipeline: summary.json, and a stored envelope's JSON (entries' value_json)
    data = tmp_path / "data" / "node1"
    write_partition(data / "streams" / "s" / "0", [[Msg(BIG_OFFSET, BIG_TIME, 1, b"k", big)]])
    out = tmp_path / "out"
    res = run_cli("pipeline", str(crafted), str(data), "--out", str(out), "-q", timeout=600)
    assert res.returncode in (0, 1), res.stderr
    assert_jq_round_trip((out / "summary.json").read_text())
    entries = pq.read_table(out / "entries").to_pylist()
    texts = [e["value_json"] for e in entries if e["value_json"]]
    assert len(texts) == 1 and f'"{BIG_EPOCH}"' in texts[0]
    assert_jq_round_trip(texts[0])


def test_the_pipelines_summary_table_escapes_what_came_from_the_inputs() -> None:
    """The pipeline's terminal summary shows file paths, stream names and the
    inputs' problems: none may reach the terminal raw."""
    from lbparse.pipeline.summary import FileSummary, Summary

    hostile = "cap\x1b]0;TITLE\x07\x1b[2J\x00\n.pcap"
    f = FileSummary(hostile, "pcap", 10, rows=1)
    f.file_errors.append(f"{hostile}: unreadable")
    f.per_stream["orders\x1b[31m"] = 1
    table = Summary([f], "out/messages", "v0").table()
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", table), table
    assert "cap\\u001b]0;TITLE\\u0007\\u001b[2J\\u0000\\u000a.pcap" in table
    assert "orders\\u001b[31m" in table
