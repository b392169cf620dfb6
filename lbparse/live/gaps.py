"""Messages missed while the connection was lost, counted where the messages say.

NATS core does not redeliver what was published while a subscriber was
away, and says nothing of it. Liftbridge's Acks do: an OK Ack carries its
stream, its partition's subject and the offset the message was stored at,
and a partition's offsets are consecutive. Offsets an Ack sequence skips
across an outage (the ack before it received before the loss, the one
after it received after the return) are messages acked meanwhile that were
not received: counted, not estimated. Only gaps across an outage count: a
subscription that sees some clients' acks and not others' skips offsets
in calm too.

Messages without offsets (anything but an OK Ack) can only be estimated,
at the rate seen before the loss (`live.Outage.may_have_missed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_PARTITIONS = 100_000  # partitions followed; past this, new ones are not


class OffsetGaps:
    """Per partition, the newest offset received and when; the offsets skipped.

    The offsets skipped are counted per outage they straddle.
    """

    def __init__(self) -> None:
        self.last: dict[tuple[str, str], tuple[int, int]] = {}  # -> (offset, arrival ns)
        self.with_offsets = 0  # messages received that carry an offset
        self.without_offsets = 0
        self.skipped: dict[int, int] = {}  # outage index -> offsets skipped across it
        self.spanned: set[int] = set()  # outages some partition's offsets straddle

    def see(self, rec: Any, outages: Sequence[Any]) -> None:
        """Take a received record into account.

        Only an OK Ack carries an offset; others are counted as without one.
        Past MAX_PARTITIONS partitions, new ones are not followed.

        Args:
            rec: A received record (decoded, `ts` its arrival).
            outages: The session's outages so far (Outage objects, in order).
        """
        env = rec.envelope
        m = env.message if env is not None and env.msg_type_name == "Ack" else None
        if m is None or m.ackError != 0 or not m.partitionSubject:
            self.without_offsets += 1
            return
        self.with_offsets += 1
        key = (m.stream, m.partitionSubject)
        prev = self.last.get(key)
        if prev is None:
            if len(self.last) < MAX_PARTITIONS:
                self.last[key] = (m.offset, rec.ts)
            return
        if m.offset <= prev[0]:
            return  # a copy (two subscriptions), or an ack out of order
        self.last[key] = (m.offset, rec.ts)
        for k, o in enumerate(outages):
            if o.back_at is not None and prev[1] <= o.lost_at and rec.ts >= o.back_at:
                self.spanned.add(k)
                self.skipped[k] = self.skipped.get(k, 0) + m.offset - prev[0] - 1
                return

    def counted(self) -> bool:
        """Some partition's offsets were received on both sides of an outage.

        Returns:
            Whether `missed` counts anything (else only an estimate can).
        """
        return bool(self.spanned)

    def missed(self) -> int:
        """Offsets skipped across the outages: acked messages not received.

        Returns:
            The count, over all outages and partitions.
        """
        return sum(self.skipped.values())

    def share_without(self) -> float:
        """The share of received messages that carry no offset (1.0 with none received).

        Returns:
            A fraction from 0.0 to 1.0.
        """
        total = self.with_offsets + self.without_offsets
        return self.without_offsets / total if total else 1.0
