"""`lbparse capture --stats` for people: a real cluster's traffic in a screenful.

A Liftbridge cluster's capture has thousands of subjects that differ only in
a random part: every request's reply inbox (`_INBOX.<nuid>.<n>`), each Raft
RPC's inbox (`<ns>.raft.metadata.<node>.request._INBOX...`), a client's ack
inbox (`<ns>.ack.<nuid>`), each partition's replication subject
(`<ns>.<stream>.<partition>.replicate`). `fold` names the pattern such a
subject belongs to, as a NATS wildcard subject (`_INBOX.>`,
`<ns>.<stream>.*.replicate`), so that the summary counts one row per pattern;
`--all` shows every subject as it is.

Besides subjects, this view counts what only the records in order tell:
NATS status messages (a 503 "no responders" is delivered on the reply inbox
of a request to a subject nobody serves: counted per that request's subject
pattern) and the messages of each connection, named by its CONNECT `name`
(Liftbridge names its connections `LIFT.<namespace>.<node>.<role>`).
"""

from __future__ import annotations

from collections import OrderedDict

from lbparse.capture.records import DESCRIPTION, STATUS, Record
from lbparse.textform import printable

__all__ = ["ClusterView", "DEFAULT_TOP", "fold", "section"]

DEFAULT_TOP = 20
MAX_WIDTH = 72  # a longer key pushes its count right rather than widening every row
INBOX = "_INBOX"
# The last tokens of Liftbridge's per-partition subjects (v1.9.0
# server/partition.go: `<namespace>.<stream>.<partition>.replicate|offset`).
PARTITION_SUFFIXES = ("replicate", "offset")
# Requests whose inbox is remembered for their 503s; past this the oldest go.
MAX_INBOXES = 100_000
# Subjects remembered (to count the subjects of each pattern).
MAX_SUBJECTS = 200_000
UNKNOWN_REQUEST = "(request not in the capture)"
NOT_SEEN = "(no CONNECT name in the capture)"
_B62 = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _random_token(tok: str) -> bool:
    """A NUID (22 base-62 characters: nats.go's inboxes, Liftbridge's ack
    inboxes and server ids when none is configured) or anything as long and
    as mixed: letters and digits, 16 characters or more."""
    return len(tok) >= 16 and set(tok) <= _B62 and not tok.isalpha() and not tok.isdigit()


def fold(subject: str) -> str:
    """The pattern `subject` is counted under (itself when nothing in it varies).

    Args:
        subject: A NATS subject.

    Returns:
        The subject with its varying tokens (reply inboxes, partition
        numbers, NUID-like tokens) replaced by `*` or `>`.
    """
    tokens = subject.split(".")
    if INBOX in tokens:  # a reply inbox, alone or at the end of a Raft RPC subject
        tokens = tokens[: tokens.index(INBOX) + 1] + [">"]
    elif len(tokens) >= 4 and tokens[-1] in PARTITION_SUFFIXES and tokens[-2].isdigit():
        tokens[-2] = "*"
    tokens = ["*" if _random_token(t) else t for t in tokens]
    return ".".join(tokens)


