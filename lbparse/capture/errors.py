"""CaptureError: a capture file that cannot be read, and its kinds.

Problems *inside* readable traffic (a gap in a TCP stream, a NATS frame
that does not parse, a file cut in the middle of a packet) are not raised:
the reader reports them as `Notice`s and carries on, because one lost
packet must not cost the rest of a long capture. That holds for a damaged
pcap record or pcapng block too: a `bad_block` notice, and reading resumes
at the next plausible one. `CaptureError` is for input that cannot be read
at all.
"""

from __future__ import annotations

from typing import ClassVar

from lbparse.errors import InputError

__all__ = ["CAPTURE_ERROR_KINDS", "KINDS", "CaptureError"]

CAPTURE_ERROR_KINDS: tuple[str, ...] = (
    "unknown_format",  # not pcap, pcapng, nor our JSON Lines / Parquet records
    "bad_header",  # a pcap file header or pcapng section header that makes no sense
    "bad_block",  # kept for callers; damaged records and blocks are now a
    # Notice of this name, and reading resumes past them
    "unsupported_linktype",  # a whole pcap file of a link type we cannot read
    "bad_record",  # a file of our JSON Lines / Parquet format without one record
    # (a bad line or row among records is a Notice of this name)
    "not_a_file",  # a FIFO, socket, device or directory: opening it could block
)
KINDS = CAPTURE_ERROR_KINDS  # the older name, kept for callers (lbparse.capture.KINDS)


class CaptureError(InputError):
    """A capture file lbparse cannot read; `kind` is one of `CAPTURE_ERROR_KINDS`.

    The message says what was found and where (file offset, line number);
    `offset` carries the byte offset for programs when there is one.
    """

    KINDS: ClassVar[frozenset[str]] = frozenset(CAPTURE_ERROR_KINDS)
