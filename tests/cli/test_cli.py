"""The `lbparse` command line, run as a real process."""

from __future__ import annotations

import json
import subprocess

import pytest
from support.cli import LBPARSE
from vectors import VECTORS

PUBLISH_CRC = next(v for v in VECTORS if v["id"] == "v0_publish_full_crc")


def lbparse(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*LBPARSE, *args], input=stdin, capture_output=True, timeout=60)


@pytest.mark.slow
def test_decode_hex_argument_prints_vector_json() -> None:
    res = lbparse("decode", PUBLISH_CRC["hex"])
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["layout"] == "v0"
    assert got["payload_json"] == PUBLISH_CRC["expect"]["payload_json"]


@pytest.mark.slow
def test_decode_raw_stdin_and_error_exit_status() -> None:
    res = lbparse("decode", stdin=bytes.fromhex(PUBLISH_CRC["hex"]))
    assert res.returncode == 0 and json.loads(res.stdout)["msg_type_name"] == "Publish"
    res = lbparse("decode", "b90e43b4000c01")
    assert res.returncode == 1
    assert json.loads(res.stdout) == {
        "error": "too_short",
        "message": "envelope needs at least 8 bytes, got 7",
        "where": {"offset": 7, "position": None, "path": None},
    }


@pytest.mark.slow
def test_decode_line_oriented_hex_and_base64(tmp_path) -> None:
    f = tmp_path / "in.txt"
    f.write_text("\n".join(v["hex"] for v in VECTORS[:5]) + "\n")
    res = lbparse("decode", "--hex", str(f))
    assert len(res.stdout.splitlines()) == 5
    import base64

    b64 = base64.b64encode(bytes.fromhex(PUBLISH_CRC["hex"])) + b"\n"
    res = lbparse("decode", "--base64", stdin=b64)
    assert json.loads(res.stdout)["crc32c"] == PUBLISH_CRC["expect"]["crc32c"]


@pytest.mark.slow
def test_decode_pretty_view() -> None:
    out = lbparse("decode", "--pretty", PUBLISH_CRC["hex"]).stdout.decode()
    assert "msg_type      0 Publish" in out
    assert "crc32c        0x8df060ea (ok)" in out


@pytest.mark.slow
def test_encode_then_decode() -> None:
    res = lbparse("encode", "--type", "Ack", "--json", '{"stream": "foo", "offset": "42"}', "--crc")
    assert res.returncode == 0, res.stderr
    wire = res.stdout.decode().strip()
    assert wire.startswith("b90e43b4000c0101")
    got = json.loads(lbparse("decode", wire).stdout)
    assert got["payload_json"] == {"stream": "foo", "offset": "42"}
    raw = lbparse(
        "encode", "--type", "protocol.ServerInfoRequest", "--json", '{"id":"s1"}', "--raw"
    )
    assert raw.stdout == bytes.fromhex("b90e43b40008000a0a027331")


@pytest.mark.slow
def test_encode_reports_bad_input_clearly() -> None:
    res = lbparse("encode", "--type", "Nope", "--json", "{}")
    assert res.returncode == 2 and b"unknown type 'Nope'" in res.stderr
    res = lbparse("encode", "--type", "Ack", "--json", '{"stream": 5}')
    assert res.returncode == 2 and b"does not fit proto.Ack" in res.stderr


@pytest.mark.slow
def test_spec_lists_the_generated_tables() -> None:
    tables = json.loads(lbparse("spec", "--json").stdout)
    assert tables["v0"]["msg_types"]["14"] == {
        "name": "PartitionNotification",
        "payload_type": "protocol.PartitionNotification",
    }
    assert "legacy" in tables


@pytest.mark.slow
def test_demo_decodes_the_examples() -> None:
    res = lbparse("demo", "--no-pipeline")  # the Spark part: tests/spark/test_demo.py
    assert res.returncode == 0
    out = res.stdout.decode()
    assert "Decoded 12 example envelopes: 11 ok, 1 rejected" in out
    assert "MsgType 3 ReplicationResponse (raw)" in out
    assert "crc_mismatch" in out


@pytest.mark.slow
def test_help_explains_every_command() -> None:
    out = lbparse("--help").stdout.decode()
    for cmd in ("decode", "encode", "spec", "demo"):
        assert cmd in out


@pytest.mark.slow
def test_decode_auto_reports_evidence_and_ambiguity() -> None:
    legacy_message = next(v for v in VECTORS if v["id"] == "legacy_message")["hex"]
    got = json.loads(lbparse("decode", "--layout", "auto", legacy_message).stdout)
    assert got["layout"] == "v0" and got["ambiguous"] is True
    assert got["layout_candidates"] == ["v0", "legacy"]
    assert got["reasons"] and 0 < got["confidence"] < 1
    plain = json.loads(lbparse("decode", "--layout", "auto", "68656c6c6f").stdout)
    assert plain["layout"] == "plain" and plain["payload_json"] == {"hex": "68656c6c6f"}


@pytest.mark.slow
def test_decode_every_layout_is_a_choice() -> None:
    out = lbparse("decode", "--help").stdout.decode()
    for layout in (
        "auto",
        "v0",
        "legacy",
        "flatbuffers",
        "flatbuffers-draft",
        "lift-cookie",
        "plain",
    ):
        assert layout in out


_LOADED = """\
import sys
from lbparse.cli import main
heavy = {"pyarrow", "numpy", "pandas", "pyspark", "altair", "nats", "grpc"}
try:
    main(sys.argv[1:])
finally:  # --help and --version end in SystemExit
    print(sorted(m for m in sys.modules
                 if m.split(".")[0] in heavy or m.startswith("lbparse.cli.")), file=sys.stderr)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, command",
    [
        (["--help"], None),
        (["--version"], None),
        (["decode", PUBLISH_CRC["hex"]], "decode"),
        (["segments", "--help"], "segments"),
        (["capture", "--help"], "capture"),  # pyarrow: only for --tables
    ],
)
def test_a_run_imports_its_own_command_only(args: list[str], command: str | None) -> None:
    """`lbparse --help` lists every command from lbparse.cli.COMMANDS; a run
    imports the module of the command it runs, none of the others' (which
    brought pyarrow and numpy into `lbparse --help`: 0.3 s of each start)."""
    import sys

    res = subprocess.run(
        [sys.executable, "-P", "-c", _LOADED, *args], capture_output=True, text=True, timeout=60
    )
    loaded = eval(res.stderr.strip().splitlines()[-1])
    own = {f"lbparse.cli.{command}_cmd"} if command else set()
    assert {m for m in loaded if m.endswith("_cmd")} == own, res.stderr
    assert not {m for m in loaded if not m.startswith("lbparse.")}, loaded
