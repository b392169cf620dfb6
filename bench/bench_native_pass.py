"""decode_tables on the real envelope mix against Liftbridge's Go (issue #24, item 3).

    taskset -c 1 python bench/bench_native_pass.py [--rounds 7]

The envelope mix of ../shared/liftbridge/samples/short.pcapng (as
bench_native.py makes it) decoded into narrow tables (`BatchDecoder.decode`
+ `tables_of`, what `lbparse.decode_tables` does) with the C passes and, in
the same rounds, with their Python references (`native = False`; absent
before the passes existed), interleaved with `lbbench` (Liftbridge's Go
decoders) over the same envelopes. Medians of the rounds, each round the
best of five; the ratios are what to read on a shared machine. Run it on
one core (taskset) so that Go and Python get the same one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_native as bn  # noqa: E402
import pyarrow as pa  # noqa: E402

from lbparse.columnar.api import _records  # noqa: E402
from lbparse.columnar.decode_arrow import BatchDecoder, DecodeOptions  # noqa: E402
from lbparse.columnar.tables import tables_of  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="the mix this many times over in one batch (13: a pipeline batch, 65,536 "
        "rows or so, where the per-batch costs are spread thinner)",
    )
    args = ap.parse_args()
    envs = bn.envelope_mix(bn.SHORT) * args.repeat
    records = _records(pa.array(envs, pa.binary()))
    decoders = {}
    for native in (True, False):
        d = BatchDecoder(DecodeOptions())
        d.native = native and getattr(d, "native", False)
        decoders["C passes" if native else "Python reference"] = d
    with tempfile.TemporaryDirectory() as tmp:
        hexfile = Path(tmp) / "envelopes.hex"
        hexfile.write_text("".join(e.hex() + "\n" for e in envs))
        times: dict[str, list[float]] = {"lbbench (Go)": [], **{k: [] for k in decoders}}
        for d in decoders.values():
            tables_of(d.decode(records), keys=("position",))  # warm
        for _ in range(args.rounds):
            times["lbbench (Go)"].append(bn.lbbench_ns(hexfile))
            for name, d in decoders.items():
                times[name].append(
                    bn.best_of(lambda d=d: tables_of(d.decode(records), keys=("position",)), 5)
                    / len(envs)
                    * 1e9
                )
    go = statistics.median(times["lbbench (Go)"])
    print(
        f"{len(envs):,} envelopes of short.pcapng ({args.repeat}x its mix) in one batch, "
        f"{args.rounds} interleaved rounds"
    )
    for name, t in times.items():
        m = statistics.median(t)
        print(f"  {name:<18} {m:7.0f} ns/envelope   {m / go:5.2f}x Go")


if __name__ == "__main__":
    main()
