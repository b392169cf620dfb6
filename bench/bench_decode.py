"""Decode benchmark: the generated parsers and lbparse.decode, side by side.

For a 150-byte Publish with CRC and a ReplicationResponse with 10 entries,
prints the median time per message of: the Kaitai parser, the construct
parser (both generated from spec/), lbparse.decode (header, CRC check and
payload decode), and the bare minimum for the Publish (one struct read,
one crc32c call, Message.FromString). Runs are interleaved so that machine
noise hits all of them alike; the ratios are what to read.
Target: lbparse.decode <= 1.5 x bare minimum on the Publish. The same
Publish encoded: lbparse.encode, its header built through the construct
schema (the reference), and the bare minimum (SerializeToString, one crc32c
call, one struct write).
"""

from __future__ import annotations

import statistics
import struct
import sys
import timeit
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

import crc32c
from kaitaistruct import KaitaiStream

import lbparse
from lbparse.codec.enveloped import schema_wire
from lbparse_generated import construct_schema as cs
from lbparse_generated.kaitai.liftbridge_commitlog import LiftbridgeCommitlog
from lbparse_generated.kaitai.liftbridge_envelope import LiftbridgeEnvelope

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchdoc import Section, pin_one_core

REPEATS = 15


def publish_150() -> bytes:
    msg = lbparse.message_class("proto.Message")(
        key=b"order-000017",
        value=b"v" * 60,
        stream="orders",
        partition=3,
        subject="orders.eu",
        ackInbox="_INBOX.acks.0001",
        correlationId="corr-0017",
        ackPolicy=1,
        timestamp=1_763_700_000_000_000_000,
    )
    wire = lbparse.encode(msg, crc=True)
    assert 145 <= len(wire) <= 155, len(wire)
    return wire


def replication_response_10() -> bytes:
    entries = [
        lbparse.CommitLogEntry(
            100 + i,
            1_763_700_000_000_000_000 + i,
            4,
            key=b"key-%d" % i,
            value=b"x" * 40,
            headers=[("subject", b"orders.eu")],
        )
        for i in range(10)
    ]
    return lbparse.encode(lbparse.ReplicationResponse(4, 109, entries), crc=True)


def kaitai(data: bytes, rr: bool) -> object:
    env = LiftbridgeEnvelope(LiftbridgeEnvelope.Layout.v0, KaitaiStream(BytesIO(data)))
    return LiftbridgeCommitlog.from_bytes(env.payload) if rr else env


def construct_parse(data: bytes, rr: bool) -> object:
    env = cs.liftbridge_envelope.parse(data, layout=0)
    return cs.liftbridge_commitlog.parse(env.payload) if rr else env


_HDR = struct.Struct(">4sBBBBI")
_from_string = lbparse.message_class("proto.Message").FromString


def bare_minimum(data: bytes) -> object:
    _magic, _v, hl, _f, _mt, crc = _HDR.unpack_from(data)
    payload = data[hl:]
    if crc32c.crc32c(payload) != crc:
        raise ValueError("crc")
    return _from_string(payload)


_PUB = lbparse.decode(publish_150())
_PUB_MSG, _PUB_TYPE = _PUB.message, _PUB.msg_type or 0
_V0 = lbparse.LAYOUTS["v0"]


def bare_encode(msg: object) -> bytes:
    payload = msg.SerializeToString()  # type: ignore[attr-defined]
    return _HDR.pack(b"\xb9\x0eC\xb4", 0, 12, 1, _PUB_TYPE, crc32c.crc32c(payload)) + payload


def construct_encode(msg: object) -> bytes:
    payload = msg.SerializeToString()  # type: ignore[attr-defined]
    return schema_wire(_V0, _PUB_TYPE, True, 0, payload)


def measure(cases: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Median seconds per call of each case, interleaving the cases."""
    number = {}
    for name, fn in cases.items():
        n, _ = timeit.Timer(fn).autorange()
        number[name] = max(n // 4, 1)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(REPEATS):
        for name, fn in cases.items():
            samples[name].append(timeit.timeit(fn, number=number[name]) / number[name])
    return {name: statistics.median(s) for name, s in samples.items()}


def report(title: str, results: dict[str, float], base: str, section: Section) -> None:
    print(f"\n{title}")
    print(f"  {'parser':<28} {'median/msg':>12} {'vs ' + base:>16}")
    for name, t in results.items():
        print(f"  {name:<28} {t * 1e6:>9.2f} us {t / results[base]:>15.2f}x")
    section.lines.append(f"{title}:")
    section.lines.append("")
    section.table(
        ["parser", "us a message", f"x {base}"],
        [[name, f"{t * 1e6:.2f}", f"{t / results[base]:.2f}x"] for name, t in results.items()],
    )


def main() -> int:
    section = Section(
        "decode",
        "lbparse.decode against the bare minimum",
        "python bench/bench_decode.py (make bench)",
    )
    section.cpu = pin_one_core()
    section.para(
        "One message decoded again and again (timeit, wall clock; the process pinned to one "
        f"core), the parsers taking turns, {REPEATS} rounds, medians. The bare minimum is "
        "what any decoder of the envelope must do: one `struct` read of the header, one "
        "`crc32c` call, `Message.FromString`. The Kaitai and construct parsers are generated "
        "from spec/."
    )
    pub = publish_150()
    rr = replication_response_10()
    res = measure(
        {
            "bare minimum": lambda: bare_minimum(pub),
            "lbparse.decode": lambda: lbparse.decode(pub),
            "kaitai (header+payload)": lambda: kaitai(pub, False),
            "construct (header+payload)": lambda: construct_parse(pub, False),
        }
    )
    report(f"Publish with CRC, {len(pub)} bytes", res, "bare minimum", section)
    ratio = res["lbparse.decode"] / res["bare minimum"]
    verdict = "meets" if ratio <= 1.5 else "MISSES"
    print(f"  lbparse.decode / bare minimum = {ratio:.2f} ({verdict} the 1.5x target)")
    section.target(
        f"lbparse.decode, a {len(pub)}-byte Publish with CRC",
        ratio,
        "<=",
        1.5,
        "{:.2f}x the bare minimum",
    )
    res = measure(
        {
            "lbparse.decode": lambda: lbparse.decode(rr),
            "kaitai (envelope+commitlog)": lambda: kaitai(rr, True),
            "construct (envelope+commitlog)": lambda: construct_parse(rr, True),
        }
    )
    report(f"ReplicationResponse with 10 entries, {len(rr)} bytes", res, "lbparse.decode", section)
    assert lbparse.encode(_PUB_MSG, crc=True) == construct_encode(_PUB_MSG) == bare_encode(_PUB_MSG)
    res = measure(
        {
            "bare minimum": lambda: bare_encode(_PUB_MSG),
            "lbparse.encode": lambda: lbparse.encode(_PUB_MSG, crc=True),
            "construct build (header)": lambda: construct_encode(_PUB_MSG),
        }
    )
    report(f"The Publish encoded, with CRC, {len(pub)} bytes", res, "bare minimum", section)
    section.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
