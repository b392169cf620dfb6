"""lbparse: read and write the Liftbridge envelope protocol, every generation.

    >>> import lbparse
    >>> env = lbparse.decode(bytes.fromhex("b90e43b40008000b0a027331"), layout="v0")
    >>> env.msg_type_name, env.message.id
    ('ServerInfoResponse', 's1')

The public API is what this module exports; everything in underscore-free
submodules is documented but may move.
"""

from lbparse.api import decode, decode_header, encode, encode_envelope, payload_from_json
from lbparse.columnar.api import (decode_arrow, decode_tables, read_capture_arrow,
                                  read_capture_tables)
from lbparse.commitlog import CommitLogEntry, ReplicationResponse
from lbparse.layouts import LAYOUTS, Layout, MsgType
from lbparse.envelope import Envelope
from lbparse.errors import KINDS, EnvelopeError, LbparseError
from lbparse.flatbuf import FlatTable
from lbparse.header import Header
from lbparse.limits import Limits
from lbparse.payloads import message_class
from lbparse.upstream import UpstreamVerdict, upstream_verdict
from lbparse.version import __version__ as __version__

__all__ = [
    "CommitLogEntry",
    "Envelope",
    "EnvelopeError",
    "LbparseError",
    "FlatTable",
    "Header",
    "KINDS",
    "LAYOUTS",
    "Layout",
    "Limits",
    "MsgType",
    "ReplicationResponse",
    "UpstreamVerdict",
    "decode",
    "decode_arrow",
    "decode_tables",
    "decode_header",
    "encode",
    "encode_envelope",
    "message_class",
    "payload_from_json",
    "read_capture_arrow",
    "read_capture_tables",
    "upstream_verdict",
]
