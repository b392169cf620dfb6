"""Where the material beside the checkout is: `../shared`, or $LBPARSE_SHARED.

One way to find it, for every test: CI clones the repository with `shared/`
beside it; a developer elsewhere points LBPARSE_SHARED at their copy. A test
whose material is missing is skipped with the path it looked for.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("LBPARSE_SHARED") or ROOT.parent / "shared")
CAPTURES = SHARED / "captures"
LIFTBRIDGE = SHARED / "liftbridge"


def shared_path(*parts: str) -> Path:
    """A path under shared/; the calling test is skipped when it is missing."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared material missing: {path} (set LBPARSE_SHARED to shared/)")
    return path


def needs_shared(*parts: str) -> pytest.MarkDecorator:
    """A skip marker for tests (or modules) that read a path under shared/."""
    path = SHARED.joinpath(*parts)
    return pytest.mark.skipif(
        not path.exists(), reason=f"shared material missing: {path} (set LBPARSE_SHARED)"
    )
