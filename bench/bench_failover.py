"""A node killed mid-read, many times: how long the read takes to end, on a real cluster.

    make bench-failover         (python bench/bench_failover.py --run [--runs N])

A real 3-node Liftbridge v1.9.0 cluster on loopback (tests/support/live_cluster.py),
a stream of 3 partitions (3 replicas) holding a few thousand messages. Each
run plans a read of every partition through a server (as a Spark driver
does), reads a first part of each, SIGKILLs one node, then reads the rest of
every partition from the plan (as the tasks do), and checks every offset
came once. The node killed is, in turn:

- the leader of partition 0 (its reads fail over to a new leader);
- a follower of partition 0 that leads nothing of the stream (no read fails over);
- the node the plan was made through (the first server named), whatever it leads;

and it is either left down for the rest of the run or started again 4 s
after the kill. What is measured is the time from the kill to the end of the
last partition's read; the bound is ELECTION + 2 x timeout (the issue's
"election time + 2 x timeout"). Then, with a node down, FetchMetadata's
answer time with a gRPC deadline and without one (Liftbridge v1.9.0 holds a
call that has a deadline until that deadline while a node is down), and the
read speed on the survivors against the speed before the kill.

Before each run, with every node up, each of the six orders of the servers
is asked for the partitions of a second stream, of 2 replicas on the 3 nodes
(some node holds none of each): every order must give every partition its
leader's end.

Without --run (as `make bench` calls every bench/bench_*.py) it only says how
to run it: a run is ~15 s, the whole bench some minutes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from benchdoc import Section  # noqa: E402

STREAM, PARTITIONS, MESSAGES = "failover", 3, 3000
SPARSE = "sparse"  # 2 partitions of 2 replicas: some node holds no replica of each
TIMEOUT = 5.0  # the client's timeout
ELECTION = 10.0  # seconds a partition may go without a leader after a kill
RESTART_AFTER = 4.0
FIRST = 100  # messages of each partition read before the kill


def _publish(cluster: Any) -> None:
    import grpc

    from lbparse_generated.proto import api_pb2, api_pb2_grpc

    stub = api_pb2_grpc.APIStub(grpc.insecure_channel(cluster.addresses[0]))
    cluster.api(
        "CreateStream",
        api_pb2.CreateStreamRequest(
            subject=STREAM, name=STREAM, partitions=PARTITIONS, replicationFactor=3
        ),
    )
    cluster.api(
        "CreateStream",
        api_pb2.CreateStreamRequest(subject=SPARSE, name=SPARSE, partitions=2, replicationFactor=2),
    )
    time.sleep(2)
    for i in range(40):
        cluster.api(
            "Publish",
            api_pb2.PublishRequest(
                stream=SPARSE, partition=i % 2, value=b"s", ackPolicy=api_pb2.ALL
            ),
            not_yet=("NOT_FOUND",),
        )

    def requests() -> Any:
        for i in range(MESSAGES):
            yield api_pb2.PublishRequest(
                stream=STREAM,
                partition=i % PARTITIONS,
                key=b"k%d" % i,
                value=b"v" * 100,
                correlationId=str(i),
                ackPolicy=api_pb2.ALL,
            )

    acked = 0
    for resp in stub.PublishAsync(requests(), timeout=300):
        if resp.HasField("asyncError"):
            raise RuntimeError(resp.asyncError.message)
        acked += 1
        if acked == MESSAGES:
            break


def _settled(cluster: Any) -> list[Any]:
    """Until every partition has three in-sync replicas and its messages (bounded)."""
    from lbparse.streams.client import StreamsClient, StreamsError

    deadline = time.monotonic() + 120
    while True:
        try:
            with StreamsClient(cluster.addresses, timeout=TIMEOUT) as client:
                parts = client.partitions([STREAM])
            if all(len(p.isr) == 3 for p in parts) and sum(p.end for p in parts) == MESSAGES:
                return parts
        except StreamsError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the cluster did not settle")
        time.sleep(0.5)


def every_order(cluster: Any) -> bool:
    """Whether every order of the servers gives each partition of SPARSE the end
    its leader gives (a node with no replica of it says -1 of it itself)."""
    import itertools

    from lbparse.streams.client import StreamsClient

    with StreamsClient(cluster.addresses, timeout=TIMEOUT) as client:
        truth = [(p.partition, p.end) for p in client.partitions([SPARSE])]
    ok = all(end > 0 for _, end in truth)
    for order in itertools.permutations(cluster.addresses):
        with StreamsClient(list(order), timeout=TIMEOUT) as client:
            ok &= [(p.partition, p.end) for p in client.partitions([SPARSE])] == truth
    return ok


def one_run(cluster: Any, who: str, left_down: bool) -> dict[str, Any]:
    from lbparse.streams.client import StreamsClient

    parts = _settled(cluster)
    orders_ok = every_order(cluster)
    p0 = parts[0]
    leaders = {p.leader for p in parts}
    if who == "leader":
        victim = p0.leader
    elif who == "follower":
        followers = [a for a in p0.isr if a != p0.address]
        by_address = {cluster.addresses[i]: f"node{i + 1}" for i in range(3)}
        quiet = [by_address[a] for a in followers if by_address[a] not in leaders]
        victim = quiet[0] if quiet else by_address[followers[0]]
    else:  # the planning node: the first server named
        victim = "node1"
    servers = [cluster.addresses[int(victim[-1]) - 1]] if who == "planner" else []
    servers += [a for a in cluster.addresses if a not in servers]
    with StreamsClient(servers, timeout=TIMEOUT) as planner:
        plan = planner.partitions([STREAM])
    seen: dict[int, list[int]] = {}
    for p in plan:
        with StreamsClient(servers, timeout=TIMEOUT) as client:
            seen[p.partition] = [
                m.offset for m in client.read(STREAM, p.partition, 0, FIRST, p.address)
            ]
    cluster.kill(victim)
    killed = time.monotonic()
    back = None if left_down else threading.Timer(RESTART_AFTER, cluster.start_node, (victim,))
    if back:
        back.start()
    failed_over = 0
    try:
        for p in plan:
            with StreamsClient(servers, timeout=TIMEOUT) as client:
                seen[p.partition] += [
                    m.offset for m in client.read(STREAM, p.partition, FIRST, p.end, p.address)
                ]
                failed_over += client.resumed
        took = time.monotonic() - killed
        after = _speed(servers, plan)
    finally:
        if back:
            back.join()
        else:
            cluster.start_node(victim)
    exact = all(seen[p.partition] == list(range(p.end)) for p in plan)
    return {
        "took": took,
        "exact": exact,
        "failed_over": failed_over,
        "after": after,
        "victim_led": victim in leaders,
        "orders_ok": orders_ok,
    }


def _speed(servers: list[str], plan: list[Any]) -> float:
    """Messages/s of a whole read of every partition, planned anew (on the
    survivors, after a kill), the plan's lookup not counted: with a node
    down, v1.9.0 answers FetchMetadata after its 3 s survey (see the table's
    note), what a read's plan costs once."""
    from lbparse.streams.client import StreamsClient

    rates = []
    with StreamsClient(servers, timeout=TIMEOUT) as client:
        parts = client.partitions([STREAM])
        for _ in range(3):  # a read is a fraction of a second: the median of three
            t = time.monotonic()
            n = 0
            for p in parts:
                n += sum(1 for _ in client.read(STREAM, p.partition, 0, p.end, p.address))
            rates.append(n / (time.monotonic() - t))
    return statistics.median(rates)


