"""The fuzz targets: each runs checks of tests/support/hostile.py on bytes.

Plain functions, so that fuzz/harness.py (atheris, coverage-guided),
fuzz/replay.py (the corpus, once, e.g. under the sanitizers of `make
sanitize`) and the tests run the same checks. `NATIVE` are the targets
whose bytes reach the C modules (lbparse/capture/_native.c,
lbparse/columnar/_kernels.c, _structs.c): their checks hold the C code
equal to its Python reference (`native_pass`: the batch decoder's C
passes). Issue #19 added `batch` (the pipeline's batch decoder against
lbparse.decode row by row), `storage` (segments,
indexes, checkpoints, raft.db; the C entry loop against the Python one)
and `raft` (Raft log entries and the transport stream); issue #27 `raftdb`
(whole raft.db files: the bbolt walk and the log's copy budget); issue #28
`h2` (an HTTP/2 connection carrying gRPC: lbparse.capture.h2 and grpc);
issue #47 `streams` (lbparse.streams.client against a hostile gRPC server,
and the streams source's batch reader) and `outputs` (lbparse.outputs on
any name and content).
"""

from __future__ import annotations

import spark.test_batch_composition  # noqa: F401  the batch decoder's reference
from support import hostile

import lbparse.capture.grpc
import lbparse.capture.h2

# Imported here, under atheris.instrument_imports (harness.py), so that the
# fuzzer sees inside them: the checks import them lazily.
import lbparse.columnar.decode_arrow
import lbparse.outputs
import lbparse.raft
import lbparse.report.aggregate
import lbparse.report.fast_path
import lbparse.spark.streams_source
import lbparse.storage
import lbparse.storage.checkpoints
import lbparse.storage.raftdb
import lbparse.streams.client  # noqa: F401
from lbparse.codec.limits import Limits

# Small limits, so that the limit checks themselves get fuzzed: inputs are
# at most a few KiB.
TIGHT = Limits(max_payload=300, max_frame=400, max_depth=6, max_reassembly=2000)


def decode(data: bytes) -> None:
    hostile.check_decode(data)


def decode_limits(data: bytes) -> None:
    hostile.check_decode(data, limits=TIGHT)


def differential(data: bytes) -> None:
    hostile.check_differential(data)


def nats(data: bytes) -> None:
    # First byte: the segment size, so that the fuzzer also explores splits.
    if not data:
        return
    step = data[0] % 23 + 1
    stream = data[1:]
    hostile.check_nats(stream, list(range(step, len(stream), step)))
    hostile.check_nats(stream, list(range(step, len(stream), step)), max_frame=TIGHT.max_frame)


def capture(data: bytes) -> None:
    hostile.check_capture(data, layout="auto")
    hostile.check_capture(data, layout="v0", limits=TIGHT)


def batch(data: bytes) -> None:
    hostile.check_batch(hostile.split_payloads(data))


def storage(data: bytes) -> None:
    hostile.check_storage(data)


def checkpoints(data: bytes) -> None:
    """The checkpoint readers (issue #27) and the index reader: any bytes give
    numbers or one bad_checkpoint StorageError of one short line."""
    hostile.check_checkpoints(data)


def raft(data: bytes) -> None:
    hostile.check_raft(data)


def raft_native(data: bytes) -> None:
    """The Raft transport's C reader against the Python one (issue #45)."""
    hostile.check_raft_native_bytes(data, every_role=False)


def raftdb(data: bytes) -> None:
    """raft.db (issue #27): the bbolt walk, the log's budget, the stable store."""
    hostile.check_raftdb(data)


def native_capture(data: bytes) -> None:
    hostile.check_native_capture(data)
    hostile.check_native_capture(data, limits=TIGHT)


def native_scan(data: bytes) -> None:
    """The C capture loop alone (issue #47's campaign): thousands of runs a
    second under ASan where native_capture's differential check runs ~50."""
    hostile.check_native_scan(data, tight=TIGHT)


def decode_arrow(data: bytes) -> None:
    for layout in ("v0", "auto"):
        hostile.check_decode_arrow(data, layout)


def native_pass(data: bytes) -> None:
    """The batch decoder's C passes (issue #24: the input column, headers and CRCs,
    grouping, the ReplicationResponse walk, packed numbers) against their Python
    references."""
    from support import native_pass as npass

    payloads = hostile.split_payloads(data)
    npass.check_binary(payloads)
    npass.check_binary([None if p[:1] == b"\x00" else p for p in payloads])
    npass.check_headers(payloads)
    npass.check_group([b - 8 for b in data[:200]], 40)
    # The payloads as ReplicationResponses too, and behind a v0 header of either size.
    npass.check_replication(payloads + [p[8:] for p in payloads] + [p[12:] for p in payloads])
    if payloads:
        npass.check_decoder(payloads)


def h2(data: bytes) -> None:
    """HTTP/2 and gRPC (issue #28): a connection's segments, cut two ways."""
    hostile.check_h2(data)


def report(data: bytes) -> None:
    """The report's aggregation (issue #27): its two paths, columns and records,
    count the same (tests/support/report_check.py)."""
    from support.report_check import check_report

    check_report(data)


def streams(data: bytes) -> None:
    """The streams client against a hostile gRPC server (issue #47): one real
    server in the process answers the input's bytes; one call an execution."""
    from support import hostile_streams

    hostile_streams.check_streams(data)


def outputs(data: bytes) -> None:
    """The outputs (issue #47): a name and content, written whole or refused,
    no temporary file left, nothing else touched."""
    from support import hostile_outputs

    hostile_outputs.check_outputs(data)


TARGETS = {
    f.__name__: f
    for f in (
        decode,
        decode_limits,
        differential,
        nats,
        capture,
        batch,
        storage,
        checkpoints,
        raft,
        raft_native,
        raftdb,
        native_capture,
        native_scan,
        decode_arrow,
        native_pass,
        report,
        h2,
        streams,
        outputs,
    )
}
NATIVE = ("native_capture", "native_scan", "decode_arrow", "native_pass", "raft_native")
EVERY = tuple(TARGETS)
_ran: set[str] = set()


def every(data: bytes) -> None:
    """Every target in one process: the first byte chooses which (EVERY's
    order), the rest is its input. The suite's check that each target runs
    under the harness starts atheris once (instrumenting lbparse takes
    seconds), not once a target; `make fuzz` and fuzz-ci run them one by
    one. Says each target the first time it runs (flushed: libFuzzer ends
    the process itself)."""
    if not data:
        return
    name = EVERY[data[0] % len(EVERY)]
    if name not in _ran:
        _ran.add(name)
        print(f"every: ran {name}", flush=True)
    TARGETS[name](data[1:])


# The seed corpus each target starts from when it has none of its own
# (fuzz/build_corpus.py makes them).
SEEDS = {
    "native_capture": "capture",
    "native_scan": "capture",
    "decode_arrow": "decode",
    "native_pass": "batch",
    "raft_native": "raft",
    "report": "batch",
}
