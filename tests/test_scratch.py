"""Scratch files another local user cannot plant (issue #19, part 3).

`lbparse pipeline` handed Spark a log4j2 configuration at a predictable
path in the temp directory and reused it if it existed, whoever owned it:
another user could make the victim's JVM log chosen lines to a chosen
file. The tests plant such a file, owned by another user (a throwaway one
made with useradd when running as root), and check it is never used.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from lbparse import scratch
from lbparse.pipeline import session

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def other_user() -> Iterator[int | None]:
    """The uid of a throwaway user (root only; None elsewhere: the planted
    file is then ours, which must not make it trusted either)."""
    if os.getuid() != 0 or shutil.which("useradd") is None:
        yield None
        return
    name = f"lbt{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    name], check=True, capture_output=True, timeout=60)
    try:
        import pwd

        yield pwd.getpwnam(name).pw_uid
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)


def _attacker_config(target: Path) -> str:
    """A log4j2 configuration that appends every INFO line to `target`."""
    return (f"rootLogger.level = info\nrootLogger.appenderRef.f.ref = f\n"
            f"appender.f.type = File\nappender.f.name = f\nappender.f.fileName = {target}\n"
            "appender.f.layout.type = PatternLayout\nappender.f.layout.pattern = %m%n\n")


def _plant(tmp: Path, target: Path, uid: int | None) -> Path:
    """The file the old code used, `<tmp>/lbparse-log4j2-<uid>.properties`, planted."""
    planted = tmp / f"lbparse-log4j2-{os.getuid()}.properties"
    planted.write_text(_attacker_config(target))
    if uid is not None:
        os.chown(planted, uid, uid)
        os.chmod(tmp, 0o1777)  # a shared temp directory, as /tmp is
    return planted


def test_the_log4j_file_is_new_private_and_ours(tmp_path: Path, other_user: int | None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.setattr(scratch, "_dir", None)
    planted = _plant(tmp_path, tmp_path / "owned", other_user)
    path = Path(session._log4j_file())
    assert path != planted and path.read_text() == session._LOG4J
    d = path.parent.lstat()
    assert d.st_uid == os.getuid() and stat.S_IMODE(d.st_mode) == 0o700
    assert stat.S_IMODE(path.lstat().st_mode) == 0o600
    # A second session writes a new file: nothing found on disk is reused.
    assert Path(session._log4j_file()) != path


def test_a_tampered_private_directory_is_replaced_not_used(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scratch, "_dir", None)
    first = scratch.private_dir()
    os.chmod(first, 0o777)  # someone opened it up: it is no longer private
    try:
        second = scratch.private_dir()
        assert second != first and stat.S_IMODE(os.lstat(second).st_mode) == 0o700
    finally:
        os.chmod(first, 0o700)
    # A name taken in the directory is never opened: a new file beside it.
    taken = Path(second) / "x.properties"
    taken.write_text("planted")
    made = scratch.write_private("x.properties", "ours")
    assert taken.read_text() == "planted" and Path(made).read_text() == "ours"


@pytest.mark.slow
def test_spark_never_reads_a_planted_log4j_configuration(tmp_path: Path,
                                                         other_user: int | None) -> None:
    """A real Spark JVM started by lbparse's session, with the planted file
    at the old path: nothing is logged where the planted file says."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    target = tmp_path / "authorized_keys"
    planted = _plant(tmp_path, target, other_user)
    before = planted.read_bytes()
    code = ("from lbparse.pipeline.session import spark_session\n"
            "s = spark_session('local[1]', conf={'spark.ui.enabled': 'false'})\n"
            "s.range(3).count()\n"
            "print(s.sparkContext.getConf().get('spark.driver.extraJavaOptions'))\n"
            "s.stop()\n")
    env = dict(os.environ, TMPDIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    used = out.stdout.strip().rpartition("configurationFile=file:")[2]
    assert used and Path(used) != planted
    assert not target.exists(), f"the JVM logged into the planted target: {target.read_text()[:200]}"
    assert planted.read_bytes() == before
    assert not Path(used).exists(), "the private directory outlived its process"
