"""Liftbridge's NATS traffic that is not an envelope, named and decoded.

A Liftbridge cluster's metadata Raft group talks over NATS in bytes of its
own (spec/raft.ksy): hashicorp/raft's transport stream on
`<ns>.raft.metadata.<node>.request._INBOX.…` (reassembled per inbox and
connection, `lbparse.raft.StreamDecoder`; an empty message closes the
stream), nats-on-a-log's JSON handshake on `<ns>.raft.metadata.<node>.accept`
and its reply, and the bootstrap probe, a bare server id, on
`<ns>.raft.metadata.bootstrap`. `TrafficReader` names each such message of
a capture (or a live session) and decodes it into a `Traffic`; the
subjects and their meaning are the spec's (`lbparse.raft.SUBJECTS`).

A reader is fed the messages in order (the capture reader, the pipeline per
unit, a tap per session); it keeps each stream's state, and learns from
the handshakes which way each stream flows (`role`: the dialer's inbox
receives responses, the acceptor's requests).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from lbparse.capture.records import STATUS, parse_headers
from lbparse.raft import SUBJECTS, Chunk, StreamDecoder
from lbparse.raft.transport import REQUEST, RESPONSE, stream_rows

__all__ = ["KINDS", "TRAFFIC_KINDS", "Traffic", "TrafficReader", "subject_kind"]

# What `Traffic.kind` says.
TRAFFIC_KINDS: tuple[str, ...] = (
    "raft_request",
    "raft_response",
    "raft_stream",
    "raft_stream_close",
    "raft_accept",
    "raft_accept_reply",
    "bootstrap_probe",
)
KINDS = TRAFFIC_KINDS  # the older name, kept for callers

_TOKEN = {
    "ns": r"(?P<ns>[^.]+)",
    "node": r"(?P<node>[^.]+)",
    "nuid": r"[^.]+",
    "stream": r"[^.]+",
    "partition": r"[^.]+",
    "inbox": r"(?P<inbox>_INBOX\..+)",
}


def _compile(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\{\w+\})", pattern)
    return re.compile(
        "".join(_TOKEN[p[1:-1]] if p.startswith("{") else re.escape(p) for p in parts) + r"\Z"
    )


_PATTERNS = [(_compile(p), kind, name) for p, kind, name in SUBJECTS]
# Cheap test before the patterns: every non-envelope subject has this in it.
_MARK = ".raft.metadata."
# The subject kinds TrafficReader.read reads (on any other it says None).
_READ_KINDS = frozenset({"raft_stream", "raft_accept", "bootstrap_probe"})


def subject_kind(subject: str) -> tuple[str, str, dict[str, str]] | None:
    """What the first spec subject `subject` matches says of it.

    Args:
        subject: A NATS subject.

    Returns:
        (kind, name, captured tokens) of the first matching spec subject, or
        None when none matches.
    """
    found = _subject_kind(subject)
    if found is None:
        return None
    kind, name, tokens = found
    return kind, name, dict(tokens)  # the caller's own: the cached answer stays as it is


# A capture's Raft subjects are few (one per node and direction), each seen
# thousands of times: the patterns are tried once per subject. Bounded, so
# that a capture of many distinct subjects costs no more than matching anew.
@lru_cache(maxsize=4096)
def _subject_kind(subject: str) -> tuple[str, str, tuple[tuple[str, str], ...]] | None:
    for rx, kind, name in _PATTERNS:
        m = rx.match(subject)
        if m:
            return kind, name, tuple((k, v) for k, v in m.groupdict().items() if v is not None)
    return None


@lru_cache(maxsize=4096)
def _kind_name_node(subject: str) -> tuple[str, str, str | None] | None:
    """subject_kind's kind, name and node token: all a message's reading needs
    of its subject, without a dict of the tokens made per message."""
    found = _subject_kind(subject)
    if found is None:
        return None
    kind, name, tokens = found
    return kind, name, dict(tokens).get("node")


@dataclass
class Traffic:
    """One NATS message of Liftbridge's own non-envelope traffic.

    Attributes:
        kind: Its kind (TRAFFIC_KINDS).
        name: The subject's meaning, from the spec.
        node: The server whose subject it is.
        _detail: What was decoded (the handshake's fields, the probe's server
            id); read it as `detail`, which makes a stream message's from its
            chunk.
        error: Bytes that are not what the subject carries, said.
        rpcs: The RPCs a stream message completed (lbparse.raft.RPC), for
            columns.
        chunk: A stream message's decoding: its detail is made when asked for.
        rows: Read for columns (`TrafficReader.read(rows=True)`): the RPCs a
            stream message completed as raft_rpcs rows (lbparse.raft.rpc_row),
            and then no `rpcs`; None otherwise.
    """

    kind: str
    name: str
    node: str | None = None
    _detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    rpcs: list[Any] = field(default_factory=list)  # lbparse.raft.RPC, for columns
    chunk: Chunk | None = None  # a stream message: its detail is made when asked for
    rows: list[dict[str, Any]] | None = None  # read for columns: the RPCs' rows, no rpcs

    @property
    def detail(self) -> dict[str, Any]:
        """What was decoded: a stream message's RPCs, the handshake's fields, the probe's id."""
        if self.chunk is not None and not self._detail:
            d = self.chunk.to_json_dict()
            d.pop("role", None)
            d.pop("error", None)
            self._detail = d
        return self._detail

    def summary(self) -> str:
        """One line for people: the kind, and the RPCs with their terms and ops.

        Returns:
            The line.
        """
        parts = [self.kind]
        for rpc in self.rpcs:
            text = f"{rpc.rpc} term {rpc.term}"
            if rpc.node:
                text += f" {rpc.node}"
            for key in ("Granted", "Success"):
                if key in rpc.fields and rpc.role == RESPONSE:
                    text += f" {key.lower()}" if rpc.fields[key] else f" not {key.lower()}"
            ops = [e.command.name or e.command.op for e in rpc.entries if e.command]
            if rpc.entries:
                text += f" ({len(rpc.entries)} entries{': ' + ', '.join(ops) if ops else ''})"
            parts.append(text)
        for key in ("id", "inbox", "server_id", "status"):
            if key in self._detail:
                parts.append(f"{key}={self._detail[key]}")
        if self.chunk is not None and self.chunk.skipped:
            parts.append(f"{self.chunk.skipped} bytes out of step")
        if self.error:
            parts.append(f"error: {self.error}")
        return " ".join(parts)

    def to_json_dict(self) -> dict[str, Any]:
        """The message's traffic as a JSON-ready dict (a record's `liftbridge`).

        Returns:
            A new dict: kind, name, node (when known), the detail's keys, error
            (when any).
        """
        d: dict[str, Any] = {"kind": self.kind, "name": self.name}
        if self.node is not None:
            d["node"] = self.node
        d.update(self.detail)
        if self.error is not None:
            d["error"] = self.error
        return d


