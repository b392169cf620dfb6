"""`format("liftbridge-streams")`: Liftbridge streams read live, by offset,
through the nodes' gRPC API (lbparse.streams.client), batch and streaming.

    lbparse.spark.register(spark)
    df = (spark.read.format("liftbridge-streams")
          .option("servers", "127.0.0.1:9292,127.0.0.1:9293").option("stream", "orders")
          .load())                                            # every committed message
    q = (spark.readStream.format("liftbridge-streams").option("servers", "127.0.0.1:9292")
         .option("stream", "orders,events").load()
         .writeStream.format("parquet").option("checkpointLocation", "chk/").start("out/"))

One input partition per Liftbridge partition, read from its leader (or an
in-sync follower, readISRReplica): the offsets start..end-1 of the range
planned on the driver. Options (names case-insensitive, as the Kafka
source's where they fit):

| option | |
|---|---|
| `servers` | `host:port[,host:port...]`: any nodes of the cluster (required) |
| `stream` | a stream, or a comma list of streams (this or subjectPattern) |
| `subjectPattern` | the streams whose subject matches (NATS wildcards `*`, `>`) |
| `startingOffsets` | `earliest` (default), `latest`, or JSON: `{"orders": {"0": 23, "1": -2}}` |
| `startingTimestamp` | Unix ms: each partition from its first message at or after it |
| `startingOffsetsByTimestamp` | JSON as startingOffsets, of Unix ms |
| `endingOffsets` | batch only: `latest` (the default, see below), or JSON as above |
| `endingTimestamp` | batch only: up to each partition's first message at or after it |
| `endingOffsetsByTimestamp` | batch only: JSON as endingOffsets, of Unix ms |
| `maxRecordsPerTrigger` | streaming only: at most this many messages per micro-batch |
| `readISRReplica` | `true`: read each partition from an in-sync follower |
| `timeout` | seconds a call or a silent subscription may take (default 10) |

In the JSON, offset -2 is a partition's earliest and -1 its latest; the
ending `latest` is each partition's high watermark + 1 when the read is
planned. A time is resolved to an offset per partition on the driver, so
what is planned and checkpointed is offsets. With subjectPattern the
streams are listed again at each micro-batch (a stream made later is read
from its first offset). A paused partition (Liftbridge reads nothing of
it) fails a batch read in one line; a streaming query holds it where it is.

Streaming offsets are `{"stream": {"partition": next offset}}` (JSON, kept in
the checkpoint): a micro-batch reads from its start offset to its end offset,
both planned on the driver and replayed by Spark as they were after a
restart, so a message is read once. A partition that appears later is read
from its first offset.

Each partition's end is its leader's high watermark + 1 (never what the first
server to answer holds of it), and each task subscribes at the node the
plan found. A partition whose leader dies is looked up again (FetchMetadata,
while a new leader is elected) and read on from the next offset at the new
leader, by the client's retries (lbparse.streams.client); past them the task
fails with one line. The ranges planned never pass a high watermark, so what
a new leader truncates was never read. Batches end at BATCH_ROWS messages or
BATCH_BYTES bytes, so a task holds one batch of messages of any size.

The rows (ROW_FIELDS): stream, partition, offset, timestamp (Unix
nanoseconds, as stored) and time (the same as Spark's timestamp), key,
value, headers (as stored: the server adds `subject` and `reply`), subject,
reply_subject, correlation_id, ack_inbox, and leader_epoch, which is null:
the API's Message does not carry it (the segments do: format("liftbridge")
on a data directory). A value that is an envelope decodes with
lbparse.spark.from_envelope.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from lbparse.columnar import wirescan
from lbparse.columnar.schema import message_type
from lbparse.digits import ascii_int
from lbparse.errors import InputError
from lbparse.streams.client import (
    DEFAULT_TIMEOUT,
    MAX_TIMEOUT,
    StreamsClient,
    StreamsError,
    parse_servers,
)
from lbparse_generated.proto import api_pb2

__all__ = ["NAME", "ROW_FIELDS", "LiftbridgeStreamsDataSource", "StreamsOptions", "arrow_schema"]

NAME = "liftbridge-streams"
EARLIEST, LATEST = -2, -1  # in per-partition JSON, as the Kafka source's
# A batch handed to Spark ends at whichever comes first: BATCH_ROWS messages, or
# BATCH_BYTES of serialized messages (the last one may pass it). A
# task holds one batch, so its memory is bounded by the batch, whatever the
# messages' size; Arrow's 2 GiB a binary array is never approached.
BATCH_ROWS = 4096
MAX_OFFSET = 2**63 - 1  # an offset is an int64
MAX_PARTITION = 2**31 - 1  # a partition an int32
MAX_MS = (2**63 - 1) // 1_000_000  # Unix ms whose ns (as stored) fit an int64
BATCH_BYTES = 16 * 1024 * 1024

KNOWN = (
    "servers",
    "stream",
    "subjectpattern",
    "startingoffsets",
    "startingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsets",
    "endingtimestamp",
    "endingoffsetsbytimestamp",
    "maxrecordspertrigger",
    "readisrreplica",
    "timeout",
)
KNOWN_NAMES = (
    "servers, stream, subjectPattern, startingOffsets, startingTimestamp, "
    "startingOffsetsByTimestamp, endingOffsets, endingTimestamp, "
    "endingOffsetsByTimestamp, maxRecordsPerTrigger, readISRReplica, timeout"
)

ROW_FIELDS: tuple[pa.Field, ...] = (
    pa.field("stream", pa.string(), False),
    pa.field("partition", pa.int32(), False),
    pa.field("offset", pa.int64(), False),
    pa.field("timestamp", pa.int64()),  # Unix nanoseconds, as stored
    pa.field("time", pa.timestamp("us", tz="UTC")),  # the same, as Spark's timestamp
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field(
        "headers",
        pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.binary(), False)),
    ),
    pa.field("subject", pa.string()),
    pa.field("reply_subject", pa.string()),
    pa.field("correlation_id", pa.string()),
    pa.field("ack_inbox", pa.string()),
    pa.field("leader_epoch", pa.int64()),  # not in the API's Message: null
)


def arrow_schema() -> pa.Schema:
    """The rows' Arrow schema: ROW_FIELDS.

    Returns:
        A pyarrow schema of ROW_FIELDS: stream, partition, offset, timestamp
        (Unix ns), time, key, value, headers, subject, reply_subject,
        correlation_id, ack_inbox and leader_epoch (always null).
    """
    return pa.schema(ROW_FIELDS)


Offsets = dict[str, dict[str, int]]  # {stream: {partition (as text, JSON's keys): offset}}
# A position by time (Unix milliseconds, as the Kafka source's): one for every
# partition, or per partition as Offsets.
ByTime = int | Offsets


@dataclass(frozen=True)
class StreamsOptions:
    """The source's options, parsed and checked on the driver.

    Attributes:
        servers: The `servers` option: the nodes' addresses (`host:port`).
        streams: The `stream` option's streams; empty when `pattern` chooses
            them.
        starting: startingOffsets: "earliest", "latest", or per-partition
            offsets ({"stream": {"partition": offset}}, -2 earliest, -1 latest).
        ending: endingOffsets: "latest", or per-partition offsets as
            `starting`.
        max_records: maxRecordsPerTrigger: the most messages per micro-batch,
            None for no bound.
        timeout: Seconds a call or a silent subscription may take.
        pattern: subjectPattern: the streams whose subject matches ('' when
            `streams` names them).
        starting_ms: startingTimestamp (one Unix ms for every partition) or
            startingOffsetsByTimestamp (per partition); over `starting` when
            given.
        ending_ms: endingTimestamp or endingOffsetsByTimestamp, as
            `starting_ms`.
        replica: readISRReplica: read each partition from an in-sync follower.
    """

    servers: list[str]
    streams: list[str]  # empty when `pattern` chooses them
    starting: str | Offsets
    ending: str | Offsets
    max_records: int | None
    timeout: float
    pattern: str = ""  # subjectPattern: the streams whose subject matches
    starting_ms: ByTime | None = None  # startingTimestamp / ...ByTimestamp: over `starting`
    ending_ms: ByTime | None = None
    replica: bool = False  # readISRReplica

    def client(self) -> StreamsClient:
        """A client of the options' servers, timeout and replica choice.

        Returns:
            A new StreamsClient; the caller closes it (a `with` block).
        """
        return StreamsClient(self.servers, timeout=self.timeout, replica=self.replica)


def parse_options(options: Mapping[str, str], streaming: bool | None) -> StreamsOptions:
    """The options, checked on the driver: a bad one is a ValueError of one line.
    `streaming` None: not known yet (load()), those of one mode alone unchecked."""
    opts = {k.lower(): v for k, v in options.items()}
    unknown = sorted(set(opts) - set(KNOWN))
    if unknown:
        raise InputError(
            "bad_option", f"{NAME}: unknown option {unknown[0]!r} (known: {KNOWN_NAMES})"
        )
    if not opts.get("servers", "").strip():
        raise InputError("bad_option", f"{NAME}: option 'servers' is required")
    try:
        servers = parse_servers(opts["servers"])
    except StreamsError as exc:
        raise InputError("bad_option", f"{NAME}: option 'servers': {exc}") from None
    streams = list(dict.fromkeys(s.strip() for s in opts.get("stream", "").split(",") if s.strip()))
    pattern = opts.get("subjectpattern", "").strip()
    if bool(streams) == bool(pattern):
        raise InputError(
            "bad_option",
            f"{NAME}: give exactly one of the options 'stream' and "
            f"'subjectPattern', not {'both' if pattern else 'neither'}",
        )
    ending = [k for k in KNOWN_NAMES.split(", ") if k.startswith("ending") and k.lower() in opts]
    if streaming is True and ending:
        raise InputError(
            "bad_option", f"{NAME}: {ending[0]} is for batch reads (read), not readStream"
        )
    if streaming is False and "maxrecordspertrigger" in opts:
        raise InputError("bad_option", f"{NAME}: maxRecordsPerTrigger is for readStream, not read")
    named = _Named(streams, pattern)
    return StreamsOptions(
        servers,
        streams,
        _offsets_option(opts, "startingoffsets", "earliest", named, ("earliest", "latest")),
        _offsets_option(opts, "endingoffsets", "latest", named, ("latest",)),
        _positive(opts, "maxrecordspertrigger", int, MAX_OFFSET),
        _positive(opts, "timeout", float, MAX_TIMEOUT) or DEFAULT_TIMEOUT,
        pattern,
        _by_time(opts, "starting", named),
        _by_time(opts, "ending", named),
        _flag(opts, "readisrreplica"),
    )


@dataclass(frozen=True)
class _Named:
    """The streams the options choose, to check the JSON options' stream names."""

    streams: list[str]
    pattern: str

    def check(self, option: str, found: Mapping[str, Any]) -> None:
        if self.pattern:
            return  # the streams a pattern matches are known only to the cluster
        for name in sorted(found):
            if name not in self.streams:
                raise InputError(
                    "bad_option",
                    f"{NAME}: option {option!r} names stream {name!r}, which "
                    "option 'stream' does not",
                )


