"""The build tools in tools/ (not part of the installed package), for tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def load_tool(name: str) -> ModuleType:
    """tools/NAME.py as a module."""
    spec = importlib.util.spec_from_file_location(f"lbparse_tools_{name}", TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
