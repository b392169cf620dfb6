"""From a capture file to records: packets, TCP, NATS, envelopes.

`CaptureReader(path)` is an iterator of `Record`s in capture order (the
order in which each message's last byte was captured). It reads pcap,
pcapng, and our own JSON Lines and Parquet records, told apart by their
first bytes; `-` is standard input (`tcpdump -U -w - | lbparse capture -`,
read as it arrives: lbparse.capture.pipe). Problems in readable traffic
become `Notice`s (passed to `on_notice` as they happen and counted in
`stats`); a file that cannot be read at all raises `CaptureError`. `limits`
(lbparse.codec.limits.Limits) bounds what hostile input may cost; every
limit hit is a Notice or a record's error, and is counted in `stats.limits`.

The packet loop is the hot path: Ethernet/IPv4/TCP and in-order segments
are handled inline, everything else through `linktypes` and `Direction`.
"""

from __future__ import annotations

import functools
import os
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, Final, cast

from lbparse.capture.connects import remember, remember_name
from lbparse.capture.errors import CaptureError
from lbparse.capture.formats import (
    HEAD_BYTES,
    JSONL,
    PARQUET,
    PCAP,
    PCAPNG,
    regular_file,
    sniff_head,
)
from lbparse.capture.h2 import Flows
from lbparse.capture.linktypes import SUPPORTED, ip_offset
from lbparse.capture.nats import MESSAGE_VERBS, Control, Frame, Parsed, Problem
from lbparse.capture.notices import Notice
from lbparse.capture.pcap import Packet, PcapSource
from lbparse.capture.pcapng import PcapngSource
from lbparse.capture.pipe import STDIN, input_name, input_size, open_input, spool
from lbparse.capture.recordings import read_jsonl, read_parquet
from lbparse.capture.records import Record
from lbparse.capture.tcp import MASK, Direction
from lbparse.capture.traffic import TrafficReader
from lbparse.codec.api import decode
from lbparse.codec.dispatch import DECODERS
from lbparse.codec.generation import GenerationContext, connection_key
from lbparse.codec.limits import DEFAULT, Limits
from lbparse.errors import EnvelopeError
from lbparse.textform import msg_type_word


def default_layout() -> str:
    """The envelope layout payloads are decoded as when none is named.

    Returns:
        "auto" when the codec has the auto decoder, else "v0".
    """
    return "auto" if "auto" in DECODERS else "v0"


def subject_matches(pattern: str, subject: str) -> bool:
    """Whether `subject` matches the NATS subject pattern `pattern`.

    NATS wildcards: `*` is one token, `>` one or more trailing tokens.

    Args:
        pattern: A subject pattern, tokens separated by dots.
        subject: A literal subject.

    Returns:
        True if every token matches (and the token counts agree, but for `>`).
    """
    pt, st = pattern.split("."), subject.split(".")
    for i, p in enumerate(pt):
        if p == ">":
            return len(st) > i
        if i >= len(st) or (p != "*" and p != st[i]):
            return False
    return len(pt) == len(st)


# Distinct subjects counted one by one; past this, the rest are counted
# together: replies go to a fresh _INBOX subject each, and a long capture
# must not grow the summary without bound.
MAX_SUBJECTS = 10_000
OTHER_SUBJECTS = "(other subjects)"
# Connections kept; past this, idle ones (nothing half-read, nothing
# waiting behind a hole) are forgotten, half of them at a time. One that
# comes back is picked up again at its next control line, as any
# connection whose start the capture missed.
MAX_FLOWS = 1 << 16
# Flow keys of the connections a reader told `connections` skips, remembered
# so that each is looked at once; past this many, forgotten and looked at again.
MAX_SKIPPED = 1 << 17


