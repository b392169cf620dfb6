"""Every atheris target (fuzz/targets.py) runs clean on its seed corpus, and
the new ones of issue #19 have teeth: the batch target fails on a decoder
that misaligns rows, the storage target on a C entry loop that disagrees
with the Python one."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "fuzz"))

import build_corpus  # noqa: E402
import targets  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    build_corpus.build(out)
    return out


@pytest.mark.parametrize("name", list(targets.TARGETS))
def test_every_target_runs_clean_on_its_seeds(name: str, corpus: Path) -> None:
    seeds = sorted((corpus / targets.SEEDS.get(name, name)).iterdir())
    assert seeds, name
    for seed in seeds[:12]:
        targets.TARGETS[name](seed.read_bytes())


def test_the_batch_target_catches_a_misaligned_row(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa

    from lbparse.columnar.decode_arrow import BatchDecoder

    real = BatchDecoder.__call__

    def swapped(self: BatchDecoder, batch: pa.RecordBatch) -> pa.RecordBatch:
        out = real(self, batch)
        if out.num_rows < 2:
            return out
        order = pa.array([1, 0] + list(range(2, out.num_rows)))
        return out.take(order)

    monkeypatch.setattr(BatchDecoder, "__call__", swapped)
    ack, msg = bytes.fromhex("b90e43b4000800010a0161"), bytes.fromhex("b90e43b4000800000a0162")
    with pytest.raises(AssertionError):
        targets.batch(bytes([len(ack)]) + ack + bytes([len(msg)]) + msg)


def test_the_storage_target_catches_a_c_loop_that_disagrees(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lbparse.storage import segment as seg

    if seg._native is None:
        pytest.skip("the C entry loop is not built here")
    real = seg._native.scan

    def short(data, pos, end, *rest):  # type: ignore[no-untyped-def]
        got = real(data, pos, end, *rest)
        rest[-2].pop() if rest[-2] else None  # one entry fewer than it read
        return got

    monkeypatch.setattr(seg._native, "scan", short, raising=False)
    seeds = [p.read_bytes() for p in sorted((corpus / "storage").iterdir())]
    with pytest.raises(AssertionError):
        for data in seeds:
            targets.storage(data)


def test_the_raftdb_target_catches_a_budget_overrun(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The raftdb target (issue #27) fails on a reader that copies past
    Limits.max_raft_db (its crafted seed of keys sharing one value)."""
    from lbparse.storage import raftdb

    seeds = [p.read_bytes() for p in sorted((corpus / "raftdb").iterdir())]
    for data in seeds:
        targets.raftdb(data)
    monkeypatch.setattr(raftdb._Budget, "take", lambda self, n: True)
    with pytest.raises(AssertionError, match="over the budget"):
        for data in seeds:
            targets.raftdb(data)


