"""Captures: NATS traffic carrying Liftbridge envelopes, from files.

    >>> from lbparse.capture import CaptureReader
    >>> reader = CaptureReader("nats.pcap", layout="v0")       # doctest: +SKIP
    >>> for rec in reader:                                      # doctest: +SKIP
    ...     print(rec.verb, rec.subject, rec.error or rec.envelope)

pcap, pcapng and our own JSON Lines / Parquet records are all read by
`CaptureReader`; `record_writer(path)` writes our format. The pieces
(`pcap`, `pcapng`, `linktypes`, `tcp`, `nats`, `records`) are importable
on their own; `nats.NatsParser` does no I/O.
"""

from lbparse.capture.errors import KINDS, CaptureError
from lbparse.capture.nats import NatsParser
from lbparse.capture.notices import Notice
from lbparse.capture.reader import (CaptureReader, Stats, default_layout, read_capture,
                                    subject_matches)
from lbparse.capture.records import (CLIENT_TO_SERVER, SERVER_TO_CLIENT, JsonlRecordWriter,
                                     ParquetRecordWriter, Record, parse_headers, record_writer)

__all__ = [
    "CLIENT_TO_SERVER", "SERVER_TO_CLIENT", "KINDS", "CaptureError", "CaptureReader",
    "JsonlRecordWriter", "NatsParser", "Notice", "ParquetRecordWriter", "Record", "Stats",
    "default_layout", "parse_headers", "read_capture", "record_writer", "subject_matches",
]
