"""The NATS client protocol, one direction of one connection at a time.

No I/O: `NatsParser.feed(bytes)` returns the frames completed by those
bytes, whatever the segmentation (a segment with hundreds of frames, a
frame over many segments). A frame is a tuple

    (verb, subject, reply, sid, header_block, payload)

`PUB`, `HPUB`, `MSG` and `HMSG` fill what they carry (`header_block` is the
raw `NATS/1.0...` block, None without one); the other verbs (`INFO`,
`CONNECT`, `SUB`, `UNSUB`, `PING`, `PONG`, `+OK`, `-ERR`) carry their
argument text as `payload` and None elsewhere. Bytes that are not the
protocol give a frame with verb `"!"` and the explanation as `payload`;
parsing then resumes at the next line that starts with a verb. Fields are
split on runs of whitespace: clients send `PUB subj  5` for an empty reply.
"""

from __future__ import annotations

import re

Frame = tuple  # (verb, subject, reply, sid, header_block, payload)

MESSAGE_VERBS = frozenset({"PUB", "HPUB", "MSG", "HMSG"})
CONTROL_VERBS = ("INFO", "CONNECT", "SUB", "UNSUB", "PING", "PONG", "+OK", "-ERR")
# INFO with many cluster URLs runs to a few KiB; anything past this without
# a CRLF is not a control line.
MAX_LINE = 1 << 16
CRLF = b"\r\n"

_PUB, _HPUB, _MSG, _HMSG = 1, 2, 3, 4
_VERBS: dict[bytes, int | str] = {b"PUB": _PUB, b"HPUB": _HPUB, b"MSG": _MSG, b"HMSG": _HMSG}
_VERBS.update({v.encode(): v for v in CONTROL_VERBS})

_ALT = rb"(?:HPUB|PUB|HMSG|MSG|INFO|CONNECT|SUB|UNSUB|PING|PONG|\+OK|-ERR)[ \t\r]"
_LINE_HERE = re.compile(_ALT, re.I)
_LINE_NEXT = re.compile(rb"(?<=\n)" + _ALT, re.I)


# Subjects, reply subjects and sids repeat: decode each once. Bounded, so
# a capture of endless distinct inboxes does not grow it without limit.
_names: dict[bytes, str] = {}


def _name(b: bytes) -> str:
    if len(_names) >= 65536:
        _names.clear()
    s = _names[b] = b.decode("utf-8", "replace")
    return s