def _flag(opts: Mapping[str, str], name: str) -> bool:
    text = opts.get(name, "false").strip().lower()
    if text not in ("true", "false"):
        raise InputError(
            "bad_option", f"{NAME}: option {name!r} is true or false, not {_shown(opts[name])}"
        )
    return text == "true"


def _by_time(opts: Mapping[str, str], which: str, named: _Named) -> ByTime | None:
    """startingTimestamp (one for all) or startingOffsetsByTimestamp (JSON per
    partition), in Unix ms; at most one of them and startingOffsets (and so
    for ending)."""
    given = [
        k
        for k in (f"{which}offsets", f"{which}timestamp", f"{which}offsetsbytimestamp")
        if k in opts
    ]
    if len(given) > 1:
        raise InputError(
            "bad_option",
            f"{NAME}: options {given[0]!r} and {given[1]!r} both say where to "
            f"{'start' if which == 'starting' else 'end'}: give one",
        )
    if f"{which}timestamp" in opts:
        return int(_positive(opts, f"{which}timestamp", int, MAX_MS))
    name = f"{which}offsetsbytimestamp"
    if name not in opts:
        return None
    found = _json_offsets(opts[name], minimum=0, maximum=MAX_MS)
    if found is None:
        raise InputError(
            "bad_option",
            f"{NAME}: option {name!r} is JSON "
            f'{{"stream": {{"partition": Unix milliseconds}}}}, not {_shown(opts[name])}',
        )
    named.check(name, found)
    return found