def metadata_waits(cluster: Any, rounds: int) -> dict[str, float]:
    """With node3 down: FetchMetadata at node1 with a 10 s deadline, and without."""
    import grpc

    from lbparse_generated.proto import api_pb2, api_pb2_grpc

    cluster.kill("node3")
    out: dict[str, list[float]] = {"with a 10 s deadline": [], "without a deadline": []}
    try:
        time.sleep(3)  # past the nodes' 2 s broker cache
        stub = api_pb2_grpc.APIStub(grpc.insecure_channel(cluster.addresses[0]))
        for _ in range(rounds):
            for name, kwargs in (
                ("with a 10 s deadline", {"timeout": 10.0}),
                ("without a deadline", {}),
            ):
                time.sleep(2.1)  # the broker cache expired again
                t = time.monotonic()
                try:
                    stub.FetchMetadata(api_pb2.FetchMetadataRequest(), **kwargs)
                except grpc.RpcError:
                    pass  # DEADLINE_EXCEEDED: the time says it
                out[name].append(time.monotonic() - t)
    finally:
        cluster.start_node("node3")
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="run it (minutes)")
    parser.add_argument("--runs", type=int, default=4, help="runs of each case")
    args = parser.parse_args()
    if not args.run:
        print(
            "bench_failover: `make bench-failover` (python bench/bench_failover.py --run): "
            "a live cluster, a node killed mid-read many times, minutes"
        )
        return
    from support.live_cluster import temporary_cluster

    with temporary_cluster("bench-failover-") as cluster:
        run(cluster, args.runs)


