"""lbparse.pipeline.worker_daemon: Spark's zips of pyspark and py4j moved after
the installed packages, only when those are the same version."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path

import pytest

from lbparse.pipeline.session import worker_daemon_conf
from lbparse.pipeline.worker_daemon import prefer_installed

# Where pyspark is installed, found without importing it (a third of a second)
_spec = importlib.util.find_spec("pyspark")
if _spec is None or _spec.origin is None:
    pytest.skip("pyspark is not installed", allow_module_level=True)
SITE = str(Path(_spec.origin).parent.parent)
LIB = Path(_spec.origin).parent / "python" / "lib"


def _zips() -> tuple[str, str]:
    spark_zip = LIB / "pyspark.zip"
    py4j = sorted(LIB.glob("py4j-*-src.zip"))
    if not spark_zip.is_file() or not py4j:
        pytest.skip("this pyspark has no zips of its own")
    return str(spark_zip), str(py4j[0])


def test_the_zips_go_after_the_same_installed_versions() -> None:
    spark_zip, py4j_zip = _zips()
    path = [spark_zip, py4j_zip, "/nowhere", SITE]
    assert prefer_installed(path) == ["/nowhere", SITE, spark_zip, py4j_zip]
    assert path == [spark_zip, py4j_zip, "/nowhere", SITE]  # not changed in place


def test_without_an_installed_copy_the_zips_stay_first() -> None:
    spark_zip, py4j_zip = _zips()
    path = [spark_zip, py4j_zip, "/nowhere"]
    assert prefer_installed(path) == path


def test_another_installed_version_keeps_its_zip_first(tmp_path: Path) -> None:
    spark_zip, py4j_zip = _zips()
    other = tmp_path / "site"
    for package, version in (("pyspark", b'__version__: str = "0.0.1"\n'), ("py4j", None)):
        (other / package).mkdir(parents=True)
        (other / package / "__init__.py").write_bytes(b"")
        same = (Path(SITE) / package / "version.py").read_bytes()
        (other / package / "version.py").write_bytes(version or same)
    path = [spark_zip, py4j_zip, str(other)]
    # py4j is the same version there: its zip moves; pyspark's does not
    assert prefer_installed(path) == [spark_zip, str(other), py4j_zip]


def test_a_damaged_zip_is_left_where_it_is(tmp_path: Path) -> None:
    bad = tmp_path / "pyspark.zip"
    bad.write_bytes(b"PK\x03\x04 not a zip")
    empty = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty, "w"):
        pass
    path = [str(bad), str(empty), SITE]
    assert prefer_installed(path) == path


def test_a_new_local_session_in_this_interpreter_gets_the_daemon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert worker_daemon_conf("local[2]") == {
        "spark.python.daemon.module": "lbparse.pipeline.worker_daemon"
    }
    assert worker_daemon_conf("local") != {}


@pytest.mark.parametrize("master", ["spark://127.0.0.1:7077", "yarn", "k8s://h:443"])
def test_a_cluster_session_keeps_sparks_daemon(
    monkeypatch: pytest.MonkeyPatch, master: str
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert worker_daemon_conf(master) == {}


def test_another_workers_python_keeps_sparks_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3-elsewhere")
    assert worker_daemon_conf("local[2]") == {}


def test_one_zip_of_both_packages_moves_once(tmp_path: Path) -> None:
    both = tmp_path / "both.zip"
    with zipfile.ZipFile(both, "w") as z:
        for package in ("pyspark", "py4j"):
            z.writestr(f"{package}/version.py", (Path(SITE) / package / "version.py").read_bytes())
    assert prefer_installed([str(both), SITE]) == [SITE, str(both)]