def _add(counts: dict[str, int], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


class _Connection:
    __slots__ = ("published", "delivered")

    def __init__(self) -> None:
        self.published = 0
        self.delivered = 0


class ClusterView:
    """What `--stats` adds to `Stats`, from the records in capture order."""

    def __init__(self) -> None:
        self.folded: dict[str, int] = {}  # pattern -> messages
        self.distinct: dict[str, int] = {}  # pattern -> subjects seen in it
        self.statuses: dict[str, int] = {}  # "503 no responders to <pattern>" -> count
        self.connections: dict[str, _Connection] = {}  # client endpoint ->
        self._inboxes: OrderedDict[str, str] = OrderedDict()  # reply -> request subject
        self._seen: dict[str, str] = {}  # subject -> pattern, up to MAX_SUBJECTS
        self.overflow = False  # more subjects than MAX_SUBJECTS: `distinct` a lower bound

    def _fold(self, subject: str) -> str:
        pattern = self._seen.get(subject)
        if pattern is None:
            pattern = fold(subject)
            if len(self._seen) < MAX_SUBJECTS:
                self._seen[subject] = pattern
                _add(self.distinct, pattern)
            else:
                self.overflow = True
        return pattern

    def add(self, rec: Record) -> None:
        """Count one record: its folded subject, its client, and a status it carries.

        Args:
            rec: The record, in capture order.
        """
        subject = rec.subject
        _add(self.folded, self._fold(subject))
        publishing = rec.verb in ("PUB", "HPUB")
        client = rec.src if publishing else rec.dst
        conn = self.connections.get(client)
        if conn is None:
            conn = self.connections[client] = _Connection()
        if publishing:
            conn.published += 1
            if rec.reply:
                self._inboxes[rec.reply] = subject
                if len(self._inboxes) > MAX_INBOXES:
                    self._inboxes.popitem(last=False)
        else:
            conn.delivered += 1
        if rec.header_block is not None:
            self._status(rec)

    def subject_rows(self) -> dict[str, int]:
        """Messages per pattern; a pattern standing for several subjects says how many.

        Returns:
            A new dict from row label to message count.
        """
        out: dict[str, int] = {}
        for pattern, n in self.folded.items():
            k = self.distinct.get(pattern, 0)
            out[pattern if k < 2 else f"{pattern}  ({k} subjects)"] = n
        return out

    def fold_note(self) -> str:
        """How many subjects the rows stand for ("" when no row stands for several).

        Returns:
            The note, or "".
        """
        if not self.overflow and len(self._seen) == len(self.folded):
            return ""
        many = "more than " if self.overflow else ""
        return f"{many}{len(self._seen)} subjects folded into {len(self.folded)} rows"

    def _status(self, rec: Record) -> None:
        headers = rec.headers or []
        if not headers or headers[0][0] != STATUS:
            return
        code = headers[0][1]
        text = headers[1][1] if len(headers) > 1 and headers[1][0] == DESCRIPTION else ""
        if code == "503" and not text:
            text = "no responders"
        request = self._inboxes.get(rec.subject)
        target = UNKNOWN_REQUEST if request is None else self._fold(request)
        _add(self.statuses, f"{code} {text} to {target}".replace("  ", " "))

    def by_name(self, names: dict[str, str]) -> dict[str, int]:
        """Messages of each connection (published by it and delivered to it).

        Args:
            names: Client endpoint to the name its CONNECT line gave.

        Returns:
            A new dict keyed `<CONNECT name>  <client endpoint>` (NOT_SEEN for a
            connection whose CONNECT the capture does not hold), valued by the
            messages.
        """
        out: dict[str, int] = {}
        for endpoint, conn in self.connections.items():
            label = names.get(endpoint, NOT_SEEN)
            out[f"{label}  {endpoint}"] = conn.published + conn.delivered
        return out


def _sorted(counts: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: kv[1], reverse=True)


def section(title: str, counts: dict[str, int], top: int | None, note: str = "") -> list[str]:
    """A titled section, largest counts first.

    Past `top` rows (None: all) one line counts the rows left out and their
    messages.

    Args:
        title: The section's title.
        counts: Row label to count.
        top: The most rows shown; None shows all.
        note: Said in parentheses after the title, if not empty.

    Returns:
        The section's lines (empty when `counts` is).
    """
    if not counts:
        return []
    rows = _sorted(counts)
    shown = rows if top is None else rows[:top]
    lines = [f"{title}{' (' + note + ')' if note else ''}:"]
    rest = rows[len(shown) :]
    left = (
        f"... {len(rest)} more row{'s' if len(rest) > 1 else ''} (--all shows every row)"
        if rest
        else ""
    )
    keys = [printable(k) for k, _ in shown]
    width = min(max(32, len(left), *(len(k) for k in keys)), MAX_WIDTH)
    lines += [f"  {k:<{width}} {v:>9}" for k, (_, v) in zip(keys, shown)]
    if rest:
        lines.append(f"  {left:<{width}} {sum(v for _, v in rest):>9}")
    return lines
