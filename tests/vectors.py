"""The reference vectors made by Liftbridge's own Go code (tests/data/vectors.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent / "data"
VECTORS: list[dict[str, Any]] = [
    json.loads(line)
    for line in (DATA / "vectors.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
assert len(VECTORS) == 163, "the reference set has 163 vectors"


def params(pred=lambda v: True) -> list[Any]:
    """pytest params of the vectors that satisfy `pred`, named by id."""
    return [pytest.param(v, id=v["id"]) for v in VECTORS if pred(v)]


def data(v: dict[str, Any]) -> bytes:
    return bytes.fromhex(v["hex"])


def accepted_kinds(expect: dict[str, Any]) -> set[str]:
    return {expect["error"], *expect.get("error_alternatives", [])}
