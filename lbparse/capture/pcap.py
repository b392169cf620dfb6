"""Classic pcap files: microsecond and nanosecond, both byte orders.

`PcapSource` yields one tuple per packet, `(ts, linktype, buf, off, caplen,
wirelen)`: the packet is `buf[off:off+caplen]`, `ts` its capture time in
integer nanoseconds since the Unix epoch (exact for both resolutions). Handing out the read block
and an offset instead of a slice saves a copy per packet; the block is read
1 MiB at a time, so memory stays flat whatever the file size, and follows
the bytes read, never a length field: a record that claims more than the
file holds costs what the file holds.

A record header that cannot be right (longer than the snap length allows,
or running past the end of the file while plausible records follow it)
is reported as a `bad_block` notice, and reading resumes at the next
plausible record: one whose header makes sense and is followed by another
that does (or by the end of the file). Garbage in the middle of a file
costs the packets it overwrote, not the rest of the file; only a record
cut by the end of the file, with nothing plausible after its start, is
the file's `truncated` end.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, BinaryIO, Final, cast

if TYPE_CHECKING:  # annotations only: mypyc's native 64-bit integer (plain int otherwise)
    from mypy_extensions import i64

from lbparse.capture.errors import CaptureError
from lbparse.capture.notices import Notice

BLOCK = 1 << 20
# A record longer than this is a corrupt length field, not a packet.
MAX_RECORD = 1 << 26
# Records may exceed a file's snap length (writers disagree on it), but not
# this: the snap length tcpdump has used since 4.99.
MIN_MAX_RECORD = 1 << 18

# Byte order, and nanoseconds per unit of the timestamp's fraction field.
MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),
    b"\xa1\xb2\x3c\x4d": (">", 1),
}
NS_PER_S: Final = 1_000_000_000

# (ts in nanoseconds, link type, buffer, offset, captured length, wire length)
Packet = tuple[int, int, bytes, int, int, int]


def read_more(f: BinaryIO, need: int) -> bytes:
    """At least `need` bytes from `f` (a file gives a whole BLOCK), or what is left.

    Read a block at a time: `f.read(n)` allocates n bytes before it knows
    whether the file has them. A pipe (lbparse.capture.pipe) gives what has
    arrived, so a live capture is parsed as it comes.

    Args:
        f: The file (or PipeReader) to read from its current position.
        need: The fewest bytes wanted; blocks are read until there are as
            many, or the file ends.

    Returns:
        The bytes read (fewer than `need` only at the file's end).
    """
    chunks = []
    got = 0
    while True:
        chunk = f.read(BLOCK)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        if got >= need:
            break
    return b"".join(chunks)


def refill(f: BinaryIO, base: int, pos: int, n: int, need: int) -> tuple[bytes, int, bool]:
    """The next buffer once `buf[:pos]` is used up.

    At least `need` bytes from `pos` on, if the file has them. The kept bytes
    are read again with the next block rather than the block appended to
    them: one copy of every byte, not two.

    Args:
        f: The file the buffer was read from (it is seeked).
        base: The file offset of the buffer's first byte.
        pos: The buffer position up to which it is used.
        n: The buffer's length.
        need: The fewest bytes wanted from `pos` on.

    Returns:
        (buffer, its file offset, whether the file had nothing more).
    """
    kept = n - pos
    base += pos
    f.seek(base)
    buf = read_more(f, max(need, kept + 1))
    return buf, base, len(buf) <= kept


class PcapSource:
    """Packets of one pcap file; `bytes_read` follows the reading for progress.

    Iterating yields Packets (ts in nanoseconds, link type, buffer, offset,
    captured length, wire length).

    Args:
        f: The file, at its start (its 24-byte header is read here).
        name: How notices and errors name the file.
        on_notice: Called with each Notice (truncated, bad_block), if given.

    Raises:
        CaptureError: The file does not start with a pcap file header (kind
            bad_header).
    """

    def __init__(
        self, f: BinaryIO, name: str = "capture", on_notice: Callable[[Notice], None] | None = None
    ) -> None:
        self.f = f
        self.name = name
        self.bytes_read = 0
        self.on_notice = on_notice
        head = f.read(24)
        self.bytes_read = len(head)
        if len(head) < 24 or head[:4] not in MAGICS:
            raise CaptureError(
                "bad_header",
                f"{name}: not a pcap file header (first bytes {head[:4].hex() or 'none'})",
                offset=0,
            )
        self.endian, self.tick = MAGICS[head[:4]]  # tick: nanoseconds per fraction unit
        _, _, _, _, self.snaplen, network = struct.unpack(self.endian + "HHiIII", head[4:])
        # The upper bits of the link type field carry FCS information.
        self.linktype = network & 0xFFFF
        self.max_record = min(max(self.snaplen, MIN_MAX_RECORD), MAX_RECORD)
        self._frac_limit = NS_PER_S // self.tick  # a fraction field past a second is damage

    def __iter__(self) -> Iterator[Packet]:
        unpack_from = struct.Struct(self.endian + "IIII").unpack_from
        f, lt, maxrec = self.f, self.linktype, self.max_record
        # Nanoseconds as native 64-bit integers in the compiled build: an
        # int product past 2**31 takes mypyc's slow path (PyLong objects),
        # ~800 instructions a packet. No overflow: 32-bit seconds times 10**9
        # and a 32-bit fraction times at most 1000 stay below 2**63.
        tick: i64 = self.tick
        second: i64 = NS_PER_S
        buf = read_more(f, 1)  # a file: one BLOCK; a pipe: what has come
        base = 24  # file offset of buf[0]
        pos = 0
        eof = False
        bad_at = -1  # file offset where unreadable bytes began, while looking past them
        while True:
            n = len(buf)
            need = 16
            if bad_at >= 0:
                pos, need = self._resync(buf, pos, n, eof)
                if need == 0:
                    self._skipped(bad_at, base + pos)
                    bad_at = -1
                elif eof:  # nothing plausible in the rest of the file
                    self._skipped(bad_at, base + n)
                    self.bytes_read = base + n
                    return
            if bad_at < 0:
                while pos + 16 <= n:
                    sec, frac, incl, orig = cast(tuple[int, int, int, int], unpack_from(buf, pos))
                    end = pos + 16 + incl
                    if end > n or incl > maxrec:
                        break
                    s: i64 = sec
                    fr: i64 = frac
                    yield s * second + fr * tick, lt, buf, pos + 16, incl, orig
                    pos = end
                else:
                    incl = 0
                if incl > maxrec:
                    bad_at = base + pos
                    self._notice(
                        Notice(
                            "bad_block",
                            f"{self.name}: packet record at offset "
                            f"{bad_at} claims {incl} bytes, more than its snap "
                            f"length allows ({maxrec}): the file is damaged here; "
                            "looking for the next plausible record",
                        )
                    )
                    pos += 1
                    continue
                need = 16 + incl
                if eof:
                    q = self._after_damage(buf, pos + 1, n) if pos + 16 <= n else -1
                    if q >= 0:
                        # A length that runs past the end, with records after
                        # it: damage, not a file cut short.
                        self._notice(
                            Notice(
                                "bad_block",
                                f"{self.name}: packet record at offset "
                                f"{base + pos} claims {incl} bytes, past the end of "
                                f"the file at {base + n}, and records follow it: the "
                                "file is damaged here; reading on at the next "
                                "plausible record",
                            )
                        )
                        self._skipped(base + pos, base + q)
                        pos = q
                        continue
                    if pos < n:
                        self._truncated(base + pos, n - pos, incl)
                    self.bytes_read = base + n
                    return
            self.bytes_read = base + pos
            buf, base, eof = refill(f, base, pos, n, need)
            pos = 0

    def _plausible(self, buf: bytes, q: int) -> int:
        """The length of a plausible record at `q`, -1 if there is none."""
        sec, frac, incl, orig = cast(
            tuple[int, int, int, int], struct.unpack_from(self.endian + "IIII", buf, q)
        )
        if frac >= self._frac_limit or incl > self.max_record or orig < incl:
            return -1
        return incl

    def _after_damage(self, buf: bytes, pos: int, n: int) -> int:
        """In the last bytes of the file (`buf[pos:n]`, all there is): the
        first non-empty plausible record followed by another, or ending the
        file exactly; -1 if none. Stricter than `_resync` (empty records are
        what runs of zeros in a cut packet look like): it decides between
        damage and a file cut short."""
        for q in range(pos, n - 15):
            incl = self._plausible(buf, q)
            if incl <= 0:
                continue
            nxt = q + 16 + incl
            if nxt == n or (nxt + 16 <= n and self._plausible(buf, nxt) > 0):
                return q
        return -1

    def _resync(self, buf: bytes, pos: int, n: int, eof: bool) -> tuple[int, int]:
        """Look from `pos` for a plausible record followed by another, or
        ending the file. Returns (offset, 0) when found, else (offset to
        keep from, bytes needed there); at the end of the file only a
        record that ends it exactly is found without a successor."""
        for q in range(pos, n - 15):
            incl = self._plausible(buf, q)
            if incl < 0:
                continue
            nxt = q + 16 + incl
            if nxt + 16 > n:
                if not eof:
                    return q, nxt + 16 - q  # read on: the next header decides
                if nxt == n:
                    return q, 0
                continue
            if self._plausible(buf, nxt) >= 0:
                return q, 0
        return max(pos, n - 15), 16

    def _skipped(self, start: int, end: int) -> None:
        self._notice(
            Notice(
                "bad_block",
                f"{self.name}: skipped {end - start} damaged bytes from offset {start} to {end}",
                nbytes=end - start,
            )
        )

    def _notice(self, n: Notice) -> None:
        if self.on_notice:
            self.on_notice(n)

    def _truncated(self, offset: int, have: int, incl: int) -> None:
        what = "a packet header" if have < 16 else f"a packet of {incl} bytes ({have - 16} present)"
        self._notice(
            Notice(
                "truncated",
                f"{self.name}: file ends at offset {offset + have} "
                f"inside {what}; the partial packet is skipped",
                nbytes=have,
            )
        )
