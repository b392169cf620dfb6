"""What a generated Kaitai parser must say about bytes, judged against lbparse.

Every language's driver (tests/langs/LANG) reads lines `LAYOUT_ID HEX` and
prints one JSON object a line:

    {"ok": true, "version", "header_len", "flags", "msg_type", "crc32c",
     "payload_offset", "payload_len", "commitlog"}
    {"ok": false, "error": "<the runtime's error, with its spec path>"}

`commitlog` is null, or for a v0 ReplicationResponse the payload read with
the commit-log parser: {"ok": true, "leader_epoch", "high_watermark",
"entries": [...]} or {"ok": false, "error"}. 64-bit numbers are decimal
strings (exact in every language). `problems(result, data, layout)` lists
where a result disagrees with `lbparse.decode` of the same bytes.

The Kaitai parser checks what the spec declares (magic, version, header
length, CRC flag, the cookie) and leaves the CRC value, the MsgType table
and the payload schema to its caller; so an lbparse error of one of those
kinds must be a parser error, and any other outcome a successful parse whose
fields equal lbparse's reading of the header. Which kind a parser error is
follows from the spec path in its message (the field's `-error` key), or,
for a read past the end, from the kinds a read past the end can give.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from lbparse import decode, decode_header
from lbparse.codec.commitlog import header_items, parse_replication_response
from lbparse.codec.header import read_header
from lbparse.codec.layouts import layout_named
from lbparse.errors import EnvelopeError
from lbparse_generated.tables import LAYOUTS

ROOT = Path(__file__).resolve().parents[2]
ENVELOPE_KSY = ROOT / "spec" / "envelope.ksy"
VECTORS = ROOT / "tests" / "data" / "vectors.jsonl"
# Kinds a strict Kaitai parser of the spec can see (the header checks).
HEADER_KINDS = frozenset(
    {"too_short", "bad_magic", "unknown_version", "bad_header_len", "crc_missing", "truncated"}
)
_PATH = re.compile(r"/(?:types/(\w+)/)?seq/(\d+)")


@lru_cache(maxsize=1)
def _ksy() -> dict[str, Any]:
    return yaml.safe_load(ENVELOPE_KSY.read_text(encoding="utf-8"))


def eof_kinds() -> frozenset[str]:
    """What running out of bytes is, for some field of the top-level seq.

    The first block (the fixed header) has no `-error` of its own: too
    short; the others say theirs (the cookie, the CRC field, the payload).
    """
    kinds = {"too_short"}
    kinds |= {f["-error"] for f in _ksy()["seq"] if "-error" in f}
    return frozenset(kinds)


def kind_at(path_match: re.Match[str]) -> str | None:
    """The `-error` kind of the field a spec path like /types/header/seq/2 names."""
    type_name, index = path_match.group(1), int(path_match.group(2))
    seq = _ksy()["types"][type_name]["seq"] if type_name else _ksy()["seq"]
    return seq[index].get("-error") if index < len(seq) else None


def error_kinds(message: str) -> frozenset[str]:
    """The kinds a driver's error message can stand for."""
    m = _PATH.search(message)
    if m is None:
        return eof_kinds()
    kind = kind_at(m)
    return frozenset({kind}) if kind else frozenset()


def lbparse_kinds(kind: str) -> frozenset[str]:
    """lbparse's kind, and the spec's `-error` of the check that finds it.

    The CRC flag and the header length are one check, on the flags field:
    a Kaitai parser raises it as that field's error (its `-error`), where
    lbparse says `-error-flag-clear` when the flag is clear.
    """
    kinds = {kind}
    for f in _ksy()["types"]["header"]["seq"]:
        if f.get("-error-flag-clear") == kind:
            kinds.add(f["-error"])
    return frozenset(kinds)


def spec_version() -> int:
    """The one envelope version the spec accepts (read_header has checked it)."""
    field = next(f for f in _ksy()["types"]["header"]["seq"] if f["id"] == "version")
    return int(field["valid"])


def layout_ids() -> dict[str, int]:
    return {name: raw["id"] for name, raw in LAYOUTS.items()}


def vector_cases() -> list[tuple[str, bytes, str]]:
    """(case id, bytes, layout) for every reference vector under every layout."""
    cases = []
    for line in VECTORS.read_text(encoding="utf-8").splitlines():
        vec = json.loads(line)
        data = bytes.fromhex(vec["hex"])
        cases += [(f"{vec['id']}@{lay}", data, lay) for lay in LAYOUTS]
    return cases


def odd_key_cases() -> list[tuple[str, bytes, str]]:
    """(case id, bytes, layout): ReplicationResponses whose header keys are
    not UTF-8. Liftbridge stores such keys (a Go string holds any bytes);
    every language's parser must give their bytes, not refuse the message
    set (the fuzzer's differential target found Python's doing so)."""
    import lbparse
    from lbparse.codec.commitlog import CommitLogEntry, ReplicationResponse

    keys = [b"\xff", b"\xd0\xba\xd0", b"IF\xb9\xbb", b"\xed\xa0\x80", b"ok\x00"]
    cases = []
    for i, key in enumerate(keys):
        entry = CommitLogEntry(
            i,
            5,
            0,
            key=b"k",
            value=b"v",
            headers=[(key.decode("utf-8", "replace"), b"x"), ("ok", b"y")],
            header_keys_raw=[key, b"ok"],
        )
        data = lbparse.encode(
            ReplicationResponse(1, 2, [entry]), msg_type="ReplicationResponse", crc=bool(i % 2)
        )
        cases.append((f"odd-key-{key.hex()}", data, "v0"))
    return cases


