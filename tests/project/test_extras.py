"""The light install and its extras (lbparse.extras).

`pip install lbparse` decodes, reads captures and data directories and
writes the tables; each command that needs an extra says in one line which
`pip install` fixes it. Run two ways: in the full install (the suite), with
the optional modules blocked in a child process; and by `make test-light`
in a virtualenv holding the wheel alone (LBPARSE_LIGHT=1), where they are
really absent. Needs nothing but the standard library, pytest and lbparse
(the light run has no conftest and no test tools).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lbparse.extras import EXTRAS, MODULES

ROOT = Path(__file__).resolve().parents[2]
LIGHT = os.environ.get("LBPARSE_LIGHT") == "1"
SAMPLE = str(
    Path(importlib.util.find_spec("lbparse.examples").origin).parent  # type: ignore[arg-type,union-attr]
    / "sample.pcap"
)
ENVELOPE = "b90e43b40008000b0a027331"  # v0 ServerInfoResponse{id: "s1"}
ALL_OPTIONAL = tuple(MODULES)


def _python(
    code: str, block: tuple[str, ...] = (), cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    # A finder ahead of the others that finds none of `block`: importing one
    # fails as it does where it is not installed.
    code = (
        "import sys\n"
        "class Absent:\n"
        "    @staticmethod\n"
        "    def find_spec(name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {block!r}:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Absent)\n" + code
    )
    return subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def _lbparse(
    argv: list[str], block: tuple[str, ...] = (), cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return _python(f"from lbparse.cli import main\nsys.exit(main({argv!r}))\n", block, cwd)


def test_the_table_is_pyprojects() -> None:
    """Each optional module's distribution is in its extra's list, and each
    distribution of an extra has its module in the table."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(extras) == {*EXTRAS, "all", "dev"}
    assert extras["all"] == [f"lbparse[{','.join(EXTRAS)}]"]
    pinned = {extra: {d.split("==")[0] for d in extras[extra]} for extra in EXTRAS}
    for module, (dist, extra) in MODULES.items():
        assert dist in pinned[extra], (module, dist, extra)
    assert {(d, e) for e, ds in pinned.items() for d in ds} == set(MODULES.values())


