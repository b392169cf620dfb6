"""Link layers: where the IP header starts in a captured frame.

`ip_offset(linktype, buf, off, end)` returns the offset of the IPv4 or IPv6
header, or -1 for frames that carry neither (ARP, unknown link types).
Ethernet, the common case, is also inlined in the reader's loop.
"""

from __future__ import annotations

ETHERNET = 1
NULL = 0  # BSD loopback, address family in host byte order
LOOP = 108  # OpenBSD loopback, address family in network byte order
RAW = 101
RAW_ALT = (12, 14)  # DLT_RAW as some systems number it
IPV4 = 228
IPV6 = 229
LINUX_SLL = 113
LINUX_SLL2 = 276

SUPPORTED = frozenset({ETHERNET, NULL, LOOP, RAW, *RAW_ALT, IPV4, IPV6, LINUX_SLL, LINUX_SLL2})

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
_VLAN = (0x8100, 0x88A8, 0x9100)


def ip_offset(linktype: int, buf: bytes, off: int, end: int) -> int:
    """Where the IPv4 or IPv6 header starts in a captured frame.

    Args:
        linktype: The capture's link-layer type (pcap LINKTYPE_ number).
        buf: The buffer holding the frame.
        off: The frame's first byte in `buf`.
        end: The offset just past the frame's captured bytes in `buf`.

    Returns:
        The offset in `buf` of the IP header, or -1 for frames that carry
        neither IPv4 nor IPv6 (ARP, unknown link types) or are too short.
    """
    if linktype == ETHERNET:
        p = off + 12
        while p + 2 <= end:
            et = buf[p] << 8 | buf[p + 1]
            if et in _VLAN:
                p += 4
                continue
            return p + 2 if et in (ETH_IPV4, ETH_IPV6) else -1
        return -1
    if linktype == LINUX_SLL:
        return off + 16 if off + 16 <= end and _is_ip(buf[off + 14] << 8 | buf[off + 15]) else -1
    if linktype == LINUX_SLL2:
        return off + 20 if off + 20 <= end and _is_ip(buf[off] << 8 | buf[off + 1]) else -1
    if linktype in (NULL, LOOP):
        # The 4-byte address family differs across BSDs (AF_INET6 is 24, 28
        # or 30) and byte orders; the IP version nibble is what is certain.
        return off + 4 if off + 4 < end and buf[off + 4] >> 4 in (4, 6) else -1
    if linktype in (RAW, IPV4, IPV6) or linktype in RAW_ALT:
        return off if off < end and buf[off] >> 4 in (4, 6) else -1
    return -1


def _is_ip(ethertype: int) -> bool:
    return ethertype == ETH_IPV4 or ethertype == ETH_IPV6
