"""One error family (issue #49): everything lbparse raises on purpose is an
`lbparse.LbparseError`, built one way, with checked kinds and one JSON
shape; the command line maps the family to its exit statuses in one place."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import json
import os
import pickle
import pkgutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from support.imports import parsed, walked

import lbparse
from lbparse.cli.status import DATA, JOB_FAILED, USAGE, UsageError, exit_status
from lbparse.errors import EnvelopeError, InputError, LbparseError, OperationalError

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lbparse"

# Where lbparse still raises a builtin exception, and why (lbparse/errors.py's
# docstring states the rule). A new `raise ValueError(...)` elsewhere fails
# test_no_other_builtin_raise: raise a member of the family instead, or add
# it here with its reason.
BUILTIN_RAISES: dict[tuple[str, str], int] = {
    # a wrong type of argument: the program's mistake, not its data's
    ("codec/envelope.py", "TypeError"): 2,
    ("codec/enveloped.py", "TypeError"): 1,
    ("codec/headerless.py", "TypeError"): 1,
    ("codec/payloads.py", "TypeError"): 1,
    ("columnar/api.py", "TypeError"): 1,
    ("storage/errors.py", "TypeError"): 1,  # StorageError built with neither shape
    # abstract methods
    ("codec/payloads.py", "NotImplementedError"): 3,
    ("codegen/kaitai_fixups.py", "NotImplementedError"): 5,
    # Python's protocols: a mapping's __getitem__, a module's __getattr__
    ("capture/fields.py", "KeyError"): 1,
    ("report/__init__.py", "AttributeError"): 1,
    # an import finder's refusal, as the import system asks (pandas hidden from pyarrow)
    ("cli/arrow_start.py", "ModuleNotFoundError"): 1,
    # file-object and file-system contracts: a pipe that cannot seek, no fresh
    # temporary name (as tempfile says it), an OS error of a Spark task reworded
    ("capture/pipe.py", "OSError"): 1,
    ("pipeline/outdir.py", "OSError"): 1,
    ("pipeline/output.py", "OSError"): 1,
    ("scratch.py", "OSError"): 2,
    # a chart's field shorthand the report's Vega-Lite builder does not read:
    # the chart code's mistake, refused as Altair refuses it
    ("report/vegalite.py", "ValueError"): 2,
    # an unknown kind: a bug in the code that built the error (or the finding)
    ("errors.py", "ValueError"): 1,
    ("storage/errors.py", "ValueError"): 1,
}

BUILTIN_EXCEPTIONS = {
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
}


def _modules() -> list[str]:
    """Every module of the lbparse package, by name (but __main__, which runs)."""
    names = ["lbparse"]
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="lbparse."):
        if not info.name.endswith(".__main__"):
            names.append(info.name)
    return names


def _caught(handler: ast.ExceptHandler) -> set[str]:
    if handler.type is None:
        return {"BaseException"}
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {t.id for t in types if isinstance(t, ast.Name)}


def _builtin_raises(node: ast.AST, caught: frozenset[str], found: list[tuple[int, str]]) -> None:
    """The raises of a builtin exception in `node`, but for those a `try` of
    the same function catches (control flow, not what lbparse says)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        caught = frozenset()
    if isinstance(node, ast.Try):
        inner = caught.union(*(_caught(h) for h in node.handlers))
        for stmt in node.body:
            _builtin_raises(stmt, inner, found)
        for part in [*node.handlers, *node.orelse, *node.finalbody]:
            _builtin_raises(part, caught, found)
        return
    if isinstance(node, ast.Raise) and node.exc is not None:
        func = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(func, ast.Name) and func.id in BUILTIN_EXCEPTIONS:
            exc = getattr(builtins, func.id)
            handled = any(
                isinstance(getattr(builtins, c, None), type)
                and issubclass(exc, getattr(builtins, c))
                for c in caught
            )
            if not handled:
                found.append((node.lineno, func.id))
    # A raise is a statement: only the blocks of statements hold one (the
    # expressions, most of a tree, cannot)
    for block in _BLOCKS:
        for child in getattr(node, block, ()):
            _builtin_raises(child, caught, found)


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_exception_class_lbparse_defines_is_an_lbparse_error() -> None:
    """Walks every module: a class deriving from Exception that lbparse
    defines is a member of the family (private ones, underscored, are
    signals that never leave their module)."""
    outside = []
    seen = 0
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue  # an optional extra this environment lacks
        for attr, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Exception)
                and obj.__module__ == name
                and not attr.startswith("_")
            ):
                seen += 1
                if not issubclass(obj, LbparseError):
                    outside.append(f"{name}.{attr}")
    assert seen >= 25, seen  # the walk found the family (it is not empty by accident)
    assert outside == []