def _positive(
    opts: Mapping[str, str], name: str, kind: type[int] | type[float], most: float
) -> Any:
    """A number in (0, most], or None when the option is not given."""
    if name not in opts:
        return None
    try:
        value = kind(opts[name].strip())
    except ValueError:
        value = 0
    if not (0 < value <= most):  # NaN and infinities are not numbers here
        raise InputError(
            "bad_option",
            f"{NAME}: option {name!r} must be a positive number of at most "
            f"{most:g}, not {_shown(opts[name])}",
        )
    return value


def _shown(text: str) -> str:
    """An option's value in a message: repr, cut to 60 characters."""
    return repr(text) if len(text) <= 60 else repr(text[:57]) + "..."


def _offsets_option(
    opts: Mapping[str, str], name: str, default: str, named: _Named, words: tuple[str, ...]
) -> str | Offsets:
    text = opts.get(name, default).strip()
    if text.lower() in words:
        return text.lower()
    found = _json_offsets(text, minimum=EARLIEST, maximum=MAX_OFFSET)
    if found is None:
        raise InputError(
            "bad_option",
            f"{NAME}: option {name!r} is {' or '.join(words)} or JSON "
            f'{{"stream": {{"partition": offset}}}}, not {_shown(text)}',
        )
    named.check(name, found)
    return found


