"""`auto` with what the capture knows (issue #12): lbparse.codec.generation in the capture reader.

Alone, a legacy proto.Message and a v0 Publish are the same bytes
(`ambiguous`). In a capture, the messages around them prove the generation:
a legacy capture reads as legacy, a v0 capture as v0, with a confidence to
match and a reason that says which scope proved it. The pipeline gives the
same layouts (tests/spark/test_generation_pipeline.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from generations import (
    LEGACY_ACK,
    LEGACY_MESSAGE,
    V0_INFO,
    V0_PUBLISH,
    _write,
    legacy_capture,
    v0_capture,
)
from support.capwriter import Conn

import lbparse
from lbparse.capture import CaptureReader
from lbparse.codec import generation


def test_alone_each_stays_ambiguous() -> None:
    """lbparse.decode(..., "auto") of a lone envelope is as it was."""
    for b in (LEGACY_MESSAGE, V0_PUBLISH):
        env = lbparse.decode(b, "auto")
        assert env.ambiguous and list(env.layout_candidates) == ["v0", "legacy"]
        assert env.confidence == 0.5


def test_a_legacy_capture_reads_as_legacy(tmp_path: Path) -> None:
    recs = list(CaptureReader(legacy_capture(tmp_path / "legacy.pcap")))
    orders = [r.envelope for r in recs if r.subject == "orders"]
    assert len(orders) == 6
    for env in orders:
        assert (env.layout, env.ambiguous, env.payload_type) == ("legacy", False, "proto.Message")
        assert env.confidence == 0.8  # proof on another connection: the capture's
        assert env.reasons[-1].startswith("context: this capture carried envelopes only it reads")
        assert env.reasons[-1].endswith(": legacy")
    # The first of them came before any proof: held, then resolved by the first proof.
    assert "(first: proto.Ack, message 7)" in orders[0].reasons[-1]


def test_a_v0_capture_reads_as_v0_by_the_narrowest_scope(tmp_path: Path) -> None:
    recs = list(CaptureReader(v0_capture(tmp_path / "v0.pcap")))
    pubs = [r.envelope for r in recs if r.subject == "orders"]
    assert [e.layout for e in pubs] == ["v0"] * 5 and not any(e.ambiguous for e in pubs)
    # Before its connection proved anything: the capture's proof; after: its connection's.
    assert [e.confidence for e in pubs] == [0.8, 0.8, 0.8, 0.9, 0.9]
    assert "this connection (127.0.0.1:40011 <-> 127.0.0.1:4222)" in pubs[-1].reasons[-1]
    assert "MsgTypes only it has (first: ServerInfoRequest, message " in pubs[-1].reasons[-1]


def test_proof_of_both_resolves_nothing(tmp_path: Path) -> None:
    conns = [
        (Conn(client=("127.0.0.1", 40021)), [("info", V0_INFO)]),
        (Conn(client=("127.0.0.1", 40022)), [("acks", LEGACY_ACK)]),
        (
            Conn(client=("127.0.0.1", 40023)),
            [("x", b"plain"), ("x", b"plain"), ("orders", V0_PUBLISH)],
        ),
    ]
    _write(tmp_path / "both.pcap", conns)
    env = [r.envelope for r in CaptureReader(tmp_path / "both.pcap") if r.subject == "orders"][0]
    assert (
        env.ambiguous
        and env.reasons[-1] == "context: this capture carried v0 and legacy alike: still ambiguous"
    )


def test_resolving_gives_a_new_envelope_and_leaves_the_decoded_one_alone() -> None:
    """Envelopes are immutable (Envelope.replace): the context's answer is a
    copy with its classification changed, the envelope it was given is as
    lbparse.decode made it."""
    conn = generation.connection_key("127.0.0.1:40011", "127.0.0.1:4222")
    ctx = generation.GenerationContext()
    ctx.see(conn, "info", lbparse.decode(V0_INFO, "auto"), V0_INFO)
    amb = lbparse.decode(V0_PUBLISH, "auto")
    before = amb.to_json_dict()
    got = ctx.see(conn, "orders", amb, V0_PUBLISH)
    assert got is not amb and amb.to_json_dict() == before and amb.ambiguous
    assert (got.layout, got.ambiguous, got.layout_candidates, got.confidence) == (
        "v0",
        False,
        (),
        0.9,
    )
    assert got.reasons[:-1] == amb.reasons and got.reasons[-1].startswith(
        "context: this connection (127.0.0.1:40011 <-> 127.0.0.1:4222) carried MsgTypes only"
    )
    assert got == amb.replace(
        ambiguous=False, layout_candidates=(), confidence=0.9, reasons=got.reasons
    )
    with pytest.raises(AttributeError):
        amb.reasons = ()  # type: ignore[misc]
    # Proof of both: still ambiguous, and only the copy says why.
    ctx.prove(ctx.index, conn, "acks", "legacy", "proto.Ack")
    ctx.index += 1
    still = ctx.see(conn, "orders", amb, V0_PUBLISH)
    assert still.ambiguous and still.reasons[-1].endswith("alike: still ambiguous")
    assert amb.to_json_dict() == before


def test_no_proof_within_the_window_leaves_the_first_messages_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(generation, "WINDOW", 3)
    path = legacy_capture(tmp_path / "late.pcap", messages=8, acks_from=6)
    reader = CaptureReader(path)
    recs = list(reader)
    orders = [r.envelope for r in recs if r.subject == "orders"]
    first_ack = next(i for i, r in enumerate(recs) if r.subject == "acks")
    assert first_ack > 3
    before = [r.envelope for r in recs[:first_ack] if r.subject == "orders"]
    assert all(e.ambiguous for e in before)  # never held past the window: auto's own answer
    assert all(e.layout == "legacy" for e in orders[len(before) :])
    assert [r.subject for r in recs] == [
        r.subject for r in CaptureReader(path, layout="v0")
    ]  # order kept
    assert reader.stats.messages == len(recs)


def test_a_named_layout_has_no_context(tmp_path: Path) -> None:
    recs = list(CaptureReader(legacy_capture(tmp_path / "l.pcap"), layout="v0"))
    assert {r.envelope.layout for r in recs if r.subject == "orders"} == {"v0"}


class _Collect:
    """A TableWriter stand-in: the rows process_unit writes to messages, by position."""

    def __init__(self) -> None:
        self.rows: dict[int, str | None] = {}

    def write(self, table: str, n: int, columns: dict) -> None:
        if table != "messages":  # a payload table: no layout
            return
        for pos, layout, kind in zip(
            columns["position"].to_pylist(),
            columns["layout"].to_pylist(),
            columns["error_kind"].to_pylist() if "error_kind" in columns else [None] * n,
        ):
            self.rows[pos] = None if kind else layout


@pytest.mark.parametrize(
    "window,window_bytes,batch_rows",
    [(10_000, 64 << 20, 2), (3, 64 << 20, 2), (10_000, 150, 2), (10_000, 150, 64)],
)
def test_the_pipelines_unit_reading_gives_the_readers_layouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int, window_bytes: int, batch_rows: int
) -> None:
    """Without Spark: process_unit (one unit, batches of `batch_rows`, held until
    the first proof) against the capture reader, whatever bounds the window."""
    from lbparse.columnar.decode_arrow import DecodeOptions
    from lbparse.columnar.sources import SourceOptions
    from lbparse.pipeline.input_plan import plan
    from lbparse.pipeline.tasks import TaskOptions, process_unit

    monkeypatch.setattr(generation, "WINDOW", window)
    monkeypatch.setattr(generation, "WINDOW_BYTES", window_bytes)
    path = legacy_capture(tmp_path / "late.pcap", messages=8, acks_from=6)
    want = [r.envelope.layout if r.envelope else None for r in CaptureReader(path)]
    source = SourceOptions(batch_rows=batch_rows)
    writer = _Collect()
    process_unit(
        plan([str(path)], source)[0], TaskOptions(DecodeOptions(layout="auto"), source), writer
    )  # type: ignore[arg-type]
    assert [writer.rows[i] for i in sorted(writer.rows)] == want
    if window == 10_000 and window_bytes > 1000:
        assert want.count("legacy") == 10  # 8 Messages and 2 Acks: all resolved
    else:
        assert "v0" in want  # the first Messages came before a proof inside the window


def test_deferred_proof_is_worked_out_in_order_when_read_and_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GenerationContext.defer: a note runs once, in the order given, when
    `first` or `labels` is read, and at once when the notes held would span
    more than DEFER_ROWS messages. Held proof and proof noted after it by
    `prove` give the least index of each, whatever the order."""
    ran: list[int] = []
    ctx = generation.GenerationContext()
    conn = ("127.0.0.1:1", "127.0.0.1:2")
    ctx.defer(lambda: (ran.append(1), ctx.keep_first(("connection", conn), "v0", 5, "a")), 3)
    ctx.defer(lambda: (ran.append(2), ctx.keep_first(("connection", conn), "v0", 4, "b")), 3)
    assert ran == [] and ctx.capture_firsts == {}
    assert ctx.labels[("connection", conn)] == {"v0": "b"}  # the least index kept
    assert ran == [1, 2] and ctx.first == {("connection", conn): {"v0": 4}}
    assert ran == [1, 2]  # once
    ctx.defer(lambda: ctx.keep_first(("connection", conn), "legacy", 6, "c"), 3)
    ctx.prove(7, conn, "s", "legacy", "d")
    assert ctx.first[("connection", conn)] == {"v0": 4, "legacy": 6}
    assert ctx.labels[("connection", conn)]["legacy"] == "c"
    monkeypatch.setattr(generation, "DEFER_ROWS", 5)
    ctx.defer(lambda: ran.append(3), 5)
    assert ran == [1, 2]
    ctx.defer(lambda: ran.append(4), 1)  # 6 rows held: past the bound
    assert ran == [1, 2, 3, 4] and not ctx._deferred