class NatsParser:
    """Frames of one direction of a NATS connection, fed in arbitrary pieces."""

    __slots__ = ("_rest", "_wait", "_chunks", "_have", "_need", "_resync", "_here")

    def __init__(self, resync: bool = False) -> None:
        self._rest = b""            # a control line not yet ended by CRLF
        self._wait: tuple | None = None  # a message line whose payload is still arriving
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = 0
        # Resynchronising: skip to a line that starts with a verb. `_here`:
        # the next byte starts a line too (after a gap, or a stream's start).
        self._resync = resync
        self._here = resync

    @property
    def busy(self) -> bool:
        """True while a frame is half-read (its end still to come)."""
        return self._wait is not None or bool(self._rest)

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        if self._wait is not None:
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return frames
            b = b"".join(self._chunks)
            self._chunks = []
            verb, subject, reply, sid, hsize = self._wait
            self._wait = None
            need = self._need
            if b[need - 2:need] != CRLF:
                frames.append(("!", None, None, None, None,
                               f"{verb} payload of {need - 2} bytes not followed by CRLF "
                               f"(found {b[need - 2:need]!r}); message dropped"))
                self._resync, self._here = True, False
                self._parse(b, 0, frames)
                return frames
            hdr = b[:hsize] if verb[0] == "H" else None
            frames.append((verb, subject, reply, sid, hdr, b[hsize:need - 2]))
            self._parse(b, need, frames)
        elif self._rest:
            b = self._rest + data
            self._rest = b""
            self._parse(b, 0, frames)
        else:
            self._parse(data, 0, frames)
        return frames

    def gap(self) -> str | None:
        """Bytes went missing before the next `feed`: drop any half-read frame
        (returned as a description) and resume at the next control line."""
        lost = self._describe()
        self._rest, self._wait, self._chunks, self._have = b"", None, [], 0
        self._resync = self._here = True
        return lost

    def finish(self) -> str | None:
        """The stream ended: describe a half-read frame, if any."""
        lost = self._describe()
        self._rest, self._wait, self._chunks, self._have = b"", None, [], 0
        return lost

    def _describe(self) -> str | None:
        if self._wait is not None:
            verb, subject, _, _, _ = self._wait
            return (f"{verb} {subject}: {self._have} of {self._need - 2} payload bytes "
                    "arrived; message dropped")
        if self._rest and not self._resync:
            return f"control line cut after {len(self._rest)} bytes: {self._rest[:40]!r}"
        return None

    def _parse(self, b: bytes, p: int, frames: list[Frame]) -> None:
        n = len(b)
        names = _names
        append = frames.append
        while p < n:
            if self._resync:
                p = self._find_line(b, p)
                if p < 0:
                    return
            e = b.find(CRLF, p)
            if e < 0:
                if n - p > MAX_LINE:
                    append(("!", None, None, None, None,
                            f"{n - p} bytes without CRLF where a control line was "
                            f"expected: {b[p:p + 40]!r}"))
                    self._resync, self._here = True, False
                    p += 1
                    continue
                self._rest = b[p:]
                return
            parts = b[p:e].split()
            np = len(parts)
            v = parts[0] if np else b""
            # The four message verbs, most frequent first; field counts
            # tell an optional reply apart.
            hsize = 0
            try:
                if v == b"MSG" and (np == 4 or np == 5):
                    verb, total, sid = "MSG", int(parts[-1]), parts[2]
                    reply = parts[3] if np == 5 else None
                elif v == b"PUB" and (np == 3 or np == 4):
                    verb, total, sid = "PUB", int(parts[-1]), None
                    reply = parts[2] if np == 4 else None
                elif v == b"HMSG" and (np == 5 or np == 6):
                    verb, hsize, total, sid = "HMSG", int(parts[-2]), int(parts[-1]), parts[2]
                    reply = parts[3] if np == 6 else None
                elif v == b"HPUB" and (np == 4 or np == 5):
                    verb, hsize, total, sid = "HPUB", int(parts[-2]), int(parts[-1]), None
                    reply = parts[2] if np == 5 else None
                else:
                    verb = None
            except ValueError:
                verb, total = "?", -1
            if verb is None:
                if not np:
                    p = e + 2
                    continue
                k = _VERBS.get(v) or _VERBS.get(v.upper())
                if type(k) is str:
                    append((k, None, None, None, None, b[p + len(v):e].strip()))
                    p = e + 2
                    continue
                if k is None:
                    append(("!", None, None, None, None,
                            f"not a NATS control line: {b[p:e][:80]!r}"))
                    self._resync, self._here = True, False
                    p = e + 2
                    continue
                if v != v.upper():  # a message verb in lower case: parse it as upper
                    b = b[:p] + b[p:p + len(v)].upper() + b[p + len(v):]
                    continue
                total = -1
            if total < 0 or not 0 <= hsize <= total:
                append(("!", None, None, None, None, f"malformed control line {b[p:e][:80]!r}"))
                self._resync, self._here = True, False
                p = e + 2
                continue
            subject = names.get(parts[1]) or _name(parts[1])
            if reply is not None:
                reply = names.get(reply) or _name(reply)
            if sid is not None:
                sid = names.get(sid) or _name(sid)
            start = e + 2
            end = start + total
            if end + 2 > n:
                self._wait = (verb, subject, reply, sid, hsize)
                self._need = total + 2
                self._chunks = [b[start:]]
                self._have = n - start
                return
            if b[end:end + 2] != CRLF:
                append(("!", None, None, None, None,
                        f"{verb} payload of {total} bytes not followed by CRLF "
                        f"(found {b[end:end + 2]!r}); message dropped"))
                self._resync, self._here = True, False
                p = start
                continue
            if verb[0] == "H":
                append((verb, subject, reply, sid, b[start:start + hsize], b[start + hsize:end]))
            else:
                append((verb, subject, reply, sid, None, b[start:end]))
            p = end + 2

    def _find_line(self, b: bytes, p: int) -> int:
        """Offset of the next line starting with a verb, or -1 having kept
        the bytes a verb might still start in."""
        m = _LINE_HERE.match(b, p) if self._here else None
        if m is None:
            m = _LINE_NEXT.search(b, p)
        if m is not None:
            self._resync = self._here = False
            return m.start()
        nl = b.rfind(b"\n", p)
        if nl >= 0 or self._here:
            start = nl + 1 if nl >= 0 else p
            if n_keep := len(b) - start:
                if n_keep <= 16:
                    # Too short to tell: a verb may be split across feeds.
                    self._rest = b[start:]
                    self._here = True
                    return -1
            self._here = n_keep == 0
            return -1
        return -1
