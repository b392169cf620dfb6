"""decode_tables against Liftbridge's own Go decoders, per envelope (issue #24).

    python bench/bench_tables.py [--rounds 7]          (part of `make bench`)

The envelopes are those of the real cluster capture
../shared/liftbridge/samples/short.pcapng: every NATS payload of it that
starts with the envelope magic, in capture order. Go's side is `lbbench`
(../shared/liftbridge/bin/lbbench: Liftbridge v1.9.0's `protocol.Unmarshal*`
and, for ReplicationResponses, commit-log entries walked as the server
walks them, over a file of hex envelopes); it prints the median ns per
envelope of its own rounds. lbparse's side is `lbparse.decode_tables`
(the narrow tables) and, beside it, `lbparse.decode_arrow` (one wide batch),
each timed by the wall clock, as lbbench times its rounds (both on the
same pinned core, so a loaded host slows both alike), the median of its
calls.

Measured:
1. the whole mix: ns per envelope and the ratio to Go (target: decode_tables
   <= 0.5x Go);
2. each MsgType's envelopes alone (the ReplicationResponses split into
   header-only ones, the commonest envelope of an idle cluster, and those
   with commit-log entries), each group repeated to the mix's size so that
   per-call costs weigh as in the mix: the ratio per type (target:
   header-only ReplicationResponse <= 2x Go).

One process pinned to one core (lbbench, its child, on the same one),
every group's Go and lbparse runs interleaved round after round.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
from benchdoc import Section, pin_one_core, spread, wall_seconds  # noqa: E402

import lbparse  # noqa: E402

SHARED = Path(os.environ.get("LBPARSE_SHARED") or HERE.parent.parent / "shared")
SHORT = SHARED / "liftbridge" / "samples" / "short.pcapng"
LBBENCH = SHARED / "liftbridge" / "bin" / "lbbench"
MAGIC = bytes.fromhex("b90e43b4")
GO_ROUNDS = 15  # lbbench's own rounds per call (it prints their median)
CALLS = 9  # lbparse's calls per round (their median)
HEADER_ONLY = "ReplicationResponse, header only"
BATCH = 65536  # the pipeline's batch (lbparse.pipeline.DEFAULT_BATCH_ROWS)
BIG_MIX = f"the whole mix, repeated to one {BATCH:,}-row batch"


def envelope_mix(path: Path) -> list[bytes]:
    """Every NATS payload of the capture that starts with the envelope magic."""
    payloads = pa.concat_arrays(
        [b.column("payload") for b in lbparse.read_capture_arrow(path, layout="v0")]
    )
    payloads = payloads.filter(pc.is_valid(payloads))
    return [p for p in payloads.to_pylist() if p[:4] == MAGIC]


def groups(envs: list[bytes]) -> dict[str, list[bytes]]:
    """The mix's envelopes by MsgType name (as lbparse decodes them),
    ReplicationResponses split by whether they carry entries."""
    msgs = lbparse.decode_tables(envs)["messages"]
    names = msgs.column("msg_type_name").to_pylist()
    hlen = msgs.column("header_len").to_pylist()
    out: dict[str, list[bytes]] = {}
    for env, name, h in zip(envs, names, hlen):
        if name == "ReplicationResponse":
            # Leader epoch and high watermark alone: 16 bytes, no message set.
            name = HEADER_ONLY if len(env) - (h or 0) == 16 else "ReplicationResponse, entries"
        out.setdefault(name or "(no MsgType)", []).append(env)
    return out


def repeated(envs: list[bytes], n: int) -> list[bytes]:
    return (envs * (n // len(envs) + 1))[: max(n, len(envs))]


def lbbench_ns(hexfile: Path) -> float:
    out = subprocess.run(
        [str(LBBENCH), str(hexfile), str(GO_ROUNDS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    m = re.search(r"median (\d+(?:\.\d+)?)", out)
    if not m:
        raise RuntimeError(f"lbbench said: {out!r}")
    return float(m.group(1))


def ours_ns(fn: Any, arr: pa.Array) -> float:
    # Wall clock, as lbbench times its rounds: CPU time here against Go's wall
    # clock flattered lbparse on a loaded core (Go's waits counted, not ours).
    times = [wall_seconds(lambda: fn(arr))[0] for _ in range(CALLS)]
    return statistics.median(times) / len(arr) * 1e9


def measure(
    sets: dict[str, list[bytes]], tmp: Path, rounds: int
) -> dict[str, dict[str, list[float]]]:
    """ns/envelope per round of Go, decode_tables and decode_arrow, per set."""
    inputs = {}
    for i, (name, envs) in enumerate(sets.items()):
        hexfile = tmp / f"set{i}.hex"
        hexfile.write_text("".join(e.hex() + "\n" for e in envs))
        arr = pa.array(envs, pa.binary())
        lbparse.decode_tables(arr)  # warm: the decoder, its schema, its columns
        lbparse.decode_arrow(arr)
        inputs[name] = (hexfile, arr)
    res: dict[str, dict[str, list[float]]] = {
        name: {"go": [], "tables": [], "arrow": []} for name in sets
    }
    for _ in range(rounds):
        for name, (hexfile, arr) in inputs.items():
            res[name]["go"].append(lbbench_ns(hexfile))
            res[name]["tables"].append(ours_ns(lbparse.decode_tables, arr))
            res[name]["arrow"].append(ours_ns(lbparse.decode_arrow, arr))
    return res


def row(name: str, count: int, distinct: int, r: dict[str, list[float]]) -> list[Any]:
    g, t, a = (statistics.median(r[k]) for k in ("go", "tables", "arrow"))
    per_round = [x / y for x, y in zip(r["tables"], r["go"])]
    return [
        name,
        f"{count:,}" + (f" ({distinct:,} distinct)" if distinct != count else ""),
        f"{g:,.0f}",
        f"{t:,.0f}",
        f"**{t / g:.2f}x**",
        spread(per_round),
        f"{a:,.0f}",
        f"{a / g:.2f}x",
    ]


def fixed_and_per_row(res: dict[str, dict[str, list[float]]], n: int) -> dict[str, float]:
    """decode_tables' time split as a + b * rows from the mix at two batch sizes
    (the same envelopes): a, the per-call cost (us), b, the per-row cost (ns);
    Go's per-row cost beside them."""
    small = statistics.median(res["the whole mix"]["tables"]) * n
    big = statistics.median(res[BIG_MIX]["tables"]) * BATCH
    per_row = (big - small) / (BATCH - n)
    return {
        "per_call_us": (small - per_row * n) / 1e3,
        "per_row_ns": per_row,
        "go_ns": statistics.median(res[BIG_MIX]["go"]),
    }