def test_the_h2_target_catches_a_reader_that_depends_on_the_cut(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The h2 target (issue #28) reads each seed connection whole and cut into
    small segments: a reader that loses a segment's last byte when it is cut
    small (a frame header split across segments, say) fails it."""
    from lbparse.capture import h2

    seeds = [p.read_bytes() for p in sorted((corpus / "h2").iterdir())]
    assert len(seeds) >= 3
    for data in seeds:
        targets.h2(data)
    real = h2.Side.feed
    monkeypatch.setattr(
        h2.Side, "feed", lambda self, data: real(self, data[:-1] if 1 < len(data) < 4 else data)
    )
    with pytest.raises(AssertionError, match="cut every"):
        for data in seeds:
            targets.h2(data)


def _harness(name: str, corpus: Path, runs: int) -> str:
    """fuzz/harness.py (atheris, libFuzzer) on a copy of the target's seeds,
    `runs` executions: the campaign's own machinery, bounded."""
    import shutil
    import subprocess

    pytest.importorskip("atheris")
    work = corpus.parent / f"run-{name}-{runs}"
    shutil.copytree(corpus / targets.SEEDS.get(name, name), work)
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "fuzz" / "harness.py"),
            name,
            str(work),
            f"-runs={runs}",
            "-timeout=10",
            "-rss_limit_mb=2048",
            f"-artifact_prefix={corpus.parent}/",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    # libFuzzer counts the seeds it loads too: at least `runs` in all.
    done = re.search(r"^Done (\d+) runs", out.stderr, re.MULTILINE)
    assert done and int(done.group(1)) >= runs, out.stderr[-2000:]
    return out.stdout + out.stderr


@pytest.mark.slow
def test_run_py_forks_each_campaign_from_one_server(corpus: Path, tmp_path: Path) -> None:
    """The smoke of `make fuzz`, run its way: one harness server instruments
    lbparse once, and each target's short campaign (the decoder's, the NATS
    parser's: a few seconds of coverage-guided executions) is a fork of it,
    with its own log and exit status; a campaign past its time is killed
    and said. (The direct `harness.py TARGET` runs in the tests below.)"""
    pytest.importorskip("atheris")
    import run as fuzz_run

    server = fuzz_run.Server(tmp_path / "server.log")
    try:
        results = {
            t: fuzz_run.run_target(
                t,
                3,
                tmp_path / "corpus" / t,
                tmp_path / "art" / t,
                tmp_path / f"{t}.log",
                server=server,
            )
            for t in ("decode", "nats")
        }
        endless = server.run(
            "decode", [str(corpus / "decode"), "-runs=100000000"], tmp_path / "endless.log", 3
        )
    finally:
        server.close()
    assert server.proc.returncode == 0
    for t, r in results.items():
        log = (tmp_path / f"{t}.log").read_text()
        assert r["execs"] > 0 and r["coverage"] > 0 and not r["crashes"], (r, log[-2000:])
        assert r["starts"] == 1 and "Done" in log, log[-2000:]
    assert endless == "timeout"
    assert "Instrumenting lbparse" in (tmp_path / "server.log").read_text()  # once, there


@pytest.mark.slow
def test_the_batch_target_holds_its_memory_under_the_fuzzer(corpus: Path) -> None:
    """The campaign's own harness on the batch target: libFuzzer's rss from
    its 256th execution (past the warm-up: Arrow's pools, the reference's
    cache) to its 512th grows less than 12 MB, 47 KB an execution (before
    the guard: ~100 KB an execution, 56 MB over 550; now about 2 MB)."""
    err = _harness("batch", corpus, 512)
    rss = [
        (int(n), int(mb)) for n, mb in re.findall(r"^#(\d+)\s.*\brss: (\d+)Mb", err, re.MULTILINE)
    ]
    after = [(n, mb) for n, mb in rss if n >= 256]
    assert len(after) >= 2 and after[-1][0] - after[0][0] >= 200, err[-2000:]
    assert after[-1][1] - after[0][1] < 12, rss


@pytest.mark.slow
def test_the_atheris_harness_runs_every_target(corpus: Path) -> None:
    """Every target under atheris, in one start of the harness (`every`: an
    input's first byte chooses the target): each target's first seeds, then
    mutations of them. fuzz-ci starts the harness once a target."""
    every = corpus / "every"
    every.mkdir()
    for i, name in enumerate(targets.EVERY):
        for j, seed in enumerate(sorted((corpus / targets.SEEDS.get(name, name)).iterdir())[:8]):
            (every / f"{name}-{j}").write_bytes(bytes([i]) + seed.read_bytes())
    # As many mutations as seeds after them: what this holds is that every
    # target runs under the harness (the campaigns' time is fuzz-ci's and
    # `make fuzz`'s); 100 runs a target took ~20 s of the suite.
    out = _harness("every", corpus, 16 * len(targets.EVERY))
    ran = set(re.findall(r"^every: ran (\w+)$", out, re.MULTILINE))
    assert ran == set(targets.EVERY), out[-3000:]


def test_the_outputs_target_catches_a_temporary_file_left(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outputs target (issue #47) fails on a writer that leaves its
    temporary file beside the output (copied over it, never renamed)."""
    import shutil

    from lbparse import outputs

    seeds = [p.read_bytes() for p in sorted((corpus / "outputs").iterdir())]
    for data in seeds:
        targets.outputs(data)
    monkeypatch.setattr(outputs, "_rename_over", lambda temp, path, where: shutil.copy(temp, path))
    with pytest.raises(AssertionError):
        for data in seeds:
            targets.outputs(data)