class Stats:
    """What a reading saw; `to_json_dict()` is the `--stats` summary."""

    def __init__(self) -> None:
        self.messages = 0
        self.packets = 0
        self.bytes_read = 0
        # Counted once per message: plain dicts, which the compiled build
        # (setup.py) updates in place; a Counter, a dict subclass, cost it a
        # generic call and about 1,000 instructions per update.
        self.per_subject: dict[str, int] = {}
        self.per_verb: dict[str, int] = {}
        self.per_layout: dict[str, int] = {}
        self.per_msg_type: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.notices: Counter[str] = Counter()  # problems only
        # Information notices (Notice.info: normal behaviour, nothing lost), by kind
        self.notes: Counter[str] = Counter()
        self.gap_bytes = 0
        self.controls: Counter[str] = Counter()
        self.skipped_packets = 0  # not TCP over IP, or IP fragments
        self.limits: Counter[str] = Counter()  # resource limits hit, by name
        # client endpoint -> the name its CONNECT line gave (lbparse.capture.connects)
        self.connect_names: dict[str, str] = {}

    def count(self, rec: Record) -> None:
        """Count one record: its subject, verb, and layout and type or error.

        Past MAX_SUBJECTS distinct subjects, new ones are counted together under
        OTHER_SUBJECTS.

        Args:
            rec: The record, decoded or not.
        """
        self.messages += 1
        subject = rec.subject
        per_subject = self.per_subject
        n = per_subject.get(subject)
        if n is not None:
            per_subject[subject] = n + 1
        elif len(per_subject) < MAX_SUBJECTS:
            per_subject[subject] = 1
        else:
            per_subject[OTHER_SUBJECTS] = per_subject.get(OTHER_SUBJECTS, 0) + 1
        _add(self.per_verb, rec.verb)
        env = rec.envelope
        if env is not None:
            _add(self.per_layout, env.layout)
            _add(self.per_msg_type, msg_type_word(env.msg_type_name))
        elif rec.error is not None:
            _add(self.errors, rec.error.kind)
            if rec.error.limit:
                self.limits[rec.error.limit] += 1

    def notice(self, n: Notice) -> None:
        """Count one notice: a problem by kind (and limit, gap bytes), or information.

        Args:
            n: The notice.
        """
        if n.info:
            self.notes[n.kind] += 1
            return
        self.notices[n.kind] += 1
        if n.limit:
            self.limits[n.limit] += 1
        if n.kind == "gap" and n.nbytes:
            self.gap_bytes += n.nbytes

    @property
    def gaps(self) -> int:
        """The number of gap notices."""
        return self.notices["gap"]

    FIELDS = (
        "messages",
        "packets",
        "bytes_read",
        "per_subject",
        "per_verb",
        "per_layout",
        "per_msg_type",
        "errors",
        "notices",
        "notes",
        "gap_bytes",
        "controls",
        "skipped_packets",
        "limits",
    )

    def merge(self, other: Stats) -> None:
        """Add another reading's counts to these (the pipeline's parallel readings).

        Args:
            other: The Stats to add; it is not changed.
        """
        for name in self.FIELDS:  # named: compiled (setup.py), a Stats has no __dict__
            value = getattr(other, name)
            mine = getattr(self, name)
            if isinstance(value, dict):  # Counters too
                for k, v in value.items():
                    mine[k] = mine.get(k, 0) + v
            else:
                setattr(self, name, mine + value)
        for endpoint, connect in other.connect_names.items():
            remember_name(self.connect_names, endpoint, connect)

    def to_json_dict(self) -> dict[str, Any]:
        """The `--stats` summary, a JSON-ready dict.

        Returns:
            A new dict of the counts; per_subject and per_msg_type largest first.
        """
        return {
            "messages": self.messages,
            "packets": self.packets,
            "bytes_read": self.bytes_read,
            "per_subject": _most_common(self.per_subject),
            "per_verb": dict(self.per_verb),
            "per_layout": dict(self.per_layout),
            "per_msg_type": _most_common(self.per_msg_type),
            "errors": dict(self.errors),
            "gaps": self.gaps,
            "gap_bytes": self.gap_bytes,
            "notices": dict(self.notices),
            "notes": dict(self.notes),
            "controls": dict(self.controls),
            "skipped_packets": self.skipped_packets,
            "limits": dict(self.limits),
        }


