"""The generated Wireshark plugin, run by the real tshark.

- the shared captures: every NATS frame equals the oracle, every payload
  what `lbparse.decode(..., "auto")` says;
- the real cluster's capture (samples/short.pcapng): every message, every
  field (NATS, envelope header, MsgType by name, payload type, protobuf
  fields through Wireshark's protobuf dissector, the commit-log entries of
  ReplicationResponses, Status lines, Raft and handshake traffic named)
  equals what `lbparse capture` reads there;
- a capture made here (a real nats-server on 127.0.0.1, tcpdump on lo):
  every reference vector published over a raw socket, under every layout
  preference and `auto`, equals lbparse's decoding of the same bytes;
- `-T fields` lists line up message by message in frames with several;
- the plugin sets up the protobuf search path in a fresh configuration, and
  a layout preference that is not a layout is said, not ignored.
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
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.net import free_port, wait_file_settles
from support.shared import CAPTURES, shared_path

from lbparse import decode, decode_header, encode, message_class
from lbparse.capture import CaptureReader
from lbparse.codec.layouts import LAYOUTS
from lbparse.codec.wirefit import scan
from lbparse.codegen.wireshark import DEFAULT_PORT, FILE_NAME, PROTO_DIR, lua_source, write_plugin
from lbparse.errors import EnvelopeError

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "data" / "vectors.jsonl"
SHARED_PORT = 14222  # the port the shared captures were recorded on
CLUSTER_PORT = 24223  # the NATS port of samples/short.pcapng
PAYLOAD_VERBS = ("PUB", "HPUB", "MSG", "HMSG")
# Once per message (PUB, HPUB, MSG, HMSG), empty where a message has none;
# nats.verb is once per NATS frame, control lines (SUB, PING, +OK) included.
PER_MESSAGE = (
    "nats.subject",
    "nats.reply",
    "nats.sid",
    "nats.payload_len",
    "liftbridge.layout",
    "liftbridge.status",
    "liftbridge.msg_type_name",
    "liftbridge.payload_type",
    "liftbridge.traffic",
)
TIMEOUT = 20  # seconds for any one wait below


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plugins")
    write_plugin(folder)
    return folder / FILE_NAME


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A personal configuration of tshark's own: the plugin writes to it."""
    return tmp_path_factory.mktemp("wireshark-config")


def run_tshark(lua: Path, config: Path, capture: Path, port: int, *args: str) -> str:
    cmd = [
        "tshark",
        "-n",
        "-r",
        str(capture),
        "-X",
        f"lua_script:{lua}",
        "-o",
        f"nats.tcp_port:{port}",
        *args,
    ]
    # errors="replace": the protobuf dissector prints string fields of random
    # payloads as they are, not always UTF-8.
    res = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
        env={**os.environ, "WIRESHARK_CONFIG_DIR": str(config)},
    )
    assert res.returncode == 0, res.stderr
    noise = [line for line in res.stderr.splitlines() if not line.startswith("Running as user")]
    assert not noise, "\n".join(noise)
    return res.stdout


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def tshark_messages(
    lua: Path, config: Path, capture: Path, port: int, layout: str | None = None
) -> list[dict[str, Any]]:
    """Every NATS message tree tshark prints, in capture order, with its TCP ports."""
    args = ["-T", "json", "--no-duplicate-keys"]
    if layout:
        args += ["-o", f"liftbridge.layout:{layout}"]
    out = run_tshark(lua, config, capture, port, *args)
    messages: list[dict[str, Any]] = []
    for packet in json.loads(out or "[]"):
        layers = packet["_source"]["layers"]
        tcp = layers.get("tcp", {})
        for tree in as_list(layers.get("nats", [])):
            tree = dict(tree)
            tree["_ports"] = (int(tcp.get("tcp.srcport", 0)), int(tcp.get("tcp.dstport", 0)))
            tree["_frame"] = int(layers["frame"]["frame.number"])
            messages.append(tree)
    return messages


