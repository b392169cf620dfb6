"""No two modules of lbparse share a name where a reader would confuse them
(issue #49): a file's name says what it does, not only which wing it is in.

The names compared are every module's last part and every package's (so a
module named like a wing, `capture/columnar.py` beside `columnar/`, counts).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

import lbparse

ROOT = Path(lbparse.__file__).parent

# Names two or more modules may share, each with why a reader is not misled.
SHARED = {
    "__init__": "a package's front",
    "__main__": "`python -m` of the package it is in",
    "errors": "each wing's own errors, beside what raises them",
    "api": "codec/api.py and columnar/api.py: each wing's public functions, re-exported by lbparse",
    "formats": "each wing's file formats: capture's inputs told apart, storage's segment kinds",
    "inputs": "each command's own inputs: cli/ (decode, check) and report/",
    "tables": "raft/tables.py types spec/raft.ksy's generated look-up tables (used in raft/ "
    "alone); columnar/tables.py makes the narrow output tables",
    "output": "pipeline/output.py writes the Parquet tables; cli/output.py prints the commands'",
    "storage": "report/storage.py is the report's storage section, read with the storage wing",
}
# Old names kept for a while after a rename, as modules that only warn and
# re-export the new one (the new name is the one in the code and the docs).
DEPRECATED = {
    "lbparse.capture.columnar": "lbparse.capture.native_batches",
}


def module_names() -> dict[str, list[str]]:
    """last name -> the dotted names of the modules and packages that end in it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        dotted = ".".join(parts)
        if dotted not in DEPRECATED:
            found[parts[-1]].append(dotted)
    for path in sorted(ROOT.rglob("__init__.py")):
        package = path.parent.relative_to(ROOT.parent).parts
        if len(package) > 1:
            found[package[-1]].append(".".join(package))
    return found


def test_no_two_modules_share_a_name() -> None:
    shared = {
        name: where
        for name, where in module_names().items()
        if len(where) > 1 and name not in SHARED
    }
    assert shared == {}


def test_each_allowed_name_is_still_shared() -> None:
    """An entry of SHARED that no longer names two modules is stale: removed
    (the names every wing may have aside)."""
    names = module_names()
    always = {"__init__", "__main__", "errors"}
    assert sorted(n for n in SHARED.keys() - always if len(names.get(n, [])) < 2) == []


@pytest.mark.parametrize("old,new", sorted(DEPRECATED.items()))
def test_a_renamed_module_still_imports_and_warns(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} is renamed {new}"):
        shim = importlib.import_module(old)
    target = importlib.import_module(new)
    assert shim.__all__
    for name in shim.__all__:
        assert getattr(shim, name) is getattr(target, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.import_module(new)  # the new name itself does not warn
