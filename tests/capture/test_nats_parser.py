"""The NATS protocol parser alone: bytes in, frames out, any segmentation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples

from lbparse.capture.nats import Control, Frame, NatsParser, Parsed, Problem
from lbparse.capture.records import parse_headers

INFO = b'INFO {"server_id":"X","version":"2.9.10","headers":true,"max_payload":1048576} \r\n'
CLIENT = (
    b'CONNECT {"verbose":false,"headers":true} \r\n'
    b"PING\r\n"
    b"SUB foo.>  1\r\n"
    b"PUB foo.bar  5\r\nhello\r\n"
    b"PUB foo.bar _INBOX.1 0\r\n\r\n"
    b"HPUB foo.baz  12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    b"HPUB foo.baz reply.x 28 30\r\nNATS/1.0\r\nA: 1\r\nB:  two \r\n\r\nhi\r\n"
    b"UNSUB 1 10\r\n"
)
SERVER = (
    INFO
    + b"+OK\r\nPONG\r\n"
    + b"MSG foo.bar 1 5\r\nhello\r\n"
    + b"MSG foo.bar 1 _INBOX.1 0\r\n\r\n"
    + b"HMSG foo.baz 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    + b"HMSG foo.baz 1 reply.x 28 30\r\nNATS/1.0\r\nA: 1\r\nB:  two \r\n\r\nhi\r\n"
    + b"-ERR 'Unknown Protocol Operation'\r\n"
)


def _all(chunks: list[bytes]) -> list[Parsed]:
    p = NatsParser()
    out: list[Parsed] = []
    for c in chunks:
        out += p.feed(c)
    assert not p.busy
    return out


def test_client_side_frames() -> None:
    frames = _all([CLIENT])
    assert [f.verb for f in frames] == [
        "CONNECT",
        "PING",
        "SUB",
        "PUB",
        "PUB",
        "HPUB",
        "HPUB",
        "UNSUB",
    ]
    assert frames[0] == Control("CONNECT", b'{"verbose":false,"headers":true}')
    assert frames[3] == Frame("PUB", "foo.bar", None, None, None, b"hello")
    assert frames[4] == Frame("PUB", "foo.bar", "_INBOX.1", None, None, b"")
    assert frames[5] == Frame("HPUB", "foo.baz", None, None, b"NATS/1.0\r\n\r\n", b"hi")
    assert isinstance(frames[6], Frame)
    verb, subject, reply, sid, hdr, payload = frames[6].fields()
    assert (verb, subject, reply, sid, payload) == ("HPUB", "foo.baz", "reply.x", None, b"hi")
    assert parse_headers(hdr) == [["A", "1"], ["B", "two"]]


def test_server_side_frames() -> None:
    frames = _all([SERVER])
    assert [f.verb for f in frames] == ["INFO", "+OK", "PONG", "MSG", "MSG", "HMSG", "HMSG", "-ERR"]
    info = frames[0]
    assert isinstance(info, Control)
    assert info.text.startswith(b'{"server_id"') and info.text.endswith(b"}")
    assert frames[3] == Frame("MSG", "foo.bar", None, "1", None, b"hello")
    assert frames[4] == Frame("MSG", "foo.bar", "_INBOX.1", "1", None, b"")
    assert frames[5] == Frame("HMSG", "foo.baz", None, "1", b"NATS/1.0\r\n\r\n", b"hi")
    assert frames[6].fields()[:4] == ("HMSG", "foo.baz", "reply.x", "1")


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(SERVER)), max_size=30))
def test_any_segmentation_gives_the_same_frames(cuts: list[int]) -> None:
    for stream in (CLIENT, SERVER):
        points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
        chunks = [stream[a:b] for a, b in zip(points, points[1:])]
        assert _all(chunks) == _all([stream])


def test_one_byte_at_a_time() -> None:
    assert _all([SERVER[i : i + 1] for i in range(len(SERVER))]) == _all([SERVER])


def test_lower_case_verbs_and_tabs() -> None:
    frames = _all([b"pub\tfoo  3\r\nabc\r\nping\r\n"])
    assert frames == [Frame("PUB", "foo", None, None, None, b"abc"), Control("PING", b"")]


def test_garbage_line_is_reported_and_parsing_resumes() -> None:
    frames = _all([b"BOGUS line\r\nPUB a  1\r\nx\r\n"])
    assert isinstance(frames[0], Problem) and "BOGUS" in frames[0].message
    assert frames[0].limit is None
    assert frames[1] == Frame("PUB", "a", None, None, None, b"x")


def test_wrong_size_is_reported_not_misread() -> None:
    # Says 3 bytes, carries 5: the payload must not be cut at 3.
    frames = _all([b"PUB a  3\r\nhello\r\nPUB b  2\r\nok\r\n"])
    assert isinstance(frames[0], Problem)
    assert [f for f in frames if isinstance(f, Frame)] == [
        Frame("PUB", "b", None, None, None, b"ok")
    ]


def test_malformed_message_line() -> None:
    frames = _all([b"MSG a\r\nHPUB a  9 3\r\nMSG a 1 2\r\nok\r\n"])
    assert [type(f) for f in frames] == [Problem, Problem, Frame]


def test_gap_drops_the_half_read_message_and_resyncs() -> None:
    p = NatsParser()
    assert p.feed(b"MSG a 1 10\r\nabc") == []
    lost = p.gap()
    assert lost and "MSG a" in lost and "3 of 10" in lost
    # Resumes at the next line that starts with a verb, not before.
    frames = p.feed(b"xyz\r\nnoise MSG b 1 1\r\nMSG c 1 1\r\nq\r\n")
    assert frames == [Frame("MSG", "c", None, "1", None, b"q")]


def test_gap_right_at_a_frame_boundary_loses_nothing() -> None:
    p = NatsParser()
    p.feed(b"MSG a 1 1\r\nx\r\n")
    assert p.gap() is None
    assert p.feed(b"MSG b 1 1\r\ny\r\n") == [Frame("MSG", "b", None, "1", None, b"y")]


def test_resync_verb_split_across_feeds() -> None:
    p = NatsParser(resync=True)
    assert p.feed(b"tail of a payload\r\nMS") == []
    assert p.feed(b"G b 1 1\r\ny\r\n") == [Frame("MSG", "b", None, "1", None, b"y")]


def test_finish_reports_a_cut_frame() -> None:
    p = NatsParser()
    p.feed(b"HMSG a 1 12 20\r\nNATS/1.0\r\n\r\nab")
    assert p.busy
    assert "HMSG a" in (p.finish() or "")
    assert not p.busy


def test_endless_line_is_bounded() -> None:
    p = NatsParser()
    frames = p.feed(b"x" * 70000)
    assert frames and isinstance(frames[0], Problem)
    assert p.feed(b"\r\nPING\r\n")[-1] == Control("PING", b"")


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.integers(0, 10**25).map(lambda n: str(n).encode()),
        st.binary(max_size=22),
        st.text("0123456789+-_ x", max_size=22).map(str.encode),
    )
)
def test_size_fields_read_as_int_reads_them(b: bytes) -> None:
    from lbparse.capture.nats import _size

    try:
        want: int | type = int(b)
    except ValueError:
        want = ValueError
    if want is ValueError:
        with pytest.raises(ValueError):
            _size(b)
    else:
        assert _size(b) == want
