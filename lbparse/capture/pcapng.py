"""pcapng files: several sections and interfaces, each interface with its
own link type, snap length and timestamp resolution.

`PcapngSource` yields the same `(ts, linktype, buf, off, caplen, wirelen)`
tuples as `PcapSource`. Blocks other than section headers, interface
descriptions and packets are skipped by their length.

Every block carries its length twice, before and after its body; a block
whose two lengths disagree, or that is too short for its own fields, or a
packet of an interface never described, is reported as a `bad_block`
notice. A block with sound lengths is skipped alone; otherwise reading
resumes at the next offset where a block of a known type starts with both
lengths agreeing; so it does after a block whose length runs past the end
of the file when whole blocks follow it, and after garbled bytes that read
as a section header with a bad byte-order magic (only the file's first
section header decides whether the file is readable at all). Memory
follows the bytes read, never a length field.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import BinaryIO

from lbparse.capture import pcap
from lbparse.capture.errors import CaptureError
from lbparse.capture.notices import Notice
from lbparse.capture.pcap import NS_PER_S, Packet, read_more, refill
from lbparse.capture.records import NO_TIME, fits_int64

SHB = 0x0A0D0D0A
IDB = 1
OPB = 2  # obsolete packet block
SPB = 3
EPB = 6
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_TSRESOL = 9
OPT_TSOFFSET = 14
# Shortest block of each type that holds its fixed fields.
MIN_LEN = {SHB: 28, IDB: 20, OPB: 32, SPB: 16, EPB: 32}
# Block types a resynchronisation may land on (pcapng spec, section 11.1).
KNOWN = frozenset({SHB, IDB, OPB, SPB, 4, 5, EPB, 9, 0xA, 0xB, 0xBAD, 0x40000BAD})

# The block type of a Section Header Block, which every pcapng file starts with.
MAGIC = b"\x0a\x0d\x0d\x0a"


class _Interface:
    __slots__ = ("linktype", "snaplen", "num", "den", "offset")

    def __init__(self, linktype: int, snaplen: int, num: int, den: int, offset: int) -> None:
        self.linktype = linktype
        self.snaplen = snaplen
        self.num = num  # ts in ns = units * num // den + offset
        self.den = den
        self.offset = offset


def _tsresol(v: int) -> tuple[int, int]:
    """if_tsresol as a fraction of nanoseconds per unit (numerator,
    denominator): exact, finer units rounded down to the nanosecond."""
    # High bit set: a negative power of two; else a negative power of ten.
    if v & 0x80:
        return NS_PER_S, 1 << (v & 0x7F)
    e = min(v, 60)  # past 10**-60 s a unit is nothing anyway
    return (10 ** (9 - e), 1) if e <= 9 else (1, 10 ** (e - 9))


def _held(ts: int) -> int:
    """A packet's time as the records hold it: NO_TIME past what 64 bits of
    nanoseconds hold (if_tsresol and if_tsoffset reach past them either way),
    as the C loop's (TS_NONE)."""
    return ts if fits_int64(ts) else NO_TIME