def test_no_other_builtin_raise() -> None:
    """What lbparse raises of Python's own exceptions is BUILTIN_RAISES, exactly."""
    found: Counter[tuple[str, str]] = Counter()
    where: dict[tuple[str, str], list[str]] = {}
    for path in _sources():
        raises: list[tuple[int, str]] = []
        _builtin_raises(parsed(path), frozenset(), raises)
        rel = path.relative_to(PACKAGE).as_posix()
        for line, exc in raises:
            found[(rel, exc)] += 1
            where.setdefault((rel, exc), []).append(f"lbparse/{rel}:{line}")
    extra = {k: where[k] for k in found if found[k] > BUILTIN_RAISES.get(k, 0)}
    assert extra == {}, "raise a member of lbparse.errors' family (or list it, with why)"
    assert dict(found) == BUILTIN_RAISES


def _family_classes() -> dict[str, type[LbparseError]]:
    """Every public LbparseError subclass lbparse defines, by its dotted name."""
    family: dict[str, type[LbparseError]] = {}
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, LbparseError)
                and obj.__module__ == name
                and not attr.startswith("_")
            ):
                family[f"{name}.{attr}"] = obj
    return family


def test_every_member_declares_its_kinds() -> None:
    """The base has no kind (it is caught, never raised itself); every other
    class says what its kinds are, and sits in one of the two branches."""
    with pytest.raises(ValueError):
        LbparseError("failed", "x")
    for name, cls in _family_classes().items():
        if cls is LbparseError:
            continue
        assert "KINDS" in vars(cls), f"{name} declares no KINDS of its own"
        assert isinstance(cls.KINDS, frozenset) and cls.KINDS, name
        assert issubclass(cls, (InputError, OperationalError)), f"{name}: in neither branch"


def test_every_kind_written_where_lbparse_raises_is_one_of_its_class() -> None:
    """A kind given as a literal (`Cls("kind", ...)`) is one of Cls.KINDS: a
    typo would otherwise surface as a ValueError only when that line runs."""
    wrong = []
    checked = 0
    for path in _sources():
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if name.endswith(".__main__"):
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for node in walked(parsed(path)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            cls = vars(module).get(node.func.id)
            if not (inspect.isclass(cls) and issubclass(cls, LbparseError)):
                continue
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                if cls.__name__ == "StorageError" and len(node.args) == 1:
                    continue  # the older shape: the message alone
                checked += 1
                if first.value not in cls.KINDS:
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {first.value!r}")
    assert checked > 150, checked
    assert wrong == []


def test_one_constructor_and_its_attributes() -> None:
    e = InputError("bad_option", "--count must be at least 1", path="x.pcap", position=3)
    assert (e.kind, e.message, e.path, e.position, e.offset) == (
        "bad_option",
        "--count must be at least 1",
        "x.pcap",
        3,
        None,
    )
    assert str(e) == "--count must be at least 1" and e.where == 3
    assert isinstance(e, ValueError) and not isinstance(e, RuntimeError)
    o = OperationalError("unreachable", "no server answered", offset=None)
    assert isinstance(o, RuntimeError) and not isinstance(o, ValueError)
    assert o.where is None
    assert repr(o) == "OperationalError('unreachable', 'no server answered')"


@pytest.mark.parametrize(
    "cls",
    [InputError, OperationalError, EnvelopeError, UsageError],
    ids=lambda c: c.__name__,
)
def test_an_unknown_kind_is_refused_when_built(cls: type[LbparseError]) -> None:
    with pytest.raises(ValueError, match=f"unknown {cls.__name__} kind 'no_such_kind'"):
        cls("no_such_kind", "message")


def test_the_kinds_of_a_subclass_are_its_own() -> None:
    from lbparse.capture import CaptureError
    from lbparse.storage import StorageError

    # a branch's kind is not its subclass's: each class says what it means
    with pytest.raises(ValueError):
        CaptureError("bad_option", "x")
    assert StorageError("zeros", "a run of zeros", path="a.log", position=8).kind == "zeros"
    with pytest.raises(ValueError):
        StorageError("no_such_finding", "x")


def test_to_json_dict_always_carries_where() -> None:
    from lbparse.capture import CaptureError
    from lbparse.outputs import OutputError
    from lbparse.storage import StorageError
    from lbparse.streams.client import StreamsError

    errors: list[LbparseError] = [
        EnvelopeError("truncated", "cut", offset=9),
        CaptureError("bad_header", "x.pcap: bad header at 24", offset=24),
        StorageError("bad_entry", "bad magic", path="00000.log", position=8),
        OutputError("refused", "-o out: is a directory"),
        StreamsError("not_found", "stream 'x' does not exist"),
        OperationalError("failed", "it failed", path="summary.json"),
    ]
    for e in errors:
        d = e.to_json_dict()
        assert list(d)[:2] == ["error", "message"] and list(d)[-1] == "where", d
        assert d["error"] == e.kind and d["message"] == e.message, d
        assert d["where"] == {"offset": e.offset, "position": e.position, "path": e.path}
        json.dumps(d)
    assert errors[2].to_json_dict()["where"] == {
        "offset": None,
        "position": 8,
        "path": "00000.log",
    }


def test_storage_error_message_is_its_json_message() -> None:
    """Its `.message` was `path:position: message` while its JSON said the
    message alone; str() keeps naming the file, as the command line prints it."""
    from lbparse.storage import StorageError

    for e in (
        StorageError("bad_file", "not a segment", path="0.log", position=4),
        StorageError("not a segment", path="0.log", position=4, kind="bad_file"),  # older shape
    ):
        assert e.message == e.to_json_dict()["message"] == e.detail == "not a segment"
        assert str(e) == "0.log:4: not a segment"
        assert e.kind == "bad_file" and e.where == 4


def test_a_member_survives_pickling() -> None:
    """Spark's workers and multiprocessing send exceptions pickled."""
    from lbparse.pipeline.job import JobFailed
    from lbparse.storage import StorageError

    for e in (
        EnvelopeError("crc_mismatch", "crc", offset=8, expected=1, actual=2),
        StorageError("bad_entry", "bad", path="0.log", position=3),
        JobFailed("failed", "the job failed", summary_path="out/summary.json", kept=["a"]),
    ):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e)
        assert back.to_json_dict() == e.to_json_dict() and vars(back) == vars(e)


