"""The generated JavaScript parser, run in Node, agrees with lbparse.decode.

Every reference vector whose layout the spec declares (with an envelope
header) runs under every such layout. One Node process parses them all
(tests/js/conformance.js); this file compares, case by case, header fields,
CRC presence and value, payload offset and length, MsgType membership and
error kinds with what lbparse itself gives.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lbparse import decode, decode_header
from lbparse.codegen import generate
from lbparse.errors import EnvelopeError
from lbparse_generated.tables import LAYOUTS

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "data" / "vectors.jsonl"
DRIVER = ROOT / "tests" / "js" / "conformance.js"
# Kinds the Kaitai parser can see: it stops at the header checks and leaves
# the CRC value, the MsgType table and the payload schema to its caller.
HEADER_KINDS = {"too_short", "bad_magic", "unknown_version", "bad_header_len", "crc_missing",
                "truncated"}
FLAG_CRC = 0x01


def enveloped(raw: dict[str, Any]) -> bool:
    """Layouts whose bytes start with the envelope header (not lift-cookie & co)."""
    return raw.get("byte7") in ("msg_type", "reserved")


ENVELOPED = [name for name, raw in LAYOUTS.items() if enveloped(raw)]


def load_cases() -> list[Any]:
    cases = []
    for line in VECTORS.read_text(encoding="utf-8").splitlines():
        vec = json.loads(line)
        if vec["layout"] not in LAYOUTS:
            cases.append(pytest.param(vec, None, id=vec["id"], marks=pytest.mark.skip(
                reason=f"layout {vec['layout']!r} is not declared in spec/envelope.ksy")))
        elif not enveloped(LAYOUTS[vec["layout"]]):
            cases.append(pytest.param(vec, None, id=vec["id"], marks=pytest.mark.skip(
                reason=f"layout {vec['layout']!r} has no envelope header")))
        else:
            cases += [pytest.param(vec, lay, id=f"{vec['id']}@{lay}") for lay in ENVELOPED]
    return cases


CASES = load_cases()


@pytest.fixture(scope="module")
def js_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("js")
    generate(["javascript"], out)
    lines = []
    for param in CASES:
        vec, lay = param.values
        if lay is not None:
            lines.append(json.dumps({"case": f"{vec['id']}@{lay}", "hex": vec["hex"],
                                     "layout_id": LAYOUTS[lay]["id"]}))
    # The generated code requires 'kaitai-struct/KaitaiStream': the pinned
    # runtime lives in tools/node_modules.
    env = dict(os.environ, NODE_PATH=str(ROOT / "tools" / "node_modules"))
    res = subprocess.run(["node", str(DRIVER), str(out), str(ROOT / "spec" / "envelope.ksy")],
                         input="\n".join(lines) + "\n", capture_output=True, text=True,
                         timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    results = {r["case"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert len(results) == len(lines)
    return results


def expected_kinds(vec: dict[str, Any], kind: str, data: bytes) -> set[str]:
    kinds = {kind}
    if vec["expect"].get("error") == kind:
        kinds |= set(vec["expect"].get("error_alternatives", ()))
    # The spec checks the CRC flag and header_len 12 together, in the flags
    # field: with the flag clear, the 12 is what lbparse calls wrong.
    if kind == "bad_header_len" and len(data) > 6 and not data[6] & FLAG_CRC:
        kinds.add("crc_missing")
    return kinds


@pytest.mark.parametrize("vec, layout", CASES)
def test_js_parser_agrees_with_lbparse(js_results, vec: dict[str, Any], layout: str) -> None:
    data = bytes.fromhex(vec["hex"])
    js = js_results[f"{vec['id']}@{layout}"]
    try:
        env = decode(data, layout)
        kind = None
    except EnvelopeError as exc:
        env, kind, err = None, exc.kind, exc

    if kind in HEADER_KINDS:
        assert not js["ok"], f"lbparse: {kind}, JS parsed {js}"
        assert js["kind"] in expected_kinds(vec, kind, data), (kind, js)
        return

    assert js["ok"], f"lbparse got past the header ({kind or 'ok'}), JS: {js}"
    if kind == "unknown_msg_type":
        assert js["msg_type_known"] is False and js["byte7"] == err.actual
        return
    # Header fields as lbparse reads them (decode_header skips the CRC and payload).
    try:
        head = env if env is not None else decode_header(data, layout)
    except EnvelopeError as exc:  # the CRC is checked before the MsgType
        assert (kind, exc.kind) == ("crc_mismatch", "unknown_msg_type")
        assert js["msg_type_known"] is False and js["byte7"] == exc.actual
        return
    assert js["version"] == head.version
    assert js["header_len"] == head.header_len
    assert js["flags"] == head.flags
    assert js["has_crc"] == (head.crc32c is not None)
    assert js["crc32c"] == head.crc32c
    assert js["crc_ok"] == (None if head.crc32c is None else kind != "crc_mismatch")
    assert js["payload_offset"] == head.header_len
    assert js["payload_len"] == len(data) - head.header_len
    if env is not None:
        assert js["payload_len"] == len(env.payload)
    if LAYOUTS[layout]["byte7"] == "msg_type":
        assert js["msg_type_known"] is True and js["byte7"] == head.msg_type
    else:
        assert js["msg_type_known"] is None


def test_every_declared_layout_is_exercised() -> None:
    ran = {p.values[1] for p in CASES if p.values[1] is not None}
    assert ran == set(ENVELOPED)
    assert len([p for p in CASES if p.values[1] is not None]) >= 100