def test_generated_from_the_spec() -> None:
    src = lua_source()
    for name, lay in LAYOUTS.items():
        assert f'name = "{name}"' in src
        for mt in lay.msg_types.values():
            assert f'"{mt.name}"' in src
    assert f"local DEFAULT_PORT = {DEFAULT_PORT}" in src
    assert lua_source() == src  # deterministic
    # The error split of the CRC-flag check is a table, not code in the template.
    assert 'FLAG_SPLIT = { field = "flags", set = "crc_missing", clear = "bad_header_len" }' in src


def test_tshark_registers_protocols_and_fields(plugin: Path, config: Path) -> None:
    res = subprocess.run(
        ["tshark", "-G", "fields", "-X", f"lua_script:{plugin}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "WIRESHARK_CONFIG_DIR": str(config)},
    )
    assert res.returncode == 0, res.stderr
    fields = {line.split("\t")[2] for line in res.stdout.splitlines() if line.startswith("F\t")}
    protos = {line.split("\t")[2] for line in res.stdout.splitlines() if line.startswith("P\t")}
    assert {"nats", "liftbridge"} <= protos
    wanted = {
        f"nats.{f}"
        for f in ("verb", "subject", "reply", "sid", "payload_len", "status", "description")
    }
    wanted |= {
        f"liftbridge.{f}"
        for f in (
            "layout",
            "status",
            "version",
            "header_len",
            "flags",
            "msg_type",
            "msg_type_name",
            "payload_type",
            "crc32c",
            "crc_ok",
            "error",
            "traffic",
            "raft_rpc",
        )
    }
    wanted |= {
        "liftbridge.commitlog.high_watermark",
        "liftbridge.commitlog.entries",
        "liftbridge.commitlog.entry.offset",
        "liftbridge.commitlog.body.value",
    }
    assert wanted <= fields, wanted - fields


def test_plugin_sets_up_the_protobuf_search_path(plugin: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "config"
    fresh.mkdir()
    for _ in range(2):  # the second run finds the line there and adds nothing
        run_tshark(plugin, fresh, CAPTURES / "nats_verbose20.pcap", SHARED_PORT, "-c", "1")
    lines = (fresh / "protobuf_search_paths").read_text().splitlines()
    assert lines == [f'"{plugin.parent / PROTO_DIR}","TRUE"']
    # The payload fields, from the .proto files, filter and print as fields.
    out = run_tshark(
        plugin,
        fresh,
        shared_path("liftbridge", "samples", "short.pcapng"),
        CLUSTER_PORT,
        "-T",
        "fields",
        "-e",
        "pbf.proto.Message.stream",
        "-Y",
        'pbf.proto.Message.stream == "orders"',
    )
    assert out.splitlines() and all("orders" in line.split(",") for line in out.splitlines())


def test_the_readmes_two_lines_work_for_a_fresh_user(tmp_path: Path) -> None:
    """`lbparse generate --lang wireshark -o ~/.local/lib/wireshark/plugins`, then
    tshark with -e pbf.proto.Message.stream, in a HOME with nothing in it (no
    ~/.config): the plugin makes the folders of its search-path file, and the
    payload fields come out on the first run (issue #25: "Some fields aren't
    valid" until ~/.config/wireshark existed)."""
    from support.cli import run_cli

    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "WIRESHARK_CONFIG_DIR")
    }
    env["HOME"] = str(home)
    res = run_cli(
        "generate", "--lang", "wireshark", "-o", str(home / ".local/lib/wireshark/plugins"), env=env
    )
    assert res.returncode == 0, res.stderr
    capture = shared_path("liftbridge", "samples", "short.pcapng")
    got = subprocess.run(
        [
            "tshark",
            "-r",
            str(capture),
            "-o",
            f"nats.tcp_port:{CLUSTER_PORT}",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-e",
            "frame.number",
            "-e",
            "pbf.proto.Message.stream",
        ],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
        env=env,
        cwd=home,
    )
    assert got.returncode == 0 and "aren't valid" not in got.stderr, got.stderr
    streams = {
        s for line in got.stdout.splitlines() for s in line.partition("\t")[2].split(",") if s
    }
    want = set()
    for rec in CaptureReader(capture, layout="auto"):
        env_ = rec.envelope
        if env_ is not None and env_.payload_type == "proto.Message" and env_.message.stream:
            want.add(env_.message.stream)
    assert want and streams == want, (streams, want)
    search = home / ".config" / "wireshark" / "protobuf_search_paths"
    assert search.read_text().strip() == (
        f'"{home}/.local/lib/wireshark/plugins/{PROTO_DIR}","TRUE"'
    )