def _json_offsets(text: str, minimum: int, maximum: int) -> Offsets | None:
    """{"stream": {"partition": n}} with every n in [minimum, maximum] and every
    partition a number Liftbridge's int32 holds, or None."""
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested past Python's stack
        return None
    ok = isinstance(found, dict) and all(
        isinstance(parts, dict)
        and all(
            ascii_int(k, MAX_PARTITION) is not None
            and isinstance(v, int)
            and not isinstance(v, bool)
            and minimum <= v <= maximum
            for k, v in parts.items()
        )
        for parts in found.values()
    )
    if not ok:
        return None
    return {s: {str(int(k)): v for k, v in parts.items()} for s, parts in found.items()}


# -- planning (driver) -----------------------------------------------------------


def _resolve(client: StreamsClient, opts: StreamsOptions, starting: bool, ends: Offsets) -> Offsets:
    """Where reads start (or end) as an offset per partition; `ends` are the
    partitions' high watermarks + 1. A partition the JSON leaves out starts at
    its earliest offset (a starting position) or ends at its latest. A
    timestamp is the first offset at or after it (the end when none is), so
    what is planned, and checkpointed, is offsets."""
    which = opts.starting if starting else opts.ending
    by_time = opts.starting_ms if starting else opts.ending_ms
    for name, given in (
        ("startingOffsets" if starting else "endingOffsets", which),
        ("startingOffsetsByTimestamp" if starting else "endingOffsetsByTimestamp", by_time),
    ):
        if isinstance(given, dict):
            _known_partitions(name, given, ends)
    out: Offsets = {}
    for stream, parts in ends.items():
        out[stream] = {}
        for pid, end in parts.items():
            ms = (
                by_time
                if isinstance(by_time, int) or by_time is None
                else by_time.get(stream, {}).get(pid)
            )
            if ms is not None:
                out[stream][pid] = client.offset_at(stream, int(pid), ms * 1_000_000, end)
                continue
            if isinstance(which, str):  # a word, or the default beside a time
                want = LATEST if which == "latest" else EARLIEST
            else:
                want = which.get(stream, {}).get(pid, EARLIEST if starting else LATEST)
            if want == LATEST:
                out[stream][pid] = end
            elif want == EARLIEST:
                out[stream][pid] = client.first_offset(stream, int(pid), end)
            elif want > end:
                raise StreamsError(
                    "out_of_range",
                    f"{stream}/{pid}: offset {want} out of range (the last "
                    f"committed offset is {end - 1})",
                )
            else:
                out[stream][pid] = want
    return out


