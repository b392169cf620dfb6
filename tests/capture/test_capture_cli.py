"""`lbparse capture`, and our own capture format read back by it."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from support.capwriter import ETHERNET, Conn, link, pub, write_pcap
from support.shared import CAPTURES

from lbparse.capture import CaptureReader, record_writer
from lbparse.cli import main

SHARED = CAPTURES
ORACLE = SHARED / "nats_1000.oracle.json"
VECTORS = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "data" / "vectors.jsonl").read_text().splitlines()
    if line
]
KEYS = {"ts", "src", "dst", "direction", "verb", "subject", "reply", "sid", "headers", "payload"}

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="shared captures not present")


def _lines(capsys: pytest.CaptureFixture[str]) -> tuple[list[dict], str]:
    out, err = capsys.readouterr()
    return [json.loads(line) for line in out.splitlines()], err


@needs_shared
def test_jsonl_records_match_the_oracle(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capture", str(SHARED / "nats_1000.pcapng"), "--layout", "v0"]) == 0
    recs, err = _lines(capsys)
    assert err == ""
    oracle = json.loads(ORACLE.read_text())["messages"]
    pubs = [r for r in recs if r["direction"] == "client_to_server"]
    msgs = [r for r in recs if r["direction"] == "server_to_client"]
    for side, verbs in ((pubs, ("PUB", "HPUB")), (msgs, ("MSG", "HMSG"))):
        assert len(side) == len(oracle)
        for r, m in zip(side, oracle):
            assert KEYS <= set(r) and ("envelope" in r) != ("error" in r)
            assert r["verb"] == verbs[m["headers"] is not None]
            assert (r["subject"], r["reply"], r["headers"]) == (
                m["subject"],
                m["reply"],
                m["headers"],
            )
            assert base64.b64decode(r["payload"]).hex() == m["payload_hex"]
            # Capture time: integer nanoseconds, a decimal string (lbparse.codec.jsonform).
            assert r["ts"].isdigit() and ":" in r["src"] and ":" in r["dst"]
    assert all(r["sid"] is None for r in pubs) and all(r["sid"] == "1" for r in msgs)
    errors = [r["error"] for r in recs if "error" in r]
    assert errors and set(errors[0]) == {"kind", "message"}


def test_envelopes_decoded_with_their_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    valid = [v for v in VECTORS if v["layout"] == "v0" and "error" not in v["expect"]][:5]
    conn = Conn()
    frames = conn.handshake() + conn.send(
        "c", b"".join(pub("lb.x", bytes.fromhex(v["hex"])) for v in valid)
    )
    path = tmp_path / "t.pcap"
    write_pcap(path, [(1.5 + i, link(ETHERNET, f)) for i, f in enumerate(frames)])
    assert main(["capture", str(path), "--layout", "v0"]) == 0
    recs, _ = _lines(capsys)
    assert [r["envelope"]["layout"] for r in recs] == ["v0"] * 5
    for r, v in zip(recs, valid):
        for key, value in v["expect"].items():
            assert r["envelope"][key] == value


@needs_shared
def test_subject_filter_table_and_stats(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "capture",
                str(SHARED / "nats_verbose20.pcap"),
                "--subject",
                "foo.*",
                "--format",
                "table",
                "--stats",
                "--layout",
                "v0",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    rows = out.splitlines()
    assert rows and all(" foo." in row for row in rows)
    assert not any("foo.bar.qux" in row for row in rows)
    assert "per subject:" in err and "errors by kind:" in err and "bytes read 17089" in err
    assert "gaps 0" in err


@needs_shared
def test_quiet_stats_over_several_files(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(SHARED / "nats_verbose20.pcap"), str(SHARED / "nats_verbose20.pcapng")]
    assert main(["capture", *files, "-q", "--stats"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("messages 80 ")


def test_gap_reported_and_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conn = Conn()
    frames = conn.handshake() + conn.send(
        "c", b"".join(pub(f"s.{i}", bytes(50)) for i in range(10)), 60
    )
    del frames[5]
    path = tmp_path / "gap.pcap"
    write_pcap(path, [(i, link(ETHERNET, f)) for i, f in enumerate(frames)])
    assert main(["capture", str(path), "--stats"]) == 1
    recs, err = _lines(capsys)
    assert "gap: 127.0.0.1:40000 -> 127.0.0.1:4222: 60 bytes missing" in err
    assert "gaps 1 (60 bytes)" in err
    assert 0 < len(recs) < 10


def test_unreadable_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"\x01\x02\x03\x04 not a capture")
    assert main(["capture", str(bad)]) == 2
    assert "neither pcap, pcapng" in capsys.readouterr().err


@pytest.mark.slow
@needs_shared
@pytest.mark.parametrize("ext", ["jsonl", "parquet"])
def test_our_format_round_trip(
    tmp_path: Path, ext: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = SHARED / "nats_1000.pcap"
    out = tmp_path / f"rec.{ext}"
    with record_writer(str(out)) as w:
        for rec in CaptureReader(src, layout="v0"):
            w.write(rec)
    assert main(["capture", str(src), "--layout", "v0"]) == 0
    direct, _ = _lines(capsys)
    assert main(["capture", str(out), "--layout", "v0"]) == 0
    again, _ = _lines(capsys)
    assert again == direct
    back = list(CaptureReader(out, layout="v0", verbs=("HMSG",)))
    assert back and all(r.headers is not None for r in back)
