"""A real 3-node Liftbridge v1.9.0 cluster, run by shared/liftbridge/run_cluster.sh.

`run_cluster(mode, out)` runs the script on free loopback ports (never its
defaults: several agents share the machine) and returns what it left: the
capture of every NATS byte, the nodes' data directories and their logs.
The script stops every process it starts by PID, also when it is
terminated; should it outlive its time, it is terminated (its trap stops
the nodes) and then every PID its log names is stopped too.

`missing_tools()` says why a cluster cannot run here (the tests skip with it);
`full_run(request)` is a `full` run's capture, log and data directories, the
`liftbridge_full` fixture's (or LBPARSE_FULL_RUN's, an earlier run's output).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.cli import LBPARSE
from support.net import free_port
from support.shared import LIFTBRIDGE

SCRIPT = LIFTBRIDGE / "run_cluster.sh"
BIN = LIFTBRIDGE / "bin"
TIMEOUT = {"short": 180.0, "full": 420.0}


@dataclass(frozen=True)
class ClusterRun:
    """What one run left: capture, data directories, logs; its ports; and what
    `lbparse tap` subscribed to '>' on its NATS server printed meanwhile."""

    mode: str
    out: Path
    capture: Path
    data: Path
    logs: Path
    nats_port: int
    lb_port: int
    seconds: float
    tap_out: Path | None = None  # JSON Lines
    tap_err: Path | None = None
    tap_rc: int | None = None

    def log(self, name: str = "run.log") -> str:
        return (self.logs / name).read_text(errors="replace")


def missing_tools() -> str | None:
    """Why a cluster cannot run here, or None."""
    for path in (SCRIPT, BIN / "liftbridge", BIN / "lbclient", BIN / "lbtruth"):
        if not path.exists():
            return f"shared Liftbridge material missing: {path} (set LBPARSE_SHARED)"
    for tool in ("nats-server", "tshark", "tcpdump"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make install-system)"
    if os.geteuid() != 0:
        return "run_cluster.sh captures on the loopback interface: it needs root"
    return None


class RunAgain(RuntimeError):
    """A run that did not do what its script says, through no fault of ours:
    made once more (run_cluster)."""


class NodePanicked(RunAgain):
    """A Liftbridge node died of a Go panic during the run."""


class FollowerKilled(RunAgain):
    """`full`'s first SIGKILL hit a node that was no longer the metadata leader."""


class ScriptHung(RunAgain):
    """The script outlived its timeout: after a failover the real go-liftbridge
    client retried one publish for minutes ("publish ack timeout", then
    "reconnected", over and over; seen in a clean-clone CI run)."""


def run_cluster(
    mode: str, out: Path, tap_too: bool = True, capture_api: bool = False
) -> ClusterRun:
    """Run the cluster in `mode` (short: ~25 s; full: ~90 s, two failovers), with
    `lbparse tap` on its NATS server from the moment it accepts connections;
    `capture_api`: the clients' gRPC calls to the nodes captured too (CAPTURE_API=1).

    Liftbridge v1.9.0 itself sometimes panics when a node loses the metadata
    leadership while committing (`close of closed channel` in
    activityManager.BecomeFollower, seen in a loaded CI run); the cluster then
    never finishes its script. Such a run is stopped as soon as the panic is
    in a node's log and made once more, in OUT/retry, saying so on stderr. So
    is a `full` run whose first failover did not happen (_follower_killed),
    and a run whose script outlived its timeout (ScriptHung)."""
    try:
        return _run_once(mode, out, tap_too, capture_api)
    except RunAgain as exc:
        print(f"run_cluster: {exc}; running the cluster once more", file=sys.stderr)
        retry = out / "retry"
        retry.mkdir()
        return _run_once(mode, retry, tap_too, capture_api)


def _panic(logs: Path) -> str | None:
    """The first Go panic line of a node's log, with the log's name, or None."""
    for log in sorted(logs.glob("node*.log")):
        try:
            text = log.read_text(errors="replace")
        except OSError:
            continue
        m = re.search(r"^panic: .*$", text, re.M)
        if m:
            return f"{log.name}: {m.group(0)}"
    return None


def _wait(proc: subprocess.Popen, logs: Path, timeout: float) -> int | str | None:
    """The script's exit status; or a node's panic (the script stopped);
    or None when it outlived `timeout` (stopped too)."""
    deadline = time.monotonic() + timeout
    outcome: int | str | None = None
    while time.monotonic() < deadline:  # bounded by the run's timeout
        rc = proc.poll()
        if rc is not None:
            return rc
        panic = _panic(logs)
        if panic:
            outcome = panic
            break
        time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)  # its EXIT trap stops what it started
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    return outcome


def _run_once(mode: str, out: Path, tap_too: bool, capture_api: bool) -> ClusterRun:
    nats_port = free_port()
    lb_port = free_port(3)
    env = dict(
        os.environ,
        NATS_PORT=str(nats_port),
        LB_PORT=str(lb_port),
        CAPTURE_API="1" if capture_api else "0",
    )
    names = (
        ("data", "logs", "cluster.pcap")
        if mode == "full"
        else ("data-short", "logs-short", "short.pcapng")
    )
    start = time.monotonic()
    tap = None
    with open(out / f"run_cluster-{mode}.out", "wb") as log:
        proc = subprocess.Popen(
            ["bash", str(SCRIPT), mode, str(out)], stdout=log, stderr=subprocess.STDOUT, env=env
        )
        try:
            if tap_too:
                tap = _start_tap(nats_port, out, proc)
            rc = _wait(proc, out / names[1], TIMEOUT[mode])
        finally:
            tap_rc = _finish_tap(tap)
    run = ClusterRun(
        mode,
        out,
        out / names[2],
        out / names[0],
        out / names[1],
        nats_port,
        lb_port,
        time.monotonic() - start,
        out / "tap.jsonl" if tap else None,
        out / "tap.err" if tap else None,
        tap_rc,
    )
    _stop_leftovers(run)
    if isinstance(rc, str):
        raise NodePanicked(f"Liftbridge panicked in {out}: {rc}")
    if rc != 0:
        tail = (out / f"run_cluster-{mode}.out").read_text(errors="replace")[-3000:]
        if rc is None:
            raise ScriptHung(f"run_cluster.sh {mode} timed out in {out}:\n{tail}")
        raise RuntimeError(f"run_cluster.sh {mode} exited {rc}:\n{tail}")
    follower = _follower_killed(run) if mode == "full" else None
    if follower:
        raise FollowerKilled(f"no metadata failover in {out}: {follower}")
    return run


