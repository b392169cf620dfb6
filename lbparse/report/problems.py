"""Problems over time: envelopes that did not decode (by error kind) and the
capture reader's notices (gaps, cut messages, protocol trouble...), with
the first few examples of each kind."""

from __future__ import annotations

from typing import Any

from lbparse.report.timebins import MS, Counts, TimeAxis, exact_time

EXAMPLES = 3  # first examples kept per kind
MAX_MESSAGE = 300  # characters of an example's message


class Problems:
    """Problems over time, by kind, with the first few examples of each kind.

    Also the information notices (normal client or capture behaviour), counted
    and shown apart, never problems.

    Args:
        axis: The report's time axis (problems are counted per bin).
    """

    def __init__(self, axis: TimeAxis) -> None:
        self.axis = axis
        self.counts = Counts(axis)
        self.examples: dict[str, list[dict[str, Any]]] = {}
        self.untimed: dict[str, int] = {}  # notices without a time (a file cut short, say)
        # Information notices (normal client or capture behaviour: a cancelled
        # call, a call cut by the capture's end): counted and shown, never problems
        self.notes: dict[str, int] = {}
        self.note_examples: dict[str, list[dict[str, Any]]] = {}

    def error(self, ns: int, i: int, rec: Any) -> None:
        """An envelope that did not decode: counted as `error:KIND`.

        Args:
            ns: When, in integer nanoseconds since the epoch.
            i: The time bin's index on the axis.
            rec: The capture record; its `error` has kind and message.
        """
        kind = f"error:{rec.error.kind}"
        self.counts.add(i, kind)
        self._example(
            kind, ns, f"{rec.src} -> {rec.dst} {rec.verb} {rec.subject}", rec.error.message
        )

    def notice(self, kind: str, ns: int | None, where: str, message: str) -> None:
        """A reader's notice (or a pipeline row's input problem), `kind` as named there.

        Counted as `notice:KIND`; one without a time is counted apart from the bins.

        Args:
            kind: The notice's kind.
            ns: When, in integer nanoseconds since the epoch, or None.
            where: The input and place it concerns.
            message: The notice's text (its first MAX_MESSAGE characters are kept).
        """
        key = f"notice:{kind}"
        if ns is None:
            self.untimed[key] = self.untimed.get(key, 0) + 1
        else:
            self.counts.add(self.axis.index(ns), key)
        self._example(key, ns, where, message)

    def note(self, kind: str, ns: int | None, where: str, message: str) -> None:
        """A reader's information notice (Notice.info), `kind` as named there.

        Args:
            kind: The notice's kind (counted as `note:KIND`).
            ns: When, in integer nanoseconds since the epoch, or None.
            where: The input and place it concerns.
            message: The notice's text.
        """
        key = f"note:{kind}"
        self.notes[key] = self.notes.get(key, 0) + 1
        self._example(key, ns, where, message, self.note_examples)

    def count_notes(self, kind: str, n: int) -> None:
        """`n` information notices of `kind` known by their count only.

        As a pipeline's summary.json gives them.

        Args:
            kind: The notices' kind (counted as `note:KIND`).
            n: How many.
        """
        key = f"note:{kind}"
        self.notes[key] = self.notes.get(key, 0) + n

    def _example(
        self,
        kind: str,
        ns: int | None,
        where: str,
        message: str,
        examples: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        shown = (self.examples if examples is None else examples).setdefault(kind, [])
        if len(shown) < EXAMPLES:
            shown.append(
                {
                    "t": None if ns is None else ns / MS,
                    **exact_time("t", ns),
                    "where": where,
                    "message": message[:MAX_MESSAGE],
                }
            )

    def model(self) -> dict[str, Any]:
        """The problems section's data.

        Returns:
            A JSON-ready dict: total, by_kind, over_time, examples, and the notes
            (total, by_kind, examples).
        """
        totals = self.counts.totals()
        for k, n in self.untimed.items():
            totals[k] = totals.get(k, 0) + n
        return {
            "total": sum(totals.values()),
            "by_kind": dict(sorted(totals.items())),
            "over_time": self.counts.rows("kind", "count"),
            "examples": dict(sorted(self.examples.items())),
            "notes": {
                "total": sum(self.notes.values()),
                "by_kind": dict(sorted(self.notes.items())),
                "examples": dict(sorted(self.note_examples.items())),
            },
        }