def test_a_bad_layout_preference_is_said(plugin: Path, config: Path) -> None:
    cmd = [
        "tshark",
        "-n",
        "-r",
        str(CAPTURES / "nats_verbose20.pcap"),
        "-X",
        f"lua_script:{plugin}",
        "-o",
        f"nats.tcp_port:{SHARED_PORT}",
        "-o",
        "liftbridge.layout:bogus",
        "-T",
        "fields",
        "-e",
        "liftbridge.status",
        "-e",
        "liftbridge.error",
        "-Y",
        "liftbridge",
    ]
    res = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "WIRESHARK_CONFIG_DIR": str(config)},
    )
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows and all(r[0].split(",")[0] == "bad_preference" for r in rows)
    assert "bogus" in rows[0][1] and "auto, v0" in rows[0][1]


# --- the shared captures: NATS against the oracle, payloads against lbparse ---


@pytest.mark.parametrize(
    "capture",
    ["nats_1000.pcap", "nats_1000.pcapng", "nats_verbose20.pcap", "nats_verbose20.pcapng"],
)
def test_shared_capture_matches_oracle(plugin: Path, config: Path, capture: str) -> None:
    oracle = json.loads((CAPTURES / (capture.split(".")[0] + ".oracle.json")).read_text())[
        "messages"
    ]
    messages = tshark_messages(plugin, config, CAPTURES / capture, SHARED_PORT)
    pubs = [m for m in messages if m["nats.verb"] in ("PUB", "HPUB")]
    subs = [m for m in messages if m["nats.verb"] in ("MSG", "HMSG")]
    assert len(pubs) == len(subs) == len(oracle)
    for want, pub, sub in zip(oracle, pubs, subs):
        headers = want["headers"] is not None
        for got, verb in ((pub, "HPUB" if headers else "PUB"), (sub, "HMSG" if headers else "MSG")):
            assert got["nats.verb"] == verb, (want["seq"], got)
            assert got["nats.subject"] == want["subject"]
            assert (got["nats.reply"] or None) == want["reply"]
            assert int(got["nats.payload_len"]) == want["payload_len"]
            if headers:
                assert int(got["nats.hdr_len"]) == len(want["hdr_block_hex"]) // 2
            # One Liftbridge tree per message, as lbparse's auto reads the payload.
            assert tshark_view(got["liftbridge"]) == lbparse_view(
                bytes.fromhex(want["payload_hex"]), "auto"
            ), want["seq"]
        assert sub["nats.sid"] == "1"
    if "verbose" in capture:
        assert sum(m["nats.verb"] == "+OK" for m in messages) > len(oracle)


# --- the real cluster: every message and field against `lbparse capture` ------


def cluster_records() -> list[Any]:
    return list(CaptureReader(shared_path("liftbridge", "samples", "short.pcapng")))


def by_direction(items: list[Any], key: Any) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = defaultdict(list)
    for item in items:
        out[key(item)].append(item)
    return out


