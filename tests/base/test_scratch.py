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
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.system import throwaway_user

from lbparse import scratch
from lbparse.pipeline import session

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def other_user() -> Iterator[int | None]:
    """The uid of a throwaway user (root only; None elsewhere: the planted
    file is then ours, which must not make it trusted either)."""
    with throwaway_user() as uid:
        yield uid


def _attacker_config(target: Path) -> str:
    """A log4j2 configuration that appends every INFO line to `target`."""
    return (
        f"rootLogger.level = info\nrootLogger.appenderRef.f.ref = f\n"
        f"appender.f.type = File\nappender.f.name = f\nappender.f.fileName = {target}\n"
        "appender.f.layout.type = PatternLayout\nappender.f.layout.pattern = %m%n\n"
    )


def _plant(tmp: Path, target: Path, uid: int | None) -> Path:
    """The file the old code used, `<tmp>/lbparse-log4j2-<uid>.properties`, planted."""
    planted = tmp / f"lbparse-log4j2-{os.getuid()}.properties"
    planted.write_text(_attacker_config(target))
    if uid is not None:
        os.chown(planted, uid, uid)
        os.chmod(tmp, 0o1777)  # a shared temp directory, as /tmp is
    return planted


def test_the_log4j_file_is_new_private_and_ours(
    tmp_path: Path, other_user: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
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


def test_a_tampered_private_directory_is_replaced_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
def test_spark_never_reads_a_planted_log4j_configuration(
    tmp_path: Path, other_user: int | None
) -> None:
    """A real Spark JVM started by lbparse's session, with the planted file
    at the old path: nothing is logged where the planted file says."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    target = tmp_path / "authorized_keys"
    planted = _plant(tmp_path, target, other_user)
    before = planted.read_bytes()
    code = (
        "from lbparse.pipeline.session import spark_session\n"
        "s = spark_session('local[1]', conf={'spark.ui.enabled': 'false'})\n"
        "s.range(3).count()\n"
        "print(s.sparkContext.getConf().get('spark.driver.extraJavaOptions'))\n"
        "s.stop()\n"
    )
    env = dict(os.environ, TMPDIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    used = out.stdout.strip().rpartition("configurationFile=file:")[2]
    assert used and Path(used) != planted
    assert not target.exists(), (
        f"the JVM logged into the planted target: {target.read_text()[:200]}"
    )
    assert planted.read_bytes() == before
    assert not Path(used).exists(), "the private directory outlived its process"


def test_a_symlinked_private_directory_is_replaced_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory swapped for a link (to a 0700 directory of ours, which
    passes every other check) is no longer the private one."""
    monkeypatch.setattr(scratch, "_dir", None)
    first = scratch.private_dir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    shutil.rmtree(first)
    os.symlink(elsewhere, first)
    try:
        made = Path(scratch.write_private("y.properties", "ours"))
        assert made.parent != Path(first) and not any(elsewhere.iterdir())
        assert not made.parent.is_symlink()
    finally:
        os.unlink(first)


def test_a_link_planted_at_a_scratch_name_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scratch, "_dir", None)
    victim = tmp_path / "authorized_keys"
    victim.write_text("mine\n")
    (Path(scratch.private_dir()) / "z.properties").symlink_to(victim)
    made = Path(scratch.write_private("z.properties", "attacker's line\n"))
    assert victim.read_text() == "mine\n" and made.name == "z-1.properties"
    with scratch.open_private("z.properties") as f:  # the spill file's way
        f.write(b"spill")
    assert victim.read_text() == "mine\n"


def test_the_reports_output_never_goes_through_a_planted_temporary_name(
    tmp_path: Path, other_user: int | None
) -> None:
    """`lbparse report -o /tmp/r.html` wrote `/tmp/r.html.tmp<pid>` with
    open(..., "w") and renamed it: a link planted there was written through
    (here: into a file standing for ~/.ssh/authorized_keys), a file planted
    there became the report (the planter's, to rewrite later)."""
    from lbparse.cli import report_cmd

    victim = tmp_path / "authorized_keys"
    victim.write_text("mine\n")
    out = tmp_path / "r.html"
    link = Path(f"{out}.tmp{os.getpid()}")
    link.symlink_to(victim)
    report_cmd._write_text(str(out), "<html>report</html>\n")
    assert victim.read_text() == "mine\n" and os.readlink(link) == str(victim)
    st = out.lstat()
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()
    assert out.read_text() == "<html>report</html>\n"
    # A file planted at that name (another user's where we run as root).
    link.unlink()
    link.write_text("planted")
    if other_user is not None:
        os.chown(link, other_user, other_user)
    link.chmod(0o666)
    report_cmd._write_text(str(out), "<html>again</html>\n")
    st = out.lstat()
    assert st.st_uid == os.getuid() and st.st_ino != link.lstat().st_ino
    assert out.read_text() == "<html>again</html>\n" and link.read_text() == "planted"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == [], (
        "a temporary file was left behind"
    )


