"""TCP reassembly, one direction of one connection at a time.

The reader's loop handles the common case itself (the next segment, in
order, complete) and calls `Direction.segment` for the rest: the first
segment seen, retransmissions, overlaps, segments ahead of a hole, and
segments the snap length cut. Nothing is ever delivered twice or out of
order: when bytes are missing for good, the parser is told (`gap`) and
resumes at the next NATS control line, and a `Notice` says so.

Missing bytes are declared lost, rather than awaited, when the peer has
already acknowledged data beyond them (it got them, the capture did not),
when more than `max_pending` bytes (the `max_reassembly` limit) or
`MAX_PENDING_SEGMENTS` segments wait behind the hole (a `limit` notice says
so), or at the end of the stream.

Lengths are claims; sequence numbers decide. Bytes a record says the
capture cut (its original length, or an IP length, past what it holds)
are a claim the next segment settles: if it starts that far on, or less,
those bytes are lost (a `gap`); if it starts right where the captured bytes
end, nothing was cut (a TSO-style record: IPv4 total length 0 and an
original length that lies) and the stream goes on whole. An ACK counts as
acknowledging a hole only when it lies ahead of what was delivered: a
stale one, behind it, says nothing about a segment 2^31 bytes on.

A retransmission (or an overlap) keeps the bytes delivered first. Each
direction keeps the last `RETRANSMIT_WINDOW` bytes it delivered, and the
bytes of a later copy that fall in that window are compared with them: when
they differ, a `retransmission` notice says where (the segment's sequence,
the bytes compared, how many differ and the first that does), once per
direction of a connection: later copies in that direction are not compared.
Bytes further back than the window, or before a gap (a loss empties the
window), are not compared: memory stays bounded, whatever the stream.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, Final

from lbparse.capture.nats import MAX_FRAME, NatsParser, Parsed
from lbparse.capture.notices import Notice

_CUT: Final = "the capture's snap length cut them off"
MASK: Final = 0xFFFFFFFF
HALF: Final = 1 << 31
MAX_PENDING_BYTES = 1 << 24
MAX_PENDING_SEGMENTS = 4096
# The last bytes each direction delivered, kept to compare a retransmission
# with: a few segments' worth (real retransmissions resend the latest
# bytes), small enough for 10^5 connections (_native.c's copy of the fact).
RETRANSMIT_WINDOW: Final = 4096


class Direction:
    """One direction of a TCP connection: sequence state and its NATS parser.

    Args:
        src: The sender, host:port.
        dst: The receiver, host:port.
        max_pending: The most bytes held behind holes (max_reassembly).
        max_frame: The NATS parser's max_frame.
        sniff: Another protocol's sniffer for each new parser (HTTP/2's:
            lbparse.capture.nats, sniff), or None.
    """

    __slots__ = (
        "src",
        "dst",
        "next_seq",
        "pending",
        "pending_bytes",
        "parser",
        "peer",
        "ack",
        "client",
        "closed",
        "max_pending",
        "max_frame",
        "next_pos",
        "order",
        "cut",
        "window",
        "recent",
        "recent_bytes",
        "told",
        "sniff",
    )

    def __init__(
        self,
        src: str,
        dst: str,
        max_pending: int = MAX_PENDING_BYTES,
        max_frame: int = MAX_FRAME,
        sniff: Any = None,
    ) -> None:
        self.src = src
        self.dst = dst
        self.max_pending = max_pending
        self.max_frame = max_frame
        self.next_seq: int | None = None
        # Segments waiting behind a hole, by position: bytes from an origin
        # set when the first one came (sequence numbers wrap; positions do
        # not), with a heap of the positions, so that the nearest is found
        # without a scan: thousands may wait, and a scan per packet made a
        # hostile capture 150 times slower to read. The positions mean
        # something only while segments wait; the reader's fast path, which
        # moves next_seq alone, runs only when none do.
        self.pending: dict[int, tuple[bytes, int]] = {}
        self.order: list[int] = []
        self.next_pos = 0
        self.pending_bytes = 0
        self.sniff = sniff  # HTTP/2's, each parser's (lbparse.capture.nats, sniff)
        self.parser = NatsParser(max_frame=max_frame, sniff=sniff)
        self.peer: Direction = self
        self.ack: int | None = None  # the last ACK number this side sent
        self.client: bool | None = None  # from the handshake, when seen
        self.closed = False
        # Bytes a record claimed the capture cut right after next_seq: the
        # next segment's sequence number settles the claim (see the module doc).
        self.cut = 0
        # The last bytes delivered, to compare a retransmission with: the
        # window (at most RETRANSMIT_WINDOW bytes) and, after it, the segments
        # delivered since it was last gathered, by reference (no copy per
        # packet: this is the hot path). told: a retransmission that
        # differed was reported (then nothing more is compared, or kept).
        self.window = b""
        self.recent: list[bytes] = []
        self.recent_bytes = 0
        self.told = False

    def keep(self, data: bytes) -> None:
        """Note that `data` was just delivered (after next_seq moved past it).

        Kept for comparing retransmissions with, up to RETRANSMIT_WINDOW bytes.

        Args:
            data: The bytes delivered.
        """
        if self.told:
            return
        recent = self.recent
        recent.append(data)
        self.recent_bytes += len(data)
        if len(recent) >= 32 or self.recent_bytes >= RETRANSMIT_WINDOW:
            self._gather()

    def _gather(self) -> bytes:
        """The window, the segments delivered since gathered into it."""
        recent = self.recent
        if recent:
            if self.recent_bytes >= RETRANSMIT_WINDOW:
                tail = recent[0] if len(recent) == 1 else b"".join(recent)
                self.window = tail[len(tail) - RETRANSMIT_WINDOW :]
            else:  # (not window + ...: mypyc 1.13's bytes + bytes leaks the left one)
                recent.insert(0, self.window)
                joined = b"".join(recent)
                self.window = joined[max(0, len(joined) - RETRANSMIT_WINDOW) :]
            recent.clear()
            self.recent_bytes = 0
        return self.window

    def _forget(self) -> None:
        """The bytes delivered so far are not compared with (a loss, a new
        connection, a notice given)."""
        self.window = b""
        self.recent.clear()
        self.recent_bytes = 0

    def syn(self, seq: int, notices: list[Notice], ts: int) -> None:
        """A SYN: a new connection starts in this direction (the old one finished).

        Args:
            seq: The SYN's sequence number.
            notices: Where notices of the old stream's end go.
            ts: The capture time, integer nanoseconds.
        """
        if self.next_seq is not None:
            # The same addresses and ports, a new connection.
            self.finish(notices, ts)
        self.next_seq = (seq + 1) & MASK
        self.parser = NatsParser(max_frame=self.max_frame, sniff=self.sniff)
        self.closed = False
        self.cut = 0
        self._forget()
        self.told = False

    def segment(
        self, seq: int, data: bytes, missing: int, notices: list[Notice], ts: int
    ) -> list[Parsed]:
        """Take a segment: deliver its bytes in order, hold what comes past a hole.

        A segment of `len(data)` captured bytes at `seq`, followed by `missing`
        bytes the capture cut off (snap length).

        Args:
            seq: The segment's sequence number.
            data: Its captured bytes.
            missing: The bytes the capture cut off after them.
            notices: Where gap, limit and retransmission notices go.
            ts: The capture time, integer nanoseconds.

        Returns:
            The parser's Frames, Controls and Problems the delivered bytes
            completed, in stream order.
        """
        if self.next_seq is None:
            # No handshake seen: the capture starts inside the stream, maybe
            # inside a frame.
            self.next_seq = seq
            self.parser = NatsParser(resync=True, max_frame=self.max_frame, sniff=self.sniff)
        frames: list[Parsed] = []
        if self.cut:
            self._settle_cut((seq - self.next_seq) & MASK, frames, notices, ts)
        off = (seq - self.next_seq) & MASK
        if off >= HALF:
            back = (1 << 32) - off
            self._compare(back, data, notices, ts)
            if back >= len(data) + missing:
                return frames  # a retransmission of bytes already delivered
            if back >= len(data):
                missing -= back - len(data)
                data = b""
            else:
                data = data[back:]
            off = 0
        if off:
            if not self.pending:
                self.next_pos = 0
            pos = self.next_pos + off
            old = self.pending.get(pos)
            if old is None or len(old[0]) + old[1] < len(data) + missing:
                if old is None:
                    heappush(self.order, pos)
                self.pending[pos] = (data, missing)
                self.pending_bytes += len(data) - (len(old[0]) if old else 0)
            peer_ack = self.peer.ack
            if peer_ack is not None and off <= (peer_ack - self.next_seq) & MASK < HALF:
                # The peer acknowledged bytes past the hole (an ACK ahead of what
                # was delivered, and at or past the segment): they are not coming.
                why = "the peer acknowledged them"
            elif self.pending_bytes > self.max_pending or len(self.pending) > MAX_PENDING_SEGMENTS:
                why = f"{self.pending_bytes} bytes waited behind them"
                notices.append(
                    Notice(
                        "limit",
                        f"{self.pending_bytes} bytes in {len(self.pending)} segments wait "
                        f"behind a hole at sequence {self.next_seq}, over the limit of "
                        f"{self.max_pending} bytes (max_reassembly) or {MAX_PENDING_SEGMENTS} "
                        "segments; the hole is declared lost",
                        ts,
                        self.src,
                        self.dst,
                        self.pending_bytes,
                        limit="max_reassembly",
                    )
                )
            else:
                return frames
            self._lose(self._nearest(), notices, ts, why, frames)
            self._drain(frames, notices, ts)
            return frames
        self._deliver(data, missing, frames, notices, ts)
        if self.pending:
            self._drain(frames, notices, ts)
        return frames

    def finish(self, notices: list[Notice], ts: int | None) -> list[Parsed]:
        """End of the stream (FIN, RST or end of capture).

        Deliver what waits behind holes, declaring the holes, and report a
        half-read frame.

        Args:
            notices: Where gap and incomplete notices go.
            ts: The capture time, integer nanoseconds, or None.

        Returns:
            The frames the held bytes completed, in stream order.
        """
        frames: list[Parsed] = []
        while self.pending:
            self._lose(self._nearest(), notices, ts, "the stream ended without them", frames)
            self._drain(frames, notices, ts)
        if self.cut:
            self._lose(self.cut, notices, ts, _CUT, frames)
        for lost in self.parser.abandon(frames):
            notices.append(Notice("incomplete", lost, ts, self.src, self.dst))
        return frames

    def _deliver(
        self, data: bytes, missing: int, frames: list[Parsed], notices: list[Notice], ts: int | None
    ) -> None:
        if data:
            frames.extend(self.parser.feed(data))
            self.next_seq = (self.next_seq + len(data)) & MASK  # type: ignore[operator]
            self.next_pos += len(data)
            self.keep(data)
        if missing:
            self.cut = missing  # a claim: the next segment settles it

    def _settle_cut(
        self, ahead: int, frames: list[Parsed], notices: list[Notice], ts: int | None
    ) -> None:
        """The next bytes seen start `ahead` bytes past next_seq: as many of
        the claimed cut bytes as that are lost; none if it is 0 (or the
        segment is elsewhere, where the usual rules apply)."""
        cut, self.cut = self.cut, 0
        if 0 < ahead <= cut:
            self._lose(ahead, notices, ts, _CUT, frames)

    def _drain(self, frames: list[Parsed], notices: list[Notice], ts: int | None) -> None:
        """Deliver the waiting segments that now start at or before next_seq
        (their new bytes; old ones are dropped), nearest first, up to a hole."""
        pending, order = self.pending, self.order
        while order:
            if self.cut:
                self._settle_cut(order[0] - self.next_pos, frames, notices, ts)
            if order[0] > self.next_pos:
                break
            pos = heappop(order)
            data, missing = pending.pop(pos)
            self.pending_bytes -= len(data)
            back = self.next_pos - pos
            if back > 0:
                self._compare(back, data, notices, ts)
            if back < len(data):
                self._deliver(data[back:], missing, frames, notices, ts)
            elif back < len(data) + missing:
                self._deliver(b"", missing - (back - len(data)), frames, notices, ts)

    def _compare(self, back: int, data: bytes, notices: list[Notice], ts: int | None) -> None:
        """`data` starts `back` (> 0) bytes behind next_seq: its bytes that
        the window holds were delivered already, from another copy; a
        notice if they differ (the first time in this direction)."""
        if self.told:
            return
        window = self._gather()
        lo, hi = max(0, back - len(window)), min(back, len(data))
        if lo >= hi:
            return
        at = len(window) - back  # the window's index of data[0]
        if data[lo:hi] == window[at + lo : at + hi]:
            return
        first, differ = -1, 0
        for i in range(lo, hi):
            if data[i] != window[at + i]:
                differ += 1
                if first < 0:
                    first = i
        seq = (self.next_seq - back) & MASK  # type: ignore[operator]
        notices.append(
            Notice(
                "retransmission",
                f"retransmitted bytes differ from those delivered: {differ} of "
                f"{hi - lo} bytes compared in a segment of {len(data)} bytes at sequence "
                f"{seq}, the first at sequence {(seq + first) & MASK}; the copy delivered "
                "first was kept (later retransmissions in this direction are not compared)",
                ts,
                self.src,
                self.dst,
                differ,
            )
        )
        self.told = True
        self._forget()

    def _nearest(self) -> int:
        """Bytes from next_seq to the nearest waiting segment (after a drain)."""
        return self.order[0] - self.next_pos

    def _lose(
        self, nbytes: int, notices: list[Notice], ts: int | None, why: str, frames: list[Parsed]
    ) -> None:
        self.cut = 0  # a declared loss settles any claim
        notices.append(
            Notice(
                "gap",
                f"{nbytes} bytes missing at sequence {self.next_seq} "
                f"({why}); resuming at the next control line",
                ts,
                self.src,
                self.dst,
                nbytes,
            )
        )
        for lost in self.parser.abandon(frames):
            notices.append(Notice("incomplete", lost, ts, self.src, self.dst))
        self.parser.gap()  # nothing half-read is left: this only resynchronises
        self._forget()  # what was delivered is no longer right behind next_seq
        self.next_seq = (self.next_seq + nbytes) & MASK  # type: ignore[operator]
        self.next_pos += nbytes
