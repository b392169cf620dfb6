"""The public API as its users' type checkers see it, and the Envelope record.

mypy --strict (the configuration of pyproject.toml, as `make typecheck`
runs it) checks lbparse and a snippet of calls together: lbparse itself
must be clean, the right calls must pass, and the wrong ones must each be
refused where they are.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import lbparse
from lbparse.codec.envelope import Envelope

# One mypy run for the module (mypy_errors): its tests on one xdist worker.
pytestmark = pytest.mark.xdist_group("mypy")

ROOT = Path(__file__).resolve().parents[2]
PUBLISH = bytes.fromhex(
    "b90e43b4000c01008df060ea08ffffffffffffffff7f120400ff10801a1568656c6c6f20e29c"
    "9320e4b896e7958c20f09f9a8020959a97ece39fe7cb172a0973747265616d2dc3bc30073a"
    "09666f6f2e6261722e3e420e5f494e424f582e7265706c792e314a1a0a0c636f6e74656e74"
    "2d74797065120a746578742f706c61696e520761636b732ecf805a09636f72722dcea92d31"
    "6001"
)

SNIPPET = """\
import lbparse

env: lbparse.Envelope = lbparse.decode(b"", "v0")
env = lbparse.decode(b"", layout="auto", verify_crc=False, lenient=False, limits=None)
env = lbparse.decode(bytearray(b""), "legacy", payload_type="proto.Ack")
name: str | None = env.msg_type_name
wire: bytes = lbparse.encode(env.message, layout="v0", crc=True)
lbparse.decode(b"", "v0", lenient="yes", verify_crcc=True)  # BAD: two errors
lbparse.decode(b"", "v0", True)  # BAD: options are keyword-only
layout: int = env.layout  # BAD: a str
env.layout = "v0"  # BAD: read-only
"""


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    api = pytest.importorskip("mypy.api", reason="mypy is a dev dependency (pyproject.toml)")
    snippet = tmp_path_factory.mktemp("mypy") / "snippet.py"
    snippet.write_text(SNIPPET)
    out, err, _ = api.run(
        [
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--no-error-summary",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            str(ROOT / "lbparse"),
            str(snippet),
        ]
    )
    assert not err, err
    return [line for line in out.splitlines() if ": error:" in line]


def _snippet_errors(errors: list[str], line: int) -> list[str]:
    return [e for e in errors if re.search(rf"snippet\.py:{line}: error", e)]


@pytest.mark.slow
def test_lbparse_is_mypy_strict_clean(mypy_errors: list[str]) -> None:
    assert [e for e in mypy_errors if "snippet.py" not in e] == []


def test_the_right_calls_type_check(mypy_errors: list[str]) -> None:
    for line in range(1, 8):
        assert _snippet_errors(mypy_errors, line) == [], line


def test_decode_options_are_typed_and_keyword_only(mypy_errors: list[str]) -> None:
    bad = " ".join(_snippet_errors(mypy_errors, 8))
    assert '"lenient"' in bad and '"str"' in bad, bad
    assert '"verify_crcc"' in bad, bad
    assert _snippet_errors(mypy_errors, 9), "a positional option must be refused"


def test_envelope_fields_are_typed_and_read_only(mypy_errors: list[str]) -> None:
    assert _snippet_errors(mypy_errors, 10)
    assert _snippet_errors(mypy_errors, 11)


# -- the Envelope record ---------------------------------------------------------


def test_envelope_is_a_record_not_a_tuple() -> None:
    env = lbparse.decode(PUBLISH)
    assert not isinstance(env, tuple)
    with pytest.raises(TypeError):
        len(env)  # type: ignore[arg-type]
    assert env != tuple(env.as_dict().values())
    assert list(env.as_dict()) == list(Envelope.FIELDS)


def test_envelope_is_immutable() -> None:
    env = lbparse.decode(PUBLISH)
    for name in Envelope.FIELDS:
        with pytest.raises(AttributeError):
            setattr(env, name, None)
    with pytest.raises(AttributeError):
        env.anything_else = 1  # type: ignore[attr-defined]


def test_no_shared_mutable_state() -> None:
    """The classification of one envelope is its own: nothing mutable is
    shared between envelopes or kept on the class."""
    a = lbparse.decode(PUBLISH, "auto")
    b = lbparse.decode(PUBLISH, "auto")
    assert a.reasons and isinstance(a.reasons, tuple)
    assert a.reasons is not Envelope.__dict__.get("reasons")
    for name, value in vars(Envelope).items():
        if not name.startswith("__"):
            assert not isinstance(value, (list, dict, set, bytearray)), name
    plain = lbparse.decode(PUBLISH)
    assert plain.reasons == () and plain.layout_candidates == ()
    assert a == b


def test_equality_compares_every_field() -> None:
    env = lbparse.decode(PUBLISH)
    assert env == lbparse.decode(PUBLISH)
    assert env == lbparse.decode(PUBLISH, verify_crc=False)  # the shortcut and the full decoder
    for name, value in (
        ("crc32c", 1),
        ("layout", "legacy"),
        ("warnings", ("w",)),
        ("reasons", ("r",)),
        ("confidence", 0.5),
        ("payload", b""),
    ):
        assert env.replace(**{name: value}) != env, name
    assert env.replace() == env
    assert (env == "v0") is False
    with pytest.raises(TypeError):
        hash(env)


def test_replace_refuses_unknown_fields() -> None:
    with pytest.raises(TypeError, match="no field nope"):
        lbparse.decode(PUBLISH).replace(nope=1)


def test_the_public_constructor_builds_what_decode_builds() -> None:
    env = lbparse.decode(PUBLISH)
    fields: dict[str, Any] = env.as_dict()
    assert Envelope(**fields) == env
    assert Envelope(**fields).to_json_dict() == env.to_json_dict()


def _public_callables() -> list[tuple[str, Any]]:
    """Every public function of lbparse, and every public method of its public classes."""
    import inspect

    found: list[tuple[str, Any]] = []
    for name in lbparse.__all__:
        obj = getattr(lbparse, name)
        if inspect.isclass(obj):
            found.append((name, obj))
            found += [
                (f"{name}.{m}", v)
                for m, v in vars(obj).items()
                if (not m.startswith("_") or m == "__init__")
                and (inspect.isfunction(v) or isinstance(v, (staticmethod, classmethod)))
            ]
        elif callable(obj):
            found.append((name, obj))
    return found


def test_get_type_hints_works_on_every_public_callable() -> None:
    """typing.get_type_hints resolves every annotation (sphinx, pydantic and
    typeguard call it): a name imported only under TYPE_CHECKING would raise
    NameError (decode_arrow's pyarrow types did)."""
    import sys
    import typing

    had_pyarrow = "pyarrow" in sys.modules
    callables = _public_callables()
    assert {"decode", "decode_arrow", "read_capture_arrow", "Envelope"} <= {n for n, _ in callables}
    for name, obj in callables:
        fn = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
        try:
            typing.get_type_hints(fn)
        except Exception as exc:
            raise AssertionError(f"{name}: {exc!r}") from None
    assert typing.get_type_hints(lbparse.decode_arrow)["return"].__name__ == "RecordBatch"
    if not had_pyarrow:  # resolving the hints is what imported it, not `import lbparse`
        import subprocess

        out = subprocess.run(
            [sys.executable, "-c", "import sys, lbparse; print('pyarrow' in sys.modules)"],
            capture_output=True,
            text=True,
        )
        assert out.stdout.strip() == "False", out
