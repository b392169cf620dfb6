"""Outputs as coreutils treat them (issue #25, lbparse/outputs.py): a device or a
FIFO written in place, never renamed over; a symbolic link, a directory or an
input refused, before any input is read; another user's link in a sticky
shared directory never written through; a regular file replaced whole.

The devices are real (mknod in the test's directory), the FIFOs real, the
other user real (useradd, as root), and every command a real process.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from support.cli import LBPARSE
from support.system import throwaway_user

from lbparse import outputs

ROOT_ONLY = pytest.mark.skipif(os.getuid() != 0, reason="mknod needs root")


def sample() -> str:
    return str(resources.files("lbparse.examples").joinpath("sample.pcap"))


def report(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LBPARSE, "report", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def null_device(tmp_path: Path) -> Path:
    """A character device 1,3 (what /dev/null is) made in the test's directory."""
    dev = tmp_path / "null"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return dev


@pytest.fixture
def silent_fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO nobody writes: a command that opens it to read waits for ever, so a
    command that returns at once has not read it."""
    fifo = tmp_path / "silent.fifo"
    os.mkfifo(fifo)
    yield fifo


def one_line(err: str, *words: str) -> None:
    assert err.count("\n") == 1 and err.startswith("lbparse report: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in err, (w, err)


@pytest.mark.slow
@ROOT_ONLY
def test_a_device_stays_a_device_and_the_json_goes_to_stdout(null_device: Path) -> None:
    """`report CAP -o DEVICE --json -`: the old code renamed a 1 MB page over
    the device (as root, /dev/null became a file for the whole machine)."""
    res = report(sample(), "-o", str(null_device), "--json", "-", "-q")
    assert res.returncode == 0, res.stderr
    st = null_device.lstat()
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert json.loads(res.stdout)["totals"]["messages"] == 196
    assert os.listdir(null_device.parent) == ["null"]  # no temporary file left beside it


@pytest.mark.slow
def test_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    res = report(sample(), "-o", str(fifo), "-q")
    reader.join(timeout=60)
    assert res.returncode == 0, res.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert got and b"vegaEmbed" in got[0]


@pytest.mark.slow
def test_a_link_to_a_file_is_refused_before_any_input_is_read(
    tmp_path: Path, silent_fifo: Path
) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("mine")
    link = tmp_path / "report.html"
    link.symlink_to(target)
    res = report(str(silent_fifo), "-o", str(link), timeout=60)
    assert res.returncode == 2
    one_line(res.stderr, "symbolic link", str(target))
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "mine"


@pytest.mark.slow
def test_a_link_to_a_device_is_followed_in_place(tmp_path: Path) -> None:
    """/dev/stdout and /dev/null given through a link: written in place."""
    link = tmp_path / "out"
    link.symlink_to("/dev/null")
    res = report(sample(), "-o", str(link), "-q")
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    res = subprocess.run(
        [*LBPARSE, "report", sample(), "-q", "-o", "/dev/stdout"], capture_output=True, timeout=120
    )
    assert res.returncode == 0 and b"vegaEmbed" in res.stdout


@pytest.mark.slow
def test_an_input_given_as_output_is_refused(tmp_path: Path) -> None:
    cap = tmp_path / "in.pcap"
    cap.write_bytes(Path(sample()).read_bytes())
    before = cap.read_bytes()
    for out in (str(cap), str(tmp_path / "." / "in.pcap")):
        res = report(str(cap), "-o", out)
        assert res.returncode == 2
        one_line(res.stderr, "is the input")
        res = report(str(cap), "--json", out)
        assert res.returncode == 2
    hard = tmp_path / "hard.pcap"
    os.link(cap, hard)  # another name, the same file
    res = report(str(cap), "-o", str(hard))
    assert res.returncode == 2
    one_line(res.stderr, "is the input")
    assert cap.read_bytes() == before


@pytest.mark.slow
def test_a_directory_is_refused_at_once(tmp_path: Path, silent_fifo: Path) -> None:
    """The old code read the inputs for 5.5 s, then failed with a raw [Errno 21]."""
    res = report(str(silent_fifo), "-o", str(tmp_path), timeout=60)
    assert res.returncode == 2
    one_line(res.stderr, "is a directory")
    res = report(str(silent_fifo), "--json", str(tmp_path / "nosuchdir" / "x.json"), timeout=60)
    assert res.returncode == 2
    one_line(res.stderr, "no such directory")
    res = report(str(silent_fifo), "-o", "-", "--json", "-", timeout=60)
    assert res.returncode == 2
    one_line(res.stderr, "both write to standard output")


@pytest.mark.slow
def test_a_regular_file_is_replaced_whole_keeping_its_permissions(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text("old")
    os.chmod(page, 0o640)
    other = tmp_path / "other-name"
    os.link(page, other)  # replaced by a rename: the other name keeps the old file
    res = report(sample(), "-o", str(page), "-q")
    assert res.returncode == 0, res.stderr
    assert "vegaEmbed" in page.read_text() and other.read_text() == "old"
    assert stat.S_IMODE(page.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["other-name", "report.html"]


@pytest.mark.slow
def test_another_users_link_in_a_sticky_shared_directory_is_not_followed(tmp_path: Path) -> None:
    """A link planted in a shared sticky directory (as /tmp is) by another
    user, to a device: never followed (even where fs.protected_symlinks is 0),
    and never replaced."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    with throwaway_user() as uid:
        if uid is None:
            pytest.skip("needs root to make another user")
        link = shared / "out.html"
        link.symlink_to("/dev/null")
        os.lchown(link, uid, uid)
        res = report(sample(), "-o", str(link))
        assert res.returncode == 2
        one_line(res.stderr, "another user", "not followed")
        assert link.is_symlink() and link.lstat().st_uid == uid


