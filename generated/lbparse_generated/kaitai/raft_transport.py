# This is a generated file! Please edit source .ksy file and use kaitai-struct-compiler to rebuild
# type: ignore

import kaitaistruct
from kaitaistruct import KaitaiStruct, KaitaiStream, BytesIO
from enum import IntEnum


if getattr(kaitaistruct, 'API_VERSION', (0, 9)) < (0, 11):
    raise Exception("Incompatible Kaitai Struct Python API: 0.11 or later is required, but you have %s" % (kaitaistruct.__version__))

class RaftTransport(KaitaiStruct):
    """Liftbridge keeps its cluster metadata (streams, partitions, ISRs,
    leaders, consumer groups) in a Raft log run by hashicorp/raft, and
    carries that Raft group's traffic over NATS with nats-on-a-log's stream
    layer. None of it is an envelope. This file declares what lbparse needs
    to name and decode it; `make generate` turns the `-` keys into the
    tables of `lbparse_generated.raft_tables` (the Kaitai compiler ignores
    them), and the Kaitai `seq` below parses the first byte of a request.
    
    Versions: Liftbridge v1.9.0 (its go.mod) builds with hashicorp/raft
    v1.1.2, raft-boltdb/v2 v2.2.0, go-msgpack v0.5.5 and nats-on-a-log
    bb17516 (2020-08-18). Later hashicorp/raft versions add fields (`since`
    below) that lbparse reads too; a key no version declares is kept aside
    and reported, never an error (go-msgpack ignores unknown keys as well).
    
    Transport (hashicorp/raft net_transport.go, sendRPC/handleCommand/
    decodeResponse): a request is one byte, the RPC type (enum `rpc_type`),
    then the request struct encoded with go-msgpack's MsgpackHandle; an
    InstallSnapshot request is followed by `Size` bytes of snapshot. A
    response is a msgpack string (the error text, empty when none) then the
    response struct. Structs are msgpack maps keyed by field name; the
    embedded RPCHeader's fields sit in the same map (go-msgpack inlines
    anonymous struct fields); []byte fields are msgpack raw strings (str8/
    16/32: MsgpackHandle without WriteExt), so lbparse reads every string
    as bytes and decodes the keys as UTF-8.
    
    Stream layer (nats-on-a-log nats_transport.go): a dialer subscribes to
    its own inbox `<prefix><its id>.request.<_INBOX.nuid>`, requests
    `<prefix><peer id>.accept` with the JSON `{"id", "inbox"}`; the peer
    subscribes to an inbox of its own and replies `{"inbox"}`. Each side
    then publishes its bytes to the other's inbox: requests flow to the
    acceptor's inbox, responses to the dialer's. Every Write of the
    transport's bufio.Writer (4096 bytes, or a whole flushed RPC) is one
    NATS message, cut further at the server's max_payload, so an RPC can
    span messages and a capture can start in the middle of one. An empty
    message closes the stream. Liftbridge's prefix is
    `<clustering.namespace>.raft.metadata.` (server/raft.go).
    
    .. seealso::
       github.com/hashicorp/raft v1.1.2: net_transport.go, commands.go, log.go,
       configuration.go, util.go; later versions for the `since` fields;
       github.com/hashicorp/raft-boltdb v2.2.0: bolt_store.go (StoreLogs);
       github.com/liftbridge-io/nats-on-a-log bb17516: nats_transport.go;
       github.com/liftbridge-io/liftbridge v1.9.0: server/raft.go, server/fsm.go,
       server/server.go, server/partition.go, server/propagation.go.
    """

    class LogType(IntEnum):
        command = 0
        noop = 1
        add_peer_deprecated = 2
        remove_peer_deprecated = 3
        barrier = 4
        configuration = 5

    class RpcType(IntEnum):
        append_entries = 0
        request_vote = 1
        install_snapshot = 2
        timeout_now = 3
        request_pre_vote = 4

    class ServerSuffrage(IntEnum):
        voter = 0
        nonvoter = 1
        staging = 2
    def __init__(self, _io, _parent=None, _root=None):
        super(RaftTransport, self).__init__(_io)
        self._parent = _parent
        self._root = _root or self
        self._read()

    def _read(self):
        self.rpc_type = KaitaiStream.resolve_enum(RaftTransport.RpcType, self._io.read_u1())
        self.body = self._io.read_bytes_full()


    def _fetch_instances(self):
        pass


