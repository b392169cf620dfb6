"""`lbparse encode` refuses JSON that does not fit in one line, status 2
(issue #27): a payload that is not an object, values the spec's commit-log
fields cannot hold, and FlatBuffers fields of the wrong type or range (each
was a traceback: TypeError, AttributeError, KeyError, construct's error)."""

from __future__ import annotations

import json

import pytest
from support.cli import run_cli

ENTRY = {"offset": 1, "timestamp": 0, "leader_epoch": 0, "value_hex": ""}


def _rr(**entry: object) -> str:
    return json.dumps({"leader_epoch": 1, "high_watermark": 2, "entries": [{**ENTRY, **entry}]})


@pytest.mark.parametrize(
    "args, wanted",
    [
        (["--type", "Ack", "--payload", "null"], "--payload is null, not a JSON object"),
        (["--type", "Ack", "--json", "null"], "--json is null, not a JSON object"),
        (
            ["--layout", "flatbuffers", "--type", "Ack", "--payload", "[]"],
            "--payload is [], not a JSON object",
        ),
        (
            ["--type", "ReplicationResponse", "--payload", _rr(offset=-1)],
            "--payload: offset does not fit its field in the spec",
        ),
        (
            ["--type", "ReplicationResponse", "--payload", _rr(magic=300)],
            "--payload: magic does not fit its field in the spec",
        ),
        (
            [
                "--type",
                "ReplicationResponse",
                "--payload",
                json.dumps({"leader_epoch": 2**64, "high_watermark": 2, "data_hex": ""}),
            ],
            "--payload: leader_epoch does not fit its field in the spec",
        ),
        (
            [
                "--layout",
                "flatbuffers",
                "--type",
                "Ack",
                "--payload",
                json.dumps({"offset": 2**64}),
            ],
            "--payload: offset is 18446744073709551616, out of int64's range",
        ),
        (
            ["--layout", "flatbuffers", "--type", "Ack", "--payload", '{"ackPolicy": 300}'],
            "--payload: ackPolicy is 300, out of ubyte's range (0 to 255)",
        ),
        (
            ["--layout", "flatbuffers", "--type", "Ack", "--payload", '{"ackPolicy": "BOGUS"}'],
            "--payload: ackPolicy is 'BOGUS', not one of LEADER, ALL, NONE",
        ),
        (
            ["--layout", "flatbuffers", "--type", "Ack", "--payload", '{"stream": 5}'],
            "--payload: stream is 5, not a string",
        ),
        (
            ["--layout", "flatbuffers", "--type", "Ack", "--payload", '{"correlationId": "!!"}'],
            "--payload: correlationId is '!!', not base64",
        ),
        (
            ["--layout", "flatbuffers", "--type", "Publish", "--payload", '{"headers": [5]}'],
            "--payload: a proto.MessageHeader table is a JSON object of its fields, not 5",
        ),
        (
            ["--layout", "flatbuffers", "--type", "Publish", "--payload", '{"headers": 5}'],
            "--payload: headers is 5, not a list",
        ),
        (
            ["--layout", "flatbuffers", "--type", "Publish", "--payload", '{"partition": -1}'],
            "--payload: partition is -1, out of uint32's range",
        ),
    ],
)
@pytest.mark.slow
def test_json_that_does_not_fit_is_one_line(args: list[str], wanted: str) -> None:
    done = run_cli("encode", *args)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"lbparse encode: {wanted}"), lines
    assert done.stdout == b""


@pytest.mark.slow
def test_fitting_flatbuffers_json_still_encodes() -> None:
    done = run_cli(
        "encode",
        "--layout",
        "flatbuffers",
        "--type",
        "Ack",
        "--payload",
        '{"ackPolicy": "ALL", "offset": "-5", "correlationId": "YWI=", "stream": "s"}',
    )
    assert done.returncode == 0, done.stderr
    back = json.loads(
        run_cli("decode", "--layout", "flatbuffers", done.stdout.decode().strip()).stdout
    )
    assert back["payload_json"] == {
        "ackPolicy": "ALL",
        "offset": "-5",
        "correlationId": "YWI=",
        "stream": "s",
    }
