"""One input's batches decoded in order, as the capture reader decodes a capture.

Two things make a batch's rows depend on the batches before it, so an input
(a capture, a recording, a table's file) is decoded as one ordered stream:

- layout auto: the generation the input's other messages prove
  (lbparse.codec.generation). The first batches are held back until a proof
  comes, and decoded again if it names a layout older than the newest;
- Liftbridge's non-envelope traffic (Raft's transport, inboxes), whose
  streams span batches (lbparse.capture.traffic.TrafficReader, fed each batch once).

`lbparse pipeline`'s tasks, the Spark data source and `read_capture_tables`
all decode through `decode_in_order`, so they give the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from lbparse.capture.traffic import TrafficReader
from lbparse.codec.generation import NEWEST, GenerationContext
from lbparse.columnar.context import message_count
from lbparse.columnar.decode_arrow import BatchDecoder, Decoded
from lbparse.columnar.trafficcols import TRAFFIC_COLUMNS

__all__ = ["decode_in_order"]

_Held = list[tuple[pa.RecordBatch, Decoded, int]]


def decode_in_order(batches: Iterable[pa.RecordBatch], decoder: BatchDecoder) -> Iterator[Decoded]:
    """The decoded batches of one input's record batches, in order.

    With layout auto, batches that may still get proof from a later one are
    held back until it comes (or the window ends), as the capture reader
    holds its first messages.

    Args:
        batches: The input's record batches, in reading order.
        decoder: The batch decoder.

    Yields:
        Each batch decoded, in input order.
    """
    context = GenerationContext() if decoder.options.layout == "auto" else None
    traffic = TrafficReader()
    held: _Held = []
    base = 0
    for records in batches:
        decoded = decoder.decode(records, context=context, base=base, traffic=traffic)
        count = message_count(records)
        if context is not None and (held or context.waiting(base)):
            held.append((records, decoded, base))
            if not context.waiting(base + count):
                yield from _release(decoder, context, held)
        else:
            yield decoded
        base += count
    yield from _release(decoder, context, held)


def _release(
    decoder: BatchDecoder, context: GenerationContext | None, held: _Held
) -> list[Decoded]:
    """The held batches, decoded again if the input's first proof is of a layout
    other than the newest (only then can it change their rows); emptied."""
    out = []
    first = context.capture_firsts if context is not None else {}
    again = any(lay != NEWEST for lay in first)
    for records, decoded, base in held:
        if again:  # decoded anew; the traffic columns (read once, in order) are kept
            fresh = decoder.decode(records, context=context, base=base)
            fresh.columns.update(
                {k: decoded.columns[k] for k in TRAFFIC_COLUMNS if k in decoded.columns}
            )
            fresh.structs.update(
                {k: decoded.structs[k] for k in TRAFFIC_COLUMNS if k in decoded.structs}
            )
            decoded = fresh
        out.append(decoded)
    held.clear()
    return out
