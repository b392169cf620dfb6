"""The shared capture with the clients' gRPC calls (api-short.pcapng, a
`CAPTURE_API=1 run_cluster.sh short` run), read once a test process: its
gRPC records and its report models, for the tests of the gRPC tables, the
report's client section and the publish join."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lbparse.capture import CaptureReader, Notice
from lbparse.report import build_model
from lbparse.report.inputs import ReadOptions
from support.shared import LIFTBRIDGE

API_SHORT = LIFTBRIDGE / "samples" / "api-short.pcapng"
CALLS, MESSAGES = 55, 287  # tshark's HTTP/2 and gRPC dissection of api-short
# Two client -> server segments of a gRPC connection (port 29392) of api-short,
# by frame number: tshark -Y 'tcp.dstport==29392 && tcp.len>0'
DROPPED = ("2495", "2736")


def need_api_short() -> None:
    if not API_SHORT.is_file():
        pytest.skip(f"shared material missing: {API_SHORT}")


def with_gaps(out: Path) -> Path:
    """api-short without the DROPPED segments (`editcap`), written to `out`: two
    TCP gaps in a gRPC connection and the HTTP/2 frames lost at each, four
    problems for every reading."""
    need_api_short()
    if shutil.which("editcap") is None:
        pytest.skip("editcap (Wireshark's) is not installed")
    subprocess.run(
        ["editcap", str(API_SHORT), str(out), *DROPPED], check=True, capture_output=True, timeout=60
    )
    return out


@functools.cache
def _reading() -> tuple[tuple[Any, ...], tuple[Notice, ...], int]:
    items: list[Any] = []
    notices: list[Notice] = []
    nats = sum(1 for _ in CaptureReader(API_SHORT, on_grpc=items.append, on_notice=notices.append))
    return tuple(items), tuple(notices), nats


def reading() -> tuple[list[Any], list[Notice], int]:
    """The reader's gRPC calls and messages, its notices (in their orders)
    and its count of NATS records, read with the default options."""
    need_api_short()
    items, notices, nats = _reading()
    return list(items), list(notices), nats


def grpc_items() -> list[Any]:
    """Every gRPC call and message the reader finds, in its order."""
    return reading()[0]


@functools.cache
def _report_models() -> dict[str, dict[str, Any]]:
    return {
        path: build_model([str(API_SHORT)], ReadOptions(fast=fast))
        for path, fast in (("columns", True), ("records", False))
    }


def report_models() -> dict[str, dict[str, Any]]:
    """The report's model of the capture by both its paths: "columns" (the
    columnar reading) and "records" (the reader's records). Shared: read only."""
    need_api_short()
    return _report_models()
