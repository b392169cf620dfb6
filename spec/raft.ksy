meta:
  id: raft_transport
  title: Liftbridge's metadata Raft group on NATS (hashicorp/raft over nats-on-a-log)
  endian: be
  license: MIT
  ks-version: "0.11"
doc: |
  Liftbridge keeps its cluster metadata (streams, partitions, ISRs,
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
doc-ref: |
  github.com/hashicorp/raft v1.1.2: net_transport.go, commands.go, log.go,
  configuration.go, util.go; later versions for the `since` fields;
  github.com/hashicorp/raft-boltdb v2.2.0: bolt_store.go (StoreLogs);
  github.com/liftbridge-io/nats-on-a-log bb17516: nats_transport.go;
  github.com/liftbridge-io/liftbridge v1.9.0: server/raft.go, server/fsm.go,
  server/server.go, server/partition.go, server/propagation.go.
seq:
  - id: rpc_type
    type: u1
    enum: rpc_type
    doc: |
      The first byte of every request on the stream (sendRPC writes it with
      WriteByte, handleCommand reads it with ReadByte): which RPC follows.
  - id: body
    size-eos: true
    doc: |
      The request struct of that RPC type as one msgpack map (see
      `-msgpack-structs`), then, for InstallSnapshot only, the snapshot's
      bytes. As NATS carries it, the rest of the stream follows.
enums:
  rpc_type:
    0:
      id: append_entries
      -name: AppendEntries
      -request: AppendEntriesRequest
      -response: AppendEntriesResponse
      doc: rpcAppendEntries (net_transport.go const block, iota 0); log replication and heartbeats.
    1:
      id: request_vote
      -name: RequestVote
      -request: RequestVoteRequest
      -response: RequestVoteResponse
      doc: rpcRequestVote (iota 1); a candidate asks for a vote in an election.
    2:
      id: install_snapshot
      -name: InstallSnapshot
      -request: InstallSnapshotRequest
      -response: InstallSnapshotResponse
      -trailer: Size
      doc: |
        rpcInstallSnapshot (iota 2); the request is followed by `Size` bytes
        of snapshot (NetworkTransport.InstallSnapshot copies them after the
        msgpack struct, handleCommand reads them with io.LimitReader).
    3:
      id: timeout_now
      -name: TimeoutNow
      -request: TimeoutNowRequest
      -response: TimeoutNowResponse
      doc: rpcTimeoutNow (iota 3); a leader transferring leadership tells a follower to start an election.
    4:
      id: request_pre_vote
      -name: RequestPreVote
      -request: RequestPreVoteRequest
      -response: RequestPreVoteResponse
      doc: rpcRequestPreVote (iota 4), since hashicorp/raft v1.7.0 (pre-vote); never sent by v1.1.2.
  log_type:
    0:
      id: command
      -name: LogCommand
      doc: LogCommand (log.go, iota 0); applied to the FSM. Liftbridge's `Data` is a protobuf protocol.RaftLog (server/fsm.go Apply).
    1:
      id: noop
      -name: LogNoop
      doc: LogNoop (iota 1); a new leader appends one to assert leadership (raft.go).
    2:
      id: add_peer_deprecated
      -name: LogAddPeerDeprecated
      doc: LogAddPeerDeprecated (iota 2); protocol version 0 membership change, `Data` the msgpack list of peer addresses (configuration.go encodePeers).
    3:
      id: remove_peer_deprecated
      -name: LogRemovePeerDeprecated
      doc: LogRemovePeerDeprecated (iota 3); as above, for a removal.
    4:
      id: barrier
      -name: LogBarrier
      doc: LogBarrier (iota 4); waits until every earlier entry is applied to the FSM.
    5:
      id: configuration
      -name: LogConfiguration
      doc: LogConfiguration (iota 5); `Data` is the msgpack Configuration (configuration.go EncodeConfiguration).
  server_suffrage:
    0:
      id: voter
      -name: Voter
      doc: Voter (configuration.go ServerSuffrage, iota 0; "Don't renumber these, since the numbers are written into the log").
    1:
      id: nonvoter
      -name: Nonvoter
      doc: Nonvoter (iota 1); receives entries, does not vote.
    2:
      id: staging
      -name: Staging
      doc: Staging (iota 2); a nonvoter to be promoted once caught up.

# Field types of the msgpack structs: uint and int (msgpack integers; Go
# uint64/int64/uint8), bool, bytes (msgpack raw string or nil; Go []byte),
# logs (array of Log maps), time (Go time.Time, see Log.AppendedAt). An
# integer with an enum is that enum's small value (Log.Type is a uint8,
# Server.Suffrage an int); every other integer is 64-bit (Go uint64 terms
# and indexes, int64 Size, int versions), a decimal string in lbparse's JSON.
-msgpack-structs:
  RPCHeader:
    doc: Embedded in every RPC struct; go-msgpack puts its fields in the struct's own map (commands.go RPCHeader).
    fields:
      - {key: ProtocolVersion, type: int, doc: "Protocol version of the sender (ProtocolVersion, 3 in Liftbridge v1.9.0)."}
      - {key: ID, type: bytes, since: v1.3.7, doc: "Server ID of the sender (added to RPCHeader in hashicorp/raft v1.3.7)."}
      - {key: Addr, type: bytes, since: v1.3.7, doc: "Transport address of the sender (v1.3.7)."}
  AppendEntriesRequest:
    header: true
    doc: commands.go AppendEntriesRequest.
    fields:
      - {key: Term, type: uint, doc: The leader's current term.}
      - {key: Leader, type: bytes, doc: "The leader's transport address (in Liftbridge, its server id); deprecated in favour of RPCHeader.Addr later."}
      - {key: PrevLogEntry, type: uint, doc: Index of the entry before the new ones (consistency check).}
      - {key: PrevLogTerm, type: uint, doc: Term of that entry.}
      - {key: Entries, type: logs, doc: "The new entries (none: a heartbeat)."}
      - {key: LeaderCommitIndex, type: uint, doc: The leader's commit index.}
  AppendEntriesResponse:
    header: true
    doc: commands.go AppendEntriesResponse.
    fields:
      - {key: Term, type: uint, doc: The follower's term (newer when the leader is out of date).}
      - {key: LastLog, type: uint, doc: The follower's last log index, a hint for a slow follower.}
      - {key: Success, type: bool, doc: Whether the entries were appended.}
      - {key: NoRetryBackoff, type: bool, doc: "A failure that needs no back-off before retrying."}
  RequestVoteRequest:
    header: true
    doc: commands.go RequestVoteRequest.
    fields:
      - {key: Term, type: uint, doc: The candidate's term.}
      - {key: Candidate, type: bytes, doc: "The candidate's transport address (in Liftbridge, its server id)."}
      - {key: LastLogIndex, type: uint, doc: The candidate's last log index (voters refuse a candidate behind them).}
      - {key: LastLogTerm, type: uint, doc: Term of that entry.}
      - {key: LeadershipTransfer, type: bool, doc: "The election was started by a leadership transfer (TimeoutNow)."}
  RequestVoteResponse:
    header: true
    doc: commands.go RequestVoteResponse.
    fields:
      - {key: Term, type: uint, doc: The voter's term.}
      - {key: Peers, type: bytes, doc: "Deprecated peer list for protocol version 0 (nil since version 2)."}
      - {key: Granted, type: bool, doc: Whether the vote was granted.}
  InstallSnapshotRequest:
    header: true
    doc: commands.go InstallSnapshotRequest; `Size` bytes of snapshot follow it on the stream.
    fields:
      - {key: SnapshotVersion, type: int, doc: Snapshot format version.}
      - {key: Term, type: uint, doc: The leader's term.}
      - {key: Leader, type: bytes, doc: "The leader's transport address."}
      - {key: LastLogIndex, type: uint, doc: Last index the snapshot includes.}
      - {key: LastLogTerm, type: uint, doc: Term of that entry.}
      - {key: Peers, type: bytes, doc: Deprecated peer set (protocol version 0).}
      - {key: Configuration, type: bytes, doc: "Cluster membership, a msgpack Configuration."}
      - {key: ConfigurationIndex, type: uint, doc: Log index at which that configuration was written.}
      - {key: Size, type: int, doc: Length of the snapshot bytes that follow.}
  InstallSnapshotResponse:
    header: true
    doc: commands.go InstallSnapshotResponse.
    fields:
      - {key: Term, type: uint, doc: The follower's term.}
      - {key: Success, type: bool, doc: Whether the snapshot was installed.}
  TimeoutNowRequest:
    header: true
    doc: commands.go TimeoutNowRequest (only the header).
    fields: []
  TimeoutNowResponse:
    header: true
    doc: commands.go TimeoutNowResponse (only the header).
    fields: []
  RequestPreVoteRequest:
    header: true
    doc: commands.go RequestPreVoteRequest (hashicorp/raft v1.7.0).
    fields:
      - {key: Term, type: uint, doc: The term the candidate would start.}
      - {key: LastLogIndex, type: uint, doc: The candidate's last log index.}
      - {key: LastLogTerm, type: uint, doc: Term of that entry.}
  RequestPreVoteResponse:
    header: true
    doc: commands.go RequestPreVoteResponse (hashicorp/raft v1.7.0).
    fields:
      - {key: Term, type: uint, doc: The voter's term.}
      - {key: Granted, type: bool, doc: Whether the pre-vote was granted.}
  Log:
    doc: |
      log.go Log: one entry of the Raft log, in AppendEntries and as
      raft-boltdb stores it (bolt_store.go StoreLogs: the value is
      encodeMsgPack(log), the key the index as 8 big-endian bytes, in
      bucket "logs" of raft.db).
    fields:
      - {key: Index, type: uint, doc: Index of the entry in the log.}
      - {key: Term, type: uint, doc: Election term in which the entry was appended.}
      - {key: Type, type: uint, enum: log_type, doc: "What the entry is (enum log_type)."}
      - {key: Data, type: bytes, doc: "The entry's data: protocol.RaftLog for LogCommand, a Configuration for LogConfiguration, nil otherwise."}
      - {key: Extensions, type: bytes, doc: Opaque bytes for middleware (nil in Liftbridge).}
      - {key: AppendedAt, type: time, since: v1.3.0, doc: "When the leader appended the entry (hashicorp/raft v1.3.0). Encoded with TimeNotBuiltin (util.go encodeMsgPack): Go's time.MarshalBinary bytes (version 1: 15 bytes, version 2: 16: seconds since year 1 as int64, nanoseconds int32, zone offset int16 minutes, [seconds offset int8]), or with MsgpackUseNewTimeFormat the msgpack timestamp extension (type -1)."}
  Configuration:
    doc: configuration.go Configuration (the Data of a LogConfiguration entry, EncodeConfiguration).
    fields:
      - {key: Servers, type: servers, doc: The members of the cluster.}
  Server:
    doc: configuration.go Server.
    fields:
      - {key: Suffrage, type: int, enum: server_suffrage, doc: "Whether the server votes (enum server_suffrage)."}
      - {key: ID, type: bytes, doc: "Its server id (Liftbridge: clustering.server.id)."}
      - {key: Address, type: bytes, doc: "Its transport address (with nats-on-a-log, the server id again)."}

# The data of a LogCommand entry in Liftbridge: a protocol.RaftLog whose
# `op` (enum protocol.Op, spec/proto/internal.proto) says which of its
# fields holds the operation. From the switch of Server.apply in
# server/fsm.go (v1.9.0); REPORT_LEADER and
# REPORT_CONSUMER_GROUP_COORDINATOR are PropagatedRequest ops only.
-raft-log-commands:
  - {op: CREATE_STREAM, name: CreateStream, field: createStreamOp, doc: "A stream and its partitions created (applyCreateStream)."}
  - {op: SHRINK_ISR, name: ShrinkISR, field: shrinkISROp, doc: "A replica removed from a partition's ISR (applyShrinkISR)."}
  - {op: CHANGE_LEADER, name: ChangeLeader, field: changeLeaderOp, doc: "A partition's leader changed (applyChangePartitionLeader)."}
  - {op: EXPAND_ISR, name: ExpandISR, field: expandISROp, doc: "A replica added back to a partition's ISR (applyExpandISR)."}
  - {op: DELETE_STREAM, name: DeleteStream, field: deleteStreamOp, doc: "A stream deleted (applyDeleteStream)."}
  - {op: PAUSE_STREAM, name: PauseStream, field: pauseStreamOp, doc: "Partitions paused (applyPauseStream)."}
  - {op: SET_STREAM_READONLY, name: SetStreamReadonly, field: setStreamReadonlyOp, doc: "Partitions set readonly or writable (applySetStreamReadonly)."}
  - {op: RESUME_STREAM, name: ResumeStream, field: resumeStreamOp, doc: "Paused partitions resumed (applyResumeStream)."}
  - {op: CREATE_CONSUMER_GROUP, name: CreateConsumerGroup, field: createConsumerGroupOp, doc: "A consumer group created (applyCreateConsumerGroup)."}
  - {op: JOIN_CONSUMER_GROUP, name: JoinConsumerGroup, field: joinConsumerGroupOp, doc: "A consumer joined a group (applyJoinConsumerGroup)."}
  - {op: LEAVE_CONSUMER_GROUP, name: LeaveConsumerGroup, field: leaveConsumerGroupOp, doc: "A consumer left a group (applyLeaveConsumerGroup)."}
  - {op: CHANGE_CONSUMER_GROUP_COORDINATOR, name: ChangeConsumerGroupCoordinator, field: changeConsumerGroupCoordinatorOp, doc: "A group's coordinator changed (applyChangeConsumerGroupCoordinator)."}
  - {op: PUBLISH_ACTIVITY, name: PublishActivity, field: publishActivityOp, doc: "The activity stream's publish position recorded (applyPublishActivity)."}

# NATS subjects of a Liftbridge cluster and what travels on them, for
# naming traffic in captures and in the dissector. `{ns}` is
# clustering.namespace (default liftbridge-default), `{node}` a server id,
# `{stream}`/`{partition}` a partition, `{nuid}` a NATS unique id, `{inbox}`
# a NATS inbox (`_INBOX.` and more tokens). `kind` says how the payload
# reads: envelope (spec/envelope.ksy), raft_stream (this file's RPCs:
# requests or responses, told apart by their first byte), raft_accept
# (nats-on-a-log's JSON handshake request {"id", "inbox"}; its reply
# {"inbox"} goes to the requester's reply inbox), bootstrap_probe (a bare
# server id), stream_close (an empty message on a raft_stream subject).
# Patterns are tried in order; the first match names the subject.
-nats-subjects:
  - {pattern: "{ns}.raft.metadata.{node}.request.{inbox}", kind: raft_stream, name: raft transport stream, doc: "nats-on-a-log natsRequestInbox \"%s%s.request.%s\" (prefix, owner's id, nats.NewInbox()): the owner receives the other side's bytes here; an empty message closes the stream (natsConn.close, msgHandler)."}
  - {pattern: "{ns}.raft.metadata.{node}.accept", kind: raft_accept, name: raft accept handshake, doc: "nats-on-a-log natsConnectInbox \"%s%s.accept\": a dialer's JSON connectRequestProto {\"id\": its id, \"inbox\": its request inbox}; the reply (connectResponseProto {\"inbox\"}) goes to the request's reply subject."}
  - {pattern: "{ns}.raft.metadata.bootstrap.reply", kind: bootstrap_probe, name: bootstrap probe reply, doc: "server/raft.go detectBootstrapMisconfig: a seed answering another seed's probe with its server id (a misconfiguration: both exit)."}
  - {pattern: "{ns}.raft.metadata.bootstrap", kind: bootstrap_probe, name: bootstrap probe, doc: "server/raft.go detectBootstrapMisconfig: a seed node publishes its bare server id here periodically (reply {ns}.raft.metadata.bootstrap.reply) to find other seeds."}
  - {pattern: "{ns}.raft.metadata.join", kind: envelope, name: raft join, doc: "server/raft.go: RaftJoinRequest to the metadata leader, RaftJoinResponse on the reply inbox."}
  - {pattern: "{ns}.raft.metadata.info", kind: envelope, name: server info, doc: "server/server.go getServerInfoInbox: ServerInfoRequest; ServerInfoResponses go to {ns}.raft.metadata.fetch.{nuid}."}
  - {pattern: "{ns}.raft.metadata.fetch.{nuid}", kind: envelope, name: server info replies, doc: "server/server.go: the inbox ServerInfoResponses are gathered on."}
  - {pattern: "{ns}.raft.metadata.propagate", kind: envelope, name: propagated request, doc: "server/propagation.go: PropagatedRequest to the metadata leader, PropagatedResponse on the reply inbox."}
  - {pattern: "{ns}.raft.metadata.status.{node}", kind: envelope, name: partition status, doc: "server/server.go getPartitionStatusInbox: PartitionStatusRequest to a node."}
  - {pattern: "{ns}.notify.{node}", kind: envelope, name: partition notification, doc: "server/server.go getPartitionNotificationInbox: PartitionNotification to a follower."}
  - {pattern: "{ns}.ack.{nuid}", kind: envelope, name: ack inbox, doc: "server/server.go getAckInbox: Acks for publishes sent through the API."}
  - {pattern: "{ns}.activity", kind: envelope, name: activity stream, doc: "server/server.go getActivityStreamSubject: Publishes of activity events."}
  - {pattern: "{ns}.cursors", kind: envelope, name: cursors stream, doc: "server/server.go getCursorStreamSubject: Publishes of consumer cursors."}
  - {pattern: "{ns}.{stream}.{partition}.replicate", kind: envelope, name: replication, doc: "server/partition.go getReplicationRequestInbox: ReplicationRequest from a follower; ReplicationResponse on the reply inbox."}
  - {pattern: "{ns}.{stream}.{partition}.offset", kind: envelope, name: leader epoch offset, doc: "server/partition.go getLeaderOffsetRequestInbox: LeaderEpochOffsetRequest; the response on the reply inbox."}
