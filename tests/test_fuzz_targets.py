"""Every atheris target (fuzz/targets.py) runs clean on its seed corpus, and
the new ones of issue #19 have teeth: the batch target fails on a decoder
that misaligns rows, the storage target on a C entry loop that disagrees
with the Python one."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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

    from lbparse.pipeline.decode_arrow import BatchDecoder

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


def test_the_storage_target_catches_a_c_loop_that_disagrees(corpus: Path,
                                                           monkeypatch: pytest.MonkeyPatch
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


def _harness(name: str, corpus: Path, runs: int) -> None:
    """fuzz/harness.py (atheris, libFuzzer) on a copy of the target's seeds,
    `runs` executions: the campaign's own machinery, bounded."""
    import shutil
    import subprocess

    pytest.importorskip("atheris")
    work = corpus.parent / f"run-{name}"
    shutil.copytree(corpus / targets.SEEDS.get(name, name), work)
    out = subprocess.run([sys.executable, str(ROOT / "fuzz" / "harness.py"), name, str(work),
                          f"-runs={runs}", "-timeout=10", "-rss_limit_mb=2048",
                          f"-artifact_prefix={corpus.parent}/"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    # libFuzzer counts the seeds it loads too: at least `runs` in all.
    done = re.search(r"^Done (\d+) runs", out.stderr, re.MULTILINE)
    assert done and int(done.group(1)) >= runs, out.stderr[-2000:]


def test_the_atheris_harness_runs_a_short_campaign(corpus: Path) -> None:
    """The smoke of `make fuzz`: a few hundred coverage-guided executions
    of the decoder (the long campaign runs outside the suite)."""
    _harness("decode", corpus, 300)


@pytest.mark.slow
@pytest.mark.parametrize("name", [t for t in targets.TARGETS if t != "decode"])
def test_the_atheris_harness_runs_every_target(name: str, corpus: Path) -> None:
    _harness(name, corpus, 100)
