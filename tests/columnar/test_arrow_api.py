"""lbparse.decode_arrow and lbparse.read_capture_arrow: the public Arrow API.

decode_arrow's rows are lbparse.decode's answers (every reference vector,
under v0, auto and lenient v0, with and without CRC checks); read_capture_arrow
gives the pipeline's rows of a capture (the reference reader's records
through the same batch decoder), problems included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.damage import damaged_captures
from support.shared import LIFTBRIDGE
from vectors import VECTORS, data

import lbparse
from lbparse.columnar.decode_arrow import BatchDecoder, DecodeOptions, decisive_reason
from lbparse.columnar.ordered import decode_in_order
from lbparse.columnar.schema import arrow_record_schema
from lbparse.columnar.sources import SourceOptions, Unit, UnitStats, read_capture_reference
from lbparse.errors import EnvelopeError

PAYLOADS = [data(v) for v in VECTORS]


def _answer(b: bytes, layout: str, **options: Any) -> dict[str, Any]:
    try:
        env = lbparse.decode(b, layout, **options)
    except EnvelopeError as exc:
        return {
            "error_kind": exc.kind,
            "error_message": exc.message,
            "layout_confidence": None,
            "layout_ambiguous": None,
            "layout_reason": None,
        }
    return {
        "error_kind": None,
        "layout": env.layout,
        "msg_type_name": env.msg_type_name,
        "payload_type": env.payload_type,
        "header_len": env.header_len,
        "crc32c": env.crc32c,
        "layout_confidence": env.confidence,
        "layout_ambiguous": env.ambiguous,
        "layout_reason": decisive_reason(env.layout, env.reasons),
    }


@pytest.mark.parametrize(
    "layout,options",
    [
        ("v0", {}),
        ("auto", {}),
        ("v0", {"lenient": True}),
        ("v0", {"verify_crc": False}),
        ("legacy", {}),
    ],
)
def test_decode_arrow_is_decode(layout: str, options: dict[str, Any]) -> None:
    batch = lbparse.decode_arrow(PAYLOADS, layout, **options)
    assert batch.num_rows == len(PAYLOADS)
    assert batch.column("payload").to_pylist() == PAYLOADS
    rows = batch.to_pylist()
    for b, row in zip(PAYLOADS, rows):
        want = _answer(b, layout, **options)
        got = {k: row[k] for k in want}
        assert got == want, b.hex()


def test_decode_arrow_takes_arrays_of_any_binary_kind() -> None:
    want = lbparse.decode_arrow(PAYLOADS[:20])
    for given in (
        pa.array(PAYLOADS[:20], pa.large_binary()),
        pa.chunked_array([PAYLOADS[:7], PAYLOADS[7:20]], pa.binary()),
        iter(PAYLOADS[:20]),
        tuple(PAYLOADS[:20]),
    ):
        assert lbparse.decode_arrow(given).equals(want)
    nulls = lbparse.decode_arrow([None, b""])
    assert nulls.column("error_kind").to_pylist() == ["input:null_payload", "too_short"]
    assert lbparse.decode_arrow([]).num_rows == 0


def test_decode_arrow_refuses_what_decode_refuses() -> None:
    with pytest.raises(ValueError):
        lbparse.decode_arrow(PAYLOADS[:1], "no-such-layout")


def _reference(path: str, layout: str) -> pa.Table:
    unit = Unit(path, "pcap", 0, 0)
    stats = UnitStats(path, "pcap", 0)
    decoder = BatchDecoder(DecodeOptions(layout=layout))
    # decoded as the pipeline's tasks decode a unit: in order, traffic and context
    records = read_capture_reference(unit, SourceOptions(), stats)
    return pa.Table.from_batches([d.to_batch() for d in decode_in_order(records, decoder)])


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["auto", "v0"])
def test_read_capture_arrow_is_the_pipelines_rows(layout: str, tmp_path: Path) -> None:
    paths = [c.path for c in damaged_captures(tmp_path, "pcapng")]
    short = LIFTBRIDGE / "samples" / "short.pcapng"
    if short.exists():
        paths.append(str(short))
    # A row that looked like an HTTP/2 connection's bytes but was not is
    # given last, its position its own (garbage_frames), as the pipeline
    # writes it: the same rows, keyed by position.
    by = [("source", "ascending"), ("position", "ascending")]
    for path in paths:
        got = pa.Table.from_batches(list(lbparse.read_capture_arrow(path, layout)))
        assert got.sort_by(by).equals(_reference(path, layout).sort_by(by)), path


def test_read_capture_arrow_small_batches_and_problems(tmp_path: Path) -> None:
    case = next(c for c in damaged_captures(tmp_path, "pcap") if c.name == "bad_block")
    batches = list(lbparse.read_capture_arrow(case.path, batch_rows=5))
    assert max(b.num_rows for b in batches) <= 5
    table = pa.Table.from_batches(batches)
    assert table.column("position").to_pylist() == list(range(table.num_rows))
    kinds = table.column("error_kind").to_pylist()
    assert kinds.count("input:bad_block") == 2 and "input:gap" in kinds
    missing = tmp_path / "none.pcap"
    rows = pa.Table.from_batches(list(lbparse.read_capture_arrow(missing))).to_pylist()
    assert [r["error_kind"] for r in rows] == ["input:unreadable"]


def test_record_schema_columns_lead_the_capture_rows(tmp_path: Path) -> None:
    case = damaged_captures(tmp_path, "pcap", names=["clean"])[0]
    batch = next(lbparse.read_capture_arrow(case.path))
    names = batch.schema.names
    assert names[: len(arrow_record_schema().names) - 3] == [
        n
        for n in arrow_record_schema().names
        if n not in ("payload", "error_kind", "error_message")
    ]
