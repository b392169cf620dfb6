"""`--layout auto` in the pipeline with what the capture knows (lbparse.codec.generation).

Each unit (a capture file) has one `GenerationContext`; every batch of it
notes its proof there, message by message in the unit's order, and the
ambiguous envelopes are resolved by the same rule as the capture reader's:
so a row's layout is the same in the Parquet as in `lbparse capture`.

Cheap in the usual case: proof is noted per scope as the first index of
each proven layout (a group-by per batch, not a loop), and rows are
looked at one by one only when the unit has proof of a layout other than
the newest (in a capture of today's Liftbridge, never: auto's answer for
an ambiguous v0 envelope is already v0's). process_unit holds a unit's
first batches back while it has no proof yet (see generation.WINDOW).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lbparse.codec.api import decode
from lbparse.codec.generation import (
    CONTESTED,
    INBOX,
    NEWEST,
    GenerationContext,
    connection_key,
    scopes,
)


class ContextDecoder(Protocol):
    """What the context asks of the batch decoder (decode_arrow.BatchDecoder).

    The decoder calls it: a protocol, so this module needs nothing of that
    one.
    """

    options: Any
    layouts: Any
    auto_decisions: dict[int, Any]

    def redecode(self, rows: Any, i: int, layout: str, b: bytes, e: int, scope: str = ...) -> None:
        """Decode row `i` again as `layout`, the generation its context proves.

        Args:
            rows: The batch's decoded rows.
            i: The row.
            layout: The layout proven.
            b: The row's payload.
            e: The row's payload end in the batch's buffer.
            scope: Where the proof is: "subject", "connection" or "capture".
        """


__all__ = ["ContextDecoder", "apply_context", "message_count"]


# CONTESTED (byte 7 values) as a table a row's MsgType indexes, shifted by
# one: -1 (none) at 0; past a byte, none of them. A gather, where np.isin
# sorted the batch's column.
assert all(0 <= t < 256 for t in CONTESTED), "byte 7 values"
_CONTESTED_BY_TYPE = np.zeros(258, np.bool_)
_CONTESTED_BY_TYPE[[t + 1 for t in CONTESTED]] = True


def _contested(msg_type: np.ndarray) -> np.ndarray:
    """Whether each row's MsgType is one an older layout may also read."""
    found: np.ndarray = _CONTESTED_BY_TYPE[np.clip(msg_type.astype(np.int64) + 1, 0, 257)]
    return found


def message_count(records: pa.RecordBatch) -> int:
    """Rows of a batch that are messages (not the readers' problem rows).

    Args:
        records: A batch of records.

    Returns:
        Its rows without an `error_kind`.
    """
    problems = int(np.asarray(records.column("error_kind").is_valid()).sum())
    return int(records.num_rows) - problems


def apply_context(
    dec: ContextDecoder,
    ctx: GenerationContext,
    base: int,
    records: pa.RecordBatch,
    rows: Any,
    fast: np.ndarray,
    preset: np.ndarray,
    hdr: dict[str, np.ndarray],
    buffers: tuple[np.ndarray, ...],
) -> None:
    """Note the batch's proof in `ctx`; resolve its ambiguous rows by it.

    Args:
        dec: The batch decoder.
        ctx: The unit's generation context.
        base: The index in the unit of the batch's first message.
        records: The batch.
        rows: Its decoded rows.
        fast: Rows the v0 fast path decoded.
        preset: Rows that are the readers' problem rows (not messages).
        hdr: The header arrays (`lens`: each payload's length, ...).
        buffers: The payloads' (starts, ends, data).
    """
    n = records.num_rows
    index = base + np.cumsum(~preset) - 1  # each message's index in the unit
    _window(ctx, index, preset, hdr["lens"])
    proof = np.full(n, -1, np.int8)  # 0: the newest layout; 1: another (rows.proofs)
    proof[fast & ~_contested(rows.msg_type)] = 0
    for i in rows.proofs:
        proof[i] = 1
    src = records.column("src")
    dst = records.column("dst")
    subject = records.column("subject")
    if (proof >= 0).any():
        _note(ctx, index, proof, rows, src, dst, subject)
    firsts = ctx.capture_firsts
    others = [lay for lay in firsts if lay != NEWEST]
    # Proof that counts for some row of this batch (generation.threshold).
    horizon = max(base + n, ctx.threshold(base))
    if others and min(firsts[lay] for lay in others) < horizon:
        _resolve(dec, ctx, index, records, rows, fast, buffers, src, dst, subject)
    if ctx.first_proof is not None:  # some proof, in the capture scope at least
        _settle(dec, ctx, index, rows, buffers, src, dst, subject)