def profile_rows(envs: list[bytes], calls: int = 100, top: int = 12) -> list[list[Any]]:
    """Where decode_tables' time goes on the mix: cProfile's own time per
    function, its share of the whole, the top ones."""
    import cProfile
    import pstats

    arr = pa.array(envs, pa.binary())
    lbparse.decode_tables(arr)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        lbparse.decode_tables(arr)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.values())
    rows = sorted(
        ((v[2], f"{os.path.basename(k[0])}:{k[2]}", v[1] // calls) for k, v in stats.items()),
        reverse=True,
    )[:top]
    return [
        [name, f"{t / total:.1%}", f"{t / calls / len(envs) * 1e9:.0f}", per]
        for t, name, per in rows
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    if not SHORT.exists() or not LBBENCH.exists():
        print(
            f"bench_tables: skipped: {SHORT} or {LBBENCH} missing (../shared beside the "
            "checkout, or LBPARSE_SHARED)"
        )
        return 0
    section = Section(
        "tables",
        "decode_tables against Liftbridge's Go decoders",
        "python bench/bench_tables.py (make bench)",
    )
    section.cpu = pin_one_core()
    envs = envelope_mix(SHORT)
    by_type = groups(envs)
    n = len(envs)
    # Per-batch costs (one Arrow array per column and type) weigh on 5,072
    # rows; the pipeline hands the decoder batches of 65,536.
    sets = {"the whole mix": envs, BIG_MIX: repeated(envs, BATCH)}
    sets.update(
        {name: repeated(g, n) for name, g in sorted(by_type.items(), key=lambda kv: -len(kv[1]))}
    )
    tmp = Path(tempfile.mkdtemp(prefix="lbparse-bench-tables-"))
    try:
        res = measure(sets, tmp, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    header = [
        "envelopes",
        "count",
        "Go ns",
        "decode_tables ns",
        "x Go",
        "x Go, per round",
        "decode_arrow ns",
        "x Go",
    ]
    rows = [row("the whole mix", n, n, res["the whole mix"]), row(BIG_MIX, BATCH, n, res[BIG_MIX])]
    rows += [row(name, len(sets[name]), len(by_type[name]), res[name]) for name in by_type]
    print(
        f"envelopes of {SHORT.name}: {n:,} ({sum(map(len, envs)) / 1e6:.2f} MB), "
        f"{args.rounds} interleaved rounds, CPU {section.cpu}"
    )
    widths = [34, 20, 8, 16, 7, 16, 14, 7]
    print("  ".join(f"{h:>{w}}" for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(f"{str(c).strip('*'):>{w}}" for c, w in zip(r, widths)))

    med = {k: statistics.median(res["the whole mix"][k]) for k in ("go", "tables", "arrow")}
    hdr = (
        {k: statistics.median(res[HEADER_ONLY][k]) for k in ("go", "tables")}
        if HEADER_ONLY in res
        else None
    )
    section.target(
        "decode_tables, the real envelope mix", med["tables"] / med["go"], "<=", 0.5, "{:.2f}x Go"
    )
    big = {k: statistics.median(res[BIG_MIX][k]) for k in ("go", "tables")}
    section.target(
        f"decode_tables, the mix in one {BATCH:,}-row batch",
        big["tables"] / big["go"],
        "<=",
        0.5,
        "{:.2f}x Go",
    )
    if hdr:
        section.target(
            "decode_tables, header-only ReplicationResponses",
            hdr["tables"] / hdr["go"],
            "<=",
            2.0,
            "{:.2f}x Go",
        )
    for t in section.targets:
        print(f"{t.what}: {t.measured} (target {t.target}: {t.verdict().strip('*')})")
    section.para(
        f"The envelopes of the real cluster capture `{SHORT.name}` ({n:,} envelopes, "
        f"{sum(map(len, envs)) / 1e6:.2f} MB: every NATS payload starting with the envelope "
        "magic), then each MsgType's envelopes alone, repeated to the mix's count so that "
        "per-call costs weigh as in the mix. Go: `lbbench` (Liftbridge v1.9.0's own "
        "`protocol.Unmarshal*`, ReplicationResponses' commit-log entries walked as the server "
        f"walks them), the median of its {GO_ROUNDS} rounds (wall clock, rounds of a few ms). "
        f"lbparse: wall clock as lbbench's (the same pinned core: a loaded host slows both "
        f"alike), the median of {CALLS} calls; `decode_tables` "
        "(`messages` plus one narrow table per payload type) and `decode_arrow` (one wide "
        f"batch). {args.rounds} rounds, Go and lbparse taking turns on each set; ns per "
        "envelope are medians over the rounds, `x Go` their ratio, and the spread of the "
        "per-round ratios beside it."
    )
    section.table(header, rows)
    split = fixed_and_per_row(res, n)
    section.para(
        f"The same envelopes at two batch sizes give decode_tables' cost as a per-call part "
        f"and a per-row part: **{split['per_call_us']:,.0f} us a call** (one Arrow array per "
        f"column and payload type, built in Python) plus **{split['per_row_ns']:.0f} ns a "
        f"row**, against Go's {split['go_ns']:.0f} ns a row "
        f"({split['per_row_ns'] / split['go_ns']:.2f}x). On {n:,} rows the per-call part is "
        f"{split['per_call_us'] * 1e3 / n:.0f} ns of each row."
    )
    section.para(
        "Where the rest goes: cProfile's own time of each function over 100 calls on the "
        "whole mix (profiling slows Python code more than C: shares, not times, are what "
        "to read)."
    )
    section.table(["function", "share", "ns a row", "calls a batch"], profile_rows(envs))
    section.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
