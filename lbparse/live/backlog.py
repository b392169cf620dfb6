"""The backlog between a live subscription's network reader and its writer.

A NATS server drops a client that does not read its socket fast enough
(a slow consumer): it closes the connection, and what it had queued is
gone. So `lbparse tap` and `lbparse record` do nothing on the network
reader's loop but put each message here; a worker thread takes them out,
decodes and writes them (issue #19: decoding and Parquet writing on the
loop starved the reader at 50k msg/s, and a third of the messages were
lost).

The backlog never blocks the reader and never drops: it holds up to
`max_bytes` of messages in memory, and past that spills them, in order,
to a file in the process's private scratch directory (lbparse.scratch:
0700, made fresh, removed at exit), from which the worker reads them back.
Memory stays bounded whatever the rate; the disk takes the excess.
"""

from __future__ import annotations

import struct
import threading
from collections import deque
from sys import getsizeof
from typing import BinaryIO, NamedTuple

from lbparse.scratch import open_private

__all__ = ["Backlog", "Raw"]


class Raw(NamedTuple):
    """One message as the network reader got it (ts in ns since the epoch).

    Attributes:
        ts: Its arrival, Unix time in integer nanoseconds.
        server: The server's endpoint, host:port.
        local: The subscriber's own endpoint, host:port.
        subject: The NATS subject.
        reply: The reply subject, None without one.
        sid: The subscription id, None if unknown.
        headers: The raw NATS/1.0 header block, None without one.
        data: The payload.
    """

    ts: int
    server: str
    local: str
    subject: str
    reply: str | None
    sid: str | None
    headers: bytes | None
    data: bytes

    def size(self) -> int:
        """What holding the message costs in memory.

        Its objects as CPython keeps them (counting the payload and 64 bytes made
        a flood of small messages hold three times --backlog-mb).

        Returns:
            The estimate, in bytes.
        """
        n = _HELD + getsizeof(self.data) + getsizeof(self.subject)
        for field in (self.reply, self.sid, self.headers):
            if field is not None:
                n += getsizeof(field)
        return n


# A held message's own objects besides its fields': the tuple of eight, its
# ts and the deque's slot (server and local are the connection's, shared).
_HELD = getsizeof(tuple(range(8))) + getsizeof(1 << 62) + 8


# ts, then the lengths of the text and bytes fields (-1: None).
_HEAD = struct.Struct("!qiiiiiii")


def _encode(r: Raw) -> bytes:
    texts = [
        r.server.encode(),
        r.local.encode(),
        r.subject.encode(),
        None if r.reply is None else r.reply.encode(),
        None if r.sid is None else r.sid.encode(),
        r.headers,
        r.data,
    ]
    head = _HEAD.pack(r.ts, *(-1 if t is None else len(t) for t in texts))
    return head + b"".join(t for t in texts if t)


def _decode(f: BinaryIO) -> Raw:
    ts, *lengths = _HEAD.unpack(f.read(_HEAD.size))
    parts = [None if n < 0 else f.read(n) for n in lengths]
    server, local, subject, reply, sid, headers, data = parts
    return Raw(
        ts,
        server.decode(),  # type: ignore[union-attr]
        local.decode(),  # type: ignore[union-attr]
        subject.decode(),  # type: ignore[union-attr]
        None if reply is None else reply.decode(),
        None if sid is None else sid.decode(),
        headers,
        data or b"",
    )


class Backlog:
    """A FIFO of `Raw` messages: memory up to `max_bytes`, then a spill file.

    `put` (the network reader) never blocks; `get` (the worker) blocks until
    a message is there, or returns None once `close` was called and all is
    taken, or at once after `abandon`.

    Args:
        max_bytes: The most bytes of messages (Raw.size) held in memory;
            past it they go, in order, to a private spill file.
    """

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        self._cond = threading.Condition()
        self._mem: deque[Raw] = deque()
        self._mem_bytes = 0
        self._spill: BinaryIO | None = None
        self._written = self._read = 0  # messages into / out of the spill file
        self._wpos = self._rpos = 0  # byte offsets of the next write / read
        self.spilled = 0  # messages that went through the file, in all
        self.puts = 0  # messages put, in all (the worker reads it unlocked: a hint)
        self._closed = False
        self._abandoned = False

    def put(self, item: Raw) -> None:
        """Add a message at the end; never blocks, never drops (but after `abandon`).

        Args:
            item: The message.
        """
        with self._cond:
            if self._abandoned:
                return
            self.puts += 1
            size = item.size()
            if self._written == self._read and self._mem_bytes + size <= self.max_bytes:
                self._mem.append(item)
                self._mem_bytes += size
            else:  # memory is full, or older messages wait in the file: keep the order
                self._to_spill(item)
            self._cond.notify()

    def _to_spill(self, item: Raw) -> None:
        if self._spill is None:
            self._spill = open_private("live-backlog.bin")
        self._spill.seek(self._wpos)
        data = _encode(item)
        self._spill.write(data)
        self._wpos += len(data)
        self._written += 1
        self.spilled += 1

    def get(self) -> Raw | None:
        """Take the oldest message, waiting until there is one.

        Returns:
            The message; None once `close` was called and all is taken, or at
            once after `abandon`.
        """
        with self._cond:
            while not (self._mem or self._written > self._read or self._closed or self._abandoned):
                self._cond.wait()
            if self._abandoned:
                return None
            if self._mem:
                item = self._mem.popleft()
                self._mem_bytes -= item.size()
                return item
            if self._written > self._read:
                return self._from_spill()
            return None  # closed, and all taken

    def _from_spill(self) -> Raw:
        assert self._spill is not None
        self._spill.flush()
        self._spill.seek(self._rpos)
        item = _decode(self._spill)
        self._rpos = self._spill.tell()
        self._read += 1
        if self._read == self._written:  # drained: start the file over
            self._spill.seek(0)
            self._spill.truncate()
            self._wpos = self._rpos = 0
        return item

    def close(self) -> None:
        """Nothing more will be put: `get` returns None once all is taken."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def abandon(self) -> int:
        """Give up what is held (a second signal: stop now).

        Returns:
            How many messages were given up.
        """
        with self._cond:
            n = len(self._mem) + self._written - self._read
            self._abandoned = True
            self._mem.clear()
            self._mem_bytes = 0
            self._release()
            self._cond.notify_all()
            return n

    def pending(self) -> int:
        """The messages held, in memory and in the spill file.

        Returns:
            Their count.
        """
        with self._cond:
            return len(self._mem) + self._written - self._read

    def _release(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        self._written = self._read = self._wpos = self._rpos = 0

    def __del__(self) -> None:
        spill = getattr(self, "_spill", None)
        if spill is not None:
            spill.close()