def _add(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def _most_common(counts: dict[str, int]) -> dict[str, int]:
    """By count, largest first; ties in the order first counted (as Counter.most_common)."""
    return dict(sorted(counts.items(), key=lambda kv: kv[1], reverse=True))


def _endpoint(addr: bytes, port: int) -> str:
    if len(addr) == 4:
        return f"{addr[0]}.{addr[1]}.{addr[2]}.{addr[3]}:{port}"
    import ipaddress

    return f"[{ipaddress.IPv6Address(addr)}]:{port}"


# Ethernet + IPv4 without options + the TCP header's first 14 bytes, in one
# call: ethertype, version/IHL, total length, flags/fragment offset,
# protocol, then addresses and ports (the flow key), seq, ack, offset/flags.
_FAST = struct.Struct("!12xHBxHxxHxB2x12sIIH").unpack_from
_Fast = tuple[int, int, int, int, int, bytes, int, int, int]
_TCP = struct.Struct("!4xIIH").unpack_from
# Final: the compiled build (setup.py) inlines them instead of looking up a global.
_ACK: Final = 0x10
_RST: Final = 0x04
_SYN: Final = 0x02
_FIN: Final = 0x01
_IPV6_EXT = (0, 43, 60)  # hop-by-hop, routing, destination options


def dissect(
    lt: int, buf: bytes, off: int, caplen: int
) -> tuple[bytes, int, int, int, int, int] | None:
    """Find the TCP segment in a captured frame of any supported link type.

    Any supported link type, IPv4 or IPv6. The key is source address,
    destination address, source and destination port.

    Args:
        lt: The capture's link type.
        buf: The buffer holding the frame.
        off: The frame's first byte in `buf`.
        caplen: The frame's captured length.

    Returns:
        (key, seq, ack, offflags, data offset, IP end offset), or None for
        what is not TCP over IP (or an IP fragment).
    """
    end = off + caplen
    ip = ip_offset(lt, buf, off, end)
    if ip < 0 or ip + 20 > end:
        return None
    b0 = buf[ip]
    if b0 >> 4 == 4:
        if buf[ip + 9] != 6 or buf[ip + 6] & 0x3F or buf[ip + 7]:
            return None  # not TCP, or a fragment
        tot = buf[ip + 2] << 8 | buf[ip + 3]
        tcp = ip + (b0 & 15) * 4
        addr = buf[ip + 12 : ip + 20]
        # Segmentation offload leaves the total length 0 in captures.
        ip_end = ip + tot if tot else -1
    elif b0 >> 4 == 6 and ip + 40 <= end:
        nh = buf[ip + 6]
        tcp = ip + 40
        plen = buf[ip + 4] << 8 | buf[ip + 5]
        # 0: a jumbogram, or segmentation offload: the wire length tells.
        ip_end = ip + 40 + plen if plen else -1
        while nh in _IPV6_EXT and tcp + 8 <= end:
            nh, tcp = buf[tcp], tcp + (buf[tcp + 1] + 1) * 8
        if nh != 6:
            return None
        addr = buf[ip + 8 : ip + 40]
    else:
        return None
    if tcp + 20 > end:
        return None
    seq, ack, offflags = cast(tuple[int, int, int], _TCP(buf, tcp))
    # b"".join, not +: mypyc 1.13 leaks the left operand of bytes + bytes
    # (tests/capture/test_compiled.py::test_the_compiled_reader_does_not_leak_keys).
    key = b"".join((addr, buf[tcp : tcp + 4]))
    return key, seq, ack, offflags, tcp + (offflags >> 12) * 4, ip_end


def _endpoints(key: bytes) -> tuple[str, str]:
    """The source and destination `ip:port` of the flow `key` (dissect's)."""
    half = (len(key) - 4) // 2
    sport, dport = key[-4] << 8 | key[-3], key[-2] << 8 | key[-1]
    return _endpoint(key[:half], sport), _endpoint(key[half : 2 * half], dport)


def _among(key: bytes, connections: frozenset[tuple[str, str]]) -> bool:
    """Whether the flow `key` is one of `connections`, each its (lower, higher) endpoints."""
    src, dst = _endpoints(key)
    return (min(src, dst), max(src, dst)) in connections


def _new_flow(
    flows: dict[bytes, Direction], key: bytes, limits: Limits, h2: Any = None
) -> Direction:
    src, dst = _endpoints(key)
    ds: Any = None
    rs: Any = None
    if h2 is not None:  # each direction's HTTP/2 sniffer (lbparse.capture.h2)
        ds, rs = h2.pair(src, dst)
        ds, rs = ds.sniff, rs.sniff
    d = Direction(src, dst, limits.max_reassembly, limits.max_frame, ds)
    r = Direction(dst, src, limits.max_reassembly, limits.max_frame, rs)
    d.peer, r.peer = r, d
    flows[key] = d
    flows[_reverse(key)] = r
    return d


def _forget_idle(flows: dict[bytes, Direction]) -> int:
    """Forget the oldest half of the connections whose two directions are
    idle: their state says nothing a new flow would not find out again.
    Returns the table size at which to look again: twice what is left (at
    least 2 * MAX_FLOWS), so that a table of busy connections, which
    cannot be forgotten, is scanned once per doubling, not once per new
    connection (72k busy connections took 128 s, the scans quadratic)."""
    idle = [
        k
        for k, d in flows.items()
        if not d.pending and not d.parser.busy and not d.peer.pending and not d.peer.parser.busy
    ]
    for k in idle[: len(idle) // 2]:
        _drop_flow(flows, k)  # both directions
    return max(2 * MAX_FLOWS, 2 * len(flows))


def _drop_flow(flows: dict[bytes, Direction], key: bytes) -> None:
    flows.pop(key, None)
    flows.pop(_reverse(key), None)


def _reverse(key: bytes) -> bytes:
    """The other direction's key (b"".join: see dissect)."""
    half = (len(key) - 4) // 2
    return b"".join((key[half : 2 * half], key[:half], key[-2:], key[-4:-2]))


def _open_source(f: BinaryIO, name: str, on_notice: Callable[[Notice], None]) -> Any:
    fmt = sniff_head(f.read(HEAD_BYTES))
    f.seek(0)
    if fmt == PCAPNG:
        return PcapngSource(f, name, on_notice)
    if fmt == PCAP:
        src = PcapSource(f, name, on_notice)
        if src.linktype not in SUPPORTED:
            raise CaptureError(
                "unsupported_linktype",
                f"{name}: link type {src.linktype} is not "
                "one lbparse reads (Ethernet, Linux cooked v1/v2, BSD loopback, "
                "raw IP)",
                offset=20,
            )
        return src
    return None


class CaptureReader:
    """Records of one capture file (pcap, pcapng, or our JSON Lines / Parquet).

    Iterating yields the Records in capture order (with layout "auto",
    ambiguous envelopes resolved by what the capture has shown); `stats`
    counts what the reading saw.

    Args:
        path: The capture file, or `-` for stdin.
        layout: The envelope layout payloads are decoded as (default:
            `default_layout()`).
        subject: A NATS subject pattern; other messages are skipped before
            decoding.
        decode: False leaves `envelope` and `error` None.
        verbs: Which message verbs to yield (default all four).
        on_notice: Called with every Notice (gap, dropped message, protocol
            problem) as it is found.
        limits: Resource limits (default `lbparse.codec.limits.DEFAULT`).
        verify_crc: As `lbparse.decode` takes it.
        lenient: As `lbparse.decode` takes it.
        on_grpc: When given, cleartext HTTP/2 is read too, on any port
            (lbparse.capture.h2), and each gRPC message and call (GrpcMessage,
            GrpcCall: lbparse.capture.grpc) passed to it as it completes;
            without it, HTTP/2 bytes are "protocol" notices, as any bytes that
            are not NATS.
        grpc_json: False: each gRPC message on_grpc gets (and each call keeps)
            is `{}` where it decoded, not its JSON: for a reading that keeps
            no message (its connections and notices are the same).
        connections: Read only these TCP connections, each as its (lower,
            higher) endpoints (`ip:port`, as records name them); the others'
            packets are skipped before reassembly. None (the default): all.
        source: The packets to read instead of opening `path`'s own reader:
            an iterable of Packets with `bytes_read`, as PcapSource is
            (lbparse.capture.native_batches.ConnectionPackets: the packets
            of `connections`, found by the C loop). None: the file's.

    Raises:
        CaptureError: `path` exists but is not a regular file (kind
            not_a_file); errors of the file's format are raised when it is
            read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        layout: str | None = None,
        subject: str | None = None,
        decode: bool = True,
        verbs: Iterable[str] = MESSAGE_VERBS,
        on_notice: Callable[[Notice], None] | None = None,
        limits: Limits | None = None,
        verify_crc: bool = True,
        lenient: bool = False,
        on_grpc: Callable[[Any], None] | None = None,
        grpc_json: bool = True,
        connections: frozenset[tuple[str, str]] | None = None,
        source: Any = None,
    ) -> None:
        self.path = os.fspath(path)
        self._given: Any = source
        self.name = input_name(self.path)  # how messages name it: stdin for `-`
        self.limits = limits
        self.verify_crc = verify_crc
        self.lenient = lenient
        self.layout = layout or default_layout()
        self.subject = subject
        self.decode = decode
        self.verbs = frozenset(verbs)
        self.on_notice = on_notice
        self.on_grpc = on_grpc
        self.grpc_json = grpc_json
        self.connections = None if connections is None else frozenset(connections)
        # With on_grpc: each connection found to be HTTP/2, (lower, higher) endpoint.
        self.http2_connections: set[tuple[str, str]] = set()
        self.stats = Stats()
        self.notices: list[Notice] = []  # the latest, for callers that poll
        if self.path != STDIN and os.path.exists(self.path) and not regular_file(self.path):
            # Opening a FIFO blocks until someone writes to it.
            raise CaptureError(
                "not_a_file",
                f"{self.path}: not a regular file (a FIFO, socket, device or directory); not read",
                offset=None,
            )
        self.size = input_size(self.path)
        self._source: Any = None
        self._decode = self._decoder()
        # auto: ambiguous envelopes resolved by what the capture has shown
        # (lbparse.codec.generation); None for a named layout.
        self._context: Any = None
        if self.decode and self.layout == "auto":
            self._context = GenerationContext(self._decode)
        # Liftbridge's non-envelope traffic, named and decoded (lbparse.capture.traffic).
        self._traffic: Any = None
        if self.decode:
            self._traffic = TrafficReader()

    @property
    def bytes_read(self) -> int:
        """The bytes read of the file so far (0 before reading starts), for progress."""
        src = self._source
        return getattr(src, "bytes_read", 0) if src is not None else 0

    def _decoder(self) -> Callable[[bytes, str], Any]:
        """lbparse.decode with this reader's options; without options when
        they are the defaults, the call decode's shortcut is made for."""
        options: dict[str, Any] = {}
        if self.limits is not None and self.limits is not DEFAULT:
            options["limits"] = self.limits
        if not self.verify_crc:
            options["verify_crc"] = False
        if self.lenient:
            options["lenient"] = True
        return functools.partial(decode, **options) if options else decode

    def _notice(self, n: Notice) -> None:
        self.stats.notice(n)
        if self.on_notice is not None:
            self.on_notice(n)

    def __iter__(self) -> Iterator[Record]:
        if self._context is not None:
            return self._in_order(self._records())
        return self._records()

    def _our_format(self, f: BinaryIO) -> Iterator[Record]:
        head = f.read(HEAD_BYTES)
        f.seek(0)
        fmt = sniff_head(head)
        if fmt == PARQUET and self.path == STDIN:
            path = spool(f, ".parquet")  # Parquet's index is at its end
            try:  # not `with`: see _records
                yield from self._matching(read_parquet(path, self._notice))
            finally:
                os.unlink(path)
            self.stats.bytes_read = f.tell()
            return
        if fmt == PARQUET:
            recs = read_parquet(self.path, self._notice)
        elif fmt == JSONL:
            recs = read_jsonl(f, self.name, self._notice)
        else:
            raise CaptureError(
                "unknown_format",
                f"{self.name}: neither pcap, pcapng, JSON Lines "
                f"nor Parquet (first bytes {head.hex()})",
                offset=0,
            )
        yield from self._matching(recs)
        self.stats.bytes_read = f.tell() if self.path == STDIN else self.size

    def _matching(self, recs: Iterator[Record]) -> Iterator[Record]:
        matched: dict[str, bool] = {}
        for rec in recs:
            if rec.verb in self.verbs and self._wanted(rec.subject, matched):
                yield self._finish(rec)

    def _records(self) -> Iterator[Record]:
        given = self._given
        if given is not None:
            self._source = given
            yield from self._packets(given)
            self.stats.bytes_read = given.bytes_read
            return
        # try/finally rather than `with`: the compiled build (setup.py)
        # mishandles a `with` around `yield from` in a generator.
        f = open_input(self.path)
        try:
            src = _open_source(f, self.name, self._notice)
            if src is None:
                yield from self._our_format(f)
            else:
                self._source = src
                yield from self._packets(src)
                self.stats.bytes_read = src.bytes_read
        finally:
            f.close()

    def _packets(self, src: Any) -> Iterator[Record]:
        # One loop from packets to records: this is where the time goes, so
        # the common case (Ethernet, IPv4, the next segment in order) takes
        # the fewest steps and everything else calls out.
        stats = self.stats
        flow_limits = self.limits or DEFAULT
        matched: dict[str, bool] = {}
        notices: list[Notice] = []
        flows: dict[bytes, Direction] = {}
        flow_cap = 2 * MAX_FLOWS  # the table size at which idle connections are forgotten
        unsupported: set[int] = set()
        fast = _FAST
        npk = 0  # counted here, added to stats when the loop ends
        # Typed, so that the compiled build unpacks tuples by index and does
        # its arithmetic on machine integers, not through generic calls.
        packets: Iterator[Packet] = iter(src)
        ts = 0  # nanoseconds
        buf: bytes
        key: bytes
        et: int
        vihl: int
        tot: int
        frag: int
        proto: int
        seq: int
        ack: int
        offflags: int
        data: int
        ip_end: int
        only = self.connections
        skipped: set[bytes] = set()  # flow keys of connections not among `only`
        h2: Any = None
        if self.on_grpc is not None:
            h2 = Flows(
                flow_limits.max_frame, flow_limits.max_reassembly, flow_limits, self.grpc_json
            )
            h2.connections = self.http2_connections
        try:
            for ts, lt, buf, off, caplen, wirelen in packets:
                npk += 1
                if h2 is not None:
                    h2.clock.ts = ts
                parts = None
                if lt == 1 and caplen >= 54:
                    et, vihl, tot, frag, proto, key, seq, ack, offflags = cast(
                        _Fast, fast(buf, off)
                    )
                    if et == 0x0800 and vihl == 0x45 and proto == 6 and not frag & 0x3FFF:
                        data = off + 34 + (offflags >> 12) * 4
                        ip_end = off + 14 + tot if tot else -1
                    else:
                        parts = dissect(lt, buf, off, caplen)
                        if parts is None:
                            stats.skipped_packets += 1
                            continue
                        key, seq, ack, offflags, data, ip_end = parts
                else:
                    if lt not in SUPPORTED:
                        if lt not in unsupported:
                            unsupported.add(lt)
                            self._notice(
                                Notice(
                                    "protocol",
                                    f"link type {lt} is not supported; its packets are skipped",
                                    ts,
                                )
                            )
                        stats.skipped_packets += 1
                        continue
                    parts = dissect(lt, buf, off, caplen)
                    if parts is None:
                        stats.skipped_packets += 1
                        continue
                    key, seq, ack, offflags, data, ip_end = parts
                end = off + caplen
                if ip_end < 0:  # no IP length: the wire length tells
                    ip_end = off + wirelen
                if ip_end <= end:
                    avail, missing = ip_end - data, 0
                else:  # the capture cut this packet short
                    avail, missing = end - data, ip_end - end
                if avail < 0:
                    missing, avail = missing + avail, 0
                    if missing < 0:
                        missing = 0
                d = flows.get(key)
                if d is None:
                    if not (avail or missing or offflags & _SYN):
                        continue  # a bare ACK of a connection we know nothing of
                    if only is not None and (key in skipped or not _among(key, only)):
                        if len(skipped) >= MAX_SKIPPED:
                            skipped.clear()
                        skipped.add(key)
                        skipped.add(_reverse(key))
                        continue
                    if len(flows) >= flow_cap:
                        flow_cap = _forget_idle(flows)
                    d = _new_flow(flows, key, flow_limits, h2)
                if offflags & _ACK:
                    d.ack = ack
                if offflags & _SYN:
                    d.syn(seq, notices, ts)
                    d.client = not offflags & _ACK
                    d.peer.client = not d.client
                    seq = (seq + 1) & MASK
                if avail:
                    if seq == d.next_seq and not missing and not d.pending and not d.cut:
                        d.next_seq = (seq + avail) & MASK
                        chunk = buf[data : data + avail]
                        frames = d.parser.feed(chunk)
                        d.keep(chunk)
                    else:
                        frames = d.segment(seq, buf[data : data + avail], missing, notices, ts)
                elif missing:
                    frames = d.segment(seq, b"", missing, notices, ts)
                else:
                    frames = None
                if offflags & (_FIN | _RST):
                    if frames:
                        yield from self._emit(ts, d, frames, matched)
                    for dd, frames in self._close(flows, key, d, offflags, notices, ts):
                        yield from self._emit(ts, dd, frames, matched)
                    frames = None
                if notices:
                    for n in notices:
                        self._notice(n)
                    notices.clear()
                if h2 is not None and h2.out:
                    self._grpc_out(h2.out)
                if not frames:
                    continue
                for fr in frames:
                    rec = self._accept(ts, d, fr, matched)
                    if rec is not None:
                        yield rec
            if h2 is not None:
                h2.ending = True
            for d in list(flows.values()):
                frames = d.finish(notices, ts)
                yield from self._emit(ts, d, frames, matched)
                for n in notices:
                    self._notice(n)
                notices.clear()
            if h2 is not None:
                h2.close()  # calls still open when the capture ends
                self._grpc_out(h2.out)
        finally:
            stats.packets += npk

    def _grpc_out(self, out: list[Any]) -> None:
        """HTTP/2's notices and gRPC records, in the order they came."""
        for item in out:
            if isinstance(item, Notice):
                self._notice(item)
            elif self.on_grpc is not None:
                self.on_grpc(item)
        out.clear()

    def _emit(
        self, ts: int, d: Direction, frames: list[Parsed], matched: dict[str, bool]
    ) -> Iterator[Record]:
        """Records of `frames` from direction `d`."""
        for fr in frames:
            rec = self._accept(ts, d, fr, matched)
            if rec is not None:
                yield rec

    def _accept(self, ts: int, d: Direction, fr: Parsed, matched: dict[str, bool]) -> Record | None:
        """The record of one parsed item, decoded and counted; None for what
        this reading does not yield (a problem is a notice, a control line is
        counted, a message of another verb or subject is skipped)."""
        if isinstance(fr, Frame):
            if fr.verb not in self.verbs or not self._wanted(fr.subject, matched):
                return None
            return self._finish(Record(ts, d, fr))
        if isinstance(fr, Control):
            self.stats.controls[fr.verb] += 1
            if fr.verb == "CONNECT":
                remember(self.stats.connect_names, d.src, fr.text)
        else:
            self._notice(_problem_notice(fr, ts, d))
        return None

    def _wanted(self, subject: str, matched: dict[str, bool]) -> bool:
        """Does `subject` match the reading's pattern (`matched` caches answers)?"""
        if self.subject is None:
            return True
        ok = matched.get(subject)
        if ok is None:
            if len(matched) > 10000:
                matched.clear()
            ok = matched[subject] = subject_matches(self.subject, subject)
        return ok

    def _finish(self, rec: Record) -> Record:
        """`rec` decoded (unless decode=False) and counted."""
        if self.decode:
            try:
                rec.envelope = self._decode(rec.payload, self.layout)
            except EnvelopeError as exc:
                rec.error = exc
            if self._traffic is not None:
                rec.traffic = self._traffic.read(
                    rec.src, rec.dst, rec.subject, rec.reply, rec.payload, rec.header_block
                )
            if self._context is not None and self._see(rec):
                return rec  # held for the capture's first proof: counted when released
        self.stats.count(rec)
        return rec

    def _see(self, rec: Record) -> bool:
        """Note the record's proof of its generation; resolve it if ambiguous.
        True when it must wait for the capture's first proof (`_in_order`)."""
        _, env, held = self._context.note(rec.src, rec.dst, rec.subject, rec.envelope, rec.payload)
        rec.envelope = env
        return bool(held)

    def _in_order(self, recs: Iterator[Record]) -> Iterator[Record]:
        """The records, with those that wait for the capture's first proof held
        back (and every record after them, to keep the order) until it comes,
        or until the context's window has passed without it."""
        ctx = self._context
        held: list[tuple[int, Record]] = []
        for rec in recs:
            index = ctx.index - 1
            env = rec.envelope
            waits = env is not None and env.ambiguous and ctx.waiting(index)
            if not held and not waits:
                yield rec
                continue
            held.append((index, rec))  # the waiting ones are counted at release
            if ctx.first_proof is not None or ctx.window_end is not None:
                yield from self._release(held, connection_key)
                held = []
        yield from self._release(held, connection_key)

    def _release(self, held: list[tuple[int, Record]], connection_key: Any) -> Iterator[Record]:
        ctx = self._context
        for index, rec in held:
            env = rec.envelope
            if env is not None and env.ambiguous:
                rec.envelope = ctx.resolve(
                    index, connection_key(rec.src, rec.dst), rec.subject, env, rec.payload
                )
                self.stats.count(rec)
            yield rec

    @staticmethod
    def _close(
        flows: dict[bytes, Direction],
        key: bytes,
        d: Direction,
        offflags: int,
        notices: list[Notice],
        ts: int,
    ) -> list[tuple[Direction, list[Parsed]]]:
        d.closed = True
        out = [(d, d.finish(notices, ts))]
        if offflags & _RST or d.peer.closed:
            out.append((d.peer, d.peer.finish(notices, ts)))
            _drop_flow(flows, key)
        return out


def _problem_notice(problem: Problem, ts: int | None, d: Direction) -> Notice:
    """The Notice of a parser's Problem: a limit it names, or a protocol problem."""
    if problem.limit:
        return Notice("limit", problem.message, ts, d.src, d.dst, limit=problem.limit)
    return Notice("protocol", problem.message, ts, d.src, d.dst)


def read_capture(path: str | os.PathLike[str], **options: Any) -> Iterator[Record]:
    """`iter(CaptureReader(path, **options))`: records of one capture file.

    Args:
        path: The capture file, or `-` for stdin.
        **options: CaptureReader's keyword arguments.

    Returns:
        An iterator of the file's Records.
    """
    return iter(CaptureReader(path, **options))
