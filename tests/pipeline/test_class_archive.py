"""Spark's classes archived by the first local run and mapped by the next
(lbparse.pipeline.class_archive): the folder's rules on real files, then a
real `lbparse pipeline` whose JVM writes the archive and a real session
whose JVM maps it (read from its /proc/PID/maps), and one given a damaged
archive, which starts as without it and says nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import crc32c
import pytest
from support.cli import LBPARSE

from lbparse.pipeline import class_archive
from lbparse.pipeline.class_archive import MAGIC, STALE, ClassArchive, archive_key, java_options
from lbparse.pipeline.session import LOCAL_JVM_OPTIONS

SAMPLE = Path(__file__).resolve().parents[2] / "lbparse" / "examples" / "sample.pcap"


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "classes"
    d.mkdir(mode=0o700)
    return d


def test_the_first_start_writes_the_archive_at_exit_and_the_next_waits(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    first = ClassArchive(d, "k1").options()
    partial = d / f"spark-k1.{os.getpid()}.partial"
    assert first == f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off"
    assert (d / f"spark-k1.{os.getpid()}.writing").is_file()
    # Another start meanwhile runs without: one JVM writes a key's archive.
    assert ClassArchive(d, "k1").options() == ""
    # Another key's start is not held back by it.
    assert "ArchiveClassesAtExit" in ClassArchive(d, "k2").options()


def _named(data: bytes) -> str:
    """SIZE.CRC of a whole archive's name."""
    return f"{len(data)}.{crc32c.crc32c(data):08x}"


