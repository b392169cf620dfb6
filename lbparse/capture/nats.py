"""The NATS client protocol, one direction of one connection at a time.

No I/O: `NatsParser.feed(bytes)` returns what those bytes completed, in
stream order, whatever the segmentation (a segment with hundreds of frames,
a frame over many segments). Each item is one of

- `Frame`: a message (`PUB`, `HPUB`, `MSG`, `HMSG`) with its subject, reply
  subject, sid (MSG/HMSG), raw `NATS/1.0...` header block (HPUB/HMSG) and
  payload;
- `Control`: any other verb (`INFO`, `CONNECT`, `SUB`, `UNSUB`, `PING`,
  `PONG`, `+OK`, `-ERR`) and its argument text;
- `Problem`: bytes that are not the protocol, with what is wrong, and the
  resource limit that refused them when one did (e.g. `max_frame`).
  Parsing then resumes at the next line that starts with a verb.

Fields are split on runs of whitespace: clients send `PUB subj  5` for an
empty reply. A control line ends at LF, with or without a CR before it, as
nats-server and the clients read it; a payload must be followed by CRLF.

Memory follows the bytes that arrived, never a size field: a message line
is refused when it declares more than `max_frame` bytes, and a message
still arriving holds only what came so far.
"""

from __future__ import annotations

import re
from typing import Any, Final

MESSAGE_VERBS = frozenset({"PUB", "HPUB", "MSG", "HMSG"})
CONTROL_VERBS = ("INFO", "CONNECT", "SUB", "UNSUB", "PING", "PONG", "+OK", "-ERR")
# INFO with many cluster URLs runs to a few KiB; anything past this without
# a line end is not a control line. (Not Final: mypyc would compile the
# number in, and the C loop takes it from here, lbparse.capture.native_batches.rules.)
MAX_LINE = 1 << 16
CRLF: Final = b"\r\n"
# lbparse.codec.limits' default max_frame (not imported: limits imports decoders).
MAX_FRAME = 64 << 20
# What a sniffer (see NatsParser) answers when the first bytes do not tell yet:
# they are held, and it is asked again with the next bytes after them.
UNDECIDED: Final = "undecided"

_PUB, _HPUB, _MSG, _HMSG = 1, 2, 3, 4
_VERBS: dict[bytes, int | str] = {b"PUB": _PUB, b"HPUB": _HPUB, b"MSG": _MSG, b"HMSG": _HMSG}
_VERBS.update({v.encode(): v for v in CONTROL_VERBS})

_ALT = rb"(?:HPUB|PUB|HMSG|MSG|INFO|CONNECT|SUB|UNSUB|PING|PONG|\+OK|-ERR)[ \t\r\n]"
_LINE_HERE = re.compile(_ALT, re.I)
_LINE_NEXT = re.compile(rb"(?<=\n)" + _ALT, re.I)


# Subjects, reply subjects and sids repeat: decode each once. Bounded in
# count and in the length of what it keeps, so that endless distinct inboxes
# (or 64 KiB subjects) cannot grow it without limit.
# (Final: the compiled build keeps these in C statics, not module globals.)
_names: Final[dict[bytes, str]] = {}
_NAME_MAX: Final = 256


def _name(b: bytes) -> str:
    s = b.decode("utf-8", "replace")
    if len(b) <= _NAME_MAX:
        if len(_names) >= 65536:
            _names.clear()
        _names[b] = s
    return s


class Frame:
    """One NATS message as the protocol carried it.

    Args:
        verb: PUB, HPUB, MSG or HMSG.
        subject: The message's subject.
        reply: The reply subject, None without one.
        sid: The subscription id (MSG/HMSG), None for PUB/HPUB.
        header_block: The raw `NATS/1.0...` block of HPUB/HMSG, None for
            PUB/MSG.
        payload: The message bytes.
    """

    # A compiled (mypyc) class: built by one C call, fields read without a
    # dict or an index; the capture path makes one per message.
    __slots__ = ("verb", "subject", "reply", "sid", "header_block", "payload")

    def __init__(
        self,
        verb: str,
        subject: str,
        reply: str | None,
        sid: str | None,
        header_block: bytes | None,
        payload: bytes,
    ) -> None:
        self.verb: Final = verb
        self.subject: Final = subject
        self.reply: Final = reply
        self.sid: Final = sid
        self.header_block: Final = header_block
        self.payload: Final = payload

    def fields(self) -> tuple[str, str, str | None, str | None, bytes | None, bytes]:
        """The frame's fields, in the constructor's order.

        Returns:
            (verb, subject, reply, sid, header_block, payload).
        """
        return (self.verb, self.subject, self.reply, self.sid, self.header_block, self.payload)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Frame) and self.fields() == other.fields()

    def __repr__(self) -> str:
        return "Frame" + repr(self.fields())