def _known_partitions(option: str, given: Offsets, ends: Offsets) -> None:
    """A partition that a JSON option names is one the stream has (a stream the
    cluster does not have is an error already, or, with subjectPattern, a
    stream that may come later)."""
    for stream in sorted(given):
        if stream not in ends:
            continue
        for pid in sorted(given[stream], key=int):
            if pid not in ends[stream]:
                have = sorted(map(int, ends[stream]))
                raise StreamsError(
                    "bad_option",
                    f"option {option!r} names partition {pid} of stream {stream!r}, which has "
                    + (
                        f"partitions {have[0]} to {have[-1]}"
                        if len(have) > 1
                        else f"partition {have[0]} alone"
                        if have
                        else "no partition"
                    ),
                )


def _ends(
    client: StreamsClient, opts: StreamsOptions, held: Offsets | None = None
) -> tuple[Offsets, dict[tuple[str, str], str]]:
    """Each partition's high watermark + 1, as its leader has it: of the streams
    named, or of those whose subject matches the pattern now (so a stream made
    later is found); and the node each is to be read from. `held`
    (streaming): a paused partition ends where it is (its offset in `held`),
    left out when it has none yet; Liftbridge reads nothing of it until a
    publish resumes it. A batch read of a paused partition fails."""
    out: Offsets = {}
    at: dict[tuple[str, str], str] = {}
    streaming = held is not None
    infos = (
        client.matching(opts.pattern, leaderless=streaming)
        if opts.pattern
        else client.partitions(opts.streams, leaderless=streaming)
    )
    for p in infos:
        end = p.end
        if (p.paused or not p.described) and held is not None:
            # held where it is: paused, or its leader being elected (the next
            # micro-batch reads on once it has one)
            found = held.get(p.stream, {}).get(str(p.partition))
            if found is None:
                continue
            end = found
        out.setdefault(p.stream, {})[str(p.partition)] = end
        if p.described and p.address:
            at[p.stream, str(p.partition)] = client.reader_address(p)
    return out, at


def _ranges(
    start: Offsets, end: Offsets, at: Mapping[tuple[str, str], str] | None = None
) -> list[InputPartition]:
    """One input partition per Liftbridge partition with something to read;
    `at`: the node each was planned with (its task subscribes there first,
    without a lookup of its own)."""
    parts = []
    for stream in sorted(end):
        for pid in sorted(end[stream], key=int):
            lo = start.get(stream, {}).get(pid, 0)
            hi = end[stream][pid]
            if hi > lo:
                node = (at or {}).get((stream, pid), "")
                parts.append(InputPartition(json.dumps([stream, int(pid), lo, hi, node])))
    return parts


