"""Adding a MsgType or a layout is a change to spec/ alone.

A copy of the spec gains a v0 MsgType (15, Heartbeat, a new protobuf
message of package `protocol`) and a new enveloped layout with a MsgType
table of its own; `tools/generate.py --spec` generates from the copy into a
temporary folder, and a fresh Python process, with that folder in front of
the checkout's generated package, checks that the new MsgType and layout
decode, encode, round-trip through `auto`, get their pipeline column, and
appear in the Wireshark dissector: nothing in lbparse/ had to change.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.slow  # the whole generator (Node, protoc, flatc) over a copy of the spec

ROOT = Path(__file__).resolve().parents[2]
TOOLS_NEEDED = ("node", "flatc")

HEARTBEAT_PROTO = """
// Added by tests/codegen/test_spec_extension.py: a MsgType the spec did not have.
message Heartbeat {
  string server_id = 1;
  int64 sent_at = 2;
}
"""

CHECK = r"""
import json, sys, tempfile
import pyarrow as pa
import lbparse
from lbparse.columnar.decode_arrow import BatchDecoder, DecodeOptions
from lbparse.columnar.schema import arrow_output_schema, arrow_record_schema, payload_columns

out = {}
Heartbeat = lbparse.message_class("protocol.Heartbeat")
hb = Heartbeat(server_id="s-7", sent_at=1_700_000_000_123_456_789)
v0 = lbparse.LAYOUTS["v0"]
out["v0_table"] = [v0.msg_types[15].name, v0.msg_types[15].payload_type, v0.msg_types[15].internal]
wire = lbparse.encode(hb, crc=True)
env = lbparse.decode(wire)
out["v0_decode"] = [wire[7], env.msg_type, env.msg_type_name, env.message == hb,
                    lbparse.encode(env.message, crc=True) == wire]
nxt = lbparse.encode(hb, layout="v0-next")
env = lbparse.decode(nxt, "v0-next")
out["layout_decode"] = [nxt[7], env.layout, env.msg_type_name, env.message == hb]
auto = lbparse.decode(wire, "auto")
out["auto"] = [auto.layout, auto.msg_type_name, auto.message == hb]
cols = payload_columns()
schema = arrow_record_schema()
n = 2
arrays = {f.name: pa.nulls(n, f.type) for f in schema}
arrays["source"] = pa.array(["t"] * n)
arrays["position"] = pa.array(range(n), pa.int64())
arrays["payload"] = pa.array([wire, lbparse.encode(hb)], pa.binary())
batch = pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)
decoded = {}
for layout in ("v0", "auto"):
    got = BatchDecoder(DecodeOptions(layout=layout))(batch).to_pydict()
    decoded[layout] = [got["msg_type_name"], got[cols["protocol.Heartbeat"]]]
out["pipeline"] = [cols.get("protocol.Heartbeat"),
                   cols.get("protocol.Heartbeat") in arrow_output_schema().names, decoded]
from lbparse.codegen import wireshark
with tempfile.TemporaryDirectory() as d:
    lua = wireshark.write_dissector(d).read_text()
out["wireshark"] = ["Heartbeat" in lua, "v0-next" in lua]
print(json.dumps(out))
"""


def _extend(spec: Path) -> None:
    """The copy of the spec gains MsgType 15 and the layout `v0-next`."""
    path = spec / "envelope.ksy"
    ksy = yaml.safe_load(path.read_text(encoding="utf-8"))
    enums = ksy["enums"]
    enums["v0_msg_type"][15] = {
        "id": "heartbeat",
        "doc": "A server says it is alive (added by a test).",
        "-name": "Heartbeat",
        "-payload": "protocol.Heartbeat",
        "-internal": True,
    }
    enums["next_msg_type"] = {
        0: {
            "id": "publish",
            "doc": "A message to publish.",
            "-name": "Publish",
            "-payload": "proto.Message",
        },
        1: {
            "id": "heartbeat",
            "doc": "A heartbeat.",
            "-name": "Heartbeat",
            "-payload": "protocol.Heartbeat",
        },
    }
    newest = max(v["-recency"] for v in enums["layout"].values())
    enums["layout"][max(enums["layout"]) + 1] = {
        "id": "v0_next",
        "doc": "A layout added by a test: v0's header, a table of its own.",
        "-name": "v0-next",
        "-byte7": "msg_type",
        "-msg-types": "next_msg_type",
        "-recency": newest + 1,
    }
    path.write_text(yaml.safe_dump(ksy, sort_keys=False, allow_unicode=True), encoding="utf-8")
    proto = spec / "proto" / "internal.proto"
    proto.write_text(proto.read_text(encoding="utf-8") + HEARTBEAT_PROTO, encoding="utf-8")


@pytest.fixture(scope="module")
def extended(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    missing = [t for t in TOOLS_NEEDED if shutil.which(t) is None]
    if missing or not (ROOT / "tools" / "node_modules").is_dir():
        pytest.skip(
            f"the generator needs {', '.join(missing) or 'tools/node_modules'} (make install)"
        )
    tmp = tmp_path_factory.mktemp("spec-extension")
    spec = tmp / "spec"
    shutil.copytree(ROOT / "spec", spec)
    _extend(spec)
    gen = tmp / "generated"
    res = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "generate.py"), str(gen), "--spec", str(spec)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(gen), str(ROOT)]))
    res = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=300, cwd=tmp
    )
    assert res.returncode == 0, res.stderr[-3000:]
    result: dict[str, Any] = json.loads(res.stdout.splitlines()[-1])
    return result


def test_new_msg_type_is_in_the_table(extended: dict[str, Any]) -> None:
    assert extended["v0_table"] == ["Heartbeat", "protocol.Heartbeat", True]


def test_new_msg_type_decodes_and_encodes(extended: dict[str, Any]) -> None:
    assert extended["v0_decode"] == [15, 15, "Heartbeat", True, True]


def test_new_layout_decodes_and_encodes(extended: dict[str, Any]) -> None:
    assert extended["layout_decode"] == [1, "v0-next", "Heartbeat", True]


def test_auto_finds_the_new_msg_type(extended: dict[str, Any]) -> None:
    assert extended["auto"] == ["v0", "Heartbeat", True]


def test_pipeline_column_follows(extended: dict[str, Any]) -> None:
    column, in_schema, decoded = extended["pipeline"]
    assert column == "protocol_Heartbeat" and in_schema
    want = {"server_id": "s-7", "sent_at": 1_700_000_000_123_456_789}
    for layout in ("v0", "auto"):
        names, structs = decoded[layout]
        assert names == ["Heartbeat", "Heartbeat"], layout
        assert structs == [want, want], layout


def test_dissector_follows(extended: dict[str, Any]) -> None:
    assert extended["wireshark"] == [True, True]