class Control:
    """A control line of the NATS protocol (anything but a message).

    Args:
        verb: INFO, CONNECT, SUB, UNSUB, PING, PONG, +OK or -ERR.
        text: The rest of the line without surrounding whitespace.
    """

    __slots__ = ("verb", "text")

    def __init__(self, verb: str, text: bytes) -> None:
        self.verb: Final = verb
        self.text: Final = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Control) and (self.verb, self.text) == (other.verb, other.text)

    def __repr__(self) -> str:
        return f"Control({self.verb!r}, {self.text!r})"


class Problem:
    """Bytes that are not the NATS protocol.

    Args:
        message: What was found and what happens next.
        limit: The resource limit that refused them (`max_frame`), None when
            the bytes themselves are wrong.
    """

    __slots__ = ("message", "limit")

    def __init__(self, message: str, limit: str | None = None) -> None:
        self.message: Final = message
        self.limit: Final = limit

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Problem) and (self.message, self.limit) == (
            other.message,
            other.limit,
        )

    def __repr__(self) -> str:
        return f"Problem({self.message!r}, limit={self.limit!r})"


# What `NatsParser.feed` returns a list of.
Parsed = Frame | Control | Problem


def _lost(verb: str, subject: str, have: int, total: int) -> str:
    return f"{verb} {subject}: {have} of {total} payload bytes arrived; message dropped"


def _size(b: bytes) -> int:
    """int(b), for a size field: plain digits are read here (a call of int()
    costs the compiled parser more than the rest of a short line); anything
    else (signs, underscores, garbage) goes to int() and its ValueError."""
    if 0 < len(b) <= 18:
        v = 0
        for c in b:
            if c < 48 or c > 57:
                return int(b)
            v = v * 10 + (c - 48)
        return v
    return int(b)