KILL = re.compile(r"^(\d\d:\d\d:\d\d)\.\d+ == SIGKILL (node\d+) \(metadata leader\)", re.M)
LEADERSHIP = re.compile(
    r'^time="\S+ (\d\d:\d\d:\d\d)".*msg="Server (became metadata leader|'
    r"lost metadata leadership)",
    re.M,
)


def _follower_killed(run: ClusterRun) -> str | None:
    """What says the script's metadata leader was not the leader when killed, or None.

    The script takes the first node log (node1, node2, ...) that says it
    became metadata leader; on a loaded machine the leadership can move
    before the kill (a CI run: node1 lost it 12 s before), and the kill then
    hits a follower: no election, one term, and the failover tests fail."""
    kill = KILL.search(run.log())
    if kill is None:
        return None
    at, node = kill.groups()
    held = False
    log = (run.logs / f"{node}.log").read_text(errors="replace")
    for when, what in LEADERSHIP.findall(log):
        if _after(when, at):
            break
        held = what.startswith("became")
    return None if held else f"{node}, killed at {at}, had lost the metadata leadership"


def _after(when: str, at: str) -> bool:
    """`when` is later than `at` (HH:MM:SS, no date): a run lasts minutes, so
    the nearer way round the clock is the one (23:59:58 is before 00:00:03)."""

    def seconds(t: str) -> int:
        h, m, s = map(int, t.split(":"))
        return h * 3600 + m * 60 + s

    return 0 < (seconds(when) - seconds(at)) % 86400 < 43200


TAP_RECONNECT = 5  # seconds the tap waits for the server the script stops at its end


def _start_tap(port: int, out: Path, script: subprocess.Popen) -> subprocess.Popen | None:
    """`lbparse tap nats://127.0.0.1:PORT '>'` once the script's nats-server accepts."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and script.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    else:
        return None
    root = Path(__file__).resolve().parents[2]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(root), str(root / "generated"), os.environ.get("PYTHONPATH", "")]
        ),
    )
    with open(out / "tap.jsonl", "wb") as o, open(out / "tap.err", "wb") as e:
        return subprocess.Popen(
            [
                *LBPARSE,
                "tap",
                f"nats://127.0.0.1:{port}",
                ">",
                "--reconnect-timeout",
                str(TAP_RECONNECT),
            ],
            stdout=o,
            stderr=e,
            env=env,
        )


def _finish_tap(tap: subprocess.Popen | None) -> int | None:
    """The tap's exit status: it gives up once the server is gone for good."""
    if tap is None:
        return None
    try:
        return tap.wait(timeout=TAP_RECONNECT + 30)
    except subprocess.TimeoutExpired:
        tap.kill()
        tap.wait(timeout=10)
        return None


def _stop_leftovers(run: ClusterRun) -> None:
    """Every PID the run's log names (nodes, nats-server, capture): stopped if alive."""
    try:
        text = run.log()
    except OSError:
        return
    for pid in {int(p) for p in re.findall(r"\bpid (\d+)", text)}:
        try:
            os.kill(pid, 0)
        except OSError:
            continue
        # Only ours: the PID must still be one of the programs the script runs.
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(
            name in cmd
            for name in (b"liftbridge", b"nats-server", b"tshark", b"tcpdump", b"dumpcap")
        ):
            os.kill(pid, signal.SIGTERM)


def lbtruth(payloads: list[bytes]) -> list[dict]:
    """Liftbridge's own decoders on each payload (`lbtruth envelopes`), in order."""
    import json

    text = "".join(p.hex() + "\n" for p in payloads)
    res = subprocess.run(
        [str(BIN / "lbtruth"), "envelopes"],
        input=text.encode(),
        capture_output=True,
        timeout=300,
        check=True,
    )
    out = [json.loads(line) for line in res.stdout.decode().splitlines()]
    if len(out) != len(payloads):
        raise RuntimeError(f"lbtruth gave {len(out)} results for {len(payloads)} payloads")
    return out


def full_run(request: pytest.FixtureRequest) -> tuple[Path, Path, Path]:
    """(capture, run.log, data directories) of a `full` run."""
    given = os.environ.get("LBPARSE_FULL_RUN")
    if given:
        return (
            Path(given) / "cluster.pcap",
            Path(given) / "logs" / "run.log",
            Path(given) / "data",
        )
    try:
        run = request.getfixturevalue("liftbridge_full")
    except pytest.FixtureLookupError:
        pytest.skip(
            "no liftbridge_full fixture in this checkout (issue #12's cluster harness); "
            "set LBPARSE_FULL_RUN to a run_cluster.sh full output directory"
        )
    return Path(run.capture), Path(run.logs) / "run.log", Path(run.data)
