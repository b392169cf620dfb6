"""Which format an input is in, told from its first bytes: the one place that tells.

`sniff_head(head)` names the format of bytes that start with `head` (at
least `HEAD_BYTES` of them, fewer only at the end of a file); `sniff(path)`
opens a file to look. The formats are those the capture reader and the
pipeline read: pcap (either byte order, micro- or nanosecond timestamps),
pcapng, Parquet, and our own JSON Lines records (`lbparse record`), which
start with a JSON object, or blank space, or are empty.
"""

from __future__ import annotations

import os
import stat

from lbparse.capture.pcap import MAGICS as PCAP_MAGICS
from lbparse.capture.pcapng import MAGIC as PCAPNG_MAGIC

__all__ = [
    "FORMATS",
    "HEAD_BYTES",
    "JSONL",
    "MISSING",
    "PARQUET",
    "PCAP",
    "PCAPNG",
    "UNKNOWN",
    "regular_file",
    "sniff",
    "sniff_head",
]

PCAP, PCAPNG, PARQUET, JSONL = "pcap", "pcapng", "parquet", "jsonl"
UNKNOWN = "unknown"  # none of the above
MISSING = "missing"  # the file cannot be opened
FORMATS = (PCAP, PCAPNG, PARQUET, JSONL)
HEAD_BYTES = 4
PARQUET_MAGIC = b"PAR1"  # Parquet's file header (and footer)
_JSONL_STARTS = (b"{", b"\n", b" ", b"")


def sniff_head(head: bytes) -> str:
    """The format of data whose first bytes are `head`.

    Args:
        head: The data's first bytes (only HEAD_BYTES of them are looked at).

    Returns:
        PCAP, PCAPNG, PARQUET, JSONL or UNKNOWN.
    """
    head = head[:HEAD_BYTES]
    if head in PCAP_MAGICS:
        return PCAP
    if head == PCAPNG_MAGIC:
        return PCAPNG
    if head == PARQUET_MAGIC:
        return PARQUET
    if head[:1] in _JSONL_STARTS:
        return JSONL
    return UNKNOWN


def regular_file(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a regular file (a link to one counts).

    Anything else (a FIFO, a socket, a device) may block the reading forever
    when opened: a FIFO in an input directory stalled the pipeline's planning
    (issue #19).

    Args:
        path: The file to look at; it is stat-ed, never opened.

    Returns:
        True for a regular file; False for anything else, or when it cannot
        be stat-ed.
    """
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def sniff(path: str | os.PathLike[str]) -> str:
    """The format of a file by its first bytes.

    Args:
        path: The file to sniff.

    Returns:
        PCAP, PCAPNG, PARQUET, JSONL or UNKNOWN, or `MISSING` if it cannot be
        opened, or is not a regular file (it is never opened then).
    """
    if not regular_file(path):
        return MISSING
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return MISSING
    return sniff_head(head)
