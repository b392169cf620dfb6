"""The struct columns: Spark's from_protobuf schema rules, and its values.

A synthetic message with every kind of field checks the rules of
spark-protobuf's SchemaConverters (types, arrays without null elements,
maps without null values, empty messages dropped, recursion refused) and
the values both decoders give (proto3 zeros are null, enums by name,
unsigned wrap to signed).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import ArrayType, MapType

from lbparse.columnar.columns import StructBuilder
from lbparse.columnar.schema import message_type, typed_payloads
from lbparse.columnar.wirescan import decode_structs
from lbparse.pipeline.spark_schema import message_struct, output_schema, payload_columns

F = descriptor_pb2.FieldDescriptorProto


def _pool() -> descriptor_pool.DescriptorPool:
    fdp = descriptor_pb2.FileDescriptorProto(name="t.proto", package="t", syntax="proto3")
    fdp.enum_type.add(
        name="E",
        value=[
            descriptor_pb2.EnumValueDescriptorProto(name=n, number=i)
            for i, n in enumerate(("ZERO", "ONE", "TWO"))
        ],
    )
    fdp.message_type.add(name="Empty")
    fdp.message_type.add(name="Inner").field.add(
        name="x", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL
    )
    node = fdp.message_type.add(name="Node")
    node.field.add(
        name="next", number=1, type=F.TYPE_MESSAGE, type_name=".t.Node", label=F.LABEL_OPTIONAL
    )
    m = fdp.message_type.add(name="All")
    entry = m.nested_type.add(name="JEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    for name, number, typ, label, type_name in (
        ("a", 1, F.TYPE_INT32, F.LABEL_OPTIONAL, None),
        ("b", 2, F.TYPE_UINT32, F.LABEL_OPTIONAL, None),
        ("c", 3, F.TYPE_UINT64, F.LABEL_OPTIONAL, None),
        ("d", 4, F.TYPE_SINT64, F.LABEL_OPTIONAL, None),
        ("e", 5, F.TYPE_BOOL, F.LABEL_OPTIONAL, None),
        ("f", 6, F.TYPE_STRING, F.LABEL_OPTIONAL, None),
        ("g", 7, F.TYPE_BYTES, F.LABEL_OPTIONAL, None),
        ("h", 8, F.TYPE_ENUM, F.LABEL_OPTIONAL, ".t.E"),
        ("i", 9, F.TYPE_INT32, F.LABEL_REPEATED, None),
        ("j", 10, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".t.All.JEntry"),
        ("k", 11, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".t.Empty"),
        ("l", 12, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".t.Inner"),
        ("m", 13, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".t.Inner"),
        ("n", 14, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, None),
        ("o", 15, F.TYPE_FLOAT, F.LABEL_OPTIONAL, None),
        ("p", 16, F.TYPE_FIXED32, F.LABEL_OPTIONAL, None),
        ("q", 17, F.TYPE_SINT32, F.LABEL_OPTIONAL, None),
        ("r", 18, F.TYPE_STRING, F.LABEL_REPEATED, None),
    ):
        fd = m.field.add(name=name, number=number, type=typ, label=label)
        if type_name:
            fd.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return pool


POOL = _pool()
ALL = POOL.FindMessageTypeByName("t.All")
All = message_factory.GetMessageClass(ALL)


def test_types_follow_spark_protobuf() -> None:
    s = message_struct(ALL)
    assert s.simpleString() == (
        "struct<a:int,b:int,c:bigint,d:bigint,e:boolean,f:string,g:binary,h:string,"
        "i:array<int>,j:map<string,bigint>,l:struct<x:string>,m:array<struct<x:string>>,"
        "n:double,o:float,p:int,q:int,r:array<string>>"
    )  # k: an empty message is dropped
    by = {f.name: f for f in s.fields}
    assert isinstance(by["i"].dataType, ArrayType) and not by["i"].dataType.containsNull
    assert isinstance(by["j"].dataType, MapType) and not by["j"].dataType.valueContainsNull
    assert all(f.nullable for f in s.fields)


def test_recursive_messages_are_refused() -> None:
    with pytest.raises(ValueError, match="contains itself"):
        message_struct(POOL.FindMessageTypeByName("t.Node"))


def test_output_has_a_struct_per_payload_type() -> None:
    names = output_schema().names
    assert names[:2] == ["source", "position"]
    for col in payload_columns().values():
        assert col in names
    assert output_schema()["proto_Message"].dataType.simpleString() == (
        "struct<offset:bigint,key:binary,value:binary,timestamp:bigint,stream:string,"
        "partition:int,subject:string,replySubject:string,headers:map<string,binary>,"
        "ackInbox:string,correlationId:string,ackPolicy:string>"
    )


def test_the_arrow_type_of_the_spark_struct_is_the_columnar_one() -> None:
    """The Arrow type the C reader fills (lbparse.columnar.schema.message_type) is
    the one Spark's struct converts to: tests that use the first stand for the
    second without starting pyspark."""
    classes = [cls for cls in typed_payloads().values() if cls is not None]
    assert len(classes) > 10
    for desc in [ALL, *(cls.DESCRIPTOR for cls in classes)]:
        assert to_arrow_type(message_struct(desc)) == message_type(desc), desc.full_name


def _both(msgs: list[Any], emit: bool = False) -> list[Any]:
    """The values of both decoders, which must agree."""
    typ = to_arrow_type(message_struct(ALL))
    wires = [m.SerializeToString() for m in msgs]
    ends = np.cumsum([len(w) for w in wires]).astype(np.int64)
    starts = ends - np.array([len(w) for w in wires], np.int64)
    data = np.frombuffer(b"".join(wires) + b"\0", np.uint8)
    scanned, ok = decode_structs(ALL, typ, data, starts, ends, emit)
    built = StructBuilder(ALL, typ, emit).build(msgs).to_pylist()
    for i, good in enumerate(ok):
        if good:
            assert scanned[i].as_py() == built[i]
    return built


def test_values_follow_from_protobuf() -> None:
    full = All(
        a=-5,
        b=2**32 - 1,
        c=2**64 - 1,
        d=-3,
        e=True,
        f="ü",
        g=b"\0",
        h=7,
        i=[0, 3],
        n=-0.0,
        o=1.5,
        p=2**32 - 2,
        q=-9,
        r=["", "x"],
    )
    full.j["k"] = 0
    full.l.x = ""  # present, with only zero fields
    full.m.add(x="y")
    zero = All()
    got, empty = _both([full, zero])
    assert got == {
        "a": -5,
        "b": -1,
        "c": -1,
        "d": -3,
        "e": True,
        "f": "ü",
        "g": b"\0",
        "h": "UNKNOWN_ENUM_VALUE_E_7",
        "i": [0, 3],
        "j": [("k", 0)],
        "l": {"x": None},
        "m": [{"x": "y"}],
        "n": -0.0,
        "o": 1.5,
        "p": -2,
        "q": -9,
        "r": ["", "x"],
    }
    assert empty == {
        "a": None,
        "b": None,
        "c": None,
        "d": None,
        "e": None,
        "f": None,
        "g": None,
        "h": None,
        "i": [],
        "j": [],
        "l": None,
        "m": [],
        "n": None,
        "o": None,
        "p": None,
        "q": None,
        "r": [],
    }
    (kept,) = _both([zero], emit=True)
    assert (kept["a"], kept["f"], kept["h"], kept["l"]) == (0, "", "ZERO", None)
