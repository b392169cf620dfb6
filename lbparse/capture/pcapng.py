"""pcapng files: several sections and interfaces, each interface with its
own link type, snap length and timestamp resolution.

`PcapngSource` yields the same `(ts, linktype, buf, off, caplen, wirelen)`
tuples as `PcapSource`. Blocks other than section headers, interface
descriptions and packets are skipped by their length.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Callable, Iterator

from lbparse.capture.errors import CaptureError
from lbparse.capture.notices import Notice
from lbparse.capture.pcap import BLOCK, MAX_RECORD, Packet

SHB = 0x0A0D0D0A
IDB = 1
OPB = 2  # obsolete packet block
SPB = 3
EPB = 6
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_TSRESOL = 9
OPT_TSOFFSET = 14


class _Interface:
    __slots__ = ("linktype", "snaplen", "tick", "offset")

    def __init__(self, linktype: int, snaplen: int, tick: float, offset: int) -> None:
        self.linktype = linktype
        self.snaplen = snaplen
        self.tick = tick
        self.offset = offset


def _tsresol(v: int) -> float:
    # High bit set: a negative power of two; else a negative power of ten.
    return 2.0 ** -(v & 0x7F) if v & 0x80 else 10.0 ** -v


class PcapngSource:
    """Packets of one pcapng file; `bytes_read` follows the reading for progress."""

    def __init__(self, f: BinaryIO, name: str = "capture",
                 on_notice: Callable[[Notice], None] | None = None) -> None:
        self.f = f
        self.name = name
        self.bytes_read = 0
        self.on_notice = on_notice
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"\x0a\x0d\x0d\x0a":
            raise CaptureError("bad_header", f"{name}: not a pcapng section header block "
                               f"(first bytes {head[:4].hex() or 'none'})", offset=0)
        self._head = head

    def __iter__(self) -> Iterator[Packet]:
        f, name = self.f, self.name
        buf = self._head + f.read(BLOCK)
        base = 0
        pos = 0
        endian = "<"
        u32 = struct.Struct("<I").unpack_from
        epb = struct.Struct("<IIIII").unpack_from
        ifaces: list[_Interface] = []
        while True:
            n = len(buf)
            need = 12
            while pos + 12 <= n:
                btype, blen = struct.unpack_from(endian + "II", buf, pos)
                if btype == SHB:
                    bom = buf[pos + 8:pos + 12]
                    if bom == b"\x4d\x3c\x2b\x1a":
                        endian = "<"
                    elif bom == b"\x1a\x2b\x3c\x4d":
                        endian = ">"
                    else:
                        raise CaptureError("bad_header", f"{name}: section header at offset "
                                           f"{base + pos} has byte-order magic {bom.hex()}",
                                           offset=base + pos)
                    blen = struct.unpack_from(endian + "I", buf, pos + 4)[0]
                    u32 = struct.Struct(endian + "I").unpack_from
                    epb = struct.Struct(endian + "IIIII").unpack_from
                if blen < 12 or blen % 4 or blen > MAX_RECORD:
                    raise CaptureError("bad_block", f"{name}: block of type {btype:#x} at offset "
                                       f"{base + pos} has length {blen}", offset=base + pos)
                end = pos + blen
                if end > n:
                    need = blen
                    break
                if btype == EPB:
                    iid, hi, lo, cap, orig = epb(buf, pos + 8)
                    if iid >= len(ifaces) or cap > blen - 32:
                        self._bad(btype, base + pos, f"interface {iid}, captured length {cap}")
                    i = ifaces[iid]
                    ts = ((hi << 32) | lo) * i.tick + i.offset
                    yield ts, i.linktype, buf, pos + 28, cap, orig
                elif btype == SHB:
                    ifaces = []
                elif btype == IDB:
                    ifaces.append(self._interface(buf, pos, blen, endian))
                elif btype == SPB:
                    if not ifaces:
                        self._bad(btype, base + pos, "no interface described before it")
                    i = ifaces[0]
                    orig = u32(buf, pos + 8)[0]
                    cap = min(orig, blen - 16, i.snaplen or orig)
                    # A simple packet block has no timestamp.
                    yield 0.0, i.linktype, buf, pos + 12, cap, orig
                elif btype == OPB:
                    iid = struct.unpack_from(endian + "H", buf, pos + 8)[0]
                    hi, lo, cap, orig = struct.unpack_from(endian + "IIII", buf, pos + 12)
                    if iid >= len(ifaces) or cap > blen - 32:
                        self._bad(btype, base + pos, f"interface {iid}, captured length {cap}")
                    i = ifaces[iid]
                    yield ((hi << 32) | lo) * i.tick + i.offset, i.linktype, buf, pos + 28, cap, orig
                pos = end
            self.bytes_read = base + pos
            more = f.read(max(BLOCK, pos + need - n))
            if not more:
                if pos < n and self.on_notice:
                    self.on_notice(Notice("truncated", f"{name}: file ends at offset {base + n} "
                                          f"inside a block starting at {base + pos}; "
                                          "the partial block is skipped", nbytes=n - pos))
                self.bytes_read = base + n
                return
            base += pos
            buf = buf[pos:] + more
            pos = 0

    def _bad(self, btype: int, offset: int, what: str) -> None:
        raise CaptureError("bad_block", f"{self.name}: packet block of type {btype} at offset "
                           f"{offset}: {what}", offset=offset)

    def _interface(self, buf: bytes, pos: int, blen: int, endian: str) -> _Interface:
        linktype, _, snaplen = struct.unpack_from(endian + "HHI", buf, pos + 8)
        tick, offset = 1e-6, 0
        p, end = pos + 16, pos + blen - 4
        while p + 4 <= end:
            code, olen = struct.unpack_from(endian + "HH", buf, p)
            if code == 0:
                break
            if code == OPT_TSRESOL and olen >= 1:
                tick = _tsresol(buf[p + 4])
            elif code == OPT_TSOFFSET and olen >= 8:
                offset = struct.unpack_from(endian + "q", buf, p + 4)[0]
            p += 4 + (olen + 3) // 4 * 4
        return _Interface(linktype, snaplen, tick, offset)
