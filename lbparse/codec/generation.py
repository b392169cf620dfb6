"""`auto` with what a capture knows: the generation each connection has shown.

`lbparse.decode(data, "auto")` judges one payload alone. Some bytes fit two
generations equally (a legacy proto.Message is byte for byte a v0 Publish)
and stay `ambiguous`. A capture knows more: the other messages of the same
TCP connection, of the same subject, of the same file. `GenerationContext`
keeps which generations a capture's messages have proved, and resolves an
ambiguous envelope by the narrowest scope with proof of one of its
candidates: its subject on its connection (unless the subject is an inbox,
`_INBOX.…`: one reply to one request), its connection, the capture.
The envelope then says so (`reasons`) with a confidence to match
(`CONFIDENCE`); a scope with proof of two candidates resolves nothing
(and the reason says that).

Proof (`proves`) is an unambiguous envelope of an enveloped layout that no
other layout could also have read: a MsgType only the newest layout has
(outside `detect.contested_msg_types()`: for v0, anything but Publish and
Ack), or an older layout whose payload schema confirmed the bytes (auto
chose it over the newest, confidence 0.95 or more).

Which proof counts (`threshold`): that of the messages before the
ambiguous one; and for the messages a capture starts with, before any
proof at all, that of the capture's first proof too, if it comes within
its first `WINDOW` messages and `WINDOW_BYTES` of payload (a cluster's
first Publish often comes before its first MsgType only v0 has). The
capture reader holds those first messages back until then; the pipeline
decides the same from the same rule (`first_proof`, `window_end`,
`first`), so that both give every message the same layout.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

from lbparse.codec.api import decode
from lbparse.codec.detect import contested_msg_types
from lbparse.codec.envelope import Envelope
from lbparse.codec.layouts import LAYOUTS
from lbparse.errors import EnvelopeError

__all__ = [
    "CONFIDENCE",
    "NEWEST",
    "WINDOW",
    "GenerationContext",
    "connection_key",
    "proof_label",
    "proves",
    "scopes",
]

CONFIDENCE = {"subject": 0.9, "connection": 0.9, "capture": 0.8}
# A capture's first messages may wait for its first proof: at most these many,
# and only while the payloads before them add up to less than WINDOW_BYTES.
WINDOW = 10_000
WINDOW_BYTES = 64 << 20
# Rows (of the batches their notes keep) GenerationContext.defer may hold unworked.
DEFER_ROWS = 1 << 18
NEWEST, CONTESTED = contested_msg_types()
Key = tuple[str, str]


def connection_key(src: str, dst: str) -> Key:
    """One key for both directions of a TCP connection.

    Args:
        src: One end, "host:port".
        dst: The other end.

    Returns:
        The two ends in sorted order.
    """
    return (src, dst) if src <= dst else (dst, src)


def proves(env: Envelope) -> str | None:
    """The generation this envelope proves, or None (see the module doc).

    Args:
        env: A decoded envelope (`auto`'s, with its classification).

    Returns:
        The layout it proves: the newest one by a MsgType no other layout
        has, an older one by a confirmed payload schema; None otherwise.
    """
    if env.ambiguous or not LAYOUTS[env.layout].has_header:
        return None
    if env.layout == NEWEST:
        return NEWEST if env.msg_type is not None and env.msg_type not in CONTESTED else None
    return env.layout if (env.confidence or 0) >= 0.95 else None


def proof_label(env: Envelope) -> str:
    """What a proof is called in the reasons: its MsgType, or its payload type.

    Args:
        env: The envelope that proves.

    Returns:
        Its MsgType's name, or its payload type in a layout without MsgTypes.
    """
    return (
        env.msg_type_name
        if LAYOUTS[env.layout].has_msg_type and env.msg_type_name
        else env.payload_type
    )


INBOX = "_INBOX."


def subject_scope(subject: str | None) -> bool:
    """Whether a subject is a scope of its own: not a NATS inbox (`_INBOX.…`),
    which carries the one reply to one request."""
    return subject is not None and not subject.startswith(INBOX)


def scopes(conn: Key | None, subject: str | None) -> list[tuple[str, Hashable]]:
    """The scopes of a message, narrowest first: (name, key).

    Args:
        conn: Its connection (`connection_key`), None when not known.
        subject: Its subject; an inbox is no scope of its own.

    Returns:
        ("subject", key) when the subject is a scope, ("connection", key)
        when the connection is known, then ("capture", key).
    """
    out: list[tuple[str, Hashable]] = []
    if conn is not None:
        if subject_scope(subject):
            out.append(("subject", ("subject", conn, subject)))
        out.append(("connection", ("connection", conn)))
    out.append(("capture", ("capture",)))
    return out


class GenerationContext:
    """The proof of one capture (or one pipeline unit), message by message.

    `prove(index, ...)` notes message `index`'s proof; `choose(index, ...)`
    says which candidate an ambiguous message `index` is, by the proof
    that counts for it (see the module doc). `see(...)` does both for a
    decoded envelope and returns it resolved (the capture reader's use).

    Args:
        redecode: Decodes bytes in a named layout (default `lbparse.decode`).
        window: The first messages that may take the capture's first proof
            (default WINDOW).
        window_bytes: The payload bytes they may span (default WINDOW_BYTES).
    """

    def __init__(
        self,
        redecode: Callable[[bytes, str], Envelope] | None = None,
        window: int | None = None,
        window_bytes: int | None = None,
    ) -> None:
        if redecode is None:
            redecode = decode
        self.redecode: Callable[[bytes, str], Envelope] = redecode
        self.window = WINDOW if window is None else window
        self.window_bytes = WINDOW_BYTES if window_bytes is None else window_bytes
        # The first message outside the window (index), once it is known.
        self.window_end: int | None = None
        self.offset = 0  # payload bytes seen (note)
        self._first: dict[Hashable, dict[str, int]] = {}  # scope -> layout -> first index
        self._labels: dict[Hashable, dict[str, str]] = {}  # ... and what that message was
        # Proof noted in bulk whose narrow scopes are not worked out yet (`defer`).
        self._deferred: list[Callable[[], None]] = []
        self._deferred_rows = 0
        self._keys: dict[tuple[Key | None, str | None], list[Hashable]] = {}
        self.first_proof: int | None = None
        self.index = 0  # messages seen (see)
        self.resolved = 0

    @property
    def first(self) -> dict[Hashable, dict[str, int]]:
        """Scope key -> layout -> the index of the first message proving it there.

        Proof handed to `defer` is worked out first.
        """
        if self._deferred:
            self.settle()
        return self._first

    @property
    def labels(self) -> dict[Hashable, dict[str, str]]:
        """Scope key -> layout -> what its first proof was (`proof_label`).

        Proof handed to `defer` is worked out first.
        """
        if self._deferred:
            self.settle()
        return self._labels

    @property
    def capture_firsts(self) -> dict[str, int]:
        """Layout -> the index of the capture's first message proving it.

        Current without working out deferred proof: `defer` takes narrower
        scopes only.
        """
        return self._first.get(("capture",), {})

    def keep_first(self, key: Hashable, layout: str, index: int, label: str) -> None:
        """Note message `index` as proof of `layout` in scope `key`, if it is the first.

        Unlike `prove`, in any order (the least index is kept) and one scope
        at a time; deferred proof stays deferred.

        Args:
            key: The scope's key (`scopes`).
            layout: The layout proven.
            index: The message's place.
            label: What the proof is called in reasons.
        """
        if self.first_proof is None or index < self.first_proof:
            self.first_proof = index
        firsts = self._first.setdefault(key, {})
        if index < firsts.get(layout, index + 1):
            firsts[layout] = index
            self._labels.setdefault(key, {})[layout] = label

    def defer(self, note: Callable[[], None], rows: int) -> None:
        """Work out some proof only when it is read.

        The pipeline notes a batch's proof in the capture scope at once and
        hands its narrower scopes here: grouping rows by connection and
        subject is most of what noting costs, and in today's traffic no
        ambiguous message ever asks. `note` runs before `first` or `labels`
        is next read; held notes are worked out once they span DEFER_ROWS
        rows, so what they hold stays bounded.

        Args:
            note: Notes the proof of scopes narrower than the capture's (by
                `keep_first`; the capture scope's is noted already).
            rows: The rows it keeps alive until it runs (a batch's, however
                few of them prove anything).
        """
        self._deferred.append(note)
        self._deferred_rows += rows
        if self._deferred_rows > DEFER_ROWS:
            self.settle()

    def settle(self) -> None:
        """Work out the proof handed to `defer`, in the order it came."""
        pending, self._deferred, self._deferred_rows = self._deferred, [], 0
        for note in pending:
            note()

    # -- the rule ---------------------------------------------------------------

    def prove(
        self, index: int, conn: Key | None, subject: str | None, layout: str, label: str
    ) -> None:
        """Note that message `index` proves `layout` in each of its scopes.

        Only the first proof of a layout in a scope is kept.

        Args:
            index: The message's place in the capture.
            conn: Its connection key, None when not known.
            subject: Its subject.
            layout: The layout it proves.
            label: What the proof is called in reasons (`proof_label`).
        """
        if self.first_proof is None:
            self.first_proof = index
        keys = self._keys.get((conn, subject))
        if keys is None:
            if len(self._keys) > 100_000:  # bounded: a cache of scope keys
                self._keys.clear()
            keys = self._keys[(conn, subject)] = [key for _, key in scopes(conn, subject)]
        for key in keys:
            firsts = self._first.get(key)
            if firsts is None:
                firsts = self._first[key] = {}
                self._labels[key] = {}
            if layout not in firsts:
                firsts[layout] = index
                self._labels[key][layout] = label

    def outside(self, index: int, offset: int) -> None:
        """Note where message `index` starts: the window ends at the first past a bound.

        Args:
            index: The message's place in the capture.
            offset: The payload bytes before it.
        """
        if self.window_end is None and (index >= self.window or offset >= self.window_bytes):
            self.window_end = index

    def in_window(self, index: int) -> bool:
        """Whether message `index` is among the capture's first, which may wait for a proof.

        Args:
            index: The message's place in the capture.

        Returns:
            True while the window's end is not known or `index` is before it.
        """
        return self.window_end is None or index < self.window_end

    def threshold(self, index: int) -> int:
        """Proof of messages before the returned index counts for message `index`.

        Args:
            index: The ambiguous message's place.

        Returns:
            `index`, or one past the capture's first proof when `index` comes
            before it and that proof is within the window.
        """
        f = self.first_proof
        if f is not None and index < f and self.in_window(f):
            return f + 1
        return index

    def choose(
        self, index: int, conn: Key | None, subject: str | None, candidates: Iterable[str]
    ) -> tuple[str | None, str, list[str]]:
        """Which candidate an ambiguous message is, by the proof that counts for it.

        Args:
            index: The message's place.
            conn: Its connection key.
            subject: Its subject.
            candidates: The layouts it decodes in.

        Returns:
            (layout or None, scope name, layouts proven there): the narrowest
            scope with proof of any candidate decides; two proven there leave the
            layout None; no proof anywhere is (None, "", []).
        """
        limit = self.threshold(index)
        cands = list(candidates)
        for name, key in scopes(conn, subject):
            firsts = self.first.get(key, {})
            proven = [c for c in cands if firsts.get(c, limit) < limit]
            if len(proven) == 1:
                return proven[0], name, proven
            if proven:
                return None, name, proven
        return None, "", []

    def waiting(self, index: int) -> bool:
        """Whether an ambiguous message at `index` may still get proof from a later one.

        Args:
            index: The message's place.

        Returns:
            True while no proof came and `index` is within the window.
        """
        return self.first_proof is None and self.in_window(index)

    # -- the capture reader's use ----------------------------------------------------

    def note(
        self, src: str, dst: str, subject: str, env: Envelope | None, data: bytes
    ) -> tuple[int, Envelope | None, bool]:
        """Take the next message of a capture, in order.

        Args:
            src: The sender, "host:port".
            dst: The receiver.
            subject: Its subject.
            env: Its envelope (`auto`'s), None when it is none.
            data: Its payload.

        Returns:
            (its index, its envelope resolved if it may be now, whether it must
            wait for the first proof: then `resolve` it later).
        """
        index = self.index
        self.index += 1
        self.outside(index, self.offset)
        self.offset += len(data)
        if env is None:
            return index, env, False
        conn = (src, dst) if src <= dst else (dst, src)
        layout = proves(env)
        if layout is not None:
            self.prove(index, conn, subject, layout, proof_label(env))
        if not env.ambiguous:
            return index, env, False
        if self.waiting(index):
            return index, env, True
        return index, self.resolve(index, conn, subject, env, data), False

    def see(
        self,
        conn: Key | None,
        subject: str | None,
        env: Envelope,
        data: bytes,
        index: int | None = None,
    ) -> Envelope:
        """Note `env`'s proof, then resolve it if ambiguous (by what counts for it).

        Args:
            conn: Its connection key.
            subject: Its subject.
            env: Its envelope.
            data: Its payload (decoded again if another layout is chosen).
            index: Its place; None: the next one.

        Returns:
            The envelope, resolved where proof decides (`reasons` say how).
        """
        if index is None:
            index = self.index
            self.index += 1
        layout = proves(env)
        if layout is not None:
            self.prove(index, conn, subject, layout, proof_label(env))
        return self.resolve(index, conn, subject, env, data)

    def resolve(
        self, index: int, conn: Key | None, subject: str | None, env: Envelope, data: bytes
    ) -> Envelope:
        """An ambiguous envelope resolved by the proof that counts for it.

        Args:
            index: Its place.
            conn: Its connection key.
            subject: Its subject.
            env: Its envelope; one not ambiguous is returned as it is.
            data: Its payload, decoded again if another layout is chosen.

        Returns:
            The envelope in the proven layout, with reasons and confidence
            saying so; or still ambiguous, its reasons saying why.
        """
        if not env.ambiguous:
            return env
        layout, scope, proven = self.choose(index, conn, subject, env.layout_candidates)
        if not proven:
            return env
        where = _where(scope, conn, subject)
        if layout is None:
            return _classified(
                env,
                [
                    *env.reasons,
                    f"context: {where} carried {' and '.join(proven)} alike: still ambiguous",
                ],
            )
        chosen = env
        if layout != env.layout:
            try:
                chosen = self.redecode(data, layout)
            except EnvelopeError:  # a candidate decodes; should it not, keep auto's answer
                return env
        key = dict(scopes(conn, subject))[scope]
        first = f"first: {self.labels[key][layout]}, message {self.first[key][layout]}"
        what = "MsgTypes only it has" if layout == NEWEST else "envelopes only it reads"
        self.resolved += 1
        return _classified(
            chosen,
            [*env.reasons, f"context: {where} carried {what} ({first}): {layout}"],
            CONFIDENCE[scope],
            resolved=True,
        )


def _classified(
    env: Envelope, reasons: list[str], confidence: float | None = None, resolved: bool = False
) -> Envelope:
    """A copy of `env` (immutable) with new reasons (and, resolved, its
    confidence and no ambiguity); `env` itself is left as it was."""
    if resolved:
        return env.replace(
            reasons=tuple(reasons), confidence=confidence, ambiguous=False, layout_candidates=()
        )
    return env.replace(reasons=tuple(reasons))


def _where(scope: str, conn: Key | None, subject: str | None) -> str:
    if scope == "capture" or conn is None:
        return "this capture"
    pair = f"{conn[0]} <-> {conn[1]}"
    if scope == "subject":
        return f"subject {subject} on this connection ({pair})"
    return f"this connection ({pair})"
