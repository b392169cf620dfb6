"""format("liftbridge-streams")'s options and its micro-batch budget, on the
driver's side alone (no Spark session, no cluster: those are in
tests/spark/test_streams_source.py)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("grpc")

from lbparse.spark.streams_source import _capped, parse_options

BASE = {"servers": "127.0.0.1:9292,127.0.0.1:9293", "stream": "orders, events,orders"}


def test_the_options_are_read_as_the_kafka_sources() -> None:
    opts = parse_options(
        {
            **BASE,
            "STARTINGOFFSETS": json.dumps({"orders": {"0": 5, "1": -2}}),
            "maxRecordsPerTrigger": "100",
            "timeout": "2.5",
        },
        streaming=True,
    )
    assert opts.servers == ["127.0.0.1:9292", "127.0.0.1:9293"]
    assert opts.streams == ["orders", "events"]  # a stream named twice is read once
    assert opts.starting == {"orders": {"0": 5, "1": -2}} and opts.ending == "latest"
    assert opts.max_records == 100 and opts.timeout == 2.5
    assert parse_options(BASE, streaming=False).starting == "earliest"


@pytest.mark.parametrize(
    "extra,streaming,message",
    [
        ({"startingOffset": "earliest"}, None, "unknown option 'startingoffset'"),
        ({"servers": ""}, None, "option 'servers' is required"),
        ({"servers": "localhost"}, None, "option 'servers': server 'localhost' is not host:port"),
        (
            {"startingOffsets": "first"},
            None,
            "option 'startingoffsets' is earliest or latest or JSON",
        ),
        ({"endingOffsets": "earliest"}, False, "option 'endingoffsets' is latest or JSON"),
        ({"startingOffsets": '{"other": {"0": 1}}'}, None, "names stream 'other'"),
        ({"startingOffsets": '{"orders": {"x": 1}}'}, None, "is earliest or latest or JSON"),
        ({"endingOffsets": "latest"}, True, "endingOffsets is for batch reads"),
        ({"maxRecordsPerTrigger": "10"}, False, "maxRecordsPerTrigger is for readStream"),
        ({"maxRecordsPerTrigger": "0"}, True, "'maxrecordspertrigger' must be a positive number"),
        (
            {"timeout": "soon"},
            None,
            "'timeout' must be a positive number of at most 3600, not 'soon'",
        ),
        # the adversarial review's: numbers that are not finite or not bounded, keys that
        # str.isdigit() takes and int() does not, JSON nested past Python's stack
        (
            {"timeout": "inf"},
            None,
            "'timeout' must be a positive number of at most 3600, not 'inf'",
        ),
        ({"timeout": "1e300"}, None, "'timeout' must be a positive number of at most 3600"),
        ({"timeout": "nan"}, None, "'timeout' must be a positive number of at most 3600"),
        ({"timeout": "3601"}, None, "'timeout' must be a positive number of at most 3600"),
        (
            {"startingTimestamp": "99999999999999999"},
            None,
            "'startingtimestamp' must be a positive number of at most 9.22337e+12",
        ),
        (
            {"endingOffsetsByTimestamp": '{"orders": {"0": 10000000000000000000000}}'},
            False,
            "'endingoffsetsbytimestamp' is JSON",
        ),
        (
            {"endingOffsetsByTimestamp": '{"orders": {"0": 1e22}}'},
            False,
            "'endingoffsetsbytimestamp' is JSON",
        ),
        ({"startingOffsets": '{"orders": {"\u00b2": 1}}'}, None, "is earliest or latest or JSON"),
        (
            {"startingOffsets": '{"orders": {"%s": 1}}' % ("9" * 5000)},
            None,
            "is earliest or latest or JSON",
        ),
        (
            {"startingOffsets": '{"orders": {"2147483648": 1}}'},
            None,
            "is earliest or latest or JSON",
        ),
        (
            {"startingOffsets": '{"orders": {"0": 9223372036854775808}}'},
            None,
            "is earliest or latest or JSON",
        ),
        ({"startingOffsets": "[" * 100_000 + "]" * 100_000}, None, "is earliest or latest or JSON"),
        ({"maxRecordsPerTrigger": "1e3"}, True, "'maxrecordspertrigger' must be a positive number"),
        (
            {"subjectPattern": "lb.>"},
            None,
            "give exactly one of the options 'stream' and 'subjectPattern', not both",
        ),
        (
            {"stream": ""},
            None,
            "give exactly one of the options 'stream' and 'subjectPattern', not neither",
        ),
        (
            {"startingTimestamp": "1700000000000", "startingOffsets": "latest"},
            None,
            "options 'startingoffsets' and 'startingtimestamp' both say where to start",
        ),
        (
            {"endingOffsetsByTimestamp": '{"orders": {"0": 1}}', "endingTimestamp": "5"},
            False,
            "options 'endingtimestamp' and 'endingoffsetsbytimestamp' both say where to end",
        ),
        ({"startingTimestamp": "yesterday"}, None, "'startingtimestamp' must be a positive number"),
        ({"startingTimestamp": "x" * 5000}, None, "not 'xxxxxxxxxx"),
        (
            {"startingOffsetsByTimestamp": '{"orders": {"0": -1}}'},
            None,
            "'startingoffsetsbytimestamp' is JSON",
        ),
        ({"startingOffsetsByTimestamp": '{"other": {"0": 1}}'}, None, "names stream 'other'"),
        (
            {"endingTimestamp": "5"},
            True,
            "endingTimestamp is for batch reads (read), not readStream",
        ),
        ({"readISRReplica": "yes"}, None, "'readisrreplica' is true or false, not 'yes'"),
    ],
)
def test_a_bad_option_is_one_line_naming_it(
    extra: dict[str, str], streaming: bool | None, message: str
) -> None:
    with pytest.raises(ValueError) as err:
        parse_options({**BASE, **extra}, streaming=streaming)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("liftbridge-streams: ") and len(str(err.value)) < 300


def test_timestamps_patterns_and_replicas_are_options() -> None:
    opts = parse_options(
        {
            "servers": "127.0.0.1:9292",
            "subjectPattern": "lb.*.orders",
            "startingOffsetsByTimestamp": '{"any": {"1": 1700000000000}}',
            "endingTimestamp": "1800000000000",
            "readISRReplica": "TRUE",
        },
        streaming=False,
    )
    assert opts.streams == [] and opts.pattern == "lb.*.orders"
    assert opts.starting_ms == {"any": {"1": 1700000000000}}
    assert opts.ending_ms == 1800000000000 and opts.replica and opts.client().replica
    plain = parse_options(BASE, streaming=None)
    assert (plain.pattern, plain.starting_ms, plain.ending_ms, plain.replica) == (
        "",
        None,
        None,
        False,
    )


def test_a_micro_batch_budget_is_shared_and_never_stalls() -> None:
    begin = {"a": {"0": 10, "1": 0, "2": 7}}
    ends = {"a": {"0": 110, "1": 3, "2": 7}}
    assert _capped(begin, ends, 50) == {"a": {"0": 35, "1": 3, "2": 7}}
    assert _capped(begin, ends, 1000) == ends
    # a budget smaller than the partitions waiting: one each while it lasts
    assert _capped(begin, ends, 1) == {"a": {"0": 11, "1": 0, "2": 7}}
