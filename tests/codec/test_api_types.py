"""The Envelope record.

How users' type checkers see the public API (mypy --strict: the right calls
pass, the wrong ones are refused where they are) is `make typecheck`'s, which
CI runs once: tests/codec/typed_calls.py.
"""

from __future__ import annotations

from typing import Any

import pytest

import lbparse
from lbparse.codec.envelope import Envelope

PUBLISH = bytes.fromhex(
    "b90e43b4000c01008df060ea08ffffffffffffffff7f120400ff10801a1568656c6c6f20e29c"
    "9320e4b896e7958c20f09f9a8020959a97ece39fe7cb172a0973747265616d2dc3bc30073a"
    "09666f6f2e6261722e3e420e5f494e424f582e7265706c792e314a1a0a0c636f6e74656e74"
    "2d74797065120a746578742f706c61696e520761636b732ecf805a09636f72722dcea92d31"
    "6001"
)


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
