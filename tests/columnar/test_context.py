"""The pipeline's `--layout auto` context (lbparse.columnar.context) against
the capture reader's rule (lbparse.codec.generation), message by message.

A batch's proof is noted grouped (`_note`); rows whose connection is not
known (a table of payloads without capture columns) are noted without the
group-by, their only scope being the capture. Either way the first proof of
each layout in each scope must be what `GenerationContext.prove` notes when
the same messages come one at a time.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from generations import LEGACY_ACK, LEGACY_MESSAGE, V0_INFO, V0_PUBLISH

import lbparse
from lbparse.codec import generation
from lbparse.columnar.api import payload_records
from lbparse.columnar.context import _contested
from lbparse.columnar.decode_arrow import DecodeOptions, decoder_for

CLIENTS = ["127.0.0.1:40011", "127.0.0.1:40012", None]  # None: no capture columns
SUBJECTS = ["orders", "acks", "_INBOX.abc", "info"]
PAYLOADS = [V0_INFO, LEGACY_ACK, V0_PUBLISH, LEGACY_MESSAGE, b"plain"]


def _messages(seed: int, n: int) -> list[tuple[bytes, str | None, str]]:
    rng = np.random.default_rng(seed)
    return [
        (
            PAYLOADS[int(rng.integers(len(PAYLOADS)))],
            CLIENTS[int(rng.integers(len(CLIENTS)))],
            SUBJECTS[int(rng.integers(len(SUBJECTS)))],
        )
        for _ in range(n)
    ]


def _records(msgs: list[tuple[bytes, str | None, str]]) -> pa.RecordBatch:
    records = payload_records([b for b, _, _ in msgs])
    server = [None if c is None else "127.0.0.1:4222" for _, c, _ in msgs]
    for name, values in (
        ("src", [c for _, c, _ in msgs]),
        ("dst", server),
        ("subject", [s for _, _, s in msgs]),
    ):
        i = records.schema.get_field_index(name)
        field = records.schema.field(i)
        records = records.set_column(i, field, pa.array(values, field.type))
    return records


def _reference(msgs: list[tuple[bytes, str | None, str]]) -> generation.GenerationContext:
    """The capture reader's notes: each message's proof in turn."""
    ref = generation.GenerationContext()
    for i, (b, client, subject) in enumerate(msgs):
        proof = generation.proves(lbparse.decode(b, "auto"))
        if proof is None:
            continue
        conn = None if client is None else generation.connection_key(client, "127.0.0.1:4222")
        ref.prove(i, conn, subject, proof, "?")
    return ref


@pytest.mark.parametrize("seed", range(6))
def test_the_batchs_first_proofs_are_the_capture_readers(seed: int) -> None:
    msgs = _messages(seed, 60)
    dec = decoder_for(DecodeOptions(layout="auto"))
    ctx = generation.GenerationContext()
    base = 0
    for start in range(0, len(msgs), 25):  # proof carried across batches too
        part = msgs[start : start + 25]
        dec.decode(_records(part), context=ctx, base=base)
        base += len(part)
    ref = _reference(msgs)
    assert ctx.first == ref.first and ctx.first_proof == ref.first_proof
    # Both kinds of rows are there: known connections and none.
    assert ("capture",) in ctx.first and any(k[0] == "connection" for k in ctx.first)


def test_rows_without_connections_prove_for_the_capture_alone() -> None:
    """A table of payloads without capture columns: its one scope is the
    capture, whatever the subjects, and each layout's first index is its
    first proving row's."""
    msgs = [(b"plain", None, "x"), (LEGACY_ACK, None, "acks"), (V0_INFO, None, "info")] * 3
    dec = decoder_for(DecodeOptions(layout="auto"))
    ctx = generation.GenerationContext()
    dec.decode(_records(msgs), context=ctx, base=10)
    assert ctx.first == {("capture",): {"legacy": 11, "v0": 12}} == _shifted(_reference(msgs), 10)
    assert ctx.first_proof == 11