def test_follow_allowed_is_the_kernels_rule(tmp_path: Path) -> None:
    link = tmp_path / "l"
    link.symlink_to("/dev/null")
    assert outputs.follow_allowed(str(link), link.lstat())  # ours
    with throwaway_user() as uid:
        if uid is None:
            pytest.skip("needs root to make another user")
        os.lchown(link, uid, uid)
        assert outputs.follow_allowed(str(link), link.lstat())  # not a sticky directory
        os.chmod(tmp_path, 0o1777)
        assert not outputs.follow_allowed(str(link), link.lstat())
        os.chown(tmp_path, uid, uid)  # the link's owner owns the directory
        assert outputs.follow_allowed(str(link), link.lstat())
        os.chown(tmp_path, 0, 0)
        os.chmod(tmp_path, 0o700)


# --- record: a stream written as it comes --------------------------------------


def _record(url: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LBPARSE, "record", url, "lb.>", "-o", str(out), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _publish(url: str, n: int) -> None:
    import asyncio

    import nats

    async def go() -> None:
        nc = await nats.connect(url)
        for i in range(n):
            await nc.publish(f"lb.r{i}", b"x%d" % i)
        await nc.flush()
        await nc.close()

    asyncio.run(go())


@pytest.mark.slow
def test_record_refuses_a_link_to_a_file_before_connecting(tmp_path: Path) -> None:
    from support.net import free_port

    precious = tmp_path / "precious.jsonl"
    precious.write_text("keep me\n")
    link = tmp_path / "rec.jsonl"
    link.symlink_to(precious)
    res = _record(f"nats://127.0.0.1:{free_port()}", link, "--timeout", "0.5")
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("lbparse record: -o ") and "symbolic link" in res.stderr, (
        res.stderr
    )
    assert "cannot connect" not in res.stderr  # refused before the server was tried
    assert precious.read_text() == "keep me\n" and link.is_symlink()


@pytest.mark.slow
def test_a_record_that_never_started_keeps_the_old_file(tmp_path: Path) -> None:
    from support.net import free_port

    old = tmp_path / "rec.jsonl"
    old.write_text("an earlier recording\n")
    new = tmp_path / "new.jsonl"
    for out in (old, new):
        res = _record(f"nats://127.0.0.1:{free_port()}", out, "--timeout", "0.5")
        assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert old.read_text() == "an earlier recording\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.jsonl"]  # no new, no temp


@pytest.mark.slow
def test_record_replaces_an_old_file_whole_and_writes_a_device_in_place(
    nats_server: str, tmp_path: Path, null_device: Path
) -> None:
    old = tmp_path / "rec.jsonl"
    old.write_text("an earlier recording\n")
    old.chmod(0o640)
    for out in (old, null_device):
        proc = subprocess.Popen(
            [
                *LBPARSE,
                "record",
                nats_server,
                "lb.>",
                "-o",
                str(out),
                "--count",
                "3",
                "--duration",
                "30",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()  # bounded: the process ends by --duration
            assert "listening on" in line, line
            if out == old:  # the old file stays whole until the recording ends
                assert old.read_text() == "an earlier recording\n"
            _publish(nats_server, 3)
            _, err = proc.communicate(timeout=40)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
        assert proc.returncode == 0, err
    lines = old.read_text().splitlines()
    assert [json.loads(x)["subject"] for x in lines] == ["lb.r0", "lb.r1", "lb.r2"]
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    assert stat.S_ISCHR(null_device.stat().st_mode)  # still a device
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left
