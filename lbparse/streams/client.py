"""A small client of Liftbridge's gRPC API (spec/proto/api.proto's `service API`):
where each partition is led (FetchMetadata) and a partition's messages by
offset (Subscribe), every wait bounded.

    with StreamsClient(parse_servers("127.0.0.1:9292,127.0.0.1:9293")) as client:
        parts = client.partitions(["orders"])          # leader, high watermark, ...
        for msg in client.read("orders", 0, 0, parts[0].end):
            print(msg.offset, msg.key, msg.value)

A partition's end (its high watermark and newest offset) is asked of its
leader (FetchPartitionMetadata), never taken from whichever node answered
FetchMetadata: a Liftbridge v1.9.0 node reports its own replica's, -1 for a
partition it holds no replica of and one behind on a follower that lags.

Unary calls carry no gRPC deadline; their wait is bounded here, `timeout`
seconds, and the call cancelled past it. A v1.9.0 node holds a
FetchMetadata that has a deadline until that deadline whenever a node is
down (server/metadata.go, fetchBrokerInfo), where one without a deadline is
answered after the server's own 3 s survey: a lookup during a failover
takes the cluster's time, not the client's timeout.

`read(stream, partition, start, end)` yields the messages of offsets
start..end-1, in order, each once. Liftbridge hands a subscriber only
committed messages, so `end` may be at most the high watermark + 1
(`PartitionInfo.end`); a range past it is an error, not a wait (but
while a read fails over, when the survivors may not yet know all that was
committed: then it is retried as a lost node is). The
subscription is made with the leader (or, with `replica=True`, an in-sync
follower, as Liftbridge's readISRReplica allows); when that node goes
away or stays silent for `timeout` seconds, the partition's leader is
looked up again and the read goes on from the next offset, `retries`
times at most.

Errors are StreamsError, one line: which servers, which stream, what was
found.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, TypeVar

import grpc

from lbparse.digits import ascii_int
from lbparse.errors import OperationalError
from lbparse_generated.proto import api_pb2, api_pb2_grpc

__all__ = [
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "PartitionInfo",
    "StreamsClient",
    "StreamsError",
    "parse_servers",
    "subject_matches",
]

DEFAULT_TIMEOUT = 10.0  # seconds: one unary call, or a subscription's silence
MAX_TIMEOUT = 3600.0  # the largest timeout taken: an hour
DEFAULT_RETRIES = 8  # a partition's read resumed after its node failed, at most
METADATA_ROUNDS = 3  # FetchMetadata asked of every server, at most, a pause between
# A FetchMetadata is waited for this long at least, whatever the timeout: with a
# node down, v1.9.0 answers one that has no deadline after surveying the nodes
# for 3 s (server/metadata.go's defaultFetchBrokerInfoTimeout).
METADATA_SURVEY = 4.0
# The largest message a Subscribe may bring: a Liftbridge message travels in one
# NATS message, and NATS's max_payload is at most 64 MiB; the rest is the
# Message's other fields (key, headers, subjects). gRPC's own default is 4 MiB,
# under what a cluster with a raised limit stores.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024 + 1024 * 1024

# gRPC codes that mean "this node, not the request": try another, or again.
_RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.INTERNAL,
    }
)


class StreamsError(OperationalError):
    """A read that cannot be done; the message is one line."""

    KINDS: ClassVar[frozenset[str]] = frozenset(
        {
            "bad_option",  # servers, a range or an offset that cannot be asked for
            "not_found",  # a stream or partition that does not exist (or was deleted)
            "out_of_range",  # an offset past the last committed one
            "paused",  # a paused partition: nothing to read until a publish resumes it
            "bad_message",  # a server sent what the read cannot take
            "failed",  # a server's answer (its status), or none in time
            "unavailable",  # Transient: no server answers, or no leader yet
        }
    )


class Transient(StreamsError):
    """What a failover looks like for a while: no server answers FetchMetadata
    (a metadata leader being elected), or a partition has no leader yet."""

    KINDS: ClassVar[frozenset[str]] = frozenset({"unavailable"})


class _NoLeader(Transient):
    """A partition whose leader is unknown, gone or moved: asked again (_rounds)."""


class _NotFound(Exception):
    """A Subscribe answered NOT_FOUND (the read asks whether it was deleted)."""


class _TimedOut(Exception):
    """A unary call not answered within the timeout (then cancelled)."""


T = TypeVar("T")


def parse_servers(text: str) -> list[str]:
    """Split a `--servers` value into the servers' addresses.

    'host:port,host:port' becomes ['host:port', ...]; blanks around each are
    dropped, and each must name a port.

    Args:
        text: Comma-separated `host:port` addresses of Liftbridge servers.

    Returns:
        The addresses, in the order given.

    Raises:
        StreamsError: No server is given, or one is not `host:port` with a
            port of 0..65535.
    """
    servers = [s.strip() for s in text.split(",") if s.strip()]
    if not servers:
        raise StreamsError("bad_option", "no server given: servers is 'host:port[,host:port...]'")
    for s in servers:
        host, _, port = s.rpartition(":")
        if not host or not ascii_int(port, 65535):
            raise StreamsError("bad_option", f"server {s!r} is not host:port")
    return servers


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as FetchMetadata describes it.

    Attributes:
        stream: The stream's name.
        partition: The partition's number within the stream.
        leader: The leader's server id ('' while there is none).
        address: The leader's `host:port` ('' while there is none).
        isr: The addresses (`host:port`) of the in-sync replicas.
        high_watermark: The last committed offset, -1 when there is none.
        newest_offset: The newest offset in the leader's log (committed or not).
        paused: Whether the partition is paused (PauseStream): Liftbridge reads
            none of its messages until a publish resumes it.
        readonly: Whether the partition is read-only (SetStreamReadonly).
        described: False when its leader could not be asked
            (`partitions(..., leaderless=True)`); the high watermark and newest
            offset are then what FetchMetadata's node had.
    """

    stream: str
    partition: int
    leader: str  # server id ('' while there is none)
    address: str  # the leader's host:port ('' while there is none)
    isr: tuple[str, ...]  # addresses of the in-sync replicas
    high_watermark: int  # the last committed offset, -1 when there is none
    newest_offset: int
    paused: bool
    readonly: bool
    # False: its leader could not be asked (partitions(..., leaderless=True)); the
    # high watermark and newest offset are then what FetchMetadata's node had
    described: bool = True

    @property
    def end(self) -> int:
        """The offset after the last committed message: what a read may reach."""
        return self.high_watermark + 1


