"""format("liftbridge-streams")'s batches: the serialized Messages a Subscribe
brings, read a batch at a time by lbparse's protobuf reader (raw_batch), held
equal to the reference, upb's parse of each message made into a batch by
`_batch`; on Messages of every shape, hostile bytes among them, with the C
reader and with its numpy reference. (Real messages from a real cluster:
tests/spark/test_streams_source.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from support.examples import examples

pytest.importorskip("pyspark")
pytest.importorskip("grpc")

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbparse.columnar import wirescan_native
from lbparse.spark.streams_source import _batch, batches, raw_batch
from lbparse.streams.client import StreamsError
from lbparse_generated.proto import api_pb2

M = api_pb2.Message
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=12)
BLOB = st.binary(max_size=40)
MESSAGES = st.builds(
    lambda *a: dict(
        zip(
            (
                "key",
                "value",
                "timestamp",
                "stream",
                "partition",
                "subject",
                "replySubject",
                "headers",
                "ackInbox",
                "correlationId",
                "ackPolicy",
            ),
            a,
        )
    ),
    BLOB,
    BLOB,
    INT64,
    TEXT,
    st.integers(-(2**31), 2**31 - 1),
    TEXT,
    TEXT,
    st.dictionaries(TEXT, BLOB, max_size=5),
    TEXT,
    TEXT,
    st.sampled_from([0, 1, 2]),
)


def _native(on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LBPARSE_NATIVE", "1" if on else "0")
    if on and not wirescan_native.available():
        pytest.skip("the C reader is not built here")


def _both(raws: list[bytes], first: int) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    return (raw_batch(raws, "s", 0, first), _batch([M.FromString(raw) for raw in raws]))


@pytest.mark.parametrize("native", [True, False], ids=["C", "numpy"])
@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)  # one env for all
@given(first=st.integers(0, 2**40), fields=st.lists(MESSAGES, min_size=1, max_size=30))
def test_a_batch_read_at_once_is_upbs_parse_of_each_message(
    native: bool, first: int, fields: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _native(native, monkeypatch)
    raws = [M(offset=first + i, **f).SerializeToString() for i, f in enumerate(fields)]
    fast, reference = _both(raws, first)
    assert fast.schema.equals(reference.schema)
    assert fast.to_pylist() == reference.to_pylist()


HOSTILE = [
    # fields out of their order, a scalar field twice (the last one counts)
    M(stream="a").SerializeToString()
    + M(offset=7).SerializeToString()
    + M(stream="b", partition=3).SerializeToString(),
    # unknown fields of every wire type, a field of another wire type than declared
    M(offset=7).SerializeToString()
    + bytes.fromhex("a80601b1060102030405060708ba0603616263bd0601020304"),
    M(offset=7).SerializeToString() + bytes.fromhex("2a0178"),  # stream (5) as bytes: fine
    M(offset=7).SerializeToString() + bytes.fromhex("3203616263"),  # partition (6) as bytes
    # a map key twice (the last value counts), an entry without a key or a value
    M(offset=7, headers={"k": b"1"}).SerializeToString()
    + M(headers={"k": b"2"}).SerializeToString(),
    M(offset=7).SerializeToString() + bytes.fromhex("4a03120178") + bytes.fromhex("4a030a0178"),
    # negative and huge timestamps (floor division to microseconds, as Python's)
    M(offset=7, timestamp=-1).SerializeToString(),
    M(offset=7, timestamp=-(2**63)).SerializeToString(),
]


@pytest.mark.parametrize("native", [True, False], ids=["C", "numpy"])
@pytest.mark.parametrize("raw", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_messages_read_as_upb_reads_them(
    native: bool, raw: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    _native(native, monkeypatch)
    ordinary = M(offset=8, key=b"k", headers={"b": b"2", "a": b"1"}).SerializeToString()
    fast, reference = _both([raw, ordinary], 7)
    assert fast.to_pylist() == reference.to_pylist()


def test_offsets_that_are_not_the_next_ones_are_named() -> None:
    raws = [M(offset=o).SerializeToString() for o in (5, 6, 8)]
    with pytest.raises(StreamsError) as err:
        list(batches(raws, "orders", 2, 5))
    assert str(err.value) == (
        "orders/2: the server sent offset 8 where 7 was next (offsets "
        "before it are gone: retention?)"
    )
    with pytest.raises(StreamsError, match="orders/2: the server sent offset 5 where 6 was next"):
        list(batches(raws[:1], "orders", 2, 6))
    with pytest.raises(
        StreamsError,
        match="orders/2: the server sent a message that is not "
        "an api.proto Message, in offsets 5..6",
    ):
        list(batches([raws[0], b"\x0a\xff"], "orders", 2, 5))


def test_batches_end_at_rows_or_bytes_and_continue_the_offsets() -> None:
    raws = [M(offset=10 + i, value=b"x" * 100).SerializeToString() for i in range(10)]
    got = list(batches(raws, "s", 0, 10, rows=4, size=10_000))
    assert [b.num_rows for b in got] == [4, 4, 2]
    got = list(batches(raws, "s", 0, 10, rows=100, size=250))  # ~104 bytes a message
    assert [b.num_rows for b in got] == [3, 3, 3, 1]
    assert pa.concat_arrays([b.column(2) for b in got]).to_pylist() == list(range(10, 20))
