"""Notice: something the reader noticed in readable traffic and went past.

Kinds:
  gap         bytes of a TCP stream are not in the capture (dropped packet,
              short snap length); parsing resumed at the next control line
  incomplete  a NATS message started but its bytes never all arrived (cut
              by a gap, or by the end of the capture); it is not yielded
  protocol    bytes that are not the NATS protocol where a control line was
              expected; parsing resumed at the next control line
  truncated   the capture file ends in the middle of a packet record
  limit       a resource limit was hit (`limit` names it: max_frame,
              max_reassembly); what it refused is said, and dropped
  bad_block   a pcap record or pcapng block whose lengths make no sense;
              reading resumed at the next plausible one
  bad_record  a line (row) of our JSON Lines (Parquet) records that is not a
              record, or a Parquet row group that does not read; reading
              went on with the next
  retransmission  a second copy of TCP bytes (a retransmission, an overlap)
              differs from the bytes delivered first, which were kept; said
              once per direction of a connection (lbparse.capture.tcp)
  grpc        something of a gRPC call or its HTTP/2 connection

A notice is a *problem* (the input lost data, or could not be read as what
it is: exit status 1, a red tile in the report, a problem row in the
tables) unless `info` is set: then it is *information*, normal client or
capture behaviour that lost nothing (a call the client cancelled, a call or
connection cut by the capture's end, a connection whose start the capture
does not hold). Information is counted and shown, never a problem.
"""

from __future__ import annotations

from typing import Any

from lbparse.codec.jsonform import Int64

NOTICE_KINDS = (
    "gap",
    "incomplete",
    "protocol",
    "truncated",
    "limit",
    "bad_block",
    "bad_record",
    "retransmission",
    "grpc",
)


class Notice:
    """Something the reader noticed in readable traffic and went past.

    Args:
        kind: One of NOTICE_KINDS (see the module's docstring).
        message: What happened, for people.
        ts: The capture time, integer nanoseconds, if known.
        src: The sender, host:port, if known.
        dst: The receiver, host:port, if known.
        nbytes: The bytes concerned (lost, skipped, refused), if known.
        limit: The resource limit hit, for kind "limit" (max_frame,
            max_reassembly).
        info: True for information (normal behaviour that lost nothing),
            False for a problem.
    """

    __slots__ = ("kind", "message", "ts", "src", "dst", "nbytes", "limit", "info")

    def __init__(
        self,
        kind: str,
        message: str,
        ts: int | None = None,
        src: str | None = None,
        dst: str | None = None,
        nbytes: int | None = None,
        limit: str | None = None,
        info: bool = False,
    ) -> None:
        self.kind = kind
        self.message = message
        self.ts = ts
        self.src = src
        self.dst = dst
        self.nbytes = nbytes
        self.limit = limit
        self.info = info

    def to_json_dict(self) -> dict[str, Any]:
        """The notice as a JSON-ready dict (the records' notice rows).

        Returns:
            A new dict with notice, message, ts (an Int64, or None), src, dst and
            bytes; `limit` and `info` only when set.
        """
        d = {
            "notice": self.kind,
            "message": self.message,
            "ts": None if self.ts is None else Int64(self.ts),
            "src": self.src,
            "dst": self.dst,
            "bytes": self.nbytes,
        }
        if self.limit is not None:
            d["limit"] = self.limit
        if self.info:
            d["info"] = True
        return d

    def __str__(self) -> str:
        where = f"{self.src} -> {self.dst}: " if self.src else ""
        return f"{'note: ' if self.info else ''}{self.kind}: {where}{self.message}"

    def __repr__(self) -> str:
        return f"Notice({self.kind!r}, {str(self)!r})"