@pytest.mark.parametrize(
    "argv,block,extra",
    [
        (["report", SAMPLE, "-o", "r.html"], ("vl_convert",), "report"),
        (["pipeline", SAMPLE, "-o", "out"], ("pyspark", "py4j"), "spark"),
        (["tap", "nats://127.0.0.1:9", "foo", "--count", "1"], ("nats", "nkeys", "nacl"), "live"),
        (["generate", "--lang", "python", "-o", "gen"], ("grpc_tools",), "generate"),
    ],
)
@pytest.mark.slow
def test_a_command_without_its_extra_says_which_pip_install(
    tmp_path: Path, argv: list[str], block: tuple[str, ...], extra: str
) -> None:
    done = _lbparse(argv, block, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    line = f"pip install 'lbparse[{extra}]' (or 'lbparse[all]')\n"
    assert done.stderr.startswith(f"lbparse {argv[0]}: ") and done.stderr.endswith(line), (
        done.stderr
    )
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.slow
def test_the_report_as_json_needs_no_extra(tmp_path: Path) -> None:
    """The page needs vl-convert (the Vega runtimes); the model alone (--json) does not."""
    done = _lbparse(["report", SAMPLE, "--json", "r.json", "-q"], ALL_OPTIONAL, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.slow
def test_the_page_needs_no_altair(tmp_path: Path) -> None:
    """Altair is the reference of the page's Vega-Lite specs (a dev
    dependency), not a part of the report extra: a page is written where it
    cannot be imported."""
    pytest.importorskip("vl_convert")  # the report extra (not in the light install)
    done = _lbparse(["report", SAMPLE, "-o", "r.html", "-q"], ("altair",), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "r.html").read_text()
    assert "vega-lite/v6" in page and "vegaEmbed" in page


def test_a_missing_module_that_is_not_optional_is_a_traceback(tmp_path: Path) -> None:
    """A broken install is not dressed up as a missing extra."""
    done = _lbparse(["decode", ENVELOPE], ("crc32c", "lbparse.columnar._kernels"), cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" in done.stderr, done.stderr


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
@pytest.mark.parametrize(
    "module,block,extra",
    [
        ("lbparse.report.render", ("vl_convert",), "report"),
        ("lbparse.pipeline.job", ("pyspark",), "spark"),
        ("nats.errors", ("nats",), "live"),
        ("lbparse.streams.client", ("grpc",), "streams"),
        ("lbparse.spark.streams_source", ("grpc",), "streams"),
    ],
)
def test_need_says_which_pip_install(module: str, block: tuple[str, ...], extra: str) -> None:
    """lbparse.extras.need, the one way a function imports late: a missing
    extra is MissingExtra (a ModuleNotFoundError) with missing_extra's line."""
    done = _python(
        "from lbparse.extras import MissingExtra, need\n"
        f"try:\n    need({module!r})\n"
        "except MissingExtra as exc:\n    print(exc.name, exc)\n",
        block,
    )
    assert done.returncode == 0, done.stderr
    name = done.stdout.split(" ", 1)[0]  # the module missing (several, in the light install)
    # One blocked here, or, in the light install, another extra's not installed at all
    # (lbparse.spark.streams_source needs pyspark before grpc): its own extra is named.
    assert name in block or importlib.util.find_spec(name) is None, done.stdout
    said = extra if name in block else MODULES[name][1]
    assert MODULES[name][1] == said and done.stdout.endswith(
        f"pip install 'lbparse[{said}]' (or 'lbparse[all]')\n"
    ), done.stdout


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_need_leaves_a_module_that_is_not_optional_alone() -> None:
    """A hard dependency missing is a broken install: its own error, not an extra's."""
    done = _python(
        "from lbparse.extras import MissingExtra, need\n"
        "try:\n    need('pyarrow')\n"
        "except MissingExtra:\n    print('extra')\n"
        "except ModuleNotFoundError as exc:\n    print('missing', exc.name)\n",
        ("pyarrow",),
    )
    assert done.stdout == "missing pyarrow\n", done.stderr


@pytest.mark.slow
def test_decoding_captures_and_tables_need_no_extra(tmp_path: Path) -> None:
    assert _lbparse(["decode", ENVELOPE], ALL_OPTIONAL).stdout.count('"s1"') == 1
    done = _lbparse(["capture", SAMPLE, "-c", "3", "--format", "table"], ALL_OPTIONAL)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 3, done.stderr
    done = _lbparse(["capture", SAMPLE, "--tables", str(tmp_path / "t")], ALL_OPTIONAL)
    assert done.returncode == 0 and (tmp_path / "t" / "messages").is_dir(), done.stderr
    done = _lbparse(["--version"], ALL_OPTIONAL)
    assert done.returncode == 0 and done.stdout.startswith("lbparse "), done.stderr


@pytest.mark.slow
def test_data_directories_need_no_extra(tmp_path: Path) -> None:
    import tarfile

    shared = Path(os.environ.get("LBPARSE_SHARED", ROOT.parent / "shared"))
    tar = shared / "liftbridge" / "samples" / "data-short.tar.gz"
    if not tar.is_file():
        pytest.skip(f"shared material missing: {tar}")
    with tarfile.open(tar) as t:
        t.extractall(tmp_path, filter="data")
    data = tmp_path / "data-short"
    done = _lbparse(["segments", str(data), "--verify"], ALL_OPTIONAL)
    assert done.returncode == 0 and "255 entries" in done.stderr, done.stderr
    done = _lbparse(["segments", str(data), "--format", "table"], ALL_OPTIONAL)
    assert done.returncode == 0 and len(done.stdout.splitlines()) > 255, done.stderr
    done = _lbparse(["raft", str(data)], ALL_OPTIONAL)
    assert done.returncode == 0 and done.stdout, done.stderr


@pytest.mark.skipif(not LIGHT, reason="the light install's own check (make test-light)")
def test_the_light_install_has_no_optional_module() -> None:
    present = [m for m in MODULES if importlib.util.find_spec(m) is not None]
    assert present == []
