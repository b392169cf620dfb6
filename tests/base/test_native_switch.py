"""LBPARSE_NATIVE=0 turns every C module off, read in one place
(lbparse.native_switch): each module's `available()` follows it, and no
other module reads the variable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lbparse
from lbparse.capture import native_batches
from lbparse.columnar import decode_arrow, wirescan_native
from lbparse.native_switch import SWITCH, native_enabled
from lbparse.raft import transport

# Each C module's choice, and whether the module was built here.
CHOICES: list[tuple[str, Any, bool]] = [
    ("capture loop", native_batches.available, native_batches._native is not None),
    ("batch kernels", decode_arrow.native_available, decode_arrow._kernels is not None),
    ("struct reader", wirescan_native.available, wirescan_native._structs is not None),
    ("Raft transport", transport.native_available, transport._NATIVE_READER is not None),
]


@pytest.mark.parametrize("name, available, built", CHOICES, ids=[c[0] for c in CHOICES])
def test_every_c_module_follows_the_switch(
    name: str, available: Any, built: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SWITCH, raising=False)
    assert native_enabled() and available() == built
    monkeypatch.setenv(SWITCH, "0")
    assert not native_enabled() and not available()
    monkeypatch.setenv(SWITCH, "1")
    assert available() == built


def test_only_the_switch_reads_the_variable() -> None:
    root = Path(lbparse.__file__).parent
    readers = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if f'"{SWITCH}"' in p.read_text() or f"'{SWITCH}'" in p.read_text()
    )
    assert readers == ["native_switch.py"]
