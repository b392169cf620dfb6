"""The streams client against a hostile gRPC server (issue #47): the cases the
`streams` fuzz target (tests/support/hostile_streams.py) found, kept. The
server is a real one, in this process, answering the bytes each case gives."""

from __future__ import annotations

import pytest

pytest.importorskip("grpc")

from support import hostile_streams as hs

from lbparse.streams.client import StreamsClient, StreamsError
from lbparse_generated.proto import api_pb2 as api


def _cluster(messages: list[api.Message]) -> bytes:
    return hs.cluster(messages)


# call byte (first_offset 6, offset_at 7), parameter byte 40: stream s,
# partition 0, end 2
@pytest.mark.parametrize(
    ("call", "offset"), [(6, 50), (6, -3), (7, -3)], ids=["first-past-end", "first-neg", "at-neg"]
)
def test_an_offset_out_of_range_is_not_a_position(call: int, offset: int) -> None:
    """first_offset took the server's offset as it came (past the end given,
    or negative), offset_at a negative one: the plan's start, refused later as
    the user's bad range. Now the end, or a bad_message StreamsError."""
    hs.check_streams(bytes([call, 40]) + _cluster([api.Message(offset=offset)]))


def test_the_clamped_and_refused_offsets() -> None:
    """first_offset past the end is the end; a negative offset is refused."""
    with StreamsClient(hs.server()[:1], timeout=hs.TIMEOUT, retries=0) as c:
        hs._script = hs.script_of(_cluster([api.Message(offset=50)]), hs.server())
        assert c.first_offset("s", 0, 2) == 2
        hs._script = hs.script_of(_cluster([api.Message(offset=-3)]), hs.server())
        with pytest.raises(StreamsError, match="sent offset -3") as e:
            c.first_offset("s", 0, 2)
        assert e.value.kind == "bad_message"
        hs._script = hs.script_of(_cluster([api.Message(offset=-3)]), hs.server())
        with pytest.raises(StreamsError, match="sent offset -3"):
            c.offset_at("s", 0, 0, 2)


def test_a_well_behaved_server_reads_whole() -> None:
    """The check's own baseline: each call on a sane server passes."""
    msgs = [api.Message(offset=i, value=b"v") for i in range(10)]
    for call in range(len(hs.CALLS)):
        hs.check_streams(bytes([call, 0b01011001]) + _cluster(msgs))


def test_a_script_holds_a_bounded_number_of_metadata_replies() -> None:
    """The fuzzer wrote 6,635 FetchMetadata replies into one input: the client,
    given a server for each, asked them in turn for 6.7 s, past the check's
    HANG on a loaded CI machine (atheris: "fuzz target exited"). A script
    keeps MAX_METADATA of them, so the check costs the same whatever the size."""
    many = b"".join(hs.chunk(0, b"") for _ in range(6635))
    addresses = hs.server()
    assert len(hs.script_of(many, addresses).metadata) == hs.MAX_METADATA
    hs.check_streams(bytes([hs.CALLS.index("first_offset"), 40]) + many)