def run(cluster: Any, runs: int) -> None:
    section = Section(
        "failover",
        "A node killed mid-read: the read's end after the kill",
        "python bench/bench_failover.py --run (make bench-failover)",
    )
    _publish(cluster)
    before = _speed(cluster.addresses, _settled(cluster))
    cases = [(who, down) for who in ("leader", "follower", "planner") for down in (True, False)]
    results: dict[tuple[str, bool], list[dict[str, Any]]] = {c: [] for c in cases}
    for i in range(runs):
        for who, down in cases:
            r = one_run(cluster, who, down)
            results[who, down].append(r)
            print(
                f"run {i + 1} {who:8s} {'left down' if down else 'restarted'}: "
                f"{r['took']:.1f} s, exact {r['exact']}, failovers {r['failed_over']}",
                flush=True,
            )
    waits = metadata_waits(cluster, 3)
    bound = ELECTION + 2 * TIMEOUT
    rows = []
    worst = 0.0
    for (who, down), rs in results.items():
        took = [r["took"] for r in rs]
        worst = max(worst, *took)
        rows.append(
            [
                f"{who}{' (it led a partition)' if any(r['victim_led'] for r in rs) else ''}",
                "left down" if down else f"back after {RESTART_AFTER:g} s",
                len(rs),
                f"{statistics.median(took):.1f} s",
                f"{max(took):.1f} s",
                f"{sum(r['failed_over'] for r in rs)}",
                "yes" if all(r["exact"] for r in rs) else "**no**",
                f"{statistics.median(r['after'] for r in rs) / before:.2f}",
            ]
        )
    section.target(
        f"a read's end after a node's kill, the worst of {runs * len(cases)} runs",
        worst,
        "<=",
        bound,
        "{:.1f} s",
    )
    orders = [r["orders_ok"] for rs in results.values() for r in rs]
    section.target(
        "runs in which every order of `servers` gave every partition's end "
        "(a stream of 2 replicas on 3 nodes)",
        sum(orders),
        ">=",
        len(orders),
        "{:.0f}",
    )
    section.para(
        f"A live 3-node cluster on loopback; a stream of {PARTITIONS} partitions of 3 "
        f"replicas, {MESSAGES:,} messages; the client's timeout {TIMEOUT:g} s, so the "
        f"bound is {ELECTION:g} s of election + 2 x {TIMEOUT:g} s = {bound:g} s. Each "
        f"run reads {FIRST} messages of every partition, kills the node, and reads the "
        "rest of every partition from the plan; `exact`: every offset once; "
        "`survivors' speed`: a whole read after the run (on the survivors, when the node "
        "was left down) over one before the first, their plans' lookups not counted."
    )
    section.table(
        [
            "node killed",
            "then",
            "runs",
            "median",
            "worst",
            "failovers",
            "exact",
            "survivors' speed",
        ],
        rows,
    )
    section.para(
        "FetchMetadata at a live node while another is down (its 2 s broker cache "
        "expired), medians of 3: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in waits.items())
        + ". lbparse sends it without a deadline and waits `timeout` itself."
    )
    section.write()


if __name__ == "__main__":
    main()