def pbf(tree: dict[str, Any], name: str) -> Any:
    """A protobuf field's value, wherever the protobuf tree put it."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for key, value in node.items():
            if key == name:
                return value
            if isinstance(value, dict):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, dict))
    return None


def entries_of(lb: dict[str, Any]) -> list[dict[str, Any]]:
    trees = as_list(lb.get("liftbridge.commitlog.entries", []))
    return [t for t in trees if isinstance(t, dict)]


def test_real_cluster_capture_matches_lbparse(plugin: Path, config: Path) -> None:
    capture = shared_path("liftbridge", "samples", "short.pcapng")
    records = cluster_records()
    messages = [
        m
        for m in tshark_messages(plugin, config, capture, CLUSTER_PORT)
        if m["nats.verb"] in PAYLOAD_VERBS
    ]
    assert len(messages) == len(records) > 7000
    port = lambda ep: int(ep.rsplit(":", 1)[1])  # noqa: E731
    ours = by_direction(records, lambda r: (port(r.src), port(r.dst)))
    theirs = by_direction(messages, lambda m: m["_ports"])
    assert ours.keys() == theirs.keys()
    seen: dict[str, int] = defaultdict(int)
    for direction, recs in ours.items():
        for rec, got in zip(recs, theirs[direction], strict=True):
            where = (got["_frame"], rec.subject)
            assert got["nats.verb"] == rec.verb and got["nats.subject"] == rec.subject, where
            assert (got["nats.reply"] or None) == rec.reply, where
            assert (got["nats.sid"] or None) == rec.sid, where
            assert int(got["nats.payload_len"]) == len(rec.payload), where
            if rec.header_block:
                status = bytes(rec.header_block).split(b"\r\n")[0].split()
                if len(status) > 1:
                    assert int(got["nats.status"]) == int(status[1]), where
                    seen["status"] += 1
            lb = got["liftbridge"]
            env = rec.envelope
            assert env is not None, where  # lbparse reads every payload of this capture
            assert tshark_view(lb) == lbparse_view(bytes(rec.payload), "auto"), where
            seen[env.layout] += 1
            if env.payload_type == "raw":
                rr = env.message
                assert int(lb["liftbridge.commitlog.leader_epoch"]) == rr.leader_epoch, where
                assert int(lb["liftbridge.commitlog.high_watermark"]) == rr.high_watermark, where
                entries = entries_of(lb)
                assert len(entries) == len(rr.entries), where
                for tree, entry in zip(entries, rr.entries):
                    assert int(tree["liftbridge.commitlog.entry.offset"]) == entry.offset
                    assert int(tree["liftbridge.commitlog.entry.timestamp"]) == entry.timestamp
                    body = tree["liftbridge.commitlog.entry.body"]
                    assert int(body["liftbridge.commitlog.body.crc32c"]) == entry.crc32c
                    value = body.get("liftbridge.commitlog.body.value", "").replace(":", "")
                    assert bytes.fromhex(value) == (entry.value or b"")
                    seen["entries"] += 1
            elif env.payload_type in ("proto.Message", "proto.Ack"):
                name = env.payload_type
                assert pbf(lb, f"pbf.{name}.stream") == (env.message.stream or None), where
                seen[name] += 1
            elif env.layout == "plain":
                # Raft, its handshake (and the handshake's replies) and status lines are named;
                # plain publishes of a client to a stream subject are just plain.
                if ".raft.metadata." in rec.subject:
                    assert lb["liftbridge.traffic"].startswith("raft "), where
                    if ".request._INBOX." in rec.subject:
                        assert lb["liftbridge.traffic"] == "raft transport stream"
                        assert lb["liftbridge.raft_rpc"], where
                    seen["raft"] += 1
                elif rec.header_block:
                    assert lb["liftbridge.traffic"] == "NATS status 503", where
                elif rec.subject.startswith("_INBOX."):
                    assert lb["liftbridge.traffic"] == "raft accept handshake reply", where
                    seen["handshake reply"] += 1
                seen["plain"] += 1
    assert seen["status"] == 28 and seen["entries"] > 100
    assert seen["proto.Message"] > 100 and seen["proto.Ack"] > 50 and seen["plain"] > 2000
    assert seen["raft"] > 2000 and seen["handshake reply"] == 8


def test_fields_line_up_in_frames_with_several_messages(plugin: Path, config: Path) -> None:
    capture = shared_path("liftbridge", "samples", "short.pcapng")
    args = ["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|", "-e", "frame.number"]
    for field in PER_MESSAGE:
        args += ["-e", field]
    out = run_tshark(plugin, config, capture, CLUSTER_PORT, *args, "-Y", "liftbridge")
    several = 0
    for line in out.splitlines():
        cols = line.split("\t")
        counts = {len(c.split("|")) for c in cols[1:]}
        assert len(counts) == 1, f"frame {cols[0]}: {dict(zip(PER_MESSAGE, cols[1:]))}"
        several += counts.pop() > 1
    assert several > 50  # the capture has many frames holding several messages


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


def connect(port: int, no_responders: bool = False) -> socket.socket:
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
    extra = b',"no_responders":true' if no_responders else b""
    sock.sendall(
        b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1%s}\r\n' % extra
    )
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
    out = [
        (v["layout"], bytes.fromhex(v["hex"]))
        for v in map(json.loads, VECTORS.read_text().splitlines())
    ]
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
        procs.append(
            subprocess.Popen(
                ["nats-server", "-a", "127.0.0.1", "-p", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        sub = connect(port)  # also waits for the server to listen
        socks.append(sub)
        # --immediate-mode: without it libpcap hands packets over in blocks,
        # and whatever is still in a block when tcpdump stops is lost.
        # -B: a large kernel buffer; the default holds only a few 64 KiB
        # loopback segments, and a loaded machine dropped the big message's.
        dump = subprocess.Popen(
            [
                "tcpdump",
                "-i",
                "lo",
                "--immediate-mode",
                "-U",
                "-B",
                "32768",
                "-n",
                "-w",
                str(out),
                f"tcp port {port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
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
        # A request nobody answers: the server's reply is a status line (503).
        asker = connect(port, no_responders=True)
        socks.append(asker)
        asker.sendall(b"SUB _INBOX.status 9\r\nPUB nobody.listens _INBOX.status 0\r\n\r\n")
        read_until(asker, b"NATS/1.0 503", bytearray())
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


NEWEST_ENVELOPED = min(
    (lay for lay in LAYOUTS.values() if lay.has_header), key=lambda lay: lay.recency
).name


def lbparse_view(data: bytes, layout: str) -> dict[str, Any]:
    """What the dissector should show for `data`, from lbparse itself.

    The dissector reads the envelope and the commit log as lbparse does; of a
    protobuf payload it checks the top level (its fields' keys and lengths)
    and leaves the rest to Wireshark's protobuf dissector; FlatBuffers it does
    not read. So where lbparse finds the payload bad deeper than that, the
    dissector shows the header as fine.
    """
    try:
        env = decode(data, layout)
    except EnvelopeError as exc:
        if exc.kind != "bad_payload":
            return {"status": exc.kind}
        # auto: the error is the newest layout's, which the dissector reports too.
        env = decode_header(data, NEWEST_ENVELOPED if layout == "auto" else layout)
        payload = data[env.payload_offset :]
        fmt = LAYOUTS[env.layout].payload_format
        if env.payload_type == "raw" or (
            fmt == "protobuf" and env.payload_type != "bytes" and payload and scan(payload) is None
        ):
            return {"status": exc.kind}
    else:
        payload = env.payload
    raw = env.payload_type == "raw"
    return {
        "status": "ok",
        "layout": env.layout,
        "version": env.version,
        "header_len": env.header_len,
        "flags": None if env.flags is None else f"0x{env.flags:02x}",
        "msg_type_name": env.msg_type_name or "",
        "msg_type": env.msg_type if env.layout == "v0" or env.msg_type_name else None,
        "payload_type": env.payload_type,
        "payload_len": len(payload),
        "crc32c": None if env.crc32c is None else f"0x{env.crc32c:08x}",
        "crc_ok": None if env.crc32c is None else True,
        "raw": raw,
    }


def tshark_view(lb: dict[str, Any]) -> dict[str, Any]:
    if lb["liftbridge.status"] != "ok":
        return {"status": lb["liftbridge.status"]}
    num = lambda k: None if k not in lb else int(lb[k])  # noqa: E731
    return {
        "status": "ok",
        "layout": lb["liftbridge.layout"],
        "version": num("liftbridge.version"),
        "header_len": num("liftbridge.header_len"),
        "flags": lb.get("liftbridge.flags"),
        "msg_type_name": lb["liftbridge.msg_type_name"],
        "msg_type": num("liftbridge.msg_type") if lb["liftbridge.msg_type_name"] else None,
        "payload_type": lb["liftbridge.payload_type"],
        "payload_len": num("liftbridge.payload_len"),
        "crc32c": lb.get("liftbridge.crc32c"),
        "crc_ok": None if "liftbridge.crc_ok" not in lb else lb["liftbridge.crc_ok"] == "1",
        "raw": lb["liftbridge.payload_type"] == "raw",
    }


LAYOUT_PREFS = ["auto", *LAYOUTS]


@pytest.mark.parametrize("layout", LAYOUT_PREFS)
def test_vector_capture_matches_lbparse(
    plugin: Path, config: Path, vector_capture, layout: str
) -> None:
    capture, port = vector_capture
    sent = published()
    messages = tshark_messages(plugin, config, capture, port, layout)
    payload_msgs = [
        m
        for m in messages
        if m["nats.verb"] in PAYLOAD_VERBS and m["nats.subject"].startswith("lbvec.")
    ]
    # Each message twice: the PUB/HPUB going in, the MSG/HMSG coming out.
    assert len(payload_msgs) == 2 * len(sent)
    differ = []
    for m in payload_msgs:
        i = int(m["nats.subject"].rsplit(".", 1)[1])
        vec_layout, data = sent[i]
        assert int(m["nats.payload_len"]) == len(data)
        lb = m["liftbridge"]
        assert isinstance(lb, dict), "one liftbridge tree per NATS message"
        want, got = lbparse_view(data, layout), tshark_view(lb)
        if got != want:
            differ.append((i, vec_layout, want, got))
    bad = [
        (i, vl, {k: (w.get(k), g.get(k)) for k in set(w) | set(g) if w.get(k) != g.get(k)})
        for i, vl, w, g in differ
        if not auto_differs_by_design(layout, w)
    ]
    assert not bad, f"{len(bad)} differ (lbparse, tshark): {bad[:8]}"
    status = [m for m in messages if m.get("nats.status")]
    assert [int(m["nats.status"]) for m in status] == [503]


def auto_differs_by_design(layout: str, want: dict[str, Any]) -> bool:
    """Where the dissector's `auto` may differ from lbparse's: a FlatBuffers
    layout confirmed by its table structure (the dissector does not read
    FlatBuffers, so it never has that evidence)."""
    return layout == "auto" and str(want.get("layout", "")).startswith("flatbuffers")


def test_no_expert_error_on_payloads_that_are_not_envelopes(plugin: Path, config: Path) -> None:
    # The real cluster's capture: thousands of Raft and handshake payloads, none an envelope.
    capture = shared_path("liftbridge", "samples", "short.pcapng")
    out = run_tshark(
        plugin,
        config,
        capture,
        CLUSTER_PORT,
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-Y",
        "liftbridge.bad_envelope or liftbridge.bad_payload",
    )
    assert out == ""
    plain = run_tshark(
        plugin,
        config,
        capture,
        CLUSTER_PORT,
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-Y",
        'liftbridge.layout == "plain"',
    )
    assert len(plain.splitlines()) > 1000


def test_the_plugin_reads_the_grpc_api_on_its_ports(plugin: Path, config: Path) -> None:
    """liftbridge.api_ports hands the API's ports to HTTP/2, whose gRPC finds
    each message's type through api.proto's service: tshark shows the
    PublishRequests' fields, the same correlation ids lbparse reads."""
    from lbparse.capture.grpc import GrpcMessage

    capture = shared_path("liftbridge", "samples", "api-short.pcapng")
    items: list[Any] = []
    for _ in CaptureReader(capture, on_grpc=items.append):
        pass
    want = [
        m.message["correlationId"]
        for m in items
        if isinstance(m, GrpcMessage) and m.type == "proto.PublishRequest"
    ]
    fields = (
        "-T",
        "fields",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=|",
        "-e",
        "pbf.proto.PublishRequest.correlationId",
    )
    for ports, expect in (("29392-29394", want), ("9292", [])):
        out = run_tshark(
            plugin, config, capture, 24333, "-o", f"liftbridge.api_ports:{ports}", *fields
        )
        got = [c for line in out.splitlines() for c in line.split("|") if c]
        assert sorted(got) == sorted(expect), ports
    assert want