class PcapngSource:
    """Packets of one pcapng file; `bytes_read` follows the reading for progress.

    Iterating yields Packets (ts in nanoseconds, NO_TIME past what 64 bits
    hold; link type, buffer, offset, captured length, wire length), as
    PcapSource's.

    Args:
        f: The file, at its start (its first 12 bytes are read here).
        name: How notices and errors name the file.
        on_notice: Called with each Notice (truncated, bad_block), if given.

    Raises:
        CaptureError: The file does not start with a pcapng section header
            block (kind bad_header).
    """

    def __init__(
        self, f: BinaryIO, name: str = "capture", on_notice: Callable[[Notice], None] | None = None
    ) -> None:
        self.f = f
        self.name = name
        self.bytes_read = 0
        self.on_notice = on_notice
        head = f.read(12)
        if len(head) < 12 or head[:4] != MAGIC:
            raise CaptureError(
                "bad_header",
                f"{name}: not a pcapng section header block "
                f"(first bytes {head[:4].hex() or 'none'})",
                offset=0,
            )
        self._head = head
        self._endian = "<"

    def __iter__(self) -> Iterator[Packet]:
        f, name = self.f, self.name
        buf = self._head + read_more(f, 0)
        base = 0
        pos = 0
        endian = "<"
        u32 = struct.Struct("<I").unpack_from
        epb = struct.Struct("<IIIII").unpack_from
        ifaces: list[_Interface] = []
        eof = False
        bad_at = -1  # file offset where unreadable bytes began, while looking past them
        while True:
            n = len(buf)
            need = 12
            if bad_at >= 0:
                pos, need = self._resync(buf, pos, n, endian, eof)
                if need == 0:
                    self._skipped(bad_at, base + pos)
                    bad_at = -1
                elif eof:  # no block in the rest of the file
                    self._skipped(bad_at, base + n)
                    self.bytes_read = base + n
                    return
            while bad_at < 0 and pos + 12 <= n:
                btype, blen = struct.unpack_from(endian + "II", buf, pos)
                if btype == SHB:
                    bom = buf[pos + 8 : pos + 12]
                    if bom == b"\x4d\x3c\x2b\x1a":
                        endian = "<"
                    elif bom == b"\x1a\x2b\x3c\x4d":
                        endian = ">"
                    elif base + pos == 0:  # the file's byte order is unknown: unreadable
                        raise CaptureError(
                            "bad_header",
                            f"{name}: section header at offset "
                            f"{base + pos} has byte-order magic {bom.hex()}",
                            offset=base + pos,
                        )
                    else:  # garbled bytes that read as a section header
                        bad_at = self._damaged(
                            base + pos,
                            btype,
                            f"is a section header with byte-order magic {bom.hex()}",
                        )
                        pos += 1
                        break
                    blen = struct.unpack_from(endian + "I", buf, pos + 4)[0]
                    u32 = struct.Struct(endian + "I").unpack_from
                    epb = struct.Struct(endian + "IIIII").unpack_from
                if blen < 12 or blen % 4 or blen > pcap.MAX_RECORD:
                    bad_at = self._damaged(base + pos, btype, f"has length {blen}")
                    pos += 1
                    break
                end = pos + blen
                if end > n:
                    need = blen
                    break
                if u32(buf, end - 4)[0] != blen:
                    bad_at = self._damaged(
                        base + pos,
                        btype,
                        f"has length {blen} at its start and {u32(buf, end - 4)[0]} at its end",
                    )
                    pos += 1
                    break
                if blen < MIN_LEN.get(btype, 12):
                    self._bad(btype, base + pos, f"{blen} bytes are too few for its fields")
                elif btype == EPB:
                    iid, hi, lo, cap, orig = epb(buf, pos + 8)
                    if iid >= len(ifaces) or cap > blen - 32:
                        self._bad(
                            btype,
                            base + pos,
                            f"interface {iid} ({len(ifaces)} described), "
                            f"captured length {cap} in {blen - 32} bytes",
                        )
                    else:
                        i = ifaces[iid]
                        ts = ((hi << 32) | lo) * i.num // i.den + i.offset
                        yield _held(ts), i.linktype, buf, pos + 28, cap, orig
                elif btype == SHB:
                    ifaces = []
                elif btype == IDB:
                    ifaces.append(self._interface(buf, pos, blen, endian))
                elif btype == SPB:
                    if not ifaces:
                        self._bad(btype, base + pos, "no interface described before it")
                    else:
                        i = ifaces[0]
                        orig = u32(buf, pos + 8)[0]
                        cap = min(orig, blen - 16, i.snaplen or orig)
                        # A simple packet block has no timestamp.
                        yield 0, i.linktype, buf, pos + 12, cap, orig
                elif btype == OPB:
                    iid = struct.unpack_from(endian + "H", buf, pos + 8)[0]
                    hi, lo, cap, orig = struct.unpack_from(endian + "IIII", buf, pos + 12)
                    if iid >= len(ifaces) or cap > blen - 32:
                        self._bad(
                            btype,
                            base + pos,
                            f"interface {iid} ({len(ifaces)} described), "
                            f"captured length {cap} in {blen - 32} bytes",
                        )
                    else:
                        i = ifaces[iid]
                        yield (
                            _held(((hi << 32) | lo) * i.num // i.den + i.offset),
                            i.linktype,
                            buf,
                            pos + 28,
                            cap,
                            orig,
                        )
                pos = end
            if bad_at >= 0 and need == 12 and pos + 12 <= n:
                continue  # just found damage: look past it in what is already read
            if (
                eof
                and bad_at < 0
                and pos + 12 <= n
                and need > 12
                and self._resync(buf, pos + 1, n, endian, eof)[1] == 0
            ):
                # A length that runs past the end, with blocks after it:
                # damage, not a file cut short.
                bad_at = self._damaged(
                    base + pos,
                    struct.unpack_from(endian + "I", buf, pos)[0],
                    f"has length {need}, past the end of the file at "
                    f"{base + n}, and blocks follow it",
                )
                pos += 1
                continue
            if eof and bad_at < 0:
                if pos < n:
                    self._notice(
                        Notice(
                            "truncated",
                            f"{name}: file ends at offset {base + n} "
                            f"inside a block starting at {base + pos}; "
                            "the partial block is skipped",
                            nbytes=n - pos,
                        )
                    )
                self.bytes_read = base + n
                return
            self.bytes_read = base + pos
            buf, base, eof = refill(f, base, pos, n, need)
            pos = 0

    def _resync(self, buf: bytes, pos: int, n: int, endian: str, eof: bool) -> tuple[int, int]:
        """Look from `pos` for a block of a known type whose leading and
        trailing lengths agree. Returns (offset, 0) when found, else (offset
        to keep from, bytes needed there); at the end of the file a block
        that would run past it is none."""
        lead = struct.Struct(endian + "II").unpack_from
        for q in range(pos, n - 11):
            btype, blen = lead(buf, q)
            if btype == SHB:  # a new section may change the byte order
                bom = buf[q + 8 : q + 12]
                if bom not in (b"\x4d\x3c\x2b\x1a", b"\x1a\x2b\x3c\x4d"):
                    continue
                blen = struct.unpack_from("<I" if bom[0] == 0x4D else ">I", buf, q + 4)[0]
                tail = "<I" if bom[0] == 0x4D else ">I"
            elif btype in KNOWN:
                tail = endian + "I"
            else:
                continue
            if blen < 12 or blen % 4 or blen > pcap.MAX_RECORD:
                continue
            if q + blen > n:
                if eof:
                    continue
                return q, blen  # read on: the trailing length decides
            if struct.unpack_from(tail, buf, q + blen - 4)[0] == blen:
                return q, 0
        return max(pos, n - 11), 12

    def _damaged(self, offset: int, btype: int, what: str) -> int:
        self._notice(
            Notice(
                "bad_block",
                f"{self.name}: block of type {btype:#x} at offset "
                f"{offset} {what}: the file is damaged here; looking for the "
                "next block",
            )
        )
        return offset

    def _skipped(self, start: int, end: int) -> None:
        self._notice(
            Notice(
                "bad_block",
                f"{self.name}: skipped {end - start} damaged bytes from offset {start} to {end}",
                nbytes=end - start,
            )
        )

    def _bad(self, btype: int, offset: int, what: str) -> None:
        self._notice(
            Notice(
                "bad_block",
                f"{self.name}: block of type {btype} at offset "
                f"{offset}: {what}; the block is skipped",
            )
        )

    def _notice(self, n: Notice) -> None:
        if self.on_notice:
            self.on_notice(n)

    def _interface(self, buf: bytes, pos: int, blen: int, endian: str) -> _Interface:
        linktype, _, snaplen = struct.unpack_from(endian + "HHI", buf, pos + 8)
        (num, den), offset = _tsresol(6), 0  # microseconds unless said otherwise
        p, end = pos + 16, pos + blen - 4
        while p + 4 <= end:
            code, olen = struct.unpack_from(endian + "HH", buf, p)
            if code == 0:
                break
            if code == OPT_TSRESOL and olen >= 1:
                num, den = _tsresol(buf[p + 4])
            elif code == OPT_TSOFFSET and olen >= 8 and p + 12 <= end:
                offset = struct.unpack_from(endian + "q", buf, p + 4)[0] * NS_PER_S
            p += 4 + (olen + 3) // 4 * 4
        return _Interface(linktype, snaplen, num, den, offset)
