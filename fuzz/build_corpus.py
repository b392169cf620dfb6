"""Seed corpora for the atheris targets, from the reference vectors.

    python fuzz/build_corpus.py OUT_DIR

Writes OUT_DIR/<target>/seed-*: every reference vector (tests/data/
vectors.jsonl) and an envelope of every layout for the decoding targets;
NATS streams of those envelopes (with headers, replies, control lines) for
`nats`; small pcap and pcapng captures of them, over several link types,
for `capture`; batches of envelopes for `batch`; segments of every
generation, indexes, checkpoints and raft.db pages for `storage`; Raft log
entries and transport streams for `raft`; whole raft.db files (real and
crafted) for `raftdb`; HTTP/2 connections carrying gRPC calls for `h2`; scripts of a hostile
gRPC server for `streams`; names and contents of outputs for `outputs`. The
seeds are made, never stored: fuzz/corpus/ is not committed (the fuzzer's
finds grow it).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # tests/support is the package `support`

from support import capwriter as cw  # noqa: E402
from support import hostile  # noqa: E402


def envelopes() -> list[bytes]:
    return hostile.seed_envelopes()


def nats_streams(envs: list[bytes]) -> list[bytes]:
    out = []
    control = b'INFO {"server_id":"x","max_payload":1048576}\r\nPING\r\nPONG\r\n+OK\r\n'
    for i in range(0, len(envs), 4):
        chunk = envs[i : i + 4]
        frames = [control]
        for k, env in enumerate(chunk):
            frames.append(cw.pub(f"lb.s{k}", env, reply="_INBOX.1" if k % 2 else None))
            frames.append(
                cw.msg(f"lb.s{k}", k + 1, env, headers=[("Nats-Msg-Id", str(i))] if k % 2 else None)
            )
        # First byte: the segment size (see harness.nats).
        out.append(bytes([i % 23]) + b"".join(frames))
    return out


def captures(envs: list[bytes], tmp: str) -> list[bytes]:
    out = []
    links = [cw.ETHERNET, cw.LINUX_SLL, cw.LINUX_SLL2, cw.NULL, cw.RAW, cw.LOOP]
    for i in range(0, min(len(envs), 48), 3):
        conn = cw.Conn(
            client=("127.0.0.1" if i % 2 else "::1", 40000 + i),
            server=("127.0.0.1" if i % 2 else "::1", 4222),
        )
        pkts = conn.handshake()
        for env in envs[i : i + 3]:
            pkts += conn.send("c", cw.pub("lb.x", env), mss=40 if i % 4 else None)
            pkts += conn.send("s", cw.msg("lb.x", 1, env))
        pkts.append(conn.fin("c"))
        lt = links[(i // 3) % len(links)]
        frames = [(1700000000 + k * 0.001, cw.link(lt, p)) for k, p in enumerate(pkts)]
        path = os.path.join(tmp, "c")
        if i % 2:
            cw.write_pcap(path, frames, linktype=lt, nanos=bool(i % 3), big_endian=bool(i % 5 == 0))
        else:
            cw.write_pcapng(
                path,
                [(lt, 6, 65535)],
                [(0, ts, f) for ts, f in frames],
                big_endian=bool(i % 4 == 0),
            )
        out.append(Path(path).read_bytes())
    return out


def batches(envs: list[bytes]) -> list[bytes]:
    """Batches for `batch`: each payload a length byte and its bytes."""
    small = [e for e in envs if len(e) < 256]
    out = []
    for i in range(0, len(small), 5):
        out.append(b"".join(bytes([len(e)]) + e for e in small[i : i + 5 + i % 7]))
    return out


def storage_files() -> list[bytes]:
    """Segments of every generation, their indexes, checkpoints, raft.db's first pages."""
    from support.shared import LIFTBRIDGE
    from support.storage import build_index, build_segment, messages

    from lbparse.storage.formats import SEGMENT_FORMATS_BY_NAME

    out = [b"0\n3\n4 0\n7 12\n9 40\n", b"41\n", b"0\n0\n"]
    for k, name in enumerate(SEGMENT_FORMATS_BY_NAME):
        msgs = messages(3 + k % 3, first=7)
        seg = build_segment(msgs, name)
        out += [seg, build_index(msgs, seg, 7, name), seg[: len(seg) - 5] + b"\0" * 9]
    sample = LIFTBRIDGE / "samples" / "data-short.tar.gz"
    if sample.is_file():
        import tarfile

        with tarfile.open(sample) as tar:
            member = next((m for m in tar.getmembers() if m.name.endswith("raft/raft.db")), None)
            f = tar.extractfile(member) if member is not None else None
            if f is not None:
                out.append(f.read(4 * 4096))
    return out