def _bounded_put(d: dict[str, str], key: str, value: str, limit: int) -> None:
    if len(d) >= limit:
        for k in list(d)[: limit // 2]:
            del d[k]
    d[key] = value


def _status(block: bytes | None) -> str | None:
    if not block:
        return None
    headers = parse_headers(block)
    return headers[0][1] if headers and headers[0][0] == STATUS else None


def _json_object(payload: bytes) -> dict[str, Any] | None:
    if not payload.startswith(b"{"):
        return None
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: [[[[…
        return None
    return obj if isinstance(obj, dict) else None


class TrafficReader:
    """Names and decodes a message sequence's non-envelope Liftbridge traffic.

    Args:
        max_streams: The most Raft streams, inbox roles and accept replies
            remembered, each (the oldest half forgotten past it).
    """

    def __init__(self, max_streams: int = 10_000) -> None:
        self.streams: dict[tuple[str, str, str], StreamDecoder] = {}
        self.roles: dict[str, str] = {}  # request inbox -> which way it flows
        self.accept_replies: dict[str, str] = {}  # reply subject of an accept -> its node
        self.max_streams = max_streams  # each of these is bounded to it (oldest forgotten)

    def read(
        self,
        src: str,
        dst: str,
        subject: str,
        reply: str | None,
        payload: bytes,
        header_block: bytes | None = None,
        status: str | None = None,
        rows: bool = False,
    ) -> Traffic | None:
        """The message's Traffic, or None when it is not such traffic.

        Args:
            src: The sender, host:port.
            dst: The receiver, host:port.
            subject: The NATS subject.
            reply: The reply subject, or None.
            payload: The message bytes.
            header_block: The raw header block, for a NATS status (503: no node
                answered).
            status: The status, already read from the header block.
            rows: For columns: a stream message's RPCs as `Traffic.rows`
                (no RPC objects: its `rpcs`, `detail` and `summary` then say
                none of them).

        Returns:
            The Traffic, or None.
        """
        if _MARK in subject:
            found = _kind_name_node(subject)
            if found is None:
                return None
            kind, name, node = found
            # the kinds of _READ_KINDS
            if kind == "raft_stream":
                return self._raft_stream(src, dst, subject, payload, name, node, rows)
            if kind == "raft_accept":
                return self._raft_accept(reply, payload, name, node)
            if kind == "bootstrap_probe":
                return self._bootstrap_probe(payload, name)
            return None  # an envelope's subject
        if subject in self.accept_replies or (
            payload.startswith(b'{"inbox"') and subject.startswith("_INBOX.")
        ):
            return self._accept_reply(subject, payload, status or _status(header_block))
        return None

    def stream_batch(
        self,
        src: list[str],
        dst: list[str],
        subject: list[str],
        payload: list[bytes | None],
        fallback: Any,
    ) -> tuple[bytes, ...] | None:
        """Messages read for columns, those of known streams in one C call.

        `lbparse.raft.transport.stream_rows` over this reader's streams: a
        stream message of whole plain RPCs is read there, its rows as
        columns; every other message is `fallback(j)`'s, in its turn, which
        reads it with `read(..., rows=True)`.

        Args:
            src: Each message's sender, host:port ("" when unknown).
            dst: Each message's receiver.
            subject: Each message's subject.
            payload: Each message's bytes; None: no message (skipped).
            fallback: Called with j for each message not read in C.

        Returns:
            stream_rows' codes and columns; None when the C reader is not in
            use (nothing was read or called).
        """
        return stream_rows(self.streams, src, dst, subject, payload, fallback)

    @staticmethod
    def inert(subject: str) -> bool:
        """Whether `read` is None for every message on `subject`.

        Whatever the message's bytes and the reader's state: a message on
        such a subject needs no reading.

        Args:
            subject: A NATS subject.

        Returns:
            True for a metadata subject of none of the kinds `read` reads
            (an envelope's, such as the partition status requests'), or of
            no kind at all.
        """
        if _MARK not in subject:
            return False
        found = _kind_name_node(subject)
        return found is None or found[0] not in _READ_KINDS

    @staticmethod
    def stream_node(subject: str) -> str | None:
        """The node a Raft stream's subject names (a `read` Traffic's node).

        Args:
            subject: A stream's subject.

        Returns:
            The node token, None when the subject names none.
        """
        found = _kind_name_node(subject)
        return found[2] if found is not None else None

    # -- the kinds -------------------------------------------------------------

    def _raft_stream(
        self,
        src: str,
        dst: str,
        subject: str,
        payload: bytes,
        name: str,
        node: str | None,
        rows: bool = False,
    ) -> Traffic:
        key = (src, dst, subject)
        dec = self.streams.get(key)
        if dec is None:
            if len(self.streams) >= self.max_streams:  # forget the oldest streams
                for k in list(self.streams)[: self.max_streams // 2]:
                    del self.streams[k]
            dec = self.streams[key] = StreamDecoder(self.roles.get(subject))
        found: list[dict[str, Any]] | None = None
        if rows:
            chunk, found = dec.feed_rows(payload)
        else:
            chunk = dec.feed(payload)
        if chunk.closed:
            self.streams.pop(key, None)
            kind = "raft_stream_close"
        else:
            kind = {REQUEST: "raft_request", RESPONSE: "raft_response"}.get(
                chunk.role or "", "raft_stream"
            )
        error = chunk.error.message if chunk.error is not None else None
        return Traffic(kind, name, node, {}, error, chunk.rpcs, chunk, found)

    def _raft_accept(
        self, reply: str | None, payload: bytes, name: str, node: str | None
    ) -> Traffic:
        obj = _json_object(payload)
        if (
            obj is None
            or not isinstance(obj.get("id"), str)
            or not isinstance(obj.get("inbox"), str)
        ):
            return Traffic(
                "raft_accept", name, node, {}, 'not the handshake\'s JSON {"id", "inbox"}'
            )
        # The dialer's own inbox: the acceptor's responses come to it.
        _bounded_put(self.roles, obj["inbox"], RESPONSE, self.max_streams)
        if reply:
            _bounded_put(self.accept_replies, reply, node or "", self.max_streams)
        return Traffic(
            "raft_accept", name, node, {"id": obj["id"], "inbox": obj["inbox"], "reply": reply}
        )

    def _accept_reply(self, subject: str, payload: bytes, status: str | None) -> Traffic | None:
        node = self.accept_replies.get(subject)  # both copies of a reply (PUB, MSG)
        if status is not None and node is not None:  # 503: the node is not there
            return Traffic(
                "raft_accept_reply", "raft accept handshake reply", node or None, {"status": status}
            )
        obj = _json_object(payload)
        inbox = obj.get("inbox") if obj is not None else None
        if not isinstance(inbox, str) or set(obj or {}) != {"inbox"}:
            if node is None:
                return None  # not a reply we were waiting for, nor one by its looks
            return Traffic(
                "raft_accept_reply",
                "raft accept handshake reply",
                node or None,
                {},
                'not the handshake reply\'s JSON {"inbox"}',
            )
        found = subject_kind(inbox)
        if found is None or found[0] != "raft_stream":
            return (
                None
                if node is None
                else Traffic(
                    "raft_accept_reply",
                    "raft accept handshake reply",
                    node or None,
                    {"inbox": inbox},
                    "the inbox is not a raft transport inbox",
                )
            )
        # The acceptor's inbox: the dialer's requests go to it.
        _bounded_put(self.roles, inbox, REQUEST, self.max_streams)
        return Traffic(
            "raft_accept_reply",
            "raft accept handshake reply",
            found[2].get("node"),
            {"inbox": inbox},
        )

    def _bootstrap_probe(self, payload: bytes, name: str) -> Traffic:
        try:
            server = payload.decode("utf-8")
        except UnicodeDecodeError:
            return Traffic("bootstrap_probe", name, None, {}, "the server id is not UTF-8")
        return Traffic("bootstrap_probe", name, server or None, {"server_id": server})
