"""hypothesis strategies for every payload type, derived from the descriptors."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor import FieldDescriptor as F
from hypothesis import strategies as st

from lbparse.codec.commitlog import CommitLogEntry, ReplicationResponse
from lbparse.codec.flatbuf import FlatTable
from lbparse.codec.layouts import LAYOUTS
from lbparse.codec.payloads import BYTES, CODECS, REPLICATION_RESPONSE, message_class
from lbparse_generated.fb_schema import ENUMS, TABLES

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
INTS = {
    F.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    F.TYPE_SINT32: st.integers(-(2**31), 2**31 - 1),
    F.TYPE_SFIXED32: st.integers(-(2**31), 2**31 - 1),
    F.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    F.TYPE_SINT64: st.integers(-(2**63), 2**63 - 1),
    F.TYPE_SFIXED64: st.integers(-(2**63), 2**63 - 1),
    F.TYPE_UINT32: st.integers(0, 2**32 - 1),
    F.TYPE_FIXED32: st.integers(0, 2**32 - 1),
    F.TYPE_UINT64: st.integers(0, 2**64 - 1),
    F.TYPE_FIXED64: st.integers(0, 2**64 - 1),
}


def _scalar(f: F, depth: int) -> st.SearchStrategy[Any]:
    if f.type in INTS:
        return INTS[f.type]
    if f.type == F.TYPE_BOOL:
        return st.booleans()
    if f.type == F.TYPE_STRING:
        return TEXT
    if f.type == F.TYPE_BYTES:
        return st.binary(max_size=16)
    if f.type == F.TYPE_ENUM:
        return st.sampled_from([v.number for v in f.enum_type.values])
    if f.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        return st.floats(allow_nan=False, width=32)
    if f.type == F.TYPE_MESSAGE:
        return messages(f.message_type, depth + 1)
    raise AssertionError(f"no strategy for field type {f.type}")


def _is_map(f: F) -> bool:
    return f.type == F.TYPE_MESSAGE and f.message_type.GetOptions().map_entry


def messages(desc: Descriptor, depth: int = 0) -> st.SearchStrategy[Any]:
    """Random messages of `desc`, nested at most three deep."""
    cls = message_class(desc.full_name)
    if depth > 2:
        return st.just(cls())
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in desc.fields:
        if _is_map(f):
            k, v = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            fields[f.name] = st.dictionaries(_scalar(k, depth), _scalar(v, depth), max_size=3)
        elif f.is_repeated:
            fields[f.name] = st.lists(_scalar(f, depth), max_size=3)
        else:
            fields[f.name] = _scalar(f, depth)

    @st.composite
    def build(draw: Any) -> Any:
        msg = cls()
        for name in draw(st.sets(st.sampled_from(sorted(fields)))) if fields else ():
            value = draw(fields[name])
            target = getattr(msg, name)
            if isinstance(value, dict):
                for key, item in value.items():
                    if hasattr(item, "DESCRIPTOR"):
                        target[key].CopyFrom(item)
                    else:
                        target[key] = item
            elif isinstance(value, list):
                target.extend(value)
            elif hasattr(value, "DESCRIPTOR"):
                target.CopyFrom(value)
            else:
                setattr(msg, name, value)
        return msg

    return build()


def _opt_bytes() -> st.SearchStrategy[bytes | None]:
    return st.none() | st.binary(max_size=24)


ENTRIES = st.builds(
    CommitLogEntry,
    offset=st.integers(0, 2**64 - 1),
    timestamp=st.integers(-(2**63), 2**63 - 1),
    leader_epoch=st.integers(0, 2**64 - 1),
    key=_opt_bytes(),
    value=_opt_bytes(),
    headers=st.lists(st.tuples(TEXT, st.binary(max_size=8)), max_size=3),
)
REPLICATION_RESPONSES = st.builds(
    ReplicationResponse,
    leader_epoch=st.integers(0, 2**64 - 1),
    high_watermark=st.integers(-(2**63), 2**63 - 1),
    entries=st.lists(ENTRIES, max_size=4),
)


_FB_SCALARS = {"uint32": st.integers(0, 2**32 - 1), "int64": st.integers(-(2**63), 2**63 - 1)}


def flat_tables(type_name: str, depth: int = 0) -> st.SearchStrategy[FlatTable]:
    """Random FlatBuffers tables: any subset of the fields, each any value."""

    def value(ftype: str) -> st.SearchStrategy[Any]:
        if ftype == "string":
            return TEXT
        if ftype == "[ubyte]":
            return st.binary(max_size=16)
        if ftype.startswith("enum "):
            return st.sampled_from(sorted(ENUMS[ftype[5:]]["values"]))
        if ftype.startswith("["):
            return st.lists(flat_tables(ftype[1:-1], depth + 1), max_size=3)
        return _FB_SCALARS[ftype]

    fields = {name: value(ftype) for _, name, ftype in TABLES[type_name]}
    return st.builds(
        lambda chosen: FlatTable(type_name, chosen), st.fixed_dictionaries({}, optional=fields)
    )


def payloads(payload_type: str, layout: str = "v0") -> st.SearchStrategy[Any]:
    """Random payload objects of a type, as the layout encodes it."""
    if payload_type == REPLICATION_RESPONSE:
        return REPLICATION_RESPONSES
    if payload_type == BYTES:
        return st.binary(max_size=32)
    codec = CODECS[LAYOUTS[layout].codec_key(payload_type)]
    if codec.python_type is FlatTable:
        return flat_tables(payload_type)
    return messages(codec.python_type.DESCRIPTOR)
