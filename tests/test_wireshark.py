"""The generated Wireshark dissector, run by the real tshark.

On the shared captures its NATS frames equal the oracle message by message;
on a capture made here (a real nats-server on 127.0.0.1, tcpdump on lo,
every reference vector published over a raw socket) its Liftbridge fields
equal lbparse's own decoding of the same bytes, message by message.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from lbparse import decode, decode_header, encode, message_class
from lbparse.errors import EnvelopeError
from lbparse.wireshark import DEFAULT_PORT, lua_source, write_dissector
from lbparse_generated.tables import LAYOUTS
from support.net import free_port, wait_file_settles
from support.shared import CAPTURES

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "data" / "vectors.jsonl"
SHARED_PORT = 14222  # the port the shared captures were recorded on
ENVELOPED = [n for n, raw in LAYOUTS.items() if raw.get("byte7") in ("msg_type", "reserved")]
PAYLOAD_VERBS = ("PUB", "HPUB", "MSG", "HMSG")
TIMEOUT = 20  # seconds for any one wait below


@pytest.fixture(scope="module")
def lua(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dissector(tmp_path_factory.mktemp("wireshark"))


def tshark(lua: Path, capture: Path, port: int, layout: str | None = None) -> list[dict[str, Any]]:
    """Every NATS message tree tshark prints, in capture order."""
    cmd = ["tshark", "-n", "-r", str(capture), "-X", f"lua_script:{lua}",
           "-o", f"nats.tcp_port:{port}", "-T", "json", "--no-duplicate-keys", "-j", "nats liftbridge"]
    if layout:
        cmd += ["-o", f"liftbridge.layout:{layout}"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Lua" not in res.stderr and "rror" not in res.stderr, res.stderr
    messages: list[dict[str, Any]] = []
    for packet in json.loads(res.stdout or "[]"):
        trees = packet["_source"]["layers"].get("nats", [])
        messages += trees if isinstance(trees, list) else [trees]
    return messages


def test_generated_from_the_spec() -> None:
    src = lua_source()
    for name, raw in LAYOUTS.items():
        if raw.get("byte7") in ("msg_type", "reserved"):
            assert f'name = "{name}"' in src
            for mt_name, _ in raw["msg_types"].values():
                assert f'"{mt_name}"' in src
    assert f"local DEFAULT_PORT = {DEFAULT_PORT}" in src
    assert lua_source() == src  # deterministic


def test_tshark_registers_protocols_and_fields(lua: Path) -> None:
    res = subprocess.run(["tshark", "-G", "fields", "-X", f"lua_script:{lua}"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    fields = {line.split("\t")[2] for line in res.stdout.splitlines() if line.startswith("F\t")}
    protos = {line.split("\t")[2] for line in res.stdout.splitlines() if line.startswith("P\t")}
    assert {"nats", "liftbridge"} <= protos
    wanted = {f"nats.{f}" for f in ("verb", "subject", "reply", "sid", "payload_len")}
    wanted |= {f"liftbridge.{f}" for f in ("layout", "version", "header_len", "flags", "msg_type",
                                           "msg_type_name", "crc32c", "crc_ok", "error")}
    assert wanted <= fields, wanted - fields


# --- the shared captures against their oracle -----------------------------

@pytest.mark.parametrize("capture", ["nats_1000.pcap", "nats_1000.pcapng",
                                     "nats_verbose20.pcap", "nats_verbose20.pcapng"])
def test_shared_capture_matches_oracle(lua: Path, capture: str) -> None:
    oracle = json.loads((CAPTURES / (capture.split(".")[0] + ".oracle.json")).read_text())["messages"]
    messages = tshark(lua, CAPTURES / capture, SHARED_PORT)
    pubs = [m for m in messages if m["nats.verb"] in ("PUB", "HPUB")]
    subs = [m for m in messages if m["nats.verb"] in ("MSG", "HMSG")]
    assert len(pubs) == len(subs) == len(oracle)
    for want, pub, sub in zip(oracle, pubs, subs):
        headers = want["headers"] is not None
        for got, verb in ((pub, "HPUB" if headers else "PUB"), (sub, "HMSG" if headers else "MSG")):
            assert got["nats.verb"] == verb, (want["seq"], got)
            assert got["nats.subject"] == want["subject"]
            assert got.get("nats.reply") == want["reply"]
            assert int(got["nats.payload_len"]) == want["payload_len"]
            if headers:
                assert int(got["nats.hdr_len"]) == len(want["hdr_block_hex"]) // 2
            # One envelope tree per message; the payloads are a v0 header + random bytes.
            head = decode_header(bytes.fromhex(want["payload_hex"]), "v0")
            lb = got["liftbridge"]
            assert "liftbridge.error" not in lb, (want["seq"], lb)
            assert int(lb["liftbridge.header_len"]) == head.header_len
            assert lb["liftbridge.msg_type_name"] == head.msg_type_name
            assert int(lb["liftbridge.payload_len"]) == want["payload_len"] - head.header_len
        assert sub["nats.sid"] == "1"
    if "verbose" in capture:
        assert sum(m["nats.verb"] == "+OK" for m in messages) > len(oracle)


# --- a capture of every reference vector, made here -------------------------

def read_until(sock: socket.socket, marker: bytes, buf: bytearray) -> None:
    deadline = time.monotonic() + TIMEOUT
    while marker not in buf:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {marker!r} from nats-server")
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("nats-server closed the connection")
        buf += chunk


def connect(port: int) -> socket.socket:
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=1)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    buf = bytearray()
    read_until(sock, b"\r\n", buf)  # INFO
    sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n')
    return sock


def wait_listening(proc: subprocess.Popen) -> None:
    """tcpdump says "listening on" once it captures."""
    deadline, seen = time.monotonic() + TIMEOUT, b""
    while b"listening on" not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            raise RuntimeError(f"tcpdump did not start: {seen.decode(errors='replace')}")
        ready, _, _ = select.select([proc.stderr], [], [], left)
        if ready:
            seen += os.read(proc.stderr.fileno(), 4096)


def published() -> list[tuple[str, bytes]]:
    """(layout, bytes) of each message: every vector, then one that spans segments."""
    out = [(v["layout"], bytes.fromhex(v["hex"]))
           for v in map(json.loads, VECTORS.read_text().splitlines())]
    value = random.Random(6).randbytes(150_000)  # the same bytes on every call
    big = message_class("proto.Message")(subject="big", value=value)
    return out + [("v0", encode(big, crc=True))]


def frame(i: int, data: bytes) -> bytes:
    subject = f"lbvec.{i}".encode()
    if i % 3 == 0:
        return b"PUB %s %d\r\n%s\r\n" % (subject, len(data), data)
    if i % 3 == 1:
        return b"PUB %s _INBOX.r%d %d\r\n%s\r\n" % (subject, i, len(data), data)
    hdr = b"NATS/1.0\r\nX-Vector: %d\r\n\r\n" % i
    return b"HPUB %s %d %d\r\n%s%s\r\n" % (subject, len(hdr), len(hdr) + len(data), hdr, data)


@pytest.fixture(scope="module")
def vector_capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    out = tmp_path_factory.mktemp("capture") / "vectors.pcap"
    port = free_port()
    procs: list[subprocess.Popen] = []
    socks: list[socket.socket] = []
    try:
        procs.append(subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        sub = connect(port)  # also waits for the server to listen
        socks.append(sub)
        # --immediate-mode: without it libpcap hands packets over in blocks,
        # and whatever is still in a block when tcpdump stops is lost.
        # -B: a large kernel buffer; the default holds only a few 64 KiB
        # loopback segments, and a loaded machine dropped the big message's.
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-B", "32768",
                                 "-n", "-w", str(out), f"tcp port {port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(dump)
        wait_listening(dump)
        sub.sendall(b"SUB lbvec.> 1\r\nPING\r\n")
        read_until(sub, b"PONG\r\n", bytearray())
        pub = connect(port)
        socks.append(pub)
        # One sendall: many PUBs per TCP segment, and the big one spans several.
        pub.sendall(b"".join(frame(i, data) for i, (_, data) in enumerate(published())))
        pub.sendall(b"PING\r\n")
        read_until(pub, b"PONG\r\n", bytearray())
        sub.sendall(b"PING\r\n")  # answered after every delivery queued before it
        read_until(sub, b"PONG\r\n", bytearray())
        for s in socks:
            s.close()
        wait_file_settles(out)  # let the last segments reach tcpdump's file
    finally:
        for s in socks:
            s.close()
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT if proc is procs[-1] else signal.SIGTERM)
            try:
                proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=TIMEOUT)
    yield out, port


def lbparse_view(data: bytes, layout: str) -> dict[str, Any]:
    """What the dissector should show for `data`, from lbparse itself."""
    try:
        env = decode(data, layout)
    except EnvelopeError as exc:
        if exc.kind != "bad_payload":  # the dissector does not decode protobuf
            return {"error": exc.kind}
        env = decode_header(data, layout)
    view = {"error": None, "version": env.version, "header_len": env.header_len,
            "flags": f"0x{env.flags:02x}", "msg_type_name": env.msg_type_name,
            "msg_type": env.msg_type, "payload_len": len(data) - env.header_len,
            "crc32c": None if env.crc32c is None else f"0x{env.crc32c:08x}",
            "crc_ok": None if env.crc32c is None else True}
    return view


def tshark_view(lb: dict[str, Any]) -> dict[str, Any]:
    if "liftbridge.error" in lb:
        return {"error": lb["liftbridge.error"]}
    num = lambda k: None if k not in lb else int(lb[k])  # noqa: E731
    return {"error": None, "version": num("liftbridge.version"),
            "header_len": num("liftbridge.header_len"), "flags": lb.get("liftbridge.flags"),
            "msg_type_name": lb.get("liftbridge.msg_type_name"),
            "msg_type": num("liftbridge.msg_type"), "payload_len": num("liftbridge.payload_len"),
            "crc32c": lb.get("liftbridge.crc32c"),
            "crc_ok": None if "liftbridge.crc_ok" not in lb else lb["liftbridge.crc_ok"] == "1"}


@pytest.mark.parametrize("layout", ENVELOPED)
def test_vector_capture_matches_lbparse(lua: Path, vector_capture, layout: str) -> None:
    capture, port = vector_capture
    sent = published()
    messages = tshark(lua, capture, port, layout)
    payload_msgs = [m for m in messages if m["nats.verb"] in PAYLOAD_VERBS]
    # Each message twice: the PUB/HPUB going in, the MSG/HMSG coming out.
    assert len(payload_msgs) == 2 * len(sent)
    compared = 0
    for m in payload_msgs:
        i = int(m["nats.subject"].rsplit(".", 1)[1])
        vec_layout, data = sent[i]
        assert int(m["nats.payload_len"]) == len(data)
        lb = m["liftbridge"]
        assert isinstance(lb, dict), "one liftbridge tree per NATS message"
        assert lb["liftbridge.layout"] == layout
        # Every vector, whichever generation wrote it: lbparse's reading of
        # the bytes under this layout is the reference.
        assert tshark_view(lb) == lbparse_view(data, layout), (i, vec_layout, m)
        compared += 1
    assert compared == 2 * len(sent)