class NatsParser:
    """Frames of one direction of a NATS connection, fed in arbitrary pieces.

    Time and memory are linear in the bytes fed, whatever they hold: a
    control line ends at its first LF (nats-server reads a line so, the CR
    before the LF being optional), so finding it never looks past it; a
    message whose payload is still arriving keeps its bytes in one buffer
    that grows in place, and when its size turns out a lie the frames
    within it are parsed from that same buffer, without copying what
    follows (a stream of `PUB a 60000000` lines made every one of them
    copy all the bytes after it).

    Args:
        resync: Start by skipping to a line that starts with a verb (the
            capture holds no start of the stream).
        max_frame: The most payload bytes one message may declare; a larger
            one is a Problem (limit max_frame).
        sniff: Another protocol's sniffer (HTTP/2: lbparse.capture.h2's
            Side.sniff), asked `sniff(first bytes, resync, ending)` before the
            first bytes are read: what it returns, when not None, takes every
            byte from then on; UNDECIDED: the bytes are held and it is asked
            again with more, or, `ending` True, for its last word when the
            stream ends first. None: the stream is NATS.
    """

    __slots__ = (
        "_rest",
        "_parts",
        "_parts_len",
        "_wait",
        "_buf",
        "_bpos",
        "_need",
        "_resync",
        "_here",
        "_max_frame",
        "_sniff",
        "_other",
        "_held",
    )

    def __init__(self, resync: bool = False, max_frame: int = MAX_FRAME, sniff: Any = None) -> None:
        self._rest = b""  # a control line not yet ended by LF
        # Later pieces of it, kept apart until one holds a newline: joining
        # them on every piece cost time quadratic in the line's length.
        self._parts: list[bytes] = []
        self._parts_len = 0
        self._wait: tuple[str, str, str | None, str | None, int] | None = (
            None  # a message line whose payload is still arriving
        )
        # Its bytes: the payload starts at _buf[_bpos]; _need counts the
        # payload and its CRLF.
        self._buf = bytearray()
        self._bpos = 0
        self._need = 0
        # Resynchronising: skip to a line that starts with a verb. `_here`:
        # the next byte starts a line too (after a gap, or a stream's start).
        self._resync = resync
        self._here = resync
        self._max_frame = max_frame
        # Another protocol's parser (HTTP/2: lbparse.capture.h2): `sniff(first
        # bytes, resync)` is asked before the first bytes are read, and what it
        # returns, when not None, takes every byte from then on; UNDECIDED:
        # the bytes are held (`_held`) and it is asked again with more.
        self._sniff = sniff
        self._other: Any = None
        self._held = b""

    @property
    def busy(self) -> bool:
        """True while a frame is half-read (its end still to come)."""
        if self._other is not None:
            return bool(self._other.busy)
        return self._wait is not None or bool(self._rest) or bool(self._held)

    def _handed(self, data: bytes) -> bytes | None:
        """None when `data` went to another protocol's parser or is held while
        the sniffer cannot tell (see __init__); else the bytes to read as NATS,
        those held first."""
        if self._other is None:
            if self._held:
                data = self._held + data
            got = self._sniff(data, self._resync)
            if got == UNDECIDED:
                self._held = data
                return None
            self._sniff, self._held = None, b""
            if got is None:
                return data
            self._other = got
        self._other.feed(data)
        return None

    def feed(self, data: bytes) -> list[Parsed]:
        """Parse the next bytes of the stream.

        Args:
            data: The direction's next bytes, in order (any size, cut anywhere).

        Returns:
            The Frames, Controls and Problems that `data` completes, in stream
            order (empty while a line or payload is still arriving, or when the
            bytes went to another protocol's parser).
        """
        frames: list[Parsed] = []
        if self._sniff is not None or self._other is not None:
            mine = self._handed(data)
            if mine is None:
                return frames
            data = mine
        if self._wait is not None:
            buf = self._buf
            buf += data
            start = self._bpos
            need = self._need
            if len(buf) - start < need:
                return frames
            verb, subject, reply, sid, hsize = self._wait
            self._wait = None
            end = start + need
            if buf[end - 2] != 13 or buf[end - 1] != 10:
                frames.append(
                    Problem(
                        f"{verb} payload of {need - 2} bytes not followed by CRLF "
                        f"(found {bytes(buf[end - 2 : end])!r}); message dropped"
                    )
                )
                # The payload started a line: a verb right there counts (the
                # CRLF before it is in an earlier piece, out of the regex's sight).
                self._resync = self._here = True
                self._parse(buf, start, frames)
            else:
                hdr = bytes(buf[start : start + hsize]) if verb[0] == "H" else None
                frames.append(
                    Frame(verb, subject, reply, sid, hdr, bytes(buf[start + hsize : end - 2]))
                )
                self._parse(buf, end, frames)
            self._release()
        elif self._rest:
            if (
                b"\n" not in data
                and not self._resync
                and len(self._rest) + self._parts_len + len(data) <= MAX_LINE
            ):
                self._parts.append(data)  # cannot end the line
                self._parts_len += len(data)
                return frames
            b = b"".join((self._rest, *self._parts, data))
            self._rest, self._parts, self._parts_len = b"", [], 0
            self._parse(b, 0, frames)
        else:
            self._parse(data, 0, frames)
        return frames

    def _release(self) -> None:
        """After parsing the wait buffer: free it, or drop what a new wait
        no longer needs (when that is most of it: each byte is moved at
        most once more, so the moves stay linear)."""
        if self._wait is None:
            self._buf = bytearray()
            self._bpos = 0
        elif self._bpos > len(self._buf) >> 1:
            del self._buf[: self._bpos]
            self._bpos = 0

    def gap(self, frames: list[Parsed] | None = None) -> str | None:
        """Bytes went missing before the next `feed`: drop any half-read frame.

        The parser resumes at the next control line.

        Args:
            frames: Where frames found in the dropped bytes (see `abandon`) go;
                None: they are discarded.

        Returns:
            A description of what was lost ("; "-joined), or None if nothing was.
        """
        lost = self.abandon([] if frames is None else frames)
        if self._other is not None:
            self._other.gap()
        self._resync = self._here = True
        return "; ".join(lost) or None

    def finish(self, frames: list[Parsed] | None = None) -> str | None:
        """The stream ended: describe a half-read frame, if any.

        Args:
            frames: Where the frames found in its bytes go (see `abandon`); None:
                they are discarded.

        Returns:
            A description of what was lost ("; "-joined), or None if nothing was.
        """
        return "; ".join(self.abandon([] if frames is None else frames)) or None

    def abandon(self, frames: list[Parsed]) -> list[str]:
        """Give up on a half-read frame: its end will never come.

        A message line whose size was a lie (corruption) holds the frames that
        followed it among its buffered bytes; they are parsed again, as after a
        gap, and appended to `frames`, so that one bad size field does not
        swallow the rest of the stream. One pass over those bytes: a message
        line among them whose payload runs past their end is lost too, right
        there, and the pass goes on from its payload.

        Args:
            frames: Where frames found in the abandoned bytes are appended.

        Returns:
            One description per message lost (empty if none).
        """
        if self._other is not None:
            return list(self._other.abandon())
        if self._held:  # ended while the sniffer could not tell: its last word
            undecided, self._held = self._held, b""
            got = self._sniff(undecided, self._resync, True)
            self._sniff = None
            if got is not None and got != UNDECIDED:
                self._other = got
                got.feed(undecided)
                return list(got.abandon())
            frames.extend(self.feed(undecided))  # NATS, as far as it goes
        lost: list[str] = []
        d = self._describe()
        if d:
            lost.append(d)
        held = self._wait is not None
        buf, start = self._buf, self._bpos
        self._reset()
        if held and start < len(buf):
            self._resync = self._here = True  # the payload started a line
            self._parse(buf, start, frames, lost)
            d = self._describe()  # a control line cut by the end
            if d:
                lost.append(d)
            self._reset()
        return lost

    def _reset(self) -> None:
        self._rest, self._wait, self._buf, self._bpos = b"", None, bytearray(), 0
        self._parts, self._parts_len = [], 0

    def _describe(self) -> str | None:
        if self._wait is not None:
            verb, subject, _, _, _ = self._wait
            return _lost(verb, subject, len(self._buf) - self._bpos, self._need - 2)
        if self._rest and not self._resync:
            return (
                f"control line cut after {len(self._rest) + self._parts_len} bytes: "
                f"{self._rest[:40]!r}"
            )
        return None

    def _parse(self, b: bytes, p: int, frames: list[Parsed], lost: list[str] | None = None) -> None:
        """Parse `b` from `p`. `b` is a piece of the stream (bytes), or the
        wait buffer (a bytearray: its lines and payloads are copied out as
        bytes). `lost`: the stream ends with `b` (see `abandon`)."""
        n = len(b)
        names = _names
        max_frame = self._max_frame
        copy = type(b) is not bytes
        while p < n:
            if self._resync:
                p = self._find_line(b, p)
                if p < 0:
                    return
            e = b.find(b"\n", p)
            if e < 0:
                if n - p > MAX_LINE:
                    frames.append(
                        Problem(
                            f"{n - p} bytes without a line end where a control line was "
                            f"expected: {bytes(b[p : p + 40])!r}"
                        )
                    )
                    self._resync, self._here = True, False
                    p += 1
                    continue
                self._rest = bytes(b[p:]) if copy else b[p:]
                return
            # nats-server ends a control line at LF and drops a CR before it.
            le = e - 1 if e > p and b[e - 1] == 13 else e
            line = bytes(b[p:le]) if copy else b[p:le]
            parts = line.split()
            np = len(parts)
            v = parts[0] if np else b""
            while True:  # a second pass for a message verb in another case
                # The four message verbs, most frequent first; field counts
                # tell an optional reply apart (parts[np - 1], not parts[-1]:
                # a negative index misses the interpreter's fast path).
                hsize = 0
                try:
                    if v == b"MSG" and (np == 4 or np == 5):
                        verb, total, sid = "MSG", _size(parts[np - 1]), parts[2]
                        reply = parts[3] if np == 5 else None
                    elif v == b"PUB" and (np == 3 or np == 4):
                        verb, total, sid = "PUB", _size(parts[np - 1]), None
                        reply = parts[2] if np == 4 else None
                    elif v == b"HMSG" and (np == 5 or np == 6):
                        verb, sid = "HMSG", parts[2]
                        hsize, total = _size(parts[np - 2]), _size(parts[np - 1])
                        reply = parts[3] if np == 6 else None
                    elif v == b"HPUB" and (np == 4 or np == 5):
                        verb, sid = "HPUB", None
                        hsize, total = _size(parts[np - 2]), _size(parts[np - 1])
                        reply = parts[2] if np == 5 else None
                    else:
                        verb = None
                except ValueError:
                    verb, total = "?", -1
                # Rewriting the buffer in upper case instead cost a copy of
                # the whole segment per line: quadratic time.
                if verb is None and np and v != (u := v.upper()) and type(_VERBS.get(u)) is int:
                    v = u
                    continue
                break
            if verb is None:
                if not np:
                    p = e + 1
                    continue
                k = _VERBS.get(v) or _VERBS.get(v.upper())
                if type(k) is str:
                    frames.append(Control(k, line[len(v) :].strip()))
                    p = e + 1
                    continue
                if k is None:
                    frames.append(Problem(f"not a NATS control line: {line[:80]!r}"))
                    self._resync = self._here = True  # e + 1 starts a line
                    p = e + 1
                    continue
                total = -1  # a message verb with the wrong number of fields
            if not 0 <= hsize <= total <= max_frame:  # one test for the common case
                if total < 0 or hsize < 0 or hsize > total:
                    frames.append(Problem(f"malformed control line {line[:80]!r}"))
                else:
                    # Not buffered: memory must not follow a size field. If the
                    # size is a lie, the next control line is right after this one.
                    frames.append(
                        Problem(
                            f"{verb} {_name(parts[1][:80])} declares {total} bytes, over the "
                            f"limit of {max_frame} (max_frame); resuming at the next control line",
                            limit="max_frame",
                        )
                    )
                self._resync = self._here = True
                p = e + 1
                continue
            subject = names.get(parts[1]) or _name(parts[1])
            reply_s = None if reply is None else names.get(reply) or _name(reply)
            sid_s = None if sid is None else names.get(sid) or _name(sid)
            start = e + 1
            end = start + total
            if end + 2 > n:
                if lost is not None:
                    # The stream ends here: this message is lost, and its
                    # payload may hold the frames that followed a lying size.
                    lost.append(_lost(verb, subject, n - start, total))
                    self._resync = self._here = True
                    p = start
                    continue
                self._wait = (verb, subject, reply_s, sid_s, hsize)
                self._need = total + 2
                if b is self._buf:  # the wait buffer itself: keep it, copy nothing
                    self._bpos = start
                else:
                    self._buf = bytearray(memoryview(b)[start:])
                    self._bpos = 0
                return
            if b[end] != 13 or b[end + 1] != 10:  # CR LF; no call, no slice
                frames.append(
                    Problem(
                        f"{verb} payload of {total} bytes not followed by CRLF "
                        f"(found {bytes(b[end : end + 2])!r}); message dropped"
                    )
                )
                self._resync = self._here = True  # the payload started a line
                p = start
                continue
            if copy:
                hdr = bytes(b[start : start + hsize]) if v[0] == 72 else None
                frames.append(
                    Frame(verb, subject, reply_s, sid_s, hdr, bytes(b[start + hsize : end]))
                )
            elif v[0] == 72:  # b"H": HPUB or HMSG (a bytes index costs less than a str one)
                frames.append(
                    Frame(
                        verb,
                        subject,
                        reply_s,
                        sid_s,
                        b[start : start + hsize],
                        b[start + hsize : end],
                    )
                )
            else:
                frames.append(Frame(verb, subject, reply_s, sid_s, None, b[start:end]))
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
                    self._rest = bytes(b[start:])
                    self._here = True
                    return -1
            self._here = n_keep == 0
            return -1
        return -1
