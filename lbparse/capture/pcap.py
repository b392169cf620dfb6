"""Classic pcap files: microsecond and nanosecond, both byte orders.

`PcapSource` yields one tuple per packet, `(ts, linktype, buf, off, caplen,
wirelen)`: the packet is `buf[off:off+caplen]`. Handing out the read block
and an offset instead of a slice saves a copy per packet; the block is read
1 MiB at a time, so memory stays flat whatever the file size.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Callable, Iterator

from lbparse.capture.errors import CaptureError
from lbparse.capture.notices import Notice

BLOCK = 1 << 20
# A record longer than this is a corrupt length field, not a packet.
MAX_RECORD = 1 << 26

MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}

Packet = tuple[float, int, bytes, int, int, int]


class PcapSource:
    """Packets of one pcap file; `bytes_read` follows the reading for progress."""

    def __init__(self, f: BinaryIO, name: str = "capture",
                 on_notice: Callable[[Notice], None] | None = None) -> None:
        self.f = f
        self.name = name
        self.bytes_read = 0
        self.on_notice = on_notice
        head = f.read(24)
        self.bytes_read = len(head)
        if len(head) < 24 or head[:4] not in MAGICS:
            raise CaptureError("bad_header", f"{name}: not a pcap file header "
                               f"(first bytes {head[:4].hex() or 'none'})", offset=0)
        self.endian, self.tick = MAGICS[head[:4]]
        _, _, _, _, self.snaplen, network = struct.unpack(self.endian + "HHiIII", head[4:])
        # The upper bits of the link type field carry FCS information.
        self.linktype = network & 0xFFFF

    def __iter__(self) -> Iterator[Packet]:
        unpack_from = struct.Struct(self.endian + "IIII").unpack_from
        f, tick, lt = self.f, self.tick, self.linktype
        buf = f.read(BLOCK)
        base = 24  # file offset of buf[0]
        pos = 0
        while True:
            n = len(buf)
            while pos + 16 <= n:
                sec, frac, incl, orig = unpack_from(buf, pos)
                end = pos + 16 + incl
                if end > n:
                    break
                yield sec + frac * tick, lt, buf, pos + 16, incl, orig
                pos = end
            else:
                incl = 0
            if incl > MAX_RECORD:
                raise CaptureError("bad_block", f"{self.name}: packet record at offset "
                                   f"{base + pos} claims {incl} bytes", offset=base + pos)
            self.bytes_read = base + pos
            more = f.read(max(BLOCK, pos + 16 + incl - n))
            if not more:
                if pos < n:
                    self._truncated(base + pos, n - pos, incl)
                self.bytes_read = base + n
                return
            base += pos
            buf = buf[pos:] + more
            pos = 0

    def _truncated(self, offset: int, have: int, incl: int) -> None:
        what = ("a packet header" if have < 16
                else f"a packet of {incl} bytes ({have - 16} present)")
        if self.on_notice:
            self.on_notice(Notice("truncated", f"{self.name}: file ends at offset {offset + have} "
                                  f"inside {what}; the partial packet is skipped",
                                  nbytes=have))
