"""lbparse: read and write the Liftbridge envelope protocol, every generation.

    >>> import lbparse
    >>> env = lbparse.decode(bytes.fromhex("b90e43b40008000b0a027331"), layout="v0")
    >>> env.msg_type_name, env.message.id
    ('ServerInfoResponse', 's1')

The public API is this module's `__all__`. Behind it the package is
in wings, one folder one job (the envelope codec, the columnar core,
capture, storage, raft, live, the Spark job and data source, the report,
code generation, the command line), named in the manual (docs/pages/format.md).
"""

from lbparse.codec.api import decode, decode_header, encode, encode_envelope, payload_from_json
from lbparse.codec.commitlog import CommitLogEntry, ReplicationResponse
from lbparse.codec.envelope import Envelope
from lbparse.codec.flatbuf import FlatTable
from lbparse.codec.header import Header
from lbparse.codec.layouts import LAYOUTS, Layout, MsgType
from lbparse.codec.limits import Limits
from lbparse.codec.payloads import message_class
from lbparse.codec.upstream import UpstreamVerdict, upstream_verdict
from lbparse.columnar.api import (
    decode_arrow,
    decode_tables,
    read_capture_arrow,
    read_capture_tables,
)
from lbparse.errors import (
    ENVELOPE_KINDS,
    KINDS,
    EnvelopeError,
    InputError,
    LbparseError,
    OperationalError,
)
from lbparse.version import __version__ as __version__

__all__ = [
    "CommitLogEntry",
    "Envelope",
    "ENVELOPE_KINDS",
    "EnvelopeError",
    "InputError",
    "LbparseError",
    "OperationalError",
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