def capture_cases(path: Path) -> list[tuple[str, bytes, str]]:
    """(case id, bytes, layout) for each distinct envelope of a capture.

    The layout is the one lbparse's `auto` classified it as; payloads that
    are not envelopes (plain) are left out.
    """
    from lbparse.capture import CaptureReader

    seen: dict[tuple[bytes, str], str] = {}
    for i, rec in enumerate(CaptureReader(path)):
        env = rec.envelope
        if env is None or not layout_named(env.layout).has_header:
            continue
        key = (bytes(rec.payload), env.layout)
        seen.setdefault(key, f"{path.name}#{i}:{rec.subject}")
    return [(case, data, lay) for (data, lay), case in seen.items()]


def driver_input(cases: Iterable[tuple[str, bytes, str]]) -> str:
    ids = layout_ids()
    return "".join(f"{ids[lay]} {data.hex()}\n" for _, data, lay in cases)


def _header(data: bytes, layout: str) -> dict[str, Any]:
    """The header fields as lbparse reads them (no CRC, MsgType or payload check)."""
    lay = layout_named(layout)
    if not lay.has_header:
        offset = decode_header(data, layout).payload_offset
        return {
            "version": None,
            "header_len": None,
            "flags": None,
            "msg_type": None,
            "crc32c": None,
            "payload_offset": offset,
            "payload_len": len(data) - offset,
        }
    hl, flags, crc, byte7, _ = read_header(data, lay, False)
    return {
        "version": spec_version(),
        "header_len": hl,
        "flags": flags,
        "msg_type": byte7,
        "crc32c": crc,
        "payload_offset": hl,
        "payload_len": len(data) - hl,
    }


def expected_commitlog(payload: bytes) -> dict[str, Any]:
    try:
        rr = parse_replication_response(payload)
    except EnvelopeError as exc:
        return {"ok": False, "error": str(exc)}
    hexs = lambda b: None if b is None else b.hex()  # noqa: E731
    return {
        "ok": True,
        "leader_epoch": str(rr.leader_epoch),
        "high_watermark": str(rr.high_watermark),
        "entries": [
            {
                "offset": str(e.offset),
                "timestamp": str(e.timestamp),
                "leader_epoch": str(e.leader_epoch),
                "size": e.size,
                "crc32c": e.crc32c,
                "magic": e.magic,
                "attributes": e.attributes,
                "key": hexs(e.key),
                "value": hexs(e.value),
                "headers": [[k.hex(), v.hex()] for k, v in header_items(e)],
            }
            for e in rr.entries
        ],
    }


def is_replication_response(layout: str, msg_type: int | None) -> bool:
    lay = layout_named(layout)
    mt = lay.msg_types.get(msg_type) if msg_type is not None else None
    return mt is not None and mt.payload_type == "raw"


def problems(result: Any, data: bytes, layout: str) -> list[str]:
    """Where `result` (a driver's line) disagrees with lbparse; [] if nowhere."""
    if not isinstance(result, dict) or "ok" not in result:
        return [f"not a result: {result!r}"]
    try:
        decode(data, layout)
        kind = None
    except EnvelopeError as exc:
        kind = exc.kind
    if kind in HEADER_KINDS:
        if result["ok"]:
            return [f"lbparse: {kind}; the parser accepted the bytes: {result}"]
        said = error_kinds(result["error"])
        if not said & lbparse_kinds(kind):
            return [
                f"lbparse: {kind}; the parser's error stands for {sorted(said)}: {result['error']}"
            ]
        return []
    if not result["ok"]:
        return [
            f"lbparse got past the header ({kind or 'ok'}); the parser failed: {result['error']}"
        ]
    want = _header(data, layout)
    out = [
        f"{k}: parser {result.get(k)!r}, lbparse {v!r}"
        for k, v in want.items()
        if result.get(k) != v
    ]
    if is_replication_response(layout, want["msg_type"]):
        got_cl, want_cl = (
            result.get("commitlog"),
            expected_commitlog(data[want["payload_offset"] :]),
        )
        if not isinstance(got_cl, dict) or got_cl.get("ok") != want_cl["ok"]:
            out.append(f"commit log: parser {got_cl!r}, lbparse {want_cl!r}")
        elif want_cl["ok"] and got_cl != want_cl:
            out.append(f"commit log: parser {got_cl!r}, lbparse {want_cl!r}")
    elif result.get("commitlog") is not None:
        out.append(f"commit log read where lbparse has none: {result['commitlog']!r}")
    return out


def compare(cases: list[tuple[str, bytes, str]], stdout: str) -> Iterator[str]:
    """Every disagreement of a driver's whole output with lbparse, case by case."""
    lines = stdout.splitlines()
    if len(lines) != len(cases):
        yield f"{len(lines)} result lines for {len(cases)} cases"
    for (case, data, layout), line in zip(cases, lines):
        try:
            result = json.loads(line)
        except ValueError:
            yield f"{case}: not JSON: {line[:200]!r}"
            continue
        for p in problems(result, data, layout):
            yield f"{case} ({data[:40].hex()}{'...' if len(data) > 40 else ''}): {p}"