def test_an_output_written_whole_replaces_a_link_rather_than_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    out = tmp_path / "out.json"
    out.symlink_to(victim)
    scratch.replace_file(out, b"{}\n")
    assert victim.read_text() == "mine\n" and not out.is_symlink() and out.read_bytes() == b"{}\n"


def test_a_cache_file_is_used_only_when_only_we_can_have_written_it(
    tmp_path: Path, other_user: int | None
) -> None:
    """The report inlines the cached Vega bundle as script: a cache file
    another user wrote (or could write) is not read."""
    ours = tmp_path / "ours.js"
    scratch.replace_file(ours, "ok()", mode=0o644)
    assert scratch.read_own(ours) == b"ok()"
    opened = tmp_path / "opened.js"
    opened.write_text("evil()")
    opened.chmod(0o666)
    assert scratch.read_own(opened) is None
    link = tmp_path / "link.js"
    link.symlink_to(ours)
    assert scratch.read_own(link) is None
    if other_user is not None:
        theirs = tmp_path / "theirs.js"
        theirs.write_text("evil()")
        theirs.chmod(0o644)
        os.chown(theirs, other_user, other_user)
        assert scratch.read_own(theirs) is None
    fifo = tmp_path / "fifo.js"
    os.mkfifo(fifo)
    assert scratch.read_own(fifo) is None  # and it did not block


@pytest.mark.slow
def test_the_vega_cache_planted_by_someone_else_is_not_inlined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("vl_convert")
    from lbparse.report import bundle

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    bundle.vega_bundle.cache_clear()
    real = bundle.vega_bundle()  # made, and cached on disk
    (cached,) = (tmp_path / "lbparse").iterdir()
    assert stat.S_IMODE(cached.stat().st_mode) & 0o022 == 0
    cached.write_text("alert('planted')")
    cached.chmod(0o666)
    bundle.vega_bundle.cache_clear()
    try:
        assert bundle.vega_bundle() == real
    finally:
        bundle.vega_bundle.cache_clear()


def test_the_demos_report_replaces_a_link_planted_at_its_name(tmp_path: Path) -> None:
    """`lbparse demo --out DIR` opened DIR/report.html for writing: in a
    directory others can write to, a link there was written through."""
    from lbparse.cli.demo_cmd import write_report

    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    out = tmp_path / "shared"
    out.mkdir()
    (out / "report.html").symlink_to(victim)
    path = Path(write_report(str(out)))
    assert victim.read_text() == "mine\n"
    assert not path.is_symlink() and path.read_text().startswith("<!")


def test_a_compiler_cache_another_user_can_change_is_not_run(
    tmp_path: Path, other_user: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lbparse generate` runs ksc.js under Node from the cache folder when
    one of the right name looks ready: one that is not ours alone (planted
    by another user, or open to others) is refused with what to do, never
    run, never installed over."""
    from lbparse import resources

    tools = tmp_path / "tools"
    tools.mkdir()
    for name in resources.KAITAI_FILES:
        shutil.copyfile(resources.tools_dir() / name, tools / name)
    monkeypatch.setattr(resources, "tools_dir", lambda: tools)
    monkeypatch.setattr(resources, "_install", lambda *a: pytest.fail("installed"))
    monkeypatch.setenv("LBPARSE_CACHE_DIR", str(tmp_path / "cache"))
    folder = resources.compiler_folder(tools)
    (folder / "node_modules" / "kaitai-struct-compiler").mkdir(parents=True)
    (folder / "node_modules" / "kaitai-struct-compiler" / "package.json").write_text("{}")
    (folder / "ksc.js").write_text("require('fs').writeFileSync('/tmp/owned', 'x')")
    folder.chmod(0o755)
    assert resources.kaitai_compiler(say=lambda m: None) == folder / "ksc.js"  # ours: used
    for planted in ("world-writable", "another user's", "shared parent"):
        if planted == "world-writable":
            folder.chmod(0o777)
        elif planted == "another user's":
            if other_user is None:
                continue
            folder.chmod(0o755)
            os.chown(folder, other_user, other_user)
        else:
            os.chown(folder, os.getuid(), os.getgid())
            folder.parent.chmod(0o777)
        with pytest.raises(resources.ResourceError, match="not used"):
            resources.kaitai_compiler(say=lambda m: None)