def raft_dbs() -> list[bytes]:
    """Whole raft.db files for `raftdb`: the three nodes' of the shared
    `short` run, and crafted ones (keys sharing one value, a page reached
    twice, a loop, a command that is not a RaftLog)."""
    from support import storage as bb
    from support.shared import LIFTBRIDGE

    out = []
    sample = LIFTBRIDGE / "samples" / "data-short.tar.gz"
    if sample.is_file():
        import tarfile

        with tarfile.open(sample) as tar:
            for member in tar.getmembers():
                f = tar.extractfile(member) if member.name.endswith("raft/raft.db") else None
                if f is not None:
                    out.append(f.read())
    leaf5 = bb.leaf(5, [(0, bb.key(1), bb.log_value(1)), (0, bb.key(2), bb.log_value(2))])
    out += [
        bb.raft_db(
            {4: bb.aliased_leaf(4, 40, bb.key(1), bb.log_value(1, data=bytes(900)))}, logs_root=4
        ),
        bb.raft_db({4: bb.branch(4, [(bb.key(1), 5), (bb.key(2), 5)]), 5: leaf5}, logs_root=4),
        bb.raft_db(
            {
                4: bb.branch(4, [(bb.key(1), 6)]),
                6: bb.branch(6, [(bb.key(1), 5), (bb.key(2), 4)]),
                5: leaf5,
            },
            logs_root=4,
        ),
        bb.raft_db(
            {
                4: bb.leaf(
                    4,
                    [
                        (0, bb.key(1), bb.log_value(1, data=b"\xff")),
                        (0, bb.key(9), bb.log_value(3, typ=5, data=b"\x93")),
                    ],
                )
            },
            logs_root=4,
        ),
    ]
    return out


def checkpoint_files() -> list[bytes]:
    """Both checkpoint files as Liftbridge writes them, and an index."""
    from support.storage import build_index, build_segment, messages

    msgs = messages(4, first=7)
    return [
        b"0\n3\n4 0\n7 12\n9 40\n",
        b"41\n",
        b"0\n0\n",
        b"-1",
        b"0\n1\n5 -3\n",
        b"9223372036854775807\n",
        b"0\n2\n1 2\n",
        build_index(msgs, build_segment(msgs), 7),
    ]


def raft_streams() -> list[bytes]:
    """Raft log entries and transport streams (first byte: the cut, see hostile.check_raft)."""
    from support import wire as t

    entries = [
        t.pack(t.log_map(data=t.raft_log("CHANGE_LEADER", stream="s", leader="n"))),
        t.pack(t.log_map(typ=2)),
    ]
    return entries + [
        bytes([k]) + b"".join(msgs)
        for k, msgs in enumerate(
            # the last: no snapshot, so a message of it after the first is
            # stream_rows' in C, log entries and all (check_raft_native_bytes)
            [t.REQUESTS, t.RESPONSES, t.REQUESTS[1:3], [t.APPEND, t.VOTE, t.APPEND]]
        )
    ]


def h2_connections() -> list[bytes]:
    """HTTP/2 connections carrying gRPC calls (hostile.h2_pieces' form: a byte of
    side and length before each piece of at most 128 bytes): unary calls, server
    and client streams, a gzip-compressed message, trailers with an error, a
    CONTINUATION, RST_STREAM and GOAWAY."""
    import gzip

    import hpack
    from support import capwriter as g

    from lbparse_generated.proto import api_pb2

    def pieces(side: int, data: bytes) -> bytes:
        return b"".join(
            bytes([side << 7 | len(data[i : i + 128]) - 1]) + data[i : i + 128]
            for i in range(0, len(data), 128)
        )

    creq, cresp = hpack.Encoder(), hpack.Encoder()
    body = api_pb2.FetchCursorRequest(stream="s", partition=1, cursorId="c").SerializeToString()
    pub = api_pb2.PublishRequest(
        key=b"k", value=b"v" * 40, stream="s", correlationId="c1"
    ).SerializeToString()
    # Header blocks in the order they are sent: HPACK's table is the encoder's history.
    fetch = g.request_headers(creq, "FetchCursor")
    block = g.request_headers(creq, "Publish", ("grpc-encoding", "gzip"))
    stream = g.request_headers(creq, "PublishAsync")
    status = cresp.encode([(":status", "200"), ("content-type", "application/grpc")])
    client = (
        g.SETTINGS
        + g.frame(1, 4, 1, fetch)
        + g.frame(0, 1, 1, g.grpc_message(body))
        + g.frame(1, 0, 3, block[:5])
        + g.frame(9, 4, 3, block[5:])
        + g.frame(0, 1, 3, g.grpc_message(gzip.compress(pub, mtime=0), flag=1))
        + g.frame(1, 4, 5, stream)
        + g.frame(0, 0, 5, g.grpc_message(pub) * 2)
        + g.frame(3, 0, 5, (8).to_bytes(4, "big"))
    )
    server = (
        g.SETTINGS
        + g.frame(1, 4, 1, status)
        + g.frame(
            0, 0, 1, g.grpc_message(api_pb2.FetchCursorResponse(offset=7).SerializeToString())
        )
        + g.frame(1, 5, 1, cresp.encode([("grpc-status", "0")]))
        + g.frame(
            1,
            5,
            3,
            cresp.encode(
                [(":status", "200"), ("grpc-status", "5"), ("grpc-message", "no such stream")]
            ),
        )
        + g.frame(7, 0, 0, (5).to_bytes(4, "big") + (0).to_bytes(4, "big") + b"bye")
    )
    return [
        bytes([0]) + pieces(0, client) + pieces(1, server),
        bytes([3]) + pieces(0, client[:200]) + pieces(1, server) + pieces(0, client[200:]),
        bytes([8]) + pieces(1, server) + pieces(0, client),
    ]