class StreamsClient:
    """Channels to the servers, opened as needed and closed by close().

    Use it as a context manager (`with StreamsClient(...) as client:`) or call
    close() when done.

    Args:
        servers: Addresses (`host:port`) of Liftbridge servers to ask for
            metadata, tried in order (parse_servers() makes them of a
            `--servers` value).
        timeout: Seconds one unary call is waited for, and a subscription may
            stay silent, before the node counts as failed (a FetchMetadata is
            waited for 4 s at least).
        retries: How many times one read() is taken up again after its node
            failed, at most; the failure after that is an error.
        replica: Read from an in-sync follower rather than the leader
            (Liftbridge's readISRReplica), to take the load off the leader.
    """

    def __init__(
        self,
        servers: Sequence[str],
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        replica: bool = False,
    ) -> None:
        self.servers = list(servers)
        self.timeout = timeout
        self.retries = retries
        self.replica = replica
        self._channels: dict[str, grpc.Channel] = {}
        self.resumed = 0  # reads taken up again after a node failed (for tests and logs)

    def __enter__(self) -> StreamsClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close every channel this client opened; the client may open new ones after."""
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    def _stub(self, address: str) -> api_pb2_grpc.APIStub:
        if address not in self._channels:
            self._channels[address] = grpc.insecure_channel(
                address, options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
            )
        return api_pb2_grpc.APIStub(self._channels[address])

    def _call(self, address: str, method: str, request: object) -> grpc.Future:
        """A unary call started without a deadline (see the module's doc): the
        caller waits for it with _answer."""
        future: grpc.Future = getattr(self._stub(address), method).future(request)
        return future

    def _answer(self, future: grpc.Future, wait: float = 0.0) -> object:
        """The answer of a call made by _call, waited for the timeout (or `wait`
        seconds, if more) at most; past it the call is cancelled and this raises
        _TimedOut. A call that failed raises its grpc.RpcError."""
        wait = max(wait, self.timeout)
        try:
            return future.result(timeout=wait)
        except grpc.FutureTimeoutError:
            future.cancel()
            raise _TimedOut(f"no answer within {wait:g} s") from None

    def _unary(self, address: str, method: str, request: object, wait: float = 0.0) -> object:
        return self._answer(self._call(address, method, request), wait)

    # -- metadata -----------------------------------------------------------------

    def metadata(self, streams: Sequence[str]) -> api_pb2.FetchMetadataResponse:
        """FetchMetadata of `streams` from the first server that answers.

        Every server is asked METADATA_ROUNDS times at most, a pause between (an
        election takes seconds).

        Args:
            streams: The streams' names; an empty list asks for every stream the
                server knows.

        Returns:
            The first answer (api_pb2.FetchMetadataResponse): the brokers and each
            stream's partitions as that node knows them.

        Raises:
            Transient: No server answered within the timeout, in any round.
        """
        errors: list[str] = []
        for round_ in range(METADATA_ROUNDS):
            if round_:
                time.sleep(1.0)
            errors = []
            for address in self.servers:
                try:
                    resp = self._unary(
                        address,
                        "FetchMetadata",
                        api_pb2.FetchMetadataRequest(streams=list(streams)),
                        METADATA_SURVEY,
                    )
                    assert isinstance(resp, api_pb2.FetchMetadataResponse)
                    return resp
                except (grpc.RpcError, _TimedOut) as exc:
                    errors.append(f"{address}: {_status(exc)}")
        raise Transient(
            "unavailable",
            f"no Liftbridge server answered FetchMetadata within "
            f"{max(self.timeout, METADATA_SURVEY):g} s ({'; '.join(errors)})",
        )

    def matching(self, pattern: str, leaderless: bool = False) -> list[PartitionInfo]:
        """Every partition of the streams whose subject matches a NATS subject pattern.

        Args:
            pattern: A NATS subject pattern (`*` a token, `>` the rest), matched
                with subject_matches().
            leaderless: As for partitions(): True, one lookup, a partition whose
                leader cannot be asked comes with `described` False; False, looked
                up again while a leader cannot be asked.

        Returns:
            The partitions, in stream then partition order, each as its leader
            describes it; none matching is an empty list, not an error (streams
            come and go).

        Raises:
            Transient: No server answers FetchMetadata, or (without `leaderless`)
                a partition has no leader to answer after 2 x timeout.
        """

        def once() -> list[PartitionInfo]:
            resp = self.metadata([])  # no names: every stream the server knows
            names = sorted(
                m.name
                for m in resp.streamMetadata
                if m.error == api_pb2.StreamMetadata.OK and subject_matches(pattern, m.subject)
            )
            return self._at_leaders(resp, _infos(resp, names), leaderless)

        return once() if leaderless else self._rounds(once)

    def partitions(self, streams: Sequence[str], leaderless: bool = False) -> list[PartitionInfo]:
        """Every partition of `streams`, each as its leader describes it.

        The leader tells its high watermark, newest offset, ISR and whether it is
        paused.

        Args:
            streams: The streams' names.
            leaderless: True: one lookup, and a partition whose leader cannot be
                asked now comes with `described` False (a streaming plan holds it
                where it is until it has one); False: looked up again for up to
                2 x timeout (an election), then an error.

        Returns:
            The partitions, in stream then partition order.

        Raises:
            StreamsError: A stream that does not exist.
            Transient: A partition with no leader to answer (never left out), or
                no server answers FetchMetadata.
        """
        if leaderless:
            return self._at_leaders(*self._described(streams), leaderless=True)
        return self._rounds(lambda: self._at_leaders(*self._described(streams)))

    def partition(self, stream: str, partition: int) -> PartitionInfo:
        """One partition as its leader describes it.

        It is looked up again for up to 2 x timeout while it has no leader to
        answer (an election; a pause or resume that the node answering
        FetchMetadata has not applied yet).

        Args:
            stream: The stream's name.
            partition: The partition's number.

        Returns:
            The partition's PartitionInfo.

        Raises:
            StreamsError: The stream or the partition does not exist.
            Transient: Its leader cannot be asked (or no server answers).
        """

        def once() -> PartitionInfo:
            resp, infos = self._described([stream])
            for p in infos:
                if p.partition == partition:
                    return self._at_leaders(resp, [p])[0]
            raise StreamsError("not_found", f"stream {stream!r} has no partition {partition}")

        return self._rounds(once)

    def _rounds(self, lookup: Callable[[], T]) -> T:
        """`lookup` tried again while a partition has no leader to answer, for
        2 x timeout at most (an election takes seconds), a pause between; the
        last _NoLeader raised as it is."""
        deadline = time.monotonic() + 2 * self.timeout
        while True:
            try:
                return lookup()
            except _NoLeader:
                if time.monotonic() + 1.0 > deadline:
                    raise
                time.sleep(1.0)

    def _described(
        self, streams: Sequence[str]
    ) -> tuple[api_pb2.FetchMetadataResponse, list[PartitionInfo]]:
        """FetchMetadata of `streams` and their partitions as it describes them;
        a stream that no server knows is a StreamsError."""
        resp = self.metadata(streams)
        missing = _missing(resp, streams)
        if missing:
            # A node that has just started answers before it has replayed the
            # metadata log: a stream is missing only if no server knows it.
            resp = self._knowing(streams, resp)
            missing = _missing(resp, streams)
        if missing:
            raise StreamsError(
                "not_found",
                f"stream {missing[0]!r} does not exist (asked {','.join(self.servers)})",
            )
        return resp, _infos(resp, streams)

    def _knowing(
        self, streams: Sequence[str], first: api_pb2.FetchMetadataResponse
    ) -> api_pb2.FetchMetadataResponse:
        """The first server's answer that knows every stream, each server asked once."""
        for address in self.servers:
            try:
                resp = self._unary(
                    address,
                    "FetchMetadata",
                    api_pb2.FetchMetadataRequest(streams=list(streams)),
                    METADATA_SURVEY,
                )
            except (grpc.RpcError, _TimedOut):
                continue
            assert isinstance(resp, api_pb2.FetchMetadataResponse)
            if not _missing(resp, streams):
                return resp
        return first

    def _at_leaders(
        self,
        resp: api_pb2.FetchMetadataResponse,
        infos: list[PartitionInfo],
        leaderless: bool = False,
    ) -> list[PartitionInfo]:
        """`infos` with each partition's state as its leader has it: the leaders
        asked at once (FetchPartitionMetadata, which only a leader answers).
        Raises _NoLeader naming the first partition whose leader is unknown,
        gone, or no longer its leader; with `leaderless`, that partition comes
        as FetchMetadata described it, `described` False."""
        brokers = {b.id: f"{b.host}:{b.port}" for b in resp.brokers}
        # A paused partition's log is closed and its leader answers "should be sent
        # to partition leader": its metadata is FetchMetadata's (reads of it fail
        # or hold, the high watermark is not used).
        calls = [
            self._call(
                p.address,
                "FetchPartitionMetadata",
                api_pb2.FetchPartitionMetadataRequest(stream=p.stream, partition=p.partition),
            )
            if p.address and not p.paused
            else None
            for p in infos
        ]
        try:
            out = []
            for p, call in zip(infos, calls):
                if p.paused:
                    out.append(p)
                    continue
                try:
                    if call is None:
                        raise _NoLeader(
                            "unavailable",
                            f"{p.stream}/{p.partition}: no leader now (asked "
                            f"{','.join(self.servers)})",
                        )
                    try:
                        answer = self._answer(call)
                    except (grpc.RpcError, _TimedOut) as exc:
                        raise _NoLeader(
                            "unavailable",
                            f"{p.stream}/{p.partition}: its leader {p.leader} "
                            f"({p.address}) did not describe it: {_status(exc)}",
                        ) from None
                except _NoLeader:
                    if not leaderless:
                        raise
                    out.append(dataclasses.replace(p, described=False))
                    continue
                assert isinstance(answer, api_pb2.FetchPartitionMetadataResponse)
                m = answer.metadata
                out.append(
                    PartitionInfo(
                        p.stream,
                        p.partition,
                        p.leader,
                        p.address,
                        tuple(brokers[i] for i in m.isr if i in brokers),
                        m.highWatermark,
                        m.newestOffset,
                        m.paused,
                        m.readonly,
                    )
                )
            return out
        finally:
            for call in calls:
                if call is not None:
                    call.cancel()  # nothing once answered; the rest, after a failure

    # -- reading ------------------------------------------------------------------

    def read_raw(
        self, stream: str, partition: int, start: int, end: int, at: str = ""
    ) -> Iterator[bytes]:
        """Like read(), the messages as the server serialized them, not parsed.

        Each is the bytes of an api.proto Message: offsets start..end-1 are the
        caller's to check (lbparse.spark.streams_source.batches checks them, a
        batch at a time).

        Args:
            stream: The stream's name.
            partition: The partition's number.
            start: The first offset read.
            end: The offset after the last one read; at most the partition's
                `PartitionInfo.end`.
            at: The node to subscribe at first (`host:port`), as for read(); '' to
                look the partition up first.

        Returns:
            An iterator of serialized messages, end - start of them; the
            subscriptions are made as it is consumed. Its errors are read()'s.
        """
        messages: Iterator[bytes] = self._read(stream, partition, start, end, at, raw=True)
        return messages

    def read(
        self, stream: str, partition: int, start: int, end: int, at: str = ""
    ) -> Iterator[api_pb2.Message]:
        """The messages of offsets start..end-1 of one partition, in order.

        Args:
            stream: The stream's name.
            partition: The partition's number.
            start: The first offset read.
            end: The offset after the last one read (excluded); at most the
                partition's `PartitionInfo.end` (its leader's high watermark + 1).
            at: The node to subscribe at first (`host:port`), as a plan made from
                `partitions()` knows it (`PartitionInfo.address`, or a follower with
                `replica`); '' to look the partition up first. Past a failure the
                partition is always looked up again.

        Returns:
            An iterator of api_pb2.Message, offsets start..end-1, each once; the
            subscriptions are made as it is consumed, and its errors come from it.

        Raises:
            StreamsError: Raised by the iterator: a range that is not committed, a
                partition paused, deleted or gone, or more than `retries`
                failures of its nodes during the read.
        """
        messages: Iterator[api_pb2.Message] = self._read(stream, partition, start, end, at)
        return messages

    def _read(
        self, stream: str, partition: int, start: int, end: int, at: str, raw: bool = False
    ) -> Iterator[Any]:
        """read() (raw: read_raw()): the retries around _read_once."""
        if start < 0 or end < start:
            raise StreamsError(
                "bad_option",
                f"{stream}/{partition}: offset range {start}..{end} is not a range of offsets",
            )
        failures: list[str] = []
        while start < end:
            try:
                for msg in self._read_once(
                    stream, partition, start, end, bool(failures), "" if failures else at, raw
                ):
                    yield msg
                    start += 1
                return
            except _NotFound as exc:
                # Deleted, or a node that has just started and not yet replayed the
                # metadata log (it says NOT_FOUND of a partition it will have)
                if not self._still_there(stream, partition):
                    raise StreamsError(
                        "not_found",
                        f"{stream}/{partition}: deleted while read, at offset {start} ({exc})",
                    ) from None
                failure = _status(exc)
            except (grpc.RpcError, _Silent, Transient) as exc:
                failure = _status(exc)
            failures.append(failure)
            if len(failures) > self.retries:
                raise StreamsError(
                    "failed",
                    f"{stream}/{partition}: read stopped at offset {start} "
                    f"after {len(failures)} failures "
                    f"({'; '.join(failures[-2:])})",
                ) from None
            self.resumed += 1
            # a new leader takes a few seconds (the replicas' leader.timeout)
            time.sleep(min(0.5 * len(failures), 2.0))

    def _still_there(self, stream: str, partition: int) -> bool:
        """Whether a server still knows the partition (True when none answers:
        the read's retries decide then)."""
        try:
            _, infos = self._described([stream])
        except Transient:
            return True
        except StreamsError:  # no server knows the stream
            return False
        return any(p.partition == partition for p in infos)

    def _read_once(
        self,
        stream: str,
        partition: int,
        start: int,
        end: int,
        failing_over: bool = False,
        at: str = "",
        raw: bool = False,
    ) -> Iterator[Any]:
        """One subscription at the partition's leader from `start`; a failure of
        the node (an RpcError of _RETRYABLE, _Silent, Transient) is the caller's
        to retry, any other is a StreamsError. `failing_over`: this read has
        lost its node already. `at`: the node a plan chose, subscribed to with
        no lookup (the plan's range was committed at its leader; a node that
        is no longer the one to ask fails the call, and the retry looks up)."""
        if at:
            yield from self._subscribed(at, stream, partition, start, end, raw)
            return
        info = self.partition(stream, partition)
        if info.end < end and (failing_over or end <= info.newest_offset + 1):
            # A new leader learns the high watermark from its followers: the
            # messages are in its log and are committed again in a moment. And
            # mid-failover the server that answers may know less than the one
            # that died (CI: offset 110 read as committed, then a survivor's
            # "last committed 109"): committed offsets are not lost, so a
            # shortfall then is the cluster catching up, until the retries end.
            raise Transient(
                "unavailable",
                f"{stream}/{partition}: high watermark {info.high_watermark} "
                f"behind offset {end - 1} at {info.address or 'no leader'}",
            )
        if end > info.end:
            raise StreamsError(
                "out_of_range",
                f"{stream}/{partition}: offset {end - 1} out of range (the last committed "
                f"offset is {info.high_watermark})",
            )
        _not_paused(info)
        yield from self._subscribed(
            self.reader_address(info, self.resumed), stream, partition, start, end, raw
        )

    def _subscribed(
        self, address: str, stream: str, partition: int, start: int, end: int, raw: bool = False
    ) -> Iterator[Any]:
        """_subscribe's messages, each checked to be the next offset (raw: as
        bytes, unchecked); the node's failures as _read_once says."""
        try:
            if raw:
                yield from self._subscribe(address, stream, partition, start, end, raw=True)
                return
            for msg in self._subscribe(address, stream, partition, start, end):
                if msg.offset != start:
                    raise StreamsError(
                        "bad_message",
                        f"{stream}/{partition}: {address} sent offset {msg.offset} where "
                        f"{start} was next (offsets before it are gone: retention?)",
                    )
                yield msg
                start += 1
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                raise _NotFound(f"{address}: {_status(exc)}") from None
            if exc.code() not in _RETRYABLE:
                raise StreamsError(
                    "failed", f"{stream}/{partition}: {address}: {_status(exc)}"
                ) from None
            raise

    def first_offset(self, stream: str, partition: int, end: int) -> int:
        """The oldest offset the partition still has.

        Retention may have removed the first ones, so this is asked of the
        partition's node, not taken to be 0.

        Args:
            stream: The stream's name.
            partition: The partition's number.
            end: The partition's end (`PartitionInfo.end`); 0 or less answers 0
                without asking.

        Returns:
            The oldest offset, or `end` when the partition has no message
            before `end`.

        Raises:
            StreamsError: The stream or partition does not exist, is paused, its
                node fails or sends nothing for `timeout` seconds, or it sends a
                negative offset.
            Transient: Its leader cannot be asked.
        """
        if end <= 0:
            return 0
        info = self.partition(stream, partition)
        _not_paused(info)
        address = self.reader_address(info)
        req = api_pb2.SubscribeRequest(
            stream=stream,
            partition=partition,
            startPosition=api_pb2.EARLIEST,
            readISRReplica=self.replica,
        )
        try:
            for msg in self._messages(address, req):
                return _offset_in(msg, end, stream, partition, address)
        except grpc.RpcError as exc:
            raise StreamsError(
                "failed", f"{stream}/{partition}: {address}: {_status(exc)}"
            ) from None
        except _Silent:
            raise StreamsError(
                "failed",
                f"{stream}/{partition}: {address} sent nothing for "
                f"{self.timeout:g} s from the earliest offset",
            ) from None
        return end

    def offset_at(self, stream: str, partition: int, timestamp: int, end: int) -> int:
        """The first offset whose message has a timestamp at or after `timestamp`.

        The server finds it: a Subscribe from that timestamp, stopped at the last
        committed offset.

        Args:
            stream: The stream's name.
            partition: The partition's number.
            timestamp: The time, in Unix nanoseconds.
            end: The partition's end (`PartitionInfo.end`); 0 or less answers 0
                without asking.

        Returns:
            The offset, or `end` when no committed message is that recent.

        Raises:
            StreamsError: The stream or partition does not exist, is paused, its
                node fails or sends nothing for `timeout` seconds, or it sends a
                negative offset.
            Transient: Its leader cannot be asked.
        """
        if end <= 0:
            return 0
        info = self.partition(stream, partition)
        _not_paused(info)
        address = self.reader_address(info)
        req = api_pb2.SubscribeRequest(
            stream=stream,
            partition=partition,
            startPosition=api_pb2.TIMESTAMP,
            startTimestamp=timestamp,
            stopPosition=api_pb2.STOP_OFFSET,
            stopOffset=end - 1,
            readISRReplica=self.replica,
        )
        try:
            for msg in self._messages(address, req):
                return _offset_in(msg, end, stream, partition, address)
        except grpc.RpcError as exc:
            # the server's answer when the timestamp is past the last offset
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT and "before start offset" in str(
                exc.details()
            ):
                return end
            raise StreamsError(
                "failed", f"{stream}/{partition}: {address}: {_status(exc)}"
            ) from None
        except _Silent:
            raise StreamsError(
                "failed",
                f"{stream}/{partition}: {address} sent nothing for "
                f"{self.timeout:g} s from timestamp {timestamp}",
            ) from None
        return end

    def reader_address(self, info: PartitionInfo, turn: int = 0) -> str:
        """The node to subscribe at for a partition.

        The leader; with `replica`, an in-sync follower (the load off the leader,
        readISRReplica's purpose), a partition's turn choosing which and each
        retry moving to the next (the leader last).

        Args:
            info: The partition, as partitions() describes it.
            turn: How many reads were taken up again so far: each moves the choice
                of a follower one on.

        Returns:
            The node's address, `host:port`.

        Raises:
            Transient: The partition has no leader now (and no follower to read
                from).
        """
        others = sorted(a for a in info.isr if a != info.address)
        if self.replica and others:
            choices = others + ([info.address] if info.address else [])
            return choices[(info.partition % len(others) + turn) % len(choices)]
        if info.address:
            return info.address
        raise Transient(
            "unavailable",
            f"{info.stream}/{info.partition}: no leader now (asked {','.join(self.servers)})",
        )

    def _subscribe(
        self, address: str, stream: str, partition: int, start: int, end: int, raw: bool = False
    ) -> Iterator[Any]:
        """One Subscribe call from `start` that stops after offset end-1 (raw:
        after end - start messages); a watchdog cancels it when nothing comes
        for `timeout` seconds."""
        req = api_pb2.SubscribeRequest(
            stream=stream,
            partition=partition,
            startPosition=api_pb2.OFFSET,
            startOffset=start,
            stopPosition=api_pb2.STOP_OFFSET,
            stopOffset=end - 1,
            readISRReplica=self.replica,
        )
        if raw:
            left = end - start
            for data in self._messages(address, req, raw=True):
                yield data
                left -= 1
                if not left:
                    return
        else:
            for msg in self._messages(address, req):
                yield msg
                if msg.offset >= end - 1:
                    return
        raise StreamsError(
            "failed",
            f"{stream}/{partition}: {address} ended the subscription before offset {end - 1}",
        )

    def _messages(
        self, address: str, req: api_pb2.SubscribeRequest, raw: bool = False
    ) -> Iterator[Any]:
        """A Subscribe call's messages (raw: as bytes), cancelled when the caller
        stops or nothing comes for `timeout` seconds (then _Silent)."""
        if raw:
            self._stub(address)  # the channel
            call = self._channels[address].unary_stream(
                "/proto.API/Subscribe",
                request_serializer=api_pb2.SubscribeRequest.SerializeToString,
                response_deserializer=None,
            )(req)
        else:
            call = self._stub(address).Subscribe(req)
        dog = _Watchdog(call, self.timeout)
        try:
            first = True
            for msg in call:
                dog.fed()
                if first:  # the server's empty message: the subscription is made
                    first = False
                    continue
                yield msg
        except grpc.RpcError:
            if dog.fired:
                raise _Silent(f"nothing for {self.timeout:g} s") from None
            raise
        finally:
            dog.stop()
            call.cancel()


def _offset_in(msg: api_pb2.Message, end: int, stream: str, partition: int, address: str) -> int:
    """A position's offset, at most `end`: a server that has moved past the
    end given (retention, new messages) has nothing before it to read. A
    negative one is no offset (a hostile or broken server, issue #47):
    taken as it was, it became the read's start, refused later as a bad
    range of the user's."""
    if msg.offset < 0:
        raise StreamsError(
            "bad_message", f"{stream}/{partition}: {address} sent offset {msg.offset}"
        )
    return min(int(msg.offset), end)


def _not_paused(info: PartitionInfo) -> None:
    """Liftbridge closes a paused partition's log: a Subscribe fails INTERNAL
    ("segment has been closed") until a publish resumes it. Said plainly."""
    if info.paused:
        raise StreamsError(
            "paused",
            f"{info.stream}/{info.partition}: paused (PauseStream): Liftbridge "
            "reads no message of a paused partition until a publish to it "
            "resumes it",
        )


class _Silent(Exception):
    """A subscription that stayed silent past its timeout (the watchdog cancelled it)."""


class _Watchdog:
    """Cancels a streaming call that stays silent for `timeout` seconds: one thread
    per call that looks every so often, rather than a timer per message."""

    def __init__(self, call: grpc.Future, timeout: float) -> None:
        self.call = call
        self.timeout = timeout
        self.last = time.monotonic()
        self.fired = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def fed(self) -> None:
        self.last = time.monotonic()

    def _run(self) -> None:
        step = min(0.5, self.timeout / 4)
        while not self._stop.wait(step):
            if time.monotonic() - self.last > self.timeout:
                self.fired = True
                self.call.cancel()
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _infos(resp: api_pb2.FetchMetadataResponse, streams: Sequence[str]) -> list[PartitionInfo]:
    """The partitions of `streams` (each known to `resp`) as PartitionInfo."""
    brokers = {b.id: f"{b.host}:{b.port}" for b in resp.brokers}
    found = {m.name: m for m in resp.streamMetadata}
    out = []
    for name in streams:
        meta = found[name]
        for pid in sorted(meta.partitions):
            p = meta.partitions[pid]
            out.append(
                PartitionInfo(
                    name,
                    pid,
                    p.leader,
                    brokers.get(p.leader, ""),
                    tuple(brokers[i] for i in p.isr if i in brokers),
                    p.highWatermark,
                    p.newestOffset,
                    p.paused,
                    p.readonly,
                )
            )
    return out


def subject_matches(pattern: str, subject: str) -> bool:
    """Whether a subject matches a NATS subject pattern.

    NATS's rule: tokens split at '.', `*` matches one token, `>` (last) one or
    more.

    Args:
        pattern: The pattern, e.g. `orders.*` or `orders.>`.
        subject: A stream's subject, e.g. `orders.eu`.

    Returns:
        True when `subject` matches `pattern`.
    """
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">" and i == len(want) - 1:
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(have) == len(want)


def _missing(resp: api_pb2.FetchMetadataResponse, streams: Sequence[str]) -> list[str]:
    """The streams an answer does not know."""
    known = {
        m.name for m in resp.streamMetadata if m.error != api_pb2.StreamMetadata.UNKNOWN_STREAM
    }
    return [s for s in streams if s not in known]


def _status(exc: BaseException) -> str:
    """A gRPC error as 'CODE: details', on one line."""
    if isinstance(exc, grpc.RpcError):
        code = exc.code()
        name = code.name if code is not None else "UNKNOWN"
        return f"{name}: {' '.join(str(exc.details() or '').split())}"
    return " ".join(str(exc).split())