def _shifted(ref: generation.GenerationContext, by: int) -> dict[object, dict[str, int]]:
    return {k: {lay: i + by for lay, i in v.items()} for k, v in ref.first.items()}


def test_the_contested_table_is_the_set() -> None:
    """context._contested, a gather, answers as membership in CONTESTED for
    every MsgType a row can hold (-1: none) and any other integer."""
    types = np.arange(-3, 300, dtype=np.int32)
    assert _contested(types).tolist() == [int(t) in generation.CONTESTED for t in types]
    assert _contested(types).any()


def test_newest_proof_leaves_its_narrow_scopes_until_they_are_read() -> None:
    """Today's traffic (v0 MsgTypes only v0 has, nothing ambiguous): a batch's
    capture scope is noted at once, its connection and subject scopes are
    grouped only when `first` is read (GenerationContext.defer), and then
    equal the reader's notes. Grouping every batch was a tenth of a real
    capture's read (short.pcapng)."""
    msgs = [(V0_INFO, c, s) for c in CLIENTS[:2] for s in SUBJECTS] * 3
    dec = decoder_for(DecodeOptions(layout="auto"))
    ctx = generation.GenerationContext()
    dec.decode(_records(msgs[:10]), context=ctx, base=0)
    dec.decode(_records(msgs[10:]), context=ctx, base=10)
    ref = _reference(msgs)
    assert ctx._deferred_rows == len(msgs)  # both batches' scopes still to group
    assert ctx.capture_firsts == ref.first[("capture",)] == {"v0": 0}
    assert ctx.first_proof == 0
    assert ctx._deferred_rows == len(msgs)  # reading the capture scope groups nothing
    assert ctx.first == ref.first
    assert ctx._deferred_rows == 0 and not ctx._deferred
    assert ctx.labels.keys() == ref.first.keys()


def test_held_scopes_are_grouped_before_an_ambiguous_row_reads_them() -> None:
    """Ambiguous envelopes (a v0 Publish is byte for byte a legacy Message) on a
    connection and subject an earlier batch proved legacy on, in a capture
    that proved v0 elsewhere: the capture scope holds both, the subject
    decides. Its proof, held since the first batch, must be worked out
    before the rows are settled: held, they would stay v0 and ambiguous."""
    other = "127.0.0.1:40013"
    first = [(V0_INFO, other, "acks"), (LEGACY_ACK, CLIENTS[0], "orders")]
    then = [(LEGACY_MESSAGE, CLIENTS[0], "orders"), (V0_PUBLISH, CLIENTS[0], "orders")]
    dec = decoder_for(DecodeOptions(layout="auto"))
    ctx = generation.GenerationContext()
    dec.decode(_records(first), context=ctx, base=0)
    assert ctx._deferred_rows == 2
    got = dec.decode(_records(then), context=ctx, base=2).to_batch()
    assert ctx._deferred_rows == 0  # the ambiguous rows asked
    assert got.column("layout").to_pylist() == ["legacy", "legacy"]
    assert got.column("layout_ambiguous").to_pylist() == [False, False]
    # as the capture reader decides them, message by message
    ref = _reference(first + then)
    for i, (b, client, subject) in enumerate(then, start=2):
        env = ref.resolve(
            i,
            generation.connection_key(client, "127.0.0.1:4222"),
            subject,
            lbparse.decode(b, "auto"),
            b,
        )
        assert (env.layout, env.ambiguous) == ("legacy", False)


def test_a_held_note_counts_its_whole_batch_toward_the_bound() -> None:
    """A note keeps its batch's src, dst and subject columns alive: the bound
    (generation.DEFER_ROWS) counts the batch's rows, not its few proving
    ones, so batches of little proof cannot pile up unbounded."""
    msgs = [(b"plain", CLIENTS[0], "orders")] * 8 + [(V0_INFO, CLIENTS[1], "info")] * 2
    dec = decoder_for(DecodeOptions(layout="auto"))
    ctx = generation.GenerationContext()
    dec.decode(_records(msgs), context=ctx, base=0)
    assert ctx._deferred_rows == len(msgs)
    assert ctx.first == _reference(msgs).first
