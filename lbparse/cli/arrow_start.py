"""A command's process keeps pyarrow from importing pandas it never uses.

pyarrow asks whether pandas is there, by importing it, the first time it
builds an array from Python objects (`pa.array`) and the first time it
gives numpy an array (`to_numpy`, `np.asarray`): ~0.45 CPU-s, more than
half of what a small `lbparse capture --tables` costs, in a process that
hands pandas nothing. Each question is asked once a process. So the
process that runs a command (`main()` with no argv: the `lbparse` script,
`python -m lbparse`) asks both as pyarrow finishes importing, with pandas
hidden for that moment only.

Why only there: once pyarrow has answered "no pandas", pandas objects
given to it later in that process are read as plain sequences (a Series'
NaN stays NaN, pandas' NaT is refused). No command of lbparse gives
pyarrow a pandas object; a library caller's process, where anything may,
is left as it is (`main(argv)` and `import lbparse` do nothing of this).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

from lbparse.extras import need


class _NoPandas(importlib.abc.MetaPathFinder):
    # a finder that refuses, not sys.modules["pandas"] = None: pyarrow's
    # compiled import takes a None it finds there for the module
    def find_spec(
        self, fullname: str, path: object, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError(f"{fullname} hidden from pyarrow's question", name=fullname)
        return None


def _answer_without_pandas() -> None:
    """Ask pyarrow's two pandas questions with pandas hidden."""
    if "pandas" in sys.modules:  # the process has it already: nothing to save
        return
    pa = need("pyarrow")
    hidden = _NoPandas()
    sys.meta_path.insert(0, hidden)
    try:
        pa.array([0], pa.int64()).to_numpy()
    finally:
        sys.meta_path.remove(hidden)


class _AnswerAfter(importlib.abc.Loader):
    """pyarrow's own loader, then the questions."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _answer_without_pandas()


class _WhenPyarrowLoads(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "pyarrow":
            return None
        sys.meta_path.remove(self)  # once, and out of its own lookup's way
        spec = importlib.machinery.PathFinder.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _AnswerAfter(spec.loader)
        return spec


def without_pandas() -> None:
    """Keep pyarrow, in this command's process, from importing pandas.

    pyarrow's questions are asked now if it is loaded, else as it loads (a
    command that never loads it pays nothing). Nothing happens where pandas
    is already imported.
    """
    if "pandas" in sys.modules:
        return
    if "pyarrow" in sys.modules:
        _answer_without_pandas()
    elif not any(isinstance(f, _WhenPyarrowLoads) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenPyarrowLoads())