def _read(opts: StreamsOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if partition.value is None:
        return  # Spark's one partition when none was planned: nothing to read
    stream, pid, lo, hi, *rest = json.loads(partition.value)
    with opts.client() as client:
        yield from batches(
            client.read_raw(stream, pid, lo, hi, rest[0] if rest else ""), stream, pid, lo
        )


def batches(
    raws: Iterable[bytes],
    stream: str,
    partition: int,
    first: int,
    rows: int = BATCH_ROWS,
    size: int = BATCH_BYTES,
) -> Iterator[pa.RecordBatch]:
    """Serialized Messages of one partition, offsets first, first + 1, ... (as
    StreamsClient.read_raw yields them), as record batches of ROW_FIELDS,
    each ending after `rows` messages or once it holds `size` bytes.

    Raises:
        StreamsError: a message that is not the next offset, or not a Message.
    """
    held: list[bytes] = []
    nbytes = 0
    for raw in raws:
        held.append(raw)
        nbytes += len(raw)
        if len(held) >= rows or nbytes >= size:
            yield raw_batch(held, stream, partition, first)
            first += len(held)
            held, nbytes = [], 0
    if held:
        yield raw_batch(held, stream, partition, first)


# The fields of api.proto's Message that the rows hold, as from_protobuf types them
_MESSAGE = api_pb2.Message.DESCRIPTOR
_FIELDS = (
    "offset",
    "key",
    "value",
    "timestamp",
    "stream",
    "partition",
    "subject",
    "replySubject",
    "headers",
    "ackInbox",
    "correlationId",
)
_STRUCT = pa.struct([message_type(_MESSAGE).field(name) for name in _FIELDS])


def raw_batch(raws: Sequence[bytes], stream: str, partition: int, first: int) -> pa.RecordBatch:
    """Serialized Messages, offsets first.. in order, as one batch of ROW_FIELDS.

    The messages are read a batch at a time by lbparse's protobuf reader
    (wirescan.decode_structs: C when built, its numpy reference otherwise);
    a batch it leaves to upb (a duplicate map key, a field of another wire
    type) is parsed by upb, message by message, and made by `_batch`, the
    reference this path is held equal to (tests/streams/test_streams_batches.py).

    Raises:
        StreamsError: a message that is not the next offset, or not a Message.
    """
    n = len(raws)
    lens = np.fromiter(map(len, raws), np.int64, n)
    ends = np.cumsum(lens)
    data = np.frombuffer(b"".join(raws), np.uint8)
    structs, ok = wirescan.decode_structs(
        _MESSAGE, _STRUCT, data, ends - lens, ends, emit_defaults=True
    )
    if ok.all():
        ts = structs.field("timestamp")
        batch = pa.RecordBatch.from_arrays(
            [
                structs.field("stream"),
                structs.field("partition"),
                structs.field("offset"),
                ts,
                pa.array(ts.to_numpy() // 1000, pa.timestamp("us", tz="UTC")),
                structs.field("key"),
                structs.field("value"),
                _sorted_map(structs.field("headers")),
                structs.field("subject"),
                structs.field("replySubject"),
                structs.field("correlationId"),
                structs.field("ackInbox"),
                pa.nulls(n, pa.int64()),
            ],
            schema=arrow_schema(),
        )
    else:
        try:
            batch = _batch([api_pb2.Message.FromString(raw) for raw in raws])
        except DecodeError:
            raise StreamsError(
                "bad_message",
                f"{stream}/{partition}: the server sent a message that is not "
                f"an api.proto Message, in offsets {first}..{first + n - 1}",
            ) from None
    _next_offsets(batch.column(2), stream, partition, first)
    return batch


def _next_offsets(offsets: pa.Array, stream: str, partition: int, first: int) -> None:
    """A batch's offsets are first, first + 1, ...: a message skipped (retention
    removed it) or sent twice is an error, not a row out of place."""
    got = offsets.to_numpy()
    want = np.arange(first, first + len(got), dtype=np.int64)
    wrong = np.flatnonzero(got != want)
    if len(wrong):
        i = int(wrong[0])
        raise StreamsError(
            "bad_message",
            f"{stream}/{partition}: the server sent offset {int(got[i])} where "
            f"{first + i} was next (offsets before it are gone: retention?)",
        )


def _sorted_map(headers: pa.MapArray) -> pa.MapArray:
    """Each row's headers in key order (the server sends a Go map's random order),
    as `_batch` sorts them."""
    if not len(headers.keys):
        return headers
    offsets = headers.offsets.to_numpy()
    # (pc.list_parent_indices aborts the process on a MapArray: pyarrow 26)
    rows = np.repeat(np.arange(len(headers)), np.diff(offsets))
    order = pc.sort_indices(
        pa.table({"row": rows, "key": headers.keys}),
        sort_keys=[("row", "ascending"), ("key", "ascending")],
    )
    return pa.MapArray.from_arrays(
        headers.offsets,
        headers.keys.take(order),
        headers.items.take(order),
        type=ROW_FIELDS[7].type,
    )


def _batch(msgs: Sequence[api_pb2.Message]) -> pa.RecordBatch:
    """Messages as a batch of ROW_FIELDS' columns."""
    ts = [m.timestamp for m in msgs]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.stream for m in msgs], pa.string()),
            pa.array([m.partition for m in msgs], pa.int32()),
            pa.array([m.offset for m in msgs], pa.int64()),
            pa.array(ts, pa.int64()),
            pa.array([t // 1000 for t in ts], pa.timestamp("us", tz="UTC")),
            pa.array([m.key for m in msgs], pa.binary()),
            pa.array([m.value for m in msgs], pa.binary()),
            pa.array([sorted(m.headers.items()) for m in msgs], ROW_FIELDS[7].type),
            pa.array([m.subject for m in msgs], pa.string()),
            pa.array([m.replySubject for m in msgs], pa.string()),
            pa.array([m.correlationId for m in msgs], pa.string()),
            pa.array([m.ackInbox for m in msgs], pa.string()),
            pa.nulls(len(msgs), pa.int64()),
        ],
        schema=arrow_schema(),
    )


