"""The README's pandas, Polars and DuckDB examples, run exactly as written.

Each block follows a `<!-- dataframe example: NAME -->` marker in the manual
(README.md or docs/pages);
it runs in a fresh interpreter from the repository's top directory, as a
user pastes it, and its output is checked against lbparse's own answers.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from support.docs import manual

import lbparse

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "lbparse" / "examples" / "sample.pcap"


def examples() -> dict[str, str]:
    text = manual()
    found = re.findall(r"<!-- dataframe example: (\w+) -->\n```python\n(.*?)```", text, re.S)
    return dict(found)


def run(code: str) -> str:
    # -P: lbparse as installed (the wheel, in CI), not the checkout's source
    res = subprocess.run(
        [sys.executable, "-P", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def top_three() -> list[tuple[str, int]]:
    """The three commonest MsgTypes of the sample, by lbparse.read_capture_arrow."""
    table = pa.Table.from_batches(lbparse.read_capture_arrow(str(SAMPLE)))
    names = [n for n in table.column("msg_type_name").to_pylist() if n is not None]
    counts = sorted({n: names.count(n) for n in names}.items(), key=lambda kv: (-kv[1], kv[0]))
    return counts[:3]


def test_the_readme_has_the_three_examples() -> None:
    assert set(examples()) == {"pandas", "polars", "duckdb", "tables"}


@pytest.mark.slow
def test_pandas_example() -> None:
    out = run(examples()["pandas"])
    for name, n in top_three()[:2]:  # ties past the first two may print in either order
        assert re.search(rf"^{name}\s+{n}$", out, re.M), out


@pytest.mark.slow
def test_polars_example() -> None:
    out = run(examples()["polars"])
    good = lbparse.decode(
        bytes.fromhex("b90e43b40008000b0a02733112126c6966746272696467652e6578616d706c6518cc48")
    )
    assert good.msg_type_name is not None and good.msg_type_name in out
    try:
        lbparse.decode(b"not an envelope")
    except lbparse.EnvelopeError as exc:
        assert exc.kind in out
    else:
        pytest.fail("the README's bad payload decodes")


@pytest.mark.slow
def test_duckdb_example() -> None:
    out = run(examples()["duckdb"])
    for name, n in top_three():
        assert re.search(rf"{name}\s*│\s*{n}\b", out), out


@pytest.mark.slow
def test_tables_example() -> None:
    """The join of the narrow tables gives what the wide rows say: each Publish's
    subject with its Message's stream, the three commonest pairs."""
    out = run(examples()["tables"])
    wide = pa.Table.from_batches(lbparse.read_capture_arrow(str(SAMPLE))).to_pylist()
    pairs = [
        (r["subject"], r["proto_Message"]["stream"]) for r in wide if r["proto_Message"] is not None
    ]
    counts = sorted({p: pairs.count(p) for p in pairs}.items(), key=lambda kv: (-kv[1], kv[0]))
    assert len(counts) >= 3
    for (subject, stream), n in counts[:3]:
        assert re.search(rf"{re.escape(subject)}\s*│\s*{stream}\s*│\s*{n}\b", out), out
