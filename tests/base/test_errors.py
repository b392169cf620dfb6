"""One error base: everything lbparse raises for its input is an
`lbparse.LbparseError` (a ValueError) with a kind, a message, where, and one
JSON shape."""

from __future__ import annotations

from pathlib import Path

import pytest

import lbparse
from lbparse.capture import CaptureError, CaptureReader
from lbparse.raft import RaftError
from lbparse.storage.errors import StorageError


def _decode_error() -> lbparse.LbparseError:
    with pytest.raises(lbparse.LbparseError) as info:
        lbparse.decode(bytes.fromhex("b90e43b400ff000a0a026964"))
    return info.value


def _capture_error(tmp_path: Path) -> lbparse.LbparseError:
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"not a capture at all")
    with pytest.raises(lbparse.LbparseError) as info:
        list(CaptureReader(str(bad)))
    return info.value


def test_every_input_error_is_one_catchable_kind(tmp_path: Path) -> None:
    for cls in (lbparse.EnvelopeError, CaptureError, RaftError, StorageError):
        assert issubclass(cls, lbparse.LbparseError) and issubclass(cls, ValueError), cls
    env = _decode_error()
    assert isinstance(env, lbparse.EnvelopeError) and env.where == 5
    cap = _capture_error(tmp_path)
    assert isinstance(cap, CaptureError) and cap.kind == "unknown_format"


def test_one_json_shape() -> None:
    errors: list[lbparse.LbparseError] = [
        _decode_error(),
        CaptureError("bad_header", "x.pcap: bad header at 24", offset=24),
        RaftError("truncated", "the bytes end inside a map", offset=3),
        StorageError("bad magic", path="00000.log", position=8, kind="bad_entry"),
    ]
    for e in errors:
        d = e.to_json_dict()
        assert list(d)[:2] == ["error", "message"] and d["error"] == e.kind, d
        assert d["message"] and isinstance(d["message"], str)
    assert errors[2].to_json_dict() == {
        "error": "truncated",
        "message": "the bytes end inside a map",
        "offset": 3,
        "where": {"offset": 3, "position": None, "path": None},
    }
    store = errors[3]
    assert store.where == 8 and store.to_json_dict() == {
        "error": "bad_entry",
        "message": "bad magic",
        "path": "00000.log",
        "position": 8,
        "where": {"offset": None, "position": 8, "path": "00000.log"},
    }


def test_the_envelopes_shape_is_the_vectors() -> None:
    """The reference vectors pin {"error": kind, ...}: the base keeps it."""
    d = _decode_error().to_json_dict()
    assert d == {
        "error": "bad_header_len",
        "message": "header_len (offset 5) is 255, expected 8 or 12",
        "where": {"offset": 5, "position": None, "path": None},
    }