# -- Spark's classes ---------------------------------------------------------------


class StreamsBatchReader(DataSourceReader):
    def __init__(self, opts: StreamsOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        with self.opts.client() as client:
            ends, at = _ends(client, self.opts)
            start = _resolve(client, self.opts, True, ends)
            end = _resolve(client, self.opts, False, ends)
        for stream, parts in end.items():
            for pid, hi in parts.items():
                if start[stream][pid] > hi:
                    raise StreamsError(
                        "bad_option",
                        f"{stream}/{pid}: startingOffsets {start[stream][pid]} "
                        f"is past endingOffsets {hi}",
                    )
        return _ranges(start, end, at)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.opts, partition)


class StreamsStreamReader(DataSourceStreamReader):
    """Offsets: {stream: {partition: the next offset to read}}."""

    def __init__(self, opts: StreamsOptions) -> None:
        self.opts = opts
        self._at: dict[tuple[str, str], str] = {}

    def initialOffset(self) -> Offsets:
        with self.opts.client() as client:
            # a paused partition to start at its earliest offset or a timestamp
            # is an error here: where that is cannot be known while it is paused
            return _resolve(client, self.opts, True, _ends(client, self.opts)[0])

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.opts.max_records) if self.opts.max_records else ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        with self.opts.client() as client:
            ends, self._at = _ends(client, self.opts, held=start)
            # a partition new since the start is read from its first offset
            firsts = {s: {p: start.get(s, {}).get(p) for p in parts} for s, parts in ends.items()}
            for s, parts in firsts.items():
                for p in parts:
                    if parts[p] is None:
                        parts[p] = client.first_offset(s, int(p), ends[s][p])
        begin: Offsets = {
            s: {p: int(v or 0) for p, v in parts.items()} for s, parts in firsts.items()
        }
        if isinstance(limit, ReadMaxRows):
            return _capped(begin, ends, limit.max_rows)
        return ends

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        # the nodes of the last plan; none for a batch replayed after a restart
        return _ranges(start, end, self._at)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.opts, partition)

    def commit(self, end: Offsets) -> None:
        pass  # nothing to release: Liftbridge keeps the messages by its retention

    def stop(self) -> None:
        pass


