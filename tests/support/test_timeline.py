"""tests/support/timeline.py: what a run's timeline says, from its files."""

from __future__ import annotations

from pathlib import Path

from support import timeline


def _write(where: Path) -> None:
    (where / "gw0.tsv").write_text(
        "1000.0\t1010.0\t9.50\ttests/a/test_x.py::test_one\n"
        "1010.0\t1100.0\t2.00\ttests/a/test_x.py::test_two\n"
    )
    (where / "gw1.tsv").write_text("1000.5\t1030.0\t28.00\ttests/b/test_y.py::test_three\n")
    (where / "cpu.tsv").write_text(
        "".join(f"{1000 + s}.0\t{2.0 if s < 60 else 1.0}\n" for s in range(1, 100))
    )


def test_the_summary_says_workers_cpu_by_module_and_busy_cores(tmp_path: Path) -> None:
    _write(tmp_path)
    text = timeline.summarize(tmp_path, last=2)
    assert text.startswith("3 tests, 100 s from the first start to the last end"), text
    assert "    0  2.00" in text and "    1  1.00" in text, text  # by minute from the first start
    assert "gw0: 2 tests, busy 100 s, ends at 100 s, last tests/a/test_x.py::test_two" in text
    assert "gw1: 1 tests, busy 30 s, ends at 30 s" in text
    lines = text.splitlines()
    first = lines.index("CPU seconds by module (the worker's and its reaped children's), top 2:")
    assert lines[first + 1 : first + 3] == [
        "     28.0  tests/b/test_y.py",
        "     11.5  tests/a/test_x.py",
    ]
    assert lines[-1].endswith("gw0  tests/a/test_x.py::test_two"), lines[-3:]


def test_the_machines_cores_are_read_from_proc_stat() -> None:
    busy, total = timeline._cpu_times()
    assert 0 <= busy <= total and total > 0


def test_a_folder_without_test_lines_says_so(tmp_path: Path) -> None:
    assert timeline.summarize(tmp_path) == f"{tmp_path}: no test lines"
