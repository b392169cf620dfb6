"""Live traffic through a real nats-server: `lbparse tap` and `lbparse
record` see every reference vector byte-exact, and a real tcpdump capture
of that traffic gives every message back through the capture reader."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import LBPARSE
from support.net import wait_file_settles

import lbparse
from lbparse.capture import CaptureReader
from lbparse.codec import jsonform
from lbparse.errors import EnvelopeError

pytestmark = pytest.mark.slow  # live servers (nats-server, tcpdump)

ROOT = Path(__file__).resolve().parents[2]
VECTORS = [
    json.loads(line)
    for line in (ROOT / "tests" / "data" / "vectors.jsonl").read_text().splitlines()
    if line
]
PAYLOADS = [bytes.fromhex(v["hex"]) for v in VECTORS]
ENVELOPE_KEYS = (
    "version",
    "header_len",
    "flags",
    "crc32c",
    "msg_type",
    "msg_type_name",
    "payload_type",
    "payload_json",
)


def _headers(i: int) -> dict[str, str] | None:
    return {"Vector-Id": VECTORS[i]["id"], "X-Seq": str(i)} if i % 3 == 1 else None


def _same_value(got: object, want: object) -> bool:
    """JSON of lbparse's convention (64-bit integers as decimal strings)
    against a vector's `expect` (plain numbers): the same values."""
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(_same_value(got[k], want[k]) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(map(_same_value, got, want))
    if isinstance(want, int) and not isinstance(want, bool) and isinstance(got, str):
        return got == str(want)
    return got == want


def _expected_decoding(payload: bytes) -> dict:
    try:
        # As JSON text gives it back (lbparse.codec.jsonform: 64-bit fields are strings).
        return {
            "envelope": json.loads(jsonform.dumps(lbparse.decode(payload, "v0").to_json_dict()))
        }
    except EnvelopeError as exc:
        return {"error": {"kind": exc.kind, "message": exc.message}}


async def _publish_all(url: str, prefix: str = "lb") -> None:
    import nats

    nc = await nats.connect(url, allow_reconnect=False, connect_timeout=5)
    try:
        for i, p in enumerate(PAYLOADS):
            reply = f"_INBOX.v{i}" if i % 4 == 2 else ""
            await nc.publish(f"{prefix}.v{i % 5}", p, reply=reply, headers=_headers(i))
        await nc.flush(timeout=5)
    finally:
        await nc.close()


def _start(cmd: list[str], ready: str, timeout: float = 15.0) -> subprocess.Popen:
    """Start `cmd` and wait (bounded) for `ready` on its stderr."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    deadline = time.monotonic() + timeout
    seen = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stderr], [], [], 0.2)
        if r:
            line = proc.stderr.readline()  # type: ignore[union-attr]
            seen += line
            if ready.encode() in line:
                return proc
            if not line and proc.poll() is not None:
                break
    proc.kill()
    proc.wait(timeout=5)
    raise AssertionError(f"{cmd[0:4]} did not get ready: {seen.decode(errors='replace')}")


def _finish(proc: subprocess.Popen, timeout: float = 30.0) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=5)
        raise AssertionError(f"timed out; stderr: {err.decode(errors='replace')}") from None
    assert proc.returncode == 0, err.decode(errors="replace")
    return out.decode(), err.decode()


def _while_publishing(nats_server: str, cmd: list[str]) -> tuple[str, str]:
    """Start `cmd` (a tap or record), publish every vector once it listens,
    and return what it printed; the process is stopped whatever happens."""
    proc = _start(cmd, "listening on")
    try:
        asyncio.run(_publish_all(nats_server))
        return _finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


def _check_records(recs: list[dict]) -> None:
    assert len(recs) == len(PAYLOADS)
    for i, (r, payload) in enumerate(zip(recs, PAYLOADS)):
        assert base64.b64decode(r["payload"]) == payload, VECTORS[i]["id"]
        assert r["subject"] == f"lb.v{i % 5}"
        assert r["reply"] == (f"_INBOX.v{i}" if i % 4 == 2 else None)
        h = _headers(i)
        assert r["headers"] == (None if h is None else [list(kv) for kv in h.items()])
        assert r["verb"] == ("HMSG" if h else "MSG") and r["direction"] == "server_to_client"
        assert r["sid"] is not None and r["src"].startswith("127.0.0.1:")
        got = {k: r[k] for k in ("envelope", "error") if k in r}
        assert got == _expected_decoding(payload), VECTORS[i]["id"]
        v = VECTORS[i]
        if v["layout"] == "v0" and "error" not in v["expect"]:
            shared = set(v["expect"]) & set(ENVELOPE_KEYS)
            for k in shared:
                assert _same_value(r["envelope"][k], v["expect"][k]), (v["id"], k)


def test_tap_sees_every_vector(nats_server: str) -> None:
    out, _ = _while_publishing(
        nats_server,
        [
            *LBPARSE,
            "tap",
            nats_server,
            "lb.>",
            "--layout",
            "v0",
            "--count",
            str(len(PAYLOADS)),
            "--duration",
            "30",
        ],
    )
    _check_records([json.loads(line) for line in out.splitlines()])


@pytest.mark.parametrize("ext", ["jsonl", "parquet"])
def test_record_writes_every_vector(nats_server: str, tmp_path: Path, ext: str) -> None:
    out_file = tmp_path / f"rec.{ext}"
    proc = _start(
        [
            *LBPARSE,
            "record",
            nats_server,
            "lb.*",
            "--layout",
            "v0",
            "-o",
            str(out_file),
            "--duration",
            "30",
        ],
        "listening on",
    )
    try:
        asyncio.run(_publish_all(nats_server))
        # Stopped by a signal, as a person would: the file must still be whole.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            if (
                ext == "jsonl"
                and out_file.exists()
                and out_file.read_bytes().count(b"\n") >= len(PAYLOADS)
            ):
                break
            if ext == "parquet":
                time.sleep(1.0)  # buffered until close: give delivery a moment
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = _finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert f"{len(PAYLOADS)} messages to" in err
    recs = [
        json.loads(jsonform.dumps(r.to_json_dict())) for r in CaptureReader(out_file, layout="v0")
    ]
    _check_records(recs)


def test_record_count_stops(nats_server: str, tmp_path: Path) -> None:
    out_file = tmp_path / "ten.jsonl"
    _while_publishing(
        nats_server,
        [
            *LBPARSE,
            "record",
            nats_server,
            "lb.>",
            "--count",
            "10",
            "-o",
            str(out_file),
            "--duration",
            "30",
        ],
    )
    lines = out_file.read_text().splitlines()
    assert len(lines) == 10
    assert [base64.b64decode(json.loads(x)["payload"]) for x in lines] == PAYLOADS[:10]


def test_tap_duration_stops_without_messages(nats_server: str) -> None:
    t0 = time.monotonic()
    out = subprocess.run(
        [*LBPARSE, "tap", nats_server, "none.here", "--duration", "0.5"],
        capture_output=True,
        timeout=30,
        cwd=ROOT,
    )
    assert out.returncode == 0 and out.stdout == b""
    assert time.monotonic() - t0 < 25


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
@pytest.mark.parametrize(
    "command", [("tap",), ("record", "-o", "out.jsonl")], ids=["tap", "record"]
)
def test_a_refused_connection_is_said_at_once_in_one_line(
    tmp_path: Path, host: str, command: tuple[str, ...]
) -> None:
    """Nothing listens at the port: one line and status 1 as soon as the
    connection is refused, as the `nats` CLI says it. nats-py alone would try
    again every 2 s until the time limit (2 x --timeout + 1 s: 61 s here,
    past this run's own bound). localhost: ::1 and 127.0.0.1 both refused."""
    from support.net import free_port

    url = f"nats://{host}:{free_port()}"
    out = subprocess.run(
        [*LBPARSE, command[0], url, "x", *command[1:], "--timeout", "30"],
        capture_output=True,
        timeout=20,
        cwd=tmp_path,
    )
    lines = out.stderr.decode().splitlines()
    assert out.returncode == 1 and lines == [
        f"lbparse {command[0]}: cannot connect to {url}: connection refused: is a NATS "
        "server running there?"
    ], lines
    assert not (tmp_path / "out.jsonl").exists()  # nothing received: nothing written


def test_a_server_that_accepts_and_stays_silent_is_given_up_in_one_line(tmp_path: Path) -> None:
    """A listener that never says INFO: given up after --timeout twice and a
    second (nats-py's second try), said as silence, not as a TimeoutError."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)  # the kernel completes the handshakes; nothing is ever sent
        url = f"nats://127.0.0.1:{listener.getsockname()[1]}"
        out = subprocess.run(
            [*LBPARSE, "tap", url, "x", "--timeout", "1"],
            capture_output=True,
            timeout=30,
            cwd=tmp_path,
        )
    lines = out.stderr.decode().splitlines()
    assert out.returncode == 1 and lines == [
        f"lbparse tap: no NATS server answered at {url} within 3 s"
    ], lines


TCPDUMP = shutil.which("tcpdump")


@pytest.mark.skipif(TCPDUMP is None or os.geteuid() != 0, reason="needs tcpdump and root")
def test_tcpdump_capture_gives_back_every_message(nats_server: str, tmp_path: Path) -> None:
    port = nats_server.rsplit(":", 1)[1]
    pcap = tmp_path / "live.pcap"
    # --immediate-mode: otherwise packets wait in the kernel's ring buffer
    # and a prompt stop loses them.
    # -B: a large kernel buffer, so a loaded machine does not drop packets.
    dump = _start(
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
            str(pcap),
            f"tcp port {port}",
        ],
        "listening on",
    )
    try:

        async def traffic() -> list[bytes]:
            import nats

            got: list[bytes] = []
            sub_nc = await nats.connect(nats_server, allow_reconnect=False)
            done = asyncio.Event()

            async def cb(msg) -> None:  # type: ignore[no-untyped-def]
                got.append(msg.data)
                if len(got) == len(PAYLOADS):
                    done.set()

            await sub_nc.subscribe("lb.>", cb=cb)
            await sub_nc.flush()
            await _publish_all(nats_server)
            await asyncio.wait_for(done.wait(), 20)
            await sub_nc.close()
            return got

        assert asyncio.run(traffic()) == PAYLOADS
        wait_file_settles(pcap)  # the last segments reach the capture
    finally:
        dump.send_signal(signal.SIGINT)
        try:
            dump.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            dump.kill()
            dump.communicate(timeout=5)
    notices: list = []
    recs = list(CaptureReader(pcap, layout="v0", on_notice=notices.append))
    assert [n for n in notices if n.kind != "incomplete"] == []
    pubs = [r for r in recs if r.verb in ("PUB", "HPUB")]
    msgs = [r for r in recs if r.verb in ("MSG", "HMSG")]
    assert [r.payload for r in pubs] == PAYLOADS
    assert [r.payload for r in msgs] == PAYLOADS
    for side in (pubs, msgs):
        assert [r.subject for r in side] == [f"lb.v{i % 5}" for i in range(len(PAYLOADS))]
        assert [r.headers for r in side] == [
            None if _headers(i) is None else [list(kv) for kv in _headers(i).items()]  # type: ignore[union-attr]
            for i in range(len(PAYLOADS))
        ]
    assert all(r.dst.endswith(f":{port}") for r in pubs)


def test_tap_dash_o_and_record_to_stdout(nats_server: str, tmp_path: Path) -> None:
    """tap -o FILE writes what its stdout would show; record -o - writes its
    JSON Lines on stdout (issue #25: -o and - the same in every command)."""
    out_file = tmp_path / "tap.jsonl"
    out, _ = _while_publishing(
        nats_server,
        [
            *LBPARSE,
            "tap",
            nats_server,
            "lb.>",
            "--layout",
            "v0",
            "--count",
            "10",
            "-o",
            str(out_file),
            "--duration",
            "30",
        ],
    )
    assert out == ""
    tapped = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [base64.b64decode(r["payload"]) for r in tapped] == PAYLOADS[:10]
    out, err = _while_publishing(
        nats_server,
        [
            *LBPARSE,
            "record",
            nats_server,
            "lb.>",
            "--layout",
            "v0",
            "--count",
            "10",
            "-o",
            "-",
            "--duration",
            "30",
        ],
    )
    assert "10 messages to stdout" in err
    recorded = [json.loads(line) for line in out.splitlines()]
    assert [base64.b64decode(r["payload"]) for r in recorded] == PAYLOADS[:10]