def _capped(begin: Offsets, ends: Offsets, budget: int) -> Offsets:
    """End offsets that take at most `budget` messages in all, shared out among the
    partitions with something to read (each gets at least one while any is left)."""
    waiting = [
        (s, p) for s in sorted(ends) for p in sorted(ends[s], key=int) if ends[s][p] > begin[s][p]
    ]
    out = {s: dict(parts) for s, parts in begin.items()}
    share = max(1, budget // max(1, len(waiting)))
    for s, p in waiting:
        take = min(share, budget, ends[s][p] - begin[s][p])
        out[s][p] = begin[s][p] + take
        budget -= take
    return out


class LiftbridgeStreamsDataSource(DataSource):
    """The `liftbridge-streams` data source: Liftbridge streams read live, by offset.

    Registered by lbparse.spark.register() where the extra `streams` (grpcio)
    is installed; then

        (spark.read.format("liftbridge-streams").option("servers", "127.0.0.1:9292")
            .option("stream", "orders").load())

    reads every committed message of the streams, one input partition per
    Liftbridge partition, and spark.readStream reads them as they are
    committed. Its options (case-insensitive; an unknown one is refused):

    | option | |
    |---|---|
    | `servers` | `host:port[,host:port...]`: any nodes of the cluster (required) |
    | `stream` | a stream, or a comma list of streams (this or subjectPattern) |
    | `subjectPattern` | the streams whose subject matches (NATS wildcards `*`, `>`) |
    | `startingOffsets` | `earliest` (default), `latest`, or JSON `{"orders": {"0": 23, "1": -2}}` |
    | `startingTimestamp` | Unix ms: each partition from its first message at or after it |
    | `startingOffsetsByTimestamp` | JSON as startingOffsets, of Unix ms |
    | `endingOffsets` | batch only: `latest` (default), or JSON as above |
    | `endingTimestamp` | batch only: up to the first message at or after the time |
    | `endingOffsetsByTimestamp` | batch only: the same, JSON per partition |
    | `maxRecordsPerTrigger` | streaming only: at most this many messages per micro-batch |
    | `readISRReplica` | `true`: read each partition from an in-sync follower |
    | `timeout` | seconds a call or a silent subscription may take (default 10) |

    In the offsets' JSON, -2 is a partition's earliest offset and -1 its latest.
    The rows are ROW_FIELDS'. Bad options raise ValueError when the DataFrame
    is made; a read that fails (a stream that does not exist, a paused
    partition in a batch read, a node lost more than the client's retries
    allow) fails its query with one line (lbparse.streams.client's
    StreamsError).
    """

    @classmethod
    def name(cls) -> str:
        """The format's name, "liftbridge-streams".

        Returns:
            The name `format()` takes.
        """
        return NAME

    def schema(self) -> StructType:
        # Called by load(): bad options fail there, before any task runs (the
        # options of one mode alone are checked when the reader is made).
        """The rows' schema, ROW_FIELDS', after checking the options.

        Spark calls it in load(), so bad options fail there, before any task runs
        (the options of one mode alone, batch or streaming, are checked when the
        reader is made).

        Returns:
            The Spark schema of ROW_FIELDS.

        Raises:
            ValueError: An unknown option, a missing `servers`, not exactly one of
                `stream` and `subjectPattern`, or a bad value (one line naming the
                option).
        """
        parse_options(dict(self.options), streaming=None)
        return from_arrow_schema(arrow_schema())

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader of spark.read.

        Args:
            schema: The schema of schema().

        Returns:
            The reader: partitions planned on the driver, each read in a task.

        Raises:
            ValueError: A bad option, or one of readStream's (maxRecordsPerTrigger).
        """
        return StreamsBatchReader(parse_options(dict(self.options), streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The streaming reader of spark.readStream.

        Args:
            schema: The schema of schema().

        Returns:
            The reader; its offsets are {"stream": {"partition": next offset}}.

        Raises:
            ValueError: A bad option, or one of batch reads' (endingOffsets, ...).
        """
        return StreamsStreamReader(parse_options(dict(self.options), streaming=True))