def test_a_whole_partial_file_is_renamed_into_place_and_mapped(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    data = MAGIC + b"\1" * 4096
    (d / "spark-k1.4242.partial").write_bytes(data)
    (d / "spark-k1.4242.writing").touch()
    got = ClassArchive(d, "k1").options()
    archive = d / f"spark-k1.{_named(data)}.jsa"
    assert got == f"-XX:SharedArchiveFile={archive} -Xlog:cds*=off"
    assert sorted(p.name for p in d.iterdir()) == [archive.name]
    assert archive.read_bytes() == data
    assert ClassArchive(d, "k1").whole() == archive


@pytest.mark.parametrize("damage", ["changed", "cut short", "grown", "misnamed"])
def test_an_archive_damaged_after_it_was_whole_is_removed_not_mapped(
    tmp_path: Path, damage: str
) -> None:
    """The JDK maps an archive whose header is whole and crashes on what is
    behind it: only the bytes its JVM wrote, by size and CRC, are given."""
    d = _folder(tmp_path)
    data = MAGIC + bytes(range(256)) * 16
    archive = d / f"spark-k1.{_named(data)}.jsa"
    archive.write_bytes(
        {
            "changed": data[:100] + b"\xa5" + data[101:],
            "cut short": data[:-1],
            "grown": data + b"\0",
            "misnamed": data,
        }[damage]
    )
    if damage == "misnamed":
        archive.rename(d / "spark-k1.jsa")
    got = ClassArchive(d, "k1").options()
    assert "SharedArchiveFile" not in got and "ArchiveClassesAtExit" in got
    assert not list(d.glob("*.jsa"))


def test_a_partial_file_cut_short_is_never_mapped(tmp_path: Path) -> None:
    """A JVM killed while writing leaves a file whose header (written last) is
    zeros: while young it is a write under way; once STALE it is removed and
    the next start writes the archive again."""
    d = _folder(tmp_path)
    cut = d / "spark-k1.4242.partial"
    cut.write_bytes(bytes(4096))
    assert ClassArchive(d, "k1").options() == ""
    assert cut.exists()
    old = time.time() - STALE - 60
    os.utime(cut, (old, old))
    got = ClassArchive(d, "k1").options()
    assert "SharedArchiveFile" not in got and "ArchiveClassesAtExit" in got
    assert not cut.exists()


def test_archives_beyond_keep_are_removed_the_last_used_kept(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    now = time.time()
    for age, key in ((300, "a"), (200, "b"), (100, "c")):
        f = d / f"spark-{key}.{_named(MAGIC)}.jsa"
        f.write_bytes(MAGIC)
        os.utime(f, (now - age, now - age))
    # "a" is the oldest, but this start uses it: "b" goes instead.
    assert f"spark-a.{_named(MAGIC)}.jsa" in ClassArchive(d, "a").options()
    assert class_archive.KEEP == 2
    assert sorted(p.name.split(".")[0] for p in d.iterdir()) == ["spark-a", "spark-c"]


def test_the_users_own_archive_options_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(class_archive.ENV, str(_folder(tmp_path)))
    for var in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"):
        monkeypatch.delenv(var, raising=False)
    pytest.importorskip("pyspark")
    if class_archive.java_binary() is None:
        pytest.skip("needs java")
    assert "ArchiveClassesAtExit" in java_options(LOCAL_JVM_OPTIONS)
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xmx1g -XX:SharedArchiveFile=/theirs.jsa")
    assert java_options(LOCAL_JVM_OPTIONS) == ""
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    monkeypatch.setenv(class_archive.ENV, "off")
    assert java_options(LOCAL_JVM_OPTIONS) == ""


def test_a_folder_others_can_write_to_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(class_archive.ENV, str(shared))
    assert class_archive.folder() is None
    monkeypatch.setenv(class_archive.ENV, str(tmp_path / "with space"))
    assert class_archive.folder() is None  # Spark splits JVM options at whitespace
    monkeypatch.setenv(class_archive.ENV, str(tmp_path / "mine"))
    assert class_archive.folder() == tmp_path / "mine"
    assert (tmp_path / "mine").stat().st_mode & 0o777 == 0o700


def test_a_user_without_a_home_directory_starts_without_an_archive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A container's user: no passwd entry, no HOME, no XDG_CACHE_HOME, where
    Path.home() raises RuntimeError. Spark must start all the same, without
    an archive (not a RuntimeError out of spark_session)."""
    for var in ("XDG_CACHE_HOME", "LBPARSE_CACHE_DIR", class_archive.ENV, "SPARK_SUBMIT_OPTS"):
        monkeypatch.delenv(var, raising=False)

    def no_home(cls: type[Path]) -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", classmethod(no_home))
    assert class_archive.folder() is None
    assert java_options(LOCAL_JVM_OPTIONS) == ""


def test_the_folder_written_to_is_read_from_the_options(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    writing = ClassArchive(d, "k1").options()
    assert class_archive.writing_to(f"-Xa {writing} -Xb") == d
    (d / f"spark-k1.{os.getpid()}.partial").write_bytes(MAGIC)
    assert class_archive.writing_to(ClassArchive(d, "k1").options()) is None
    assert class_archive.writing_to("") is None


def test_the_key_changes_with_the_java_the_jars_and_the_options(tmp_path: Path) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_bytes(b"java")
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core.jar").write_bytes(b"1")
    key = archive_key(java, home, "-Xa")
    assert key == archive_key(java, home, "-Xa")
    assert key != archive_key(java, home, "-Xb")
    (home / "jars" / "extra.jar").write_bytes(b"2")
    with_jar = archive_key(java, home, "-Xa")
    assert with_jar != key
    java.write_bytes(b"java 2")
    assert archive_key(java, home, "-Xa") != with_jar


def _jvms_writing(folder: Path) -> list[int]:
    """The JVMs whose command line writes an archive into `folder`."""
    found = []
    needle = f"-XX:ArchiveClassesAtExit={folder}".encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if needle in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


_MAPPED = """\
import sys
from lbparse.pipeline.session import spark_session
s = spark_session("local[1]", conf={"spark.ui.enabled": "false"})
assert s.range(100).count() == 100
pid = s._jvm.java.lang.ProcessHandle.current().pid()
with open(f"/proc/{pid}/maps") as f:
    print("MAPPED", *sorted({ln.split()[-1] for ln in f if sys.argv[1] in ln}))
s.stop()
"""


def _wait_for_the_archiving_jvm(folder: Path) -> None:
    """The JVM writes the archive as it exits, after its driver's process has
    ended: wait for it (bounded), kill it if it outlives that."""
    deadline = time.monotonic() + 240
    while _jvms_writing(folder) and time.monotonic() < deadline:  # bounded: 240 s
        time.sleep(0.5)
    left = _jvms_writing(folder)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "the archiving JVM was still running after 240 s"


@pytest.mark.slow
def test_a_pipeline_run_archives_the_classes_the_next_jvm_maps(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    folder = tmp_path / "classes"
    env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    env[class_archive.ENV] = str(folder)

    def ran(*command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    def mapped() -> str:
        run = ran(sys.executable, "-P", "-c", _MAPPED, str(folder))
        assert "cds" not in run.stdout + run.stderr, run.stdout + run.stderr[-2000:]
        return run.stdout.strip()

    run = ran(
        *LBPARSE, "pipeline", "--test-conf", "--master", "local[1]", str(SAMPLE),
        "-o", str(tmp_path / "out"),
    )  # fmt: skip
    for text in (run.stdout, run.stderr):  # the JVM's archiving says nothing
        assert "cds" not in text and "[warning]" not in text, text[-2000:]
    # lbparse says it, once, and where
    said = [ln for ln in run.stderr.splitlines() if "archived" in ln]
    assert said == [
        "lbparse pipeline: Spark's classes are archived as this run's JVM exits, for later "
        f"local runs to start sooner (~150 MB in {folder}; LBPARSE_SPARK_CLASSES=off turns "
        "this off)"
    ], run.stderr
    _wait_for_the_archiving_jvm(folder)
    partials = list(folder.glob("spark-*.partial"))
    assert len(partials) == 1 and partials[0].read_bytes()[:4] == MAGIC, partials

    # The next JVM: the partial file renamed into place, and mapped.
    said = mapped()
    (archive,) = folder.glob("spark-*.jsa")
    assert said == f"MAPPED {archive}"
    assert sorted(p.name for p in folder.iterdir()) == [archive.name]

    assert not list(tmp_path.glob("hs_err*")), "a JVM crashed"
    # An archive damaged behind its header (the JDK would crash on it) is not
    # given to the JVM, which is told to write it again as it exits:
    # test_an_archive_damaged_after_it_was_whole_is_removed_not_mapped, on the
    # options the JVM above was started with (a third JVM here, started without
    # the archive and stopped as it wrote, cost 20-40 s of make test).
