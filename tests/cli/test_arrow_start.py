"""A command's process never imports pandas (lbparse.cli.arrow_start): pyarrow's
first array and first numpy view would, ~0.45 CPU-s of a short command, for
nothing the command uses; what it writes is the same, and pandas works as ever
for whoever imports it afterwards, or in a library caller's process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.shared import LIFTBRIDGE

ROOT = Path(__file__).resolve().parents[2]
SHORT = LIFTBRIDGE / "samples" / "short.pcapng"

# `main()` as the `lbparse` script calls it (argv None), or as a library
# caller does (argv given); then what the process imported, and whether
# pandas, imported afterwards, still converts both ways
_RUN = """
import json, sys
from lbparse.cli import main
words = {words!r}
if {as_script!r}:
    sys.argv = ["lbparse", *words]
    rc = main()
else:
    rc = main(words)
loaded = "pandas" in sys.modules
import pandas as pd, pyarrow as pa
back = pa.Table.from_pandas(pa.table({{"n": [1, None]}}).to_pandas())
print(json.dumps({{"rc": rc, "pandas": loaded, "back": back.column("n").to_pylist()}}))
"""


def _run(tmp_path: Path, out: str, as_script: bool) -> dict[str, object]:
    words = ["capture", str(SHORT), "--tables", str(tmp_path / out)]
    done = subprocess.run(
        [sys.executable, "-P", "-c", _RUN.format(words=words, as_script=as_script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'generated'}", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return said


@pytest.mark.slow  # two command runs, each a process of its own
def test_a_commands_process_leaves_pandas_out_and_writes_the_same(tmp_path: Path) -> None:
    if not SHORT.is_file():
        pytest.skip(f"shared material missing: {SHORT}")
    script = _run(tmp_path, "script", as_script=True)
    library = _run(tmp_path, "library", as_script=False)
    assert script == {"rc": 0, "pandas": False, "back": [1, None]}, script
    # a library caller's process is its own: pyarrow imports pandas as it would
    assert library == {"rc": 0, "pandas": True, "back": [1, None]}, library
    names = sorted(p.name for p in (tmp_path / "script").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "library").iterdir())
    assert "messages" in names and "raft_rpcs" in names
    for name in names:
        a = pq.read_table(tmp_path / "script" / name)
        b = pq.read_table(tmp_path / "library" / name)
        assert a.equals(b), name
        assert a.schema.metadata == b.schema.metadata, name  # pandas' metadata too
