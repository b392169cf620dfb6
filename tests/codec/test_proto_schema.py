"""spec/proto/*.proto declares exactly the fields and enum values of
Liftbridge's schemas, as listed in tests/data/{fields,enums}.tsv."""

from __future__ import annotations

import csv
from pathlib import Path

from google.protobuf.descriptor import FieldDescriptor as F

from lbparse.codec.payloads import MESSAGE_CLASSES
from lbparse_generated.proto import api_pb2, internal_pb2

DATA = Path(__file__).resolve().parents[1] / "data"
SCALARS = {
    F.TYPE_INT32: "int32",
    F.TYPE_INT64: "int64",
    F.TYPE_UINT32: "uint32",
    F.TYPE_UINT64: "uint64",
    F.TYPE_BOOL: "bool",
    F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes",
    F.TYPE_DOUBLE: "double",
    F.TYPE_FLOAT: "float",
}
FILES = {"api.proto": api_pb2, "server/protocol/internal.proto": internal_pb2}


def _type(f: F) -> str:
    if f.type == F.TYPE_ENUM:
        return f"enum {f.enum_type.full_name}"
    if f.type == F.TYPE_MESSAGE:
        if f.message_type.GetOptions().map_entry:
            k, v = (f.message_type.fields_by_name[n] for n in ("key", "value"))
            return f"map<{_type(k)}, {_type(v)}>"
        return f"message {f.message_type.full_name}"
    return SCALARS[f.type]


def _label(f: F) -> str:
    if f.type == F.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
        return "map"
    return "repeated" if f.is_repeated else "optional"


def _read(name: str) -> list[dict[str, str]]:
    with open(DATA / name, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_every_field_matches() -> None:
    want = {
        (r["message"], r["field"]): (
            r["number"],
            r["type"],
            r["label"],
            r["json_name"],
            r["packed"] == "yes",
        )
        for r in _read("fields.tsv")
    }
    got = {}
    for full_name, cls in MESSAGE_CLASSES.items():
        desc = cls.DESCRIPTOR
        if desc.GetOptions().map_entry:
            continue
        for f in desc.fields:
            packed = f.is_repeated and f.is_packed
            got[(full_name, f.name)] = (str(f.number), _type(f), _label(f), f.json_name, packed)
    assert got == want


def test_every_message_in_its_file_and_package() -> None:
    for r in _read("fields.tsv"):
        desc = MESSAGE_CLASSES[r["message"]].DESCRIPTOR
        assert desc.file is FILES[r["file"]].DESCRIPTOR


def test_every_enum_value_matches() -> None:
    want = {(r["enum"], r["value"]): int(r["number"]) for r in _read("enums.tsv")}
    got = {}
    for mod in FILES.values():
        enums = list(mod.DESCRIPTOR.enum_types_by_name.values())
        enums += [
            e
            for cls in MESSAGE_CLASSES.values()
            for e in cls.DESCRIPTOR.enum_types
            if e.file is mod.DESCRIPTOR
        ]
        for e in enums:
            for v in e.values:
                got[(e.full_name, v.name)] = v.number
    assert got == want
