"""lbparse's FlatBuffers reader and builder against flatc's own classes of
spec/flatbuffers/api.fbs, and hostile FlatBuffers bytes."""

from __future__ import annotations

import importlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import flat_tables
from support.examples import examples
from vectors import data, params

import lbparse
from lbparse.codec.flatbuf import FlatBufferError, FlatTable, build_table, read_table
from lbparse_generated.fb_schema import TABLES


def _flatc_class(type_name: str) -> type:
    ns, name = type_name.rsplit(".", 1)
    mod = importlib.import_module(f"lbparse_generated.fb.{ns}.{name}")
    return getattr(mod, name)


def _flatc_view(buf: bytes, type_name: str) -> dict:
    """What flatc's object API reads, with absent fields left out."""
    cls = _flatc_class(type_name)
    table = cls.GetRootAs(buf, 0)
    out = {}
    for fid, name, ftype in TABLES[type_name]:
        if not table._tab.Offset(4 + 2 * fid):
            continue
        acc = name[0].upper() + name[1:]
        if ftype == "[ubyte]":
            out[name] = (
                bytes(getattr(table, acc + "AsNumpy")().tobytes())
                if getattr(table, acc + "Length")()
                else b""
            )
        elif ftype.startswith("["):
            elem = ftype[1:-1]
            out[name] = [
                _sub(getattr(table, acc)(i), elem) for i in range(getattr(table, acc + "Length")())
            ]
        elif ftype == "string":
            out[name] = getattr(table, acc)().decode("utf-8")
        else:
            out[name] = getattr(table, acc)()
    return out


def _sub(table: object, type_name: str) -> FlatTable:
    fields = {}
    for fid, name, ftype in TABLES[type_name]:
        if not table._tab.Offset(4 + 2 * fid):  # type: ignore[attr-defined]
            continue
        acc = name[0].upper() + name[1:]
        if ftype == "[ubyte]":
            n = getattr(table, acc + "Length")()
            fields[name] = bytes(getattr(table, acc)(i) for i in range(n))
        else:
            fields[name] = getattr(table, acc)().decode("utf-8")
    return FlatTable(type_name, fields)


@pytest.mark.parametrize("v", params(lambda v: v["layout"] == "flatbuffers"))
def test_reader_agrees_with_flatc_on_vectors(v: dict) -> None:
    env = lbparse.decode(data(v), "flatbuffers")
    assert env.message.fields == _flatc_view(env.payload, env.payload_type)


@pytest.mark.parametrize("type_name", ["proto.PublishRequest", "proto.Ack"])
@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_builder_output_reads_the_same_in_flatc(type_name: str, data: st.DataObject) -> None:
    table = data.draw(flat_tables(type_name))
    buf = build_table(table)
    assert read_table(buf, type_name) == table
    assert _flatc_view(buf, type_name) == table.fields


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=64))
def test_hostile_bytes_raise_only_flatbuffer_error(buf: bytes) -> None:
    for type_name in TABLES:
        try:
            read_table(buf, type_name)
        except FlatBufferError:
            pass


def test_absurd_vector_length_is_refused_before_allocation() -> None:
    good = build_table(FlatTable("proto.PublishRequest", {"value": b"abc"}))
    # Point the `value` vector's length at 2**32-1: refused, not allocated.
    pos = good.index(b"\x03\x00\x00\x00abc")
    bad = good[:pos] + b"\xff\xff\xff\xff" + good[pos + 4 :]
    with pytest.raises(FlatBufferError, match="outside"):
        read_table(bad, "proto.PublishRequest")
