"""The rules lbparse.codegen.kaitai_fixups applies to other languages' generated code.

Every target is also compiled and run by tests/codegen/test_langs.py; these tests
pin the rules themselves, on small specs, so that a rule that silently stops
applying (or starts applying where it must not) fails here by name.
"""

from __future__ import annotations

from typing import Any

import pytest

from lbparse.codegen.kaitai_fixups import (
    ExprError,
    NimDialect,
    PerlDialect,
    csharp_imported,
    js_bigint,
    parse_expr,
)


def _ksy(seq: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"meta": {"id": "demo"}, "seq": seq, **extra}


def test_string_literals_are_read() -> None:
    assert parse_expr('"0"') == ("str", "0")


def test_enum_paths_are_not_field_names() -> None:
    ksy = _ksy(
        [
            {"id": "freelist", "type": "u8"},
            {"id": "flags", "type": "u2"},
            {"id": "x", "type": "u1", "if": "flags == page_type::freelist"},
        ]
    )
    # `freelist` appears only in the enum path: no ExprError, and read exactly
    assert "readBigU8be(this._io)" in js_bigint("this._io.readU8be()", ksy)


@pytest.mark.parametrize(
    "key, expr", [("if", "n == 0"), ("if", "header.n != 1"), ("repeat-expr", "n"), ("value", "n")]
)
def test_bigint_fields_may_be_compared(key: str, expr: str) -> None:
    js_bigint(
        "this._io.readU8be()",
        _ksy([{"id": "n", "type": "u8"}, {"id": "y", "type": "u1", key: expr}]),
    )


@pytest.mark.parametrize("key, expr", [("if", "n + 1 == 2"), ("size", "n"), ("pos", "16 + n")])
def test_bigint_fields_in_arithmetic_are_refused(key: str, expr: str) -> None:
    with pytest.raises(ExprError, match="n \\(64-bit\\)"):
        js_bigint(
            "this._io.readU8be()",
            _ksy([{"id": "n", "type": "u8"}, {"id": "y", "type": "u1", key: expr}]),
        )


def test_string_checks_compare_as_strings() -> None:
    ksy = _ksy([{"id": "version", "type": "str", "terminator": 10, "valid": '"0"'}])
    perl = PerlDialect(ksy, None).condition(ksy["seq"][0])
    nim = NimDialect(ksy, None).condition(ksy["seq"][0])
    assert perl == ('($self->{version} eq "0")', "ValidationNotEqualError")
    assert nim == ('(this.version == "0")', "ValidationNotEqualError")


def test_csharp_follows_an_imported_specs_renames() -> None:
    text = "LiftbridgeCommitlog.Body b = new LiftbridgeCommitlog.Body(io); x.Body;"
    fixed = csharp_imported(text, {"LiftbridgeCommitlog": {"Body"}})
    assert fixed == (
        "LiftbridgeCommitlog.BodyType b = new LiftbridgeCommitlog.BodyType(io); x.Body;"
    )
