"""Captures: NATS traffic carrying Liftbridge envelopes, from files.

    >>> from lbparse.capture import CaptureReader
    >>> reader = CaptureReader("nats.pcap", layout="v0")       # doctest: +SKIP
    >>> for rec in reader:                                      # doctest: +SKIP
    ...     print(rec.verb, rec.subject, rec.error or rec.envelope)

pcap, pcapng and our own JSON Lines / Parquet records are all read by
`CaptureReader`; `record_writer(path)` writes our format. The pieces are
importable on their own: `formats` (which format a file is), `pcap`,
`pcapng`, `linktypes`, `tcp` (reassembly), `nats` (the protocol, no I/O:
`Frame`s for messages, `Control`s for other lines, `Problem`s for bytes
that are not the protocol), `fields` (the record's columns), `records`
(the record), `recordings` (our files of records). `compiled_modules()`
says which of them run compiled (setup.py builds the hot ones with mypyc
when it can).
"""

import importlib
import importlib.machinery

from lbparse.capture.errors import CAPTURE_ERROR_KINDS, KINDS, CaptureError
from lbparse.capture.nats import Control, Frame, NatsParser, Parsed, Problem
from lbparse.capture.notices import Notice
from lbparse.capture.reader import (
    CaptureReader,
    Stats,
    default_layout,
    read_capture,
    subject_matches,
)
from lbparse.capture.recordings import JsonlRecordWriter, ParquetRecordWriter, record_writer
from lbparse.capture.records import CLIENT_TO_SERVER, SERVER_TO_CLIENT, Record, parse_headers

# The modules setup.py compiles when it can: the packet loop and what it calls.
HOT_MODULES = (
    "lbparse.capture.nats",
    "lbparse.capture.tcp",
    "lbparse.capture.pcap",
    "lbparse.capture.reader",
    "lbparse.capture.records",
)


def compiled_modules() -> list[str]:
    """Those of HOT_MODULES that were loaded from a compiled extension.

    Returns:
        The module names (a subset of HOT_MODULES, in its order) whose file is
        a compiled extension; empty when the package runs as pure Python.
    """
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return [
        name
        for name in HOT_MODULES
        if (importlib.import_module(name).__file__ or "").endswith(suffixes)
    ]


__all__ = [
    "CLIENT_TO_SERVER",
    "HOT_MODULES",
    "CAPTURE_ERROR_KINDS",
    "KINDS",
    "SERVER_TO_CLIENT",
    "CaptureError",
    "CaptureReader",
    "Control",
    "Frame",
    "JsonlRecordWriter",
    "NatsParser",
    "Notice",
    "ParquetRecordWriter",
    "Parsed",
    "Problem",
    "Record",
    "Stats",
    "compiled_modules",
    "default_layout",
    "parse_headers",
    "read_capture",
    "record_writer",
    "subject_matches",
]