def _window(
    ctx: GenerationContext, index: np.ndarray, preset: np.ndarray, lens: np.ndarray
) -> None:
    """Where the unit's window ends (generation.GenerationContext.outside), from
    its messages' payload lengths. Batches come in order: the messages and
    payload bytes so far are kept on the context (`index`, `offset`), as the
    reader keeps them."""
    msg = np.flatnonzero(~preset)
    msg = msg[index[msg] >= ctx.index]  # a held batch decoded again is not counted again
    if not msg.size:
        return
    ctx.index = int(index[msg][-1]) + 1
    sizes = np.where(lens[msg] < 0, 0, lens[msg])
    before = ctx.offset + np.cumsum(sizes) - sizes  # payload bytes before each message
    ctx.offset += int(sizes.sum())
    if ctx.window_end is None:
        out = np.flatnonzero((index[msg] >= ctx.window) | (before >= ctx.window_bytes))
        if out.size:
            ctx.window_end = int(index[msg][out[0]])


def _connections(src: pa.Array, dst: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Each row's connection (`connection_key`) as two columns, its ends in
    order; null where an end is not known."""
    first = pc.less_equal(src, dst)  # null where an end is: then both are null
    return pc.if_else(first, src, dst), pc.if_else(first, dst, src)


def _note(
    ctx: GenerationContext,
    index: np.ndarray,
    proof: np.ndarray,
    rows: Any,
    src: pa.Array,
    dst: pa.Array,
    subject: pa.Array,
) -> None:
    """The first index of each proven layout per scope (grouped, not row by row).

    The capture scope (every row's widest, and `first_proof`) is noted at
    once: each layout's least index. The narrower ones are grouped by
    connection and subject only when something reads them
    (GenerationContext.defer): a row whose connection is not known (an
    end null: a table of payloads without capture columns) has the
    capture for its only scope, whatever its subject (generation.scopes)."""
    sel = np.flatnonzero(proof >= 0)
    names, codes = _layouts_of(sel, proof, rows)
    for code in np.unique(codes).tolist():
        _first(ctx, None, None, names[code], int(index[sel[codes == code]].min()))
    known = np.asarray(src.is_valid())[sel] & np.asarray(dst.is_valid())[sel]
    sel, codes = sel[known], codes[known]
    if sel.size:
        at = index[sel]
        # counted by the batch's rows: the note keeps its src, dst and subject alive
        ctx.defer(lambda: _note_scopes(ctx, sel, at, names, codes, src, dst, subject), len(src))


def _note_scopes(
    ctx: GenerationContext,
    sel: np.ndarray,
    at: np.ndarray,
    names: list[str],
    codes: np.ndarray,
    src: pa.Array,
    dst: pa.Array,
    subject: pa.Array,
) -> None:
    """`_note`'s narrower scopes: rows `sel` (their ends known), message `at`
    proving layout `names[codes]`, grouped by connection, subject and layout."""
    take = pa.array(sel)
    lo, hi = _connections(src.take(take), dst.take(take))
    subj = subject.take(take)
    table = pa.table(
        {
            "lo": lo,
            "hi": hi,
            "subject": pc.if_else(pc.starts_with(subj, INBOX), None, subj),
            "layout": pa.array(codes),
            "index": pa.array(at),
        }
    )
    firsts = table.group_by(["lo", "hi", "subject", "layout"], use_threads=False).aggregate(
        [("index", "min")]
    )
    for lo_, hi_, sub, code, first in zip(
        *(firsts.column(c).to_pylist() for c in ("lo", "hi", "subject", "layout", "index_min"))
    ):
        _first(ctx, None if lo_ is None or hi_ is None else (lo_, hi_), sub, names[code], first)


def _layouts_of(sel: np.ndarray, proof: np.ndarray, rows: Any) -> tuple[list[str], np.ndarray]:
    """The layout each row of `sel` proves (the newest, or its own proof's),
    as codes into the names returned (the newest is 0)."""
    names = [NEWEST]
    codes = np.zeros(len(sel), np.int64)
    for k in np.flatnonzero(proof[sel] == 1).tolist():
        layout = rows.proofs[int(sel[k])][0]
        if layout not in names:
            names.append(layout)
        codes[k] = names.index(layout)
    return names, codes


def _first(
    ctx: GenerationContext, conn: tuple[str, str] | None, sub: str | None, layout: str, at: int
) -> None:
    """Message `at` proves `layout` in each scope of (conn, sub): kept where it is the first."""
    for _, key in scopes(conn, sub):
        ctx.keep_first(key, layout, at, "?")  # the pipeline has no reasons


def _settle(
    dec: ContextDecoder,
    ctx: GenerationContext,
    index: np.ndarray,
    rows: Any,
    buffers: tuple[np.ndarray, ...],
    src: pa.Array,
    dst: pa.Array,
    subject: pa.Array,
) -> None:
    """The rows still ambiguous that the context decides, as the capture reader
    decides them (GenerationContext.choose): usually for the layout they have
    (the newest: a v0 Publish in a capture with MsgTypes only v0 has), which
    then only changes how it was decided. Grouped by connection, subject and
    candidates, whose proof is looked up once; each row's index compared
    with numpy.

    Only proof before the row counts here, so that a row says the same
    whatever the batches: the capture reader also credits its first proof
    to the messages it held before it (threshold), but the pipeline's tasks
    decode held batches again only when that proof is of an older layout
    (columnar.ordered._release), so those rows keep auto's own answer."""
    amb = np.flatnonzero(rows.decided_ambiguous == 1)
    if not amb.size:
        return
    # Proof of the newest layout alone (every proof is the capture scope's
    # too) and every such row read as it: the one candidate a scope could
    # prove is the layout the row has, which _decide keeps. The usual case
    # (today's traffic), known without the group-by below.
    newest = dec.layouts.code.get(NEWEST)
    if (
        newest is not None
        and all(lay == NEWEST for lay in ctx.capture_firsts)
        and bool((rows.layout[amb] == newest).all())
    ):
        return
    limits = index[amb]
    # Each row's candidates: its own (read row by row) or its class's, by
    # MsgType and CRC; as small codes, so that rows are grouped in Arrow.
    own = np.isin(amb, np.array([i for i, c in rows.ambiguous.items() if c], np.int64))
    by_class = rows.msg_type[amb].astype(np.int64) * 2 + rows.has_crc[amb]
    code_of: dict[tuple[str, ...], int] = {}
    cand_codes = np.empty(len(amb), np.int64)
    for c in np.unique(by_class[~own]).tolist():
        got = dec.auto_decisions[c][3]
        cand_codes[(by_class == c) & ~own] = code_of.setdefault(got, len(code_of))
    for k in np.flatnonzero(own).tolist():
        cand_codes[k] = code_of.setdefault(rows.ambiguous[int(amb[k])], len(code_of))
    cands_of = list(code_of)
    take = pa.array(amb)
    lo, hi = _connections(src.take(take), dst.take(take))
    table = pa.table(
        {
            "lo": lo,
            "hi": hi,
            "subject": subject.take(take),
            "cands": pa.array(cand_codes),
            "k": pa.array(np.arange(len(amb), dtype=np.int64)),
        }
    )
    groups = table.group_by(["lo", "hi", "subject", "cands"], use_threads=False).aggregate(
        [("k", "list")]
    )
    for lo, hi, sub, code, members in zip(
        *(groups.column(c).to_pylist() for c in ("lo", "hi", "subject", "cands")),
        groups.column("k_list").to_numpy(zero_copy_only=False),
    ):
        conn = None if lo is None or hi is None else (lo, hi)
        cands = cands_of[code]
        mine = np.sort(np.asarray(members, np.int64))
        open_ = np.ones(len(mine), np.bool_)  # not decided by a narrower scope
        for scope, key in scopes(conn, sub):
            firsts = ctx.first.get(key, {})
            proof = np.array([firsts.get(c, np.iinfo(np.int64).max) for c in cands])
            proven = proof[None, :] < limits[mine][:, None]
            count = proven.sum(axis=1)
            one = np.flatnonzero(open_ & (count == 1))
            if one.size:
                _decide_all(dec, rows, amb[mine[one]], cands, proven[one], scope, buffers)
            open_ &= count == 0  # more than one proven: still ambiguous, as the reader says


def _decide_all(
    dec: ContextDecoder,
    rows: Any,
    members: np.ndarray,
    cands: tuple[str, ...],
    proven: np.ndarray,
    scope: str,
    buffers: tuple[np.ndarray, ...],
) -> None:
    """`_decide` of each row of `members` (ascending), by the one candidate its
    context proves (`proven`: a row a member, a column a candidate). A row
    whose layout that already is keeps it: only the others are looked at
    one by one (decoded again)."""
    pick = np.argmax(proven, axis=1)
    current = rows.layout[members]
    change = np.zeros(len(members), np.bool_)
    for c in np.unique(pick).tolist():
        mine = pick == c
        for code in np.unique(current[mine]).tolist():
            if dec.layouts.name(int(code)) != cands[c]:
                change |= mine & (current == code)
    for k in np.flatnonzero(change).tolist():
        _decide(dec, rows, int(members[k]), cands[int(pick[k])], scope, buffers)


def _decide(
    dec: ContextDecoder, rows: Any, i: int, layout: str, scope: str, buffers: tuple[np.ndarray, ...]
) -> None:
    if layout == dec.layouts.name(int(rows.layout[i])):
        # A proof that keeps the row's layout changes only how it was decided,
        # and the pipeline reads a big capture's ranges apart (sources.plan_files):
        # a range's rows would say "context" or not by where the cut fell.
        # They keep auto's own answer, the same however the capture is cut
        # (tests/spark/test_big_capture.py).
        return
    starts, ends, data = buffers
    dec.redecode(rows, i, layout, data[starts[i] : ends[i]].tobytes(), int(ends[i]), scope)


def _resolve(
    dec: ContextDecoder,
    ctx: GenerationContext,
    index: np.ndarray,
    records: pa.RecordBatch,
    rows: Any,
    fast: np.ndarray,
    buffers: tuple[np.ndarray, ...],
    src: pa.Array,
    dst: pa.Array,
    subject: pa.Array,
) -> None:
    """Rows auto may have found ambiguous, one by one, in order: chosen by their context."""
    starts, ends, data = buffers
    maybe = fast & _contested(rows.msg_type)
    for i in rows.ambiguous:
        maybe[i] = True
    for i in np.flatnonzero(maybe).tolist():
        b = data[starts[i] : ends[i]].tobytes()
        if i in rows.ambiguous:
            candidates: tuple[str, ...] = rows.ambiguous[i]
        else:  # the fast path took it: is it ambiguous?
            env = decode(b, "auto", verify_crc=dec.options.verify_crc)
            if not env.ambiguous:
                continue
            candidates = tuple(env.layout_candidates)
        s, d = src[i].as_py(), dst[i].as_py()
        conn = connection_key(s, d) if s is not None and d is not None else None
        layout, scope, _ = ctx.choose(int(index[i]), conn, subject[i].as_py(), candidates)
        if layout is not None and layout != dec.layouts.name(int(rows.layout[i])):
            dec.redecode(rows, i, layout, b, int(ends[i]), scope)