def streams_scripts() -> list[bytes]:
    """Scripts of the hostile gRPC server for `streams` (hostile_streams' form:
    a call byte, a parameter byte, chunks): every call on a sane cluster, and
    a cluster that fails each way the client meets (a FetchMetadata that does
    not parse, aborts, a silent leader, NOT_FOUND and "before start offset",
    a paused partition, offsets skipped, a stream ended early)."""
    import grpc
    from support import hostile_streams as hs

    from lbparse_generated.proto import api_pb2

    M = api_pb2.Message
    msgs = [M(offset=i, key=b"k", value=b"v" * i, headers={"h": b"1"}) for i in range(10)]
    sane = hs.cluster(msgs, partitions=2)
    code = {c: 32 + hs._CODES.index(c) for c in hs._CODES}
    # parameters (hostile_streams.check_streams): s/0 offsets 1..1; t/0 1..2 from a
    # follower (replica); s/1 3..4
    params = [0b00101000, 0b11001001, 0b01011010]
    # the server sends what the script says, whatever the request: messages from the start asked
    out = [
        bytes([call, p]) + hs.cluster(msgs[p >> 3 & 3 :], partitions=2)
        for call in range(len(hs.CALLS))
        for p in params
    ]
    broken = [
        hs.chunk(0, b"\x0a\xff") + sane,  # FetchMetadata that does not parse, then a sane one
        hs.chunk(0, b"down", code[grpc.StatusCode.UNAVAILABLE]) + sane,
        hs.cluster(msgs)[: -sum(len(hs.chunk(2, m.SerializeToString())) for m in msgs)]
        + hs.chunk(2, b"no such partition", code[grpc.StatusCode.NOT_FOUND]),
        hs.cluster(msgs).replace(hs.chunk(2, b""), hs.chunk(2, b"", 63)),  # silent
        hs.cluster(msgs, paused=True),
        hs.cluster([msgs[0], msgs[2], msgs[1]]),  # out of order
        hs.cluster(msgs[:2]),  # ended early
        hs.cluster([M(offset=-1), M(offset=2**62)], high_watermark=2**40),
        hs.cluster([])
        + hs.chunk(2, b"before start offset", code[grpc.StatusCode.INVALID_ARGUMENT]),
        hs.cluster(msgs) + hs.chunk(2, b"\x08\x80"),  # a Message cut short
        hs.chunk(1, b"leader moved", code[grpc.StatusCode.FAILED_PRECONDITION]) + hs.cluster(msgs),
    ]
    out += [bytes([call, params[0]]) + b for b in broken for call in (1, 3, 4, 5, 6, 7)]
    return out


def output_writes() -> list[bytes]:
    """Writes for `outputs` (hostile_outputs' form: a byte of template and way,
    a byte of name length (and whether 'file' is an input), the name, the
    content): each template by each way, a few names of the input's own."""
    out = []
    for how in range(256):
        name = [b"", b"x", b"/y", b"..", b"\0", b"\xff"][how % 6]
        inputs = 128 if how % 7 == 0 else 0
        out.append(bytes([how, inputs | len(name)]) + name + b"content %d\n" % how)
    return out[::3] + [bytes([1, 0]) + b"x" * 70000]  # past a pipe's buffer, once


def build(out_dir: Path) -> dict[str, int]:
    envs = envelopes()
    with tempfile.TemporaryDirectory() as tmp:
        seeds = {
            "decode": envs,
            "decode_limits": envs,
            "differential": envs,
            "nats": nats_streams(envs),
            "capture": captures(envs, tmp),
            "batch": batches(envs),
            "storage": storage_files(),
            "raft": raft_streams(),
            "raftdb": raft_dbs(),
            "checkpoints": checkpoint_files(),
            "h2": h2_connections(),
            "streams": streams_scripts(),
            "outputs": output_writes(),
        }
    counts = {}
    for target, items in seeds.items():
        d = out_dir / target
        d.mkdir(parents=True, exist_ok=True)
        for data in items:
            (d / ("seed-" + hashlib.sha1(data).hexdigest()[:16])).write_bytes(data)
        counts[target] = len(items)
    return counts


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_corpus.py OUT_DIR")
    print(json.dumps(build(Path(sys.argv[1]))))
