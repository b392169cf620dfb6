"""The fixed facts of the wire formats, read from the .ksy specs.

lbparse's hand-written fast paths (header checks, the commit-log loop, the
pipeline's numpy scans) need the magic, the cookie, header lengths, the CRC
flag, struct formats and field offsets. They take them from the generated
`lbparse_generated.tables`, which this module computes from spec/*.ksy, so
that none of them is written anywhere else. Every fact is read from the
spec's own declarations (`contents`, `size`, `type`, `valid`, instance
expressions) or from its documented `-` keys, and checked against the
others; a spec whose facts disagree (a header `size` that is not the sum of
its fields, a CRC flag bit that the `valid` check and `has_crc` name
differently) fails generation loudly.
"""

from __future__ import annotations

import re
from typing import Any

# struct's letters for the .ksy integer types (big-endian specs only).
INT_FORMATS = {
    "u1": "B",
    "u2": "H",
    "u4": "I",
    "u8": "Q",
    "s1": "b",
    "s2": "h",
    "s4": "i",
    "s8": "q",
}
INT_SIZES = {t: int(t[1]) for t in INT_FORMATS}


class SpecFactError(ValueError):
    """The spec does not state a fact the way lbparse's generator reads it."""


def _contents(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("ascii")
    if isinstance(value, list) and all(isinstance(b, int) for b in value):
        return bytes(value)
    raise SpecFactError(f"contents {value!r}: expected a string or a list of byte values")


def _fixed_size(field: dict[str, Any]) -> tuple[int, str] | None:
    """(size, struct letter(s)) of a field whose size never varies, else None."""
    if "if" in field or "repeat" in field:
        return None
    if "contents" in field:
        n = len(_contents(field["contents"]))
        return n, f"{n}s"
    if field.get("type") in INT_FORMATS and "size" not in field:
        t = field["type"]
        return INT_SIZES[t], INT_FORMATS[t]
    return None


def fixed_prefix(seq: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of fixed-size fields a type starts with: its struct format
    (big-endian), total size, and each field's (offset, size, format)."""
    fmt, offset, fields = ">", 0, {}
    for field in seq:
        fixed = _fixed_size(field)
        if fixed is None:
            break
        size, letters = fixed
        fields[field["id"]] = (offset, size, ">" + letters)
        fmt += letters
        offset += size
    return {"format": fmt, "size": offset, "fields": fields}


def int_formats(seq: list[dict[str, Any]]) -> dict[str, str]:
    """The struct format of every integer field of a type, wherever it is."""
    return {f["id"]: ">" + INT_FORMATS[f["type"]] for f in seq if f.get("type") in INT_FORMATS}


def type_paths(ksy: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """`root` and `root::type` -> seq, for the root and every declared type."""
    root = ksy["meta"]["id"]
    out = {root: ksy.get("seq", [])}
    for name, decl in ksy.get("types", {}).items():
        out[f"{root}::{name}"] = decl.get("seq", [])
    return out


def structs(ksys: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Fixed prefix and integer formats of every type of every spec."""
    out = {}
    for ksy in ksys:
        if ksy["meta"].get("endian") != "be":
            raise SpecFactError(f"{ksy['meta']['id']}: only big-endian specs are supported")
        for path, seq in type_paths(ksy).items():
            entry = fixed_prefix(seq)
            entry["ints"] = int_formats(seq)
            out[path] = entry
    return out


def _field(seq: list[dict[str, Any]], name: str, where: str) -> dict[str, Any]:
    for f in seq:
        if f["id"] == name:
            return f
    raise SpecFactError(f"{where}: no field {name!r}")


# The two forms the envelope spec states the CRC flag in; anything else is
# refused rather than guessed at.
_HAS_CRC = re.compile(r"^\s*flags\s*&\s*(\d+)\s*!=\s*0\s*$")
_PAIRING = re.compile(r"^\s*\(\(_\s*&\s*(\d+)\)\s*!=\s*0\)\s*==\s*\(header_len\s*==\s*(\d+)\)\s*$")
_AT_LEAST = re.compile(r"^\s*_\s*>=\s*(-?\d+)\s*$")


def envelope_facts(ksy: dict[str, Any]) -> dict[str, Any]:
    """Magic, cookie, header sizes, CRC flag and the errors of its checks."""
    where = "spec/envelope.ksy"
    header_t = ksy["types"]["header"]
    hseq = header_t["seq"]
    top = ksy["seq"]
    header = fixed_prefix(hseq)
    if len(header["fields"]) != len(hseq):
        raise SpecFactError(f"{where}: the header type has fields of variable size")
    declared = _field(top, "header", where).get("size")
    if declared != header["size"]:
        raise SpecFactError(
            f"{where}: header size {declared} but its fields add up to {header['size']}"
        )
    header_lens = _field(hseq, "header_len", where)["valid"]["any-of"]
    flags = _field(hseq, "flags", where)
    pairing = _PAIRING.match(str(flags["valid"]["expr"]))
    has_crc = _HAS_CRC.match(str(header_t["instances"]["has_crc"]["value"]))
    if pairing is None or has_crc is None:
        raise SpecFactError(
            f"{where}: the CRC flag is not stated as `flags & BIT != 0` and "
            "`((_ & BIT) != 0) == (header_len == LEN)`"
        )
    crc_flag, crc_header_len = int(pairing.group(1)), int(pairing.group(2))
    if int(has_crc.group(1)) != crc_flag:
        raise SpecFactError(
            f"{where}: has_crc tests bit {has_crc.group(1)}, the flags check bit {crc_flag}"
        )
    crc = _field(top, "crc32c", where)
    crc_size = INT_SIZES[crc["type"]]
    if crc_header_len != header["size"] + crc_size:
        raise SpecFactError(
            f"{where}: header_len {crc_header_len} with the CRC flag, but the "
            f"header ({header['size']}) and crc32c ({crc_size}) make "
            f"{header['size'] + crc_size}"
        )
    if sorted(header_lens) != sorted({header["size"], crc_header_len}):
        raise SpecFactError(
            f"{where}: header_len any-of {header_lens} is not the header size "
            "with and without the CRC"
        )
    if "-error-flag-clear" not in flags:
        raise SpecFactError(
            f"{where}: flags needs `-error-flag-clear`, the error kind of a "
            "CRC-sized header_len without the CRC flag"
        )
    version = _field(hseq, "version", where).get("valid")
    if not isinstance(version, int):
        raise SpecFactError(f"{where}: header.version needs `valid: N`, the one version defined")
    return {
        "MAGIC": _contents(_field(hseq, "magic", where)["contents"]),
        "VERSION": version,
        "COOKIE": _contents(_field(top, "cookie", where)["contents"]),
        "HEADER_SIZE": header["size"],
        "HEADER_LENS": tuple(sorted(header_lens)),
        "CRC_FLAG": crc_flag,
        "CRC_HEADER_LEN": crc_header_len,
        "CRC_OFFSET": header["size"],
        "CRC_FORMAT": ">" + INT_FORMATS[crc["type"]],
        "CRC_PAIRING_ERRORS": {
            "flag_set": flags["-error"],
            "flag_clear": flags["-error-flag-clear"],
        },
    }


def commitlog_facts(ksy: dict[str, Any]) -> dict[str, Any]:
    """The nil length of keys and values, and the columns an entry flattens to."""
    where = "spec/commitlog.ksy"
    body = ksy["types"]["body"]["seq"]
    nil = set()
    for name in ("key_len", "value_len"):
        m = _AT_LEAST.match(str(_field(body, name, where).get("valid", {}).get("expr", "")))
        if m is None:
            raise SpecFactError(f"{where}: body.{name} needs `valid: expr: _ >= NIL`")
        nil.add(int(m.group(1)))
    if len(nil) != 1:
        raise SpecFactError(f"{where}: key_len and value_len disagree on nil: {sorted(nil)}")
    return {"NIL_LENGTH": nil.pop(), "REPLICATION_RESPONSE_FIELDS": value_fields(ksy)}


def _lengths(ksy: dict[str, Any], seq: list[dict[str, Any]]) -> set[str]:
    """Fields that only give the length of a byte string or the count of a
    list, both of which the values carry. (The size of a sub-type that is
    flattened into its parent is kept: the flattened values do not say it.)"""
    used = set()
    for f in seq:
        flattened = f.get("type") in ksy["types"] and not f.get("repeat")
        for key in ("size", "repeat-expr"):
            if isinstance(f.get(key), str) and not (key == "size" and flattened):
                used.add(f[key])
    return used


def _value_fields(ksy: dict[str, Any], type_name: str | None) -> list[tuple[str, Any]]:
    """(name, ksy type) of a type's values (None: the root's): lengths and
    counts left out, sub-types flattened, repeated ones as lists of their values."""
    seq = ksy["types"][type_name]["seq"] if type_name else ksy["seq"]
    skip = _lengths(ksy, seq)
    out: list[tuple[str, Any]] = []
    for f in seq:
        if f["id"] in skip:
            continue
        t = f.get("type")
        if t in ksy["types"]:
            inner = _value_fields(ksy, t)
            if f.get("repeat"):
                out.append((f["id"], inner))
            else:
                out += inner
        elif t == "str" or f.get("-text") == "go-utf8":
            out.append((f["id"], "str"))
        elif t is None:
            out.append((f["id"], "bytes"))
        else:
            out.append((f["id"], t))
    return out


def value_fields(ksy: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The root type as named values (the pipeline's struct of a
    ReplicationResponse): (name, ksy type), or (name, fields) for a list."""

    def freeze(v: Any) -> Any:
        return tuple((n, freeze(t)) for n, t in v) if isinstance(v, list) else v

    return tuple((n, freeze(t)) for n, t in _value_fields(ksy, None))
