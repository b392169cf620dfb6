"""ReplicationResponse payloads and the commit-log message set.

Declared in spec/commitlog.ksy. Decoding is a hand-written `struct` loop
(the hot path; the Kaitai and construct parsers of the same spec check it
in the tests); encoding goes through the generated construct declaration.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import crc32c as _crc32c

from lbparse.codec.jsonform import Int64, int64
from lbparse.codec.wire import (
    BODY_HEAD,
    ENTRY_HEAD,
    NIL_LENGTH,
    REPLICATION_PREFIX,
    REPLICATION_RESPONSE_FIELDS,
    int_struct,
)
from lbparse.errors import EnvelopeError, InputError
from lbparse_generated import construct_schema as _cs

__all__ = ["CommitLogEntry", "ReplicationResponse", "parse_replication_response"]

# Struct formats and sizes from spec/commitlog.ksy (through lbparse.codec.wire).
_PREFIX = ENTRY_HEAD.struct  # offset, timestamp, leader_epoch, size
_BODY_HEAD = BODY_HEAD.struct  # crc32c, magic, attributes, key_len
_KEY_LEN = int_struct("liftbridge_commitlog::body", "key_len")
_VALUE_LEN = int_struct("liftbridge_commitlog::body", "value_len")
_HEADER_COUNT = int_struct("liftbridge_commitlog::body", "header_count")
_HKEY_LEN = int_struct("liftbridge_commitlog::header", "key_len")
_HVALUE_LEN = int_struct("liftbridge_commitlog::header", "value_len")
_RR_HEAD = REPLICATION_PREFIX.struct  # leader_epoch, high_watermark
RR_MIN = _RR_HEAD.size
# The shortest body: its fixed head, a nil value's length, no headers.
_BODY_MIN = _BODY_HEAD.size + _VALUE_LEN.size + _HEADER_COUNT.size
# Where the body's CRC-32C stops and what it covers starts.
_CRC_END = BODY_HEAD.fields["crc32c"].size


# Which of an entry's and a response's integers are 64-bit (spec/commitlog.ksy):
# JSON holds those as decimal strings (lbparse.codec.jsonform).
_INT64_TYPES = ("u8", "s8")
_RESPONSE_INT64 = frozenset(n for n, t in REPLICATION_RESPONSE_FIELDS if t in _INT64_TYPES)
_ENTRY_INT64 = frozenset(
    n for n, t in dict(REPLICATION_RESPONSE_FIELDS)["entries"] if t in _INT64_TYPES
)
ENTRY_INT64 = _ENTRY_INT64  # for JSON writers of entry fields read otherwise (segments' damage)


def _unhex(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError("bad_json", f"{what} is {value!r}, not a hex string or null")
    return bytes.fromhex(value)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass
class CommitLogEntry:
    """One stored message; `key`/`value` are None when nil (length -1).

    `crc32c` and `size` are what was read (None for an entry made in code);
    they follow from the rest, so equality ignores them and encoding
    computes them afresh. `crc_ok` says whether the stored CRC matched the
    body (None if not read from bytes).

    Attributes:
        offset: The message's offset in its partition.
        timestamp: Its time, nanoseconds since the Unix epoch.
        leader_epoch: The leader epoch it was written in.
        key: The key's bytes, None when nil.
        value: The value's bytes, None when nil.
        headers: (key, value) pairs in stored order.
        magic: The entry format's magic byte.
        attributes: The attributes byte.
        crc32c: The stored CRC-32C of the body, None for an entry made in code.
        size: The stored size of the body, None for an entry made in code.
        header_keys_raw: Each header key's bytes when one of them is not UTF-8
            (`headers` has such a key as Liftbridge reads it, U+FFFD per bad
            byte); None otherwise.
    """

    offset: int
    timestamp: int
    leader_epoch: int
    key: bytes | None = None
    value: bytes | None = b""
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    magic: int = 1
    attributes: int = 0
    crc32c: int | None = field(default=None, compare=False)
    size: int | None = field(default=None, compare=False)
    # Set by the readers (lbparse.storage's C scanner too, by this name).
    _crc_ok: bool | None = field(default=None, init=False, compare=False, repr=False)
    # Each header key's bytes, when one of them is not UTF-8 (None otherwise):
    # `headers` has such a key as Liftbridge reads it, U+FFFD per bad byte.
    header_keys_raw: list[bytes] | None = field(default=None, compare=False, repr=False)

    @property
    def crc_ok(self) -> bool | None:
        """Whether the stored body CRC matched, None if not read from bytes."""
        return self._crc_ok

    def to_json_dict(self) -> dict[str, Any]:
        """The reference vectors' `commitlog_messages` shape (64-bit fields as Int64).

        Returns:
            A JSON-ready dict: key, value and header values in hex, the 64-bit
            fields as Int64 (written as decimal strings).
        """
        d: dict[str, Any] = {
            "attributes": self.attributes,
            "crc32c": self.crc32c,
            "headers_hex": {k: v.hex() for k, v in self.headers},
            "key_hex": None if self.key is None else self.key.hex(),
            "leader_epoch": self.leader_epoch,
            "magic": self.magic,
            "offset": self.offset,
            "size": self.size,
            "timestamp": self.timestamp,
            "value_hex": None if self.value is None else self.value.hex(),
        }
        for name in _ENTRY_INT64:
            d[name] = Int64(d[name])
        return d

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> CommitLogEntry:
        """Inverse of `to_json_dict`; 64-bit fields as decimal strings or numbers.

        Args:
            d: The entry's JSON object; absent fields take their defaults.

        Returns:
            The entry.

        Raises:
            InputError: `d` is not an object, or a field is not what its name
                says (hex strings, integers in range).
        """
        if not isinstance(d, dict):
            raise InputError("bad_json", f"a commit-log entry is a JSON object, not {d!r}")
        headers = d.get("headers_hex") or {}
        if not isinstance(headers, dict):
            raise InputError(
                "bad_json", f"headers_hex is {headers!r}, not an object of hex strings"
            )
        opt = d.get
        return cls(
            offset=int64(opt("offset", 0), "offset"),
            timestamp=int64(opt("timestamp", 0), "timestamp"),
            leader_epoch=int64(opt("leader_epoch", 0), "leader_epoch"),
            key=_unhex(opt("key_hex"), "key_hex"),
            value=_unhex(opt("value_hex", ""), "value_hex"),
            headers=[(str(k), _unhex(v, f"header {k}") or b"") for k, v in headers.items()],
            magic=int(opt("magic", 1)),
            attributes=int(opt("attributes", 0)),
            crc32c=_optional_int(opt("crc32c")),
            size=_optional_int(opt("size")),
        )

    def __eq__(self, other: object) -> bool:
        # crc32c, size and crc_ok are derived from the rest (compare=False):
        # entries that differ only in whether those were read are equal.
        if not isinstance(other, CommitLogEntry):
            return NotImplemented
        return (
            self.offset,
            self.timestamp,
            self.leader_epoch,
            self.key,
            self.value,
            list(self.headers),
            self.magic,
            self.attributes,
        ) == (
            other.offset,
            other.timestamp,
            other.leader_epoch,
            other.key,
            other.value,
            list(other.headers),
            other.magic,
            other.attributes,
        )


@dataclass
class ReplicationResponse:
    """The payload of MsgType 3: leader epoch, high watermark, entries.

    `data` keeps the entries' bytes as read, so that JSON (`data_hex`) and
    re-encoding give them back exactly, even where they are not what
    encoding the entries afresh would give; it is used only while it still
    holds `entries`.

    Attributes:
        leader_epoch: The leader's epoch.
        high_watermark: The partition's high watermark.
        entries: The commit-log entries the response carries.
        data: The entries' bytes as read; None for a response made in code.
    """

    leader_epoch: int
    high_watermark: int
    entries: list[CommitLogEntry] = field(default_factory=list)
    data: bytes | None = field(default=None, compare=False, repr=False)

    def entries_bytes(self) -> bytes:
        """The commit-log message set: `data` while it holds `entries`, else encoded.

        Returns:
            The message set's bytes (what follows epoch and high watermark).
        """
        if self.data is not None and parse_entries(self.data) == self.entries:
            return self.data
        return encode_entries(self.entries)

    def to_json_dict(self) -> dict[str, Any]:
        """The reference vectors' `payload_json` of a ReplicationResponse.

        Returns:
            {"leader_epoch", "high_watermark", "data_hex"}, the 64-bit fields as
            Int64 (written as decimal strings).
        """
        d: dict[str, Any] = {
            "leader_epoch": self.leader_epoch,
            "high_watermark": self.high_watermark,
            "data_hex": self.entries_bytes().hex(),
        }
        for name in _RESPONSE_INT64:
            d[name] = Int64(d[name])
        return d

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> ReplicationResponse:
        """Inverse of `to_json_dict`.

        Takes {"leader_epoch", "high_watermark", "data_hex"}. Instead of
        `data_hex`, `entries` may list the entries as `CommitLogEntry.to_json_dict`
        writes them (the envelope JSON's `commitlog_messages`).

        Args:
            d: The response's JSON object.

        Returns:
            The response; with `data_hex`, its `data` is those bytes.

        Raises:
            InputError: `d` is not an object, a field is not what its name says,
                `data_hex` is not a commit-log message set, or it disagrees with
                `entries`.
        """
        if not isinstance(d, dict):
            raise InputError("bad_json", f"a ReplicationResponse is a JSON object, not {d!r}")
        epoch = int64(d.get("leader_epoch", 0), "leader_epoch")
        hw = int64(d.get("high_watermark", 0), "high_watermark")
        listed = d.get("entries")
        if listed is not None and not isinstance(listed, list):
            raise InputError("bad_json", f"entries is {listed!r}, not a list of entries")
        entries = [CommitLogEntry.from_json_dict(e) for e in listed or []]
        if d.get("data_hex") is None:
            return cls(epoch, hw, entries)
        data = _unhex(d["data_hex"], "data_hex") or b""
        try:
            read = parse_entries(data)
        except EnvelopeError as exc:
            raise InputError(
                "bad_json", f"data_hex is not a commit-log message set: {exc}"
            ) from None
        if listed is not None and read != entries:
            raise InputError("bad_json", "data_hex and entries disagree; give one of them")
        return cls(epoch, hw, read, data=data)


def _go_replace(exc: UnicodeError) -> tuple[str, int]:
    """U+FFFD for each byte that is not UTF-8, as Go turns a string into
    JSON (encoding/json; utf8.DecodeRuneInString gives width 1 to each)."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "\ufffd" * (exc.end - exc.start), exc.end


GO_REPLACE = "lbparse.go-replace"
codecs.register_error(GO_REPLACE, _go_replace)


def _bad(msg: str, offset: int) -> EnvelopeError:
    return EnvelopeError(
        "bad_payload", f"ReplicationResponse: {msg} at payload offset {offset}", offset=offset
    )


def sized_field(buf: bytes, pos: int, end: int, length: int, what: str) -> tuple[bytes, int]:
    """buf[pos:pos+length] and the position after it; bad_payload past `end`."""
    return _sized(buf, pos, end, length, what)


def _sized(buf: bytes, pos: int, end: int, length: int, what: str) -> tuple[bytes, int]:
    if length < 0 or pos + length > end:
        raise _bad(f"{what} length {length} runs past the entry body (ends at {end})", pos)
    return buf[pos : pos + length], pos + length


def _parse_body(
    buf: bytes,
    pos: int,
    end: int,
    entry: CommitLogEntry,
    crc: Callable[[bytes], int] = _crc32c.crc32c,
) -> int:
    if end - pos < _BODY_MIN:
        raise _bad(f"entry body is {end - pos} bytes, needs at least {_BODY_MIN}", pos)
    entry.crc32c, entry.magic, entry.attributes, klen = _BODY_HEAD.unpack_from(buf, pos)
    p = pos + _BODY_HEAD.size
    if klen != NIL_LENGTH:
        entry.key, p = _sized(buf, p, end, klen, "key")
    stop = parse_value_and_headers(buf, p, end, entry)
    # The CRC once the body is known to be whole: lbparse.storage's resync
    # tries an entry at every position, and a body that is no entry must
    # cost no pass over the (attacker-declared) rest of the file.
    entry._crc_ok = crc(buf[pos + _CRC_END : end]) == entry.crc32c
    return stop


# lbparse.storage reads the bodies of segment files with it too.
parse_body = _parse_body


def parse_key_and_rest(
    buf: bytes, p: int, end: int, entry: CommitLogEntry, headers: bool = True
) -> int:
    """The body from its key on (key, value, headers); returns where its fields end.

    For lbparse.storage: the first segment generations put a timestamp
    between the attributes and the key.
    """
    if p + _KEY_LEN.size > end:
        raise _bad("key length runs past the entry body", p)
    (klen,) = _KEY_LEN.unpack_from(buf, p)
    p += _KEY_LEN.size
    entry.key = None
    if klen != NIL_LENGTH:
        entry.key, p = _sized(buf, p, end, klen, "key")
    return parse_value_and_headers(buf, p, end, entry, headers)


def parse_value_and_headers(
    buf: bytes, p: int, end: int, entry: CommitLogEntry, headers: bool = True
) -> int:
    """The body after the key: value, then (when `headers`) the headers.

    Returns where the body's fields end (`end` unless bytes are left over,
    which Liftbridge ignores). Shared with lbparse.storage, whose older
    segment generations put a timestamp before the key and, in the first
    one, headers only on some messages.
    """
    if p + _VALUE_LEN.size > end:
        raise _bad("value length runs past the entry body", p)
    (vlen,) = _VALUE_LEN.unpack_from(buf, p)
    p += _VALUE_LEN.size
    entry.value = None
    if vlen != NIL_LENGTH:
        entry.value, p = _sized(buf, p, end, vlen, "value")
    if not headers:
        return p
    if p + _HEADER_COUNT.size > end:
        raise _bad("header count runs past the entry body", p)
    (count,) = _HEADER_COUNT.unpack_from(buf, p)
    p += _HEADER_COUNT.size
    found = []
    raw: list[bytes] | None = None  # the keys' bytes, once one is not UTF-8
    for _ in range(max(count, 0)):
        if p + _HKEY_LEN.size > end:
            raise _bad("header key length runs past the entry body", p)
        (hklen,) = _HKEY_LEN.unpack_from(buf, p)
        hkey, p = _sized(buf, p + _HKEY_LEN.size, end, hklen, "header key")
        if p + _HVALUE_LEN.size > end:
            raise _bad("header value length runs past the entry body", p)
        (hvlen,) = _HVALUE_LEN.unpack_from(buf, p)
        hval, p = _sized(buf, p + _HVALUE_LEN.size, end, hvlen, "header value")
        try:
            found.append((hkey.decode("utf-8"), hval))
        except UnicodeDecodeError:
            found.append((hkey.decode("utf-8", GO_REPLACE), hval))
            raw = [k.encode() for k, _ in found[:-1]] if raw is None else raw
        if raw is not None:
            raw.append(hkey)
    entry.headers = found
    entry.header_keys_raw = raw
    return p


def scan_entries(
    buf: bytes,
    pos: int,
    end: int,
    entries: list[CommitLogEntry],
    positions: list[int] | None = None,
    crc: Callable[[bytes], int] = _crc32c.crc32c,
) -> None:
    """Append the entries of buf[pos:end] to `entries` (their starts to `positions`).

    Raises EnvelopeError at the first entry that is not whole, after
    appending every entry before it: a reader of damaged data knows where
    the good part ends. `crc` is the body checksum (CRC-32C since Feb 2020;
    lbparse.storage passes CRC-32 for older segments).
    """
    append = entries.append
    note = positions.append if positions is not None else None
    unpack = _PREFIX.unpack_from
    head = _PREFIX.size
    size_at = ENTRY_HEAD.offset("size")
    while pos < end:
        if end - pos < head:
            raise _bad(f"{end - pos} bytes left, an entry header needs {head}", pos)
        offset, ts, epoch, size = unpack(buf, pos)
        body = pos + head
        if size > end - body:
            raise _bad(f"entry size {size} but only {end - body} bytes follow", pos + size_at)
        entry = CommitLogEntry(offset, ts, epoch, size=size)
        _parse_body(buf, body, body + size, entry, crc)
        append(entry)
        if note is not None:
            note(pos)
        pos = body + size


def parse_entries(buf: bytes, pos: int = 0) -> list[CommitLogEntry]:
    """Parse commit-log entries back to back from `pos` to the end of `buf`."""
    entries: list[CommitLogEntry] = []
    scan_entries(buf, pos, len(buf), entries)
    return entries


def parse_replication_response(payload: bytes) -> ReplicationResponse:
    """Read a ReplicationResponse payload: epoch, high watermark, message set.

    Args:
        payload: The envelope's payload (after the header).

    Returns:
        The response, its `data` the message set's bytes as read.

    Raises:
        EnvelopeError: `bad_payload`: shorter than epoch and high watermark,
            or a message set whose entries do not parse.
    """
    if len(payload) < RR_MIN:
        raise _bad(
            f"payload is {len(payload)} bytes; leader_epoch and high_watermark need {RR_MIN}", 0
        )
    epoch, hw = _RR_HEAD.unpack_from(payload)
    return ReplicationResponse(epoch, hw, parse_entries(payload, RR_MIN), data=payload[RR_MIN:])


def _lenval(data: bytes | None) -> tuple[int, bytes]:
    return (NIL_LENGTH, b"") if data is None else (len(data), data)


def header_items(e: CommitLogEntry) -> list[tuple[bytes, bytes]]:
    """Each header as stored: its key's bytes (`header_keys_raw` when a key
    was not UTF-8, so a read entry is written back byte for byte), its value."""
    keys = e.header_keys_raw or [k.encode() for k, _ in e.headers]
    if len(keys) != len(e.headers):
        raise InputError(
            "bad_input", f"header_keys_raw has {len(keys)} keys for {len(e.headers)} headers"
        )
    return [(k, v) for k, (_, v) in zip(keys, e.headers)]


def encode_entry(e: CommitLogEntry) -> bytes:
    klen, key = _lenval(e.key)
    vlen, value = _lenval(e.value)
    body_fields = dict(
        crc32c=0,
        magic=e.magic,
        attributes=e.attributes,
        key_len=klen,
        key=key if klen >= 0 else None,
        value_len=vlen,
        value=value if vlen >= 0 else None,
        header_count=len(e.headers),
        headers=[
            dict(key_len=len(k), key=k, value_len=len(v), value=v) for k, v in header_items(e)
        ],
    )
    # The CRC covers the body after itself: build once to learn it.
    body: bytes = _cs.liftbridge_commitlog__body.build(body_fields)
    body_fields["crc32c"] = _crc32c.crc32c(body[_CRC_END:])
    entry: bytes = _cs.liftbridge_commitlog__entry.build(
        dict(
            offset=e.offset,
            timestamp=e.timestamp,
            leader_epoch=e.leader_epoch,
            size=len(body),
            body=body_fields,
        )
    )
    return entry


def encode_entries(entries: list[CommitLogEntry]) -> bytes:
    return b"".join(encode_entry(e) for e in entries)


def encode_replication_response(rr: ReplicationResponse) -> bytes:
    head: bytes = _cs.liftbridge_commitlog.build(
        dict(leader_epoch=rr.leader_epoch, high_watermark=rr.high_watermark, entries=[])
    )
    return head + rr.entries_bytes()