def test_the_kinds_exports_say_what_they_hold() -> None:
    from lbparse import capture, raft, storage
    from lbparse.capture import traffic

    assert lbparse.KINDS is lbparse.ENVELOPE_KINDS and "too_short" in lbparse.ENVELOPE_KINDS
    assert capture.KINDS is capture.CAPTURE_ERROR_KINDS
    assert raft.KINDS is raft.RAFT_ERROR_KINDS
    assert storage.KINDS is storage.FINDING_KINDS
    assert traffic.KINDS is traffic.TRAFFIC_KINDS
    assert EnvelopeError.KINDS == frozenset(lbparse.ENVELOPE_KINDS)


def test_builtin_bases_callers_rely_on_are_kept() -> None:
    from lbparse.capture.grpc import LimitError
    from lbparse.codegen.targets import CodegenError
    from lbparse.extras import MissingExtra
    from lbparse.live.subscriber import NotConnected
    from lbparse.outputs import OutputError, OutputFailed
    from lbparse.pipeline.job import JobFailed

    assert issubclass(OutputError, ValueError) and issubclass(OutputFailed, OutputError)
    assert issubclass(JobFailed, RuntimeError) and issubclass(CodegenError, RuntimeError)
    assert issubclass(MissingExtra, ModuleNotFoundError)
    assert issubclass(NotConnected, OSError)
    assert issubclass(LimitError, ValueError)
    assert LimitError("max_frame", "too big").limit == "max_frame"
    missing = MissingExtra("missing_extra", "pip install 'lbparse[spark]'", name="pyspark")
    assert missing.name == "pyspark" and str(missing) == "pip install 'lbparse[spark]'"


def test_exit_status_table() -> None:
    from lbparse.capture import CaptureError
    from lbparse.codegen.targets import CodegenError
    from lbparse.outputs import OutputError
    from lbparse.pipeline.job import JobFailed

    assert exit_status(EnvelopeError("too_short", "short")) == DATA
    assert exit_status(CaptureError("unknown_format", "x")) == USAGE
    assert exit_status(InputError("bad_option", "x")) == USAGE
    assert exit_status(OutputError("refused", "x")) == USAGE  # before its branch's DATA
    assert exit_status(OperationalError("unreachable", "x")) == DATA
    assert exit_status(CodegenError("failed", "x")) == DATA
    assert exit_status(JobFailed("failed", "x", summary_path=None)) == JOB_FAILED
    assert exit_status(ValueError("x")) == USAGE and exit_status(OSError("x")) == USAGE
    assert exit_status(KeyError("x")) is None  # a bug: its traceback


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'generated'}"}
    return subprocess.run(
        [sys.executable, "-P", "-m", "lbparse", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_cli_bad_input_ends_with_the_tables_status_and_the_json_shape() -> None:
    res = _cli("decode", "b90e43b400ff000a0a026964")
    assert res.returncode == DATA, res.stderr
    assert json.loads(res.stdout) == {
        "error": "bad_header_len",
        "message": "header_len (offset 5) is 255, expected 8 or 12",
        "where": {"offset": 5, "position": None, "path": None},
    }


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_cli_unwritable_output_ends_with_the_tables_status(tmp_path: Path) -> None:
    out = tmp_path / "no-such-dir" / "out.jsonl"
    res = _cli("decode", "b90e43b4000c01", "-o", str(out))
    assert res.returncode == USAGE, res.stderr
    assert res.stdout == "" and not out.exists()
    assert res.stderr.startswith("lbparse decode: -o ") and len(res.stderr.splitlines()) == 1


def test_a_fast_path_that_falls_back_fails_the_suite() -> None:
    """FastPathWarning (a fast path's failure, its rows given to the reference)
    is a warning for users and an error in this suite (pyproject.toml's
    filterwarnings): a corpus on which a fast path falls back fails its test."""
    import warnings

    from lbparse.errors import FastPathWarning

    said = FastPathWarning("fast_path_failed", "the vectorized x reader failed")
    assert isinstance(said, LbparseError) and isinstance(said, Warning)
    assert said.to_json_dict()["error"] == "fast_path_failed"
    with pytest.raises(FastPathWarning, match="the vectorized x reader failed"):
        warnings.warn(said, stacklevel=1)
