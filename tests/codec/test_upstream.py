"""lbparse.upstream_verdict against what Liftbridge's own Go decoders did
with every reference vector (the vectors' `upstream_go`)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from support.cli import LBPARSE
from vectors import data, params

import lbparse
from lbparse.codec.upstream import UPSTREAM_DECODERS, simulate, upstream_verdict

_KEY = re.compile(
    r"^(server|legacy_27b155c|client_v2|client_0a5bc38\^)"
    r"\.(?:Unmarshal(\w+)|UnmarshalEnvelope\((\w+)\))$"
)
_BY_KEY = {d.key: d for d in UPSTREAM_DECODERS.values()}
OUTCOME = {
    "ok": {"accepted"},
    "error": {"rejected", "plain"},
    "panic": {"crash"},
    "not a message": {"plain"},
}


def _said(v: dict) -> list[tuple[str, str]]:
    """(key, what upstream said) of each of the vector's upstream runs, but
    the gogo build of the server API's (the same envelope code)."""
    return [(key, said) for key, said in v["upstream_go"].items() if _KEY.match(key)]


# A test a vector, its upstream runs in it (401 pairs of under a millisecond).
@pytest.mark.parametrize(
    "v", params(lambda v: isinstance(v.get("upstream_go"), dict) and bool(_said(v)))
)
def test_model_matches_what_upstream_did(v: dict) -> None:
    wrong = []
    for key, said in _said(v):
        m = _KEY.match(key)
        assert m is not None
        decoder = _BY_KEY[m.group(1)]
        expected = m.group(2) or m.group(3)
        if decoder.envelope == "v0":
            expected = {"Message": "Publish"}.get(expected, expected)
        elif decoder.envelope == "alpha":
            expected = f"proto.{expected}"
        verdict = simulate(data(v), decoder, expected)
        word = next(w for w in OUTCOME if said.startswith(w))
        if verdict.outcome not in OUTCOME[word]:
            wrong.append((key, verdict, said))
    assert not wrong, wrong


def test_a_header_length_past_the_data_crashes_upstream() -> None:
    v = upstream_verdict(bytes.fromhex("b90e43b40028000a0a026964"))
    assert v.crashes
    outcomes = {x.generation: x.outcome for x in v.verdicts}
    assert outcomes["server (v1.0.0-beta and later)"] == "crash"
    assert outcomes["server v1.0.0-alpha"] == "crash"


def test_plain_bytes_are_stored_as_plain_messages() -> None:
    v = upstream_verdict(b"hello world")
    assert not v.crashes
    assert {x.outcome for x in v.verdicts if "server" in x.generation} == {"plain"}


@pytest.mark.slow
def test_check_command_exits_non_zero_on_a_crashing_input(tmp_path) -> None:
    good = "b90e43b40008000a0a027331"
    crash = "b90e43b40028000a0a026964"

    def run(*a: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*LBPARSE, "check", *a], capture_output=True, timeout=60)

    ok = run(good)
    assert ok.returncode == 0, ok.stderr
    assert b"accepted as MsgType 10 ServerInfoRequest" in ok.stdout
    bad = run(good, crash)
    assert bad.returncode == 1
    assert b"crash" in bad.stdout and b"slice bounds out of range [40:12]" in bad.stdout
    js = run("--json", crash)
    assert json.loads(js.stdout.splitlines()[0])["crashes_a_server"] is True


def test_verdict_is_exported() -> None:
    assert lbparse.upstream_verdict is upstream_verdict
