"""Outputs checked before any input is read, temporary files never left
behind, a failed write named as the output's (issue #47, class 7;
lbparse/outputs.py).

Every case is a real process. "Before any input is read" is shown, not
timed: the input is standard input held open by the test and never
written to, or a FIFO nobody writes. A command that read it first would
wait for ever (the run's timeout fails the test); one that refuses at once
has not read it. A full disk is a real one (a small tmpfs, mounted as
root), an immutable file a real `chattr +i`, a read-only parent a real
read-only mount; each is undone in a `finally`, and each case skips with
its reason where the machine does not allow it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import pytest
from support.cli import LBPARSE, run_cli
from support.shared import LIFTBRIDGE
from support.system import mounted, silent_fifo  # noqa: F401  (a fixture)

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"  # 2 MB: 7,538 messages, ~3 MB of JSON Lines
needs_short = pytest.mark.skipif(not SHORT.is_file(), reason=f"shared material missing: {SHORT}")
ROOT_ONLY = pytest.mark.skipif(os.getuid() != 0, reason="mount and chattr need root")
QUICK = 30  # seconds: a refusal takes well under one; a command waiting on its input, for ever


def sample() -> str:
    return str(resources.files("lbparse.examples").joinpath("sample.pcap"))


@pytest.fixture
def held_stdin() -> Iterator[int]:
    """Standard input for the command: a pipe the test holds open and never
    writes (a command that reads it waits until the test ends)."""
    r, w = os.pipe()
    try:
        yield r
    finally:
        os.close(r)
        os.close(w)


@contextmanager
def immutable(path: Path) -> Iterator[Path]:
    """`path` with chattr +i for the block; skip where the filesystem has no such flag."""
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"chattr +i not possible here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, timeout=30)


def refused(
    res: subprocess.CompletedProcess[bytes], command: str, *words: str, status: int = 2
) -> str:
    """One line on stderr, `lbparse COMMAND: ...` with `words` in it, and `status`."""
    err = res.stderr.decode()
    assert res.returncode == status, (res.returncode, err)
    assert err.count("\n") == 1 and err.startswith(f"lbparse {command}: "), err
    assert "Traceback" not in err and "Errno" not in err, err
    for w in words:
        assert w in err, (w, err)
    return err


def temp_files(folder: Path) -> list[str]:
    """What a run may have left in `folder`: hidden files and `*.tmp`."""
    return sorted(n for n in os.listdir(folder) if n.startswith(".") or n.endswith(".tmp"))


def lbparse(
    *args: str, stdin: int | None = None, cwd: Path | None = None, timeout: float = QUICK
) -> subprocess.CompletedProcess[bytes]:
    """run_cli with standard input from a descriptor (run_cli's stdin is bytes
    to write, and a pipe it writes is closed: the command would see its end)."""
    return subprocess.run(
        [*LBPARSE, *args], stdin=stdin, capture_output=True, cwd=cwd, timeout=timeout
    )


def capture_out(
    out: str, stdin: int, *more: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return lbparse("capture", "-", "-o", out, *more, stdin=stdin, cwd=cwd)


# --- refused before any input is read -----------------------------------------


@pytest.mark.slow  # command-line runs, a second or more
def test_an_empty_name_is_refused_and_nothing_is_made(tmp_path: Path, held_stdin: int) -> None:
    """The old code read the input, then failed renaming `..<hex>.tmp` (left in
    the working directory) over ''."""
    refused(capture_out("", held_stdin, cwd=tmp_path), "capture", "-o ''", "an empty name")
    assert os.listdir(tmp_path) == []
    res = lbparse("report", "-", "--json", "", stdin=held_stdin, cwd=tmp_path)
    refused(res, "report", "--json ''", "an empty name")
    assert os.listdir(tmp_path) == []


@pytest.mark.slow  # command-line runs, a second or more
def test_a_trailing_slash_or_a_missing_parent_is_refused(tmp_path: Path, held_stdin: int) -> None:
    refused(capture_out(str(tmp_path / "nodir") + "/", held_stdin), "capture", "ends in '/'")
    refused(
        capture_out(str(tmp_path / "nodir" / "x.jsonl"), held_stdin), "capture", "no such directory"
    )
    # `nodir/..` is no way back while nodir is missing: the kernel resolves it as written
    refused(
        capture_out(str(tmp_path / "nodir" / ".." / "x.jsonl"), held_stdin),
        "capture",
        "no such directory",
    )
    res = lbparse("report", "-", "-o", str(tmp_path / "nodir") + "/", stdin=held_stdin)
    refused(res, "report", "ends in '/'")
    assert temp_files(tmp_path) == [] and os.listdir(tmp_path) == []


@pytest.mark.slow  # command-line runs, a second or more
def test_names_past_name_max_or_path_max_are_refused(tmp_path: Path, held_stdin: int) -> None:
    long_part = str(tmp_path / ("n" * 256))
    refused(capture_out(long_part, held_stdin), "capture", "NAME_MAX", "256 bytes")
    deep = str(tmp_path / "/".join(["d" * 200] * 21))  # 4,200 bytes and more
    refused(capture_out(deep, held_stdin), "capture", "PATH_MAX")
    # decode and report take the same check
    res = lbparse("decode", "-", "-o", long_part, stdin=held_stdin)
    refused(res, "decode", "NAME_MAX")
    res = lbparse(
        "report", "-", "--screenshot", long_part, "-o", str(tmp_path / "r.html"), stdin=held_stdin
    )
    refused(res, "report", "--screenshot", "NAME_MAX")
    assert os.listdir(tmp_path) == []


@pytest.mark.slow  # command-line runs, a second or more
def test_a_name_of_245_bytes_is_written_its_temporary_name_cut_to_fit(tmp_path: Path) -> None:
    """The temporary file beside it once took the name plus 22 bytes: past
    NAME_MAX, after the whole input had been read."""
    out = tmp_path / ("r" * 245)
    res = run_cli("capture", sample(), "-o", str(out), timeout=120)
    assert res.returncode == 0, res.stderr
    assert out.stat().st_size > 0
    res = run_cli("report", sample(), "-q", "--json", str(out), timeout=300)
    assert res.returncode == 0, res.stderr
    assert out.read_bytes().startswith(b"{")
    assert os.listdir(tmp_path) == [out.name]


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_a_directory_as_a_file_output_is_refused(tmp_path: Path, held_stdin: int) -> None:
    refused(capture_out(str(tmp_path), held_stdin), "capture", "is a directory")


@pytest.mark.slow  # command-line runs, a second or more
@ROOT_ONLY
def test_an_immutable_file_or_directory_is_refused(tmp_path: Path, held_stdin: int) -> None:
    """The old code read the input, then failed the rename with a raw [Errno 1]
    and left its temporary file."""
    old = tmp_path / "old.jsonl"
    old.write_bytes(b"kept\n")
    with immutable(old):
        refused(capture_out(str(old), held_stdin), "capture", f"-o {old}", "immutable")
        res = lbparse("report", "-", "-o", str(old), stdin=held_stdin)
        refused(res, "report", "immutable")
    assert old.read_bytes() == b"kept\n"
    folder = tmp_path / "frozen"
    folder.mkdir()
    with immutable(folder):
        refused(
            capture_out(str(folder / "new.jsonl"), held_stdin),
            "capture",
            "cannot make a file in",
            "immutable",
        )
        res = run_cli(
            "capture", "--tables", str(folder / "t"), str(tmp_path / "none.pcap"), timeout=QUICK
        )
        refused(res, "capture", "--tables", "immutable")
    assert temp_files(tmp_path) == [] and os.listdir(folder) == []


@pytest.mark.slow  # command-line runs, a second or more
@ROOT_ONLY
def test_a_read_only_mount_is_refused(tmp_path: Path, held_stdin: int, silent_fifo: Path) -> None:
    with mounted(tmp_path / "ro", "size=64k", "ro") as ro:
        refused(capture_out(str(ro / "x.jsonl"), held_stdin), "capture", "Read-only file system")
        res = lbparse("report", "-", "-o", str(ro / "r.html"), stdin=held_stdin)
        refused(res, "report", f"-o {ro / 'r.html'}", "Read-only file system")
        res = run_cli("capture", str(silent_fifo), "--tables", str(ro / "t"), timeout=QUICK)
        refused(res, "capture", f"--tables {ro / 't'}", "Read-only file system")


@pytest.mark.slow  # command-line runs, a second or more
def test_tables_refused_before_the_fifo_is_opened(tmp_path: Path, silent_fifo: Path) -> None:
    for bad, words in (
        (str(tmp_path / "nodir" / "t"), ("no such directory",)),
        (str(tmp_path / ("t" * 300)), ("NAME_MAX",)),
        ("", ("an empty name",)),
    ):
        res = run_cli("capture", str(silent_fifo), "--tables", bad, cwd=tmp_path, timeout=QUICK)
        refused(res, "capture", "--tables", *words)
    assert os.listdir(tmp_path) == [silent_fifo.name]


# --- temporary files removed on every failure path ----------------------------


@pytest.mark.slow  # command-line runs, a second or more
@needs_short
def test_the_output_turned_into_a_directory_mid_run_leaves_no_temporary_file(
    tmp_path: Path,
) -> None:
    """The old code failed the rename with a raw [Errno 21] and left the whole
    output beside it as `.out.<hex>.tmp`."""
    out = tmp_path / "out.jsonl"
    with subprocess.Popen(
        [*LBPARSE, "capture", "-", "-o", str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdin is not None
        for _ in range(300):  # the temporary file is made before any input is read
            if temp_files(tmp_path):
                break
            time.sleep(0.1)
        assert temp_files(tmp_path), "no temporary file seen in 30 s"
        out.mkdir()
        _, err = proc.communicate(SHORT.read_bytes(), timeout=300)
    text = err.decode()
    assert proc.returncode == 2, text
    assert text.count("\n") == 1 and "became a directory after it was checked" in text, text
    assert sorted(os.listdir(tmp_path)) == ["out.jsonl"] and out.is_dir()


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_an_error_after_the_output_was_opened_removes_its_temporary_file(
    tmp_path: Path, held_stdin: int
) -> None:
    res = capture_out(str(tmp_path / "out.jsonl"), held_stdin, "--tables", str(tmp_path / "t"))
    refused(res, "capture", "--tables")
    assert os.listdir(tmp_path) == []


@pytest.mark.slow  # command-line runs, a second or more
@needs_short
def test_interrupted_the_output_holds_what_was_written_and_no_temporary_file(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    with subprocess.Popen(
        [*LBPARSE, "capture", "-", "-o", str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdin is not None
        data = SHORT.read_bytes()
        proc.stdin.write(data[: len(data) // 2])  # half: the run waits for the rest
        proc.stdin.flush()
        for _ in range(300):
            temps = temp_files(tmp_path)
            if temps and os.path.getsize(tmp_path / temps[0]) > 0:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err.decode()
    assert os.listdir(tmp_path) == ["out.jsonl"] and out.stat().st_size > 0


# --- a full disk is the output's problem --------------------------------------


@pytest.mark.slow  # command-line runs, a second or more
@ROOT_ONLY
@needs_short
def test_a_full_disk_is_said_as_the_outputs(tmp_path: Path) -> None:
    """The old capture said `short.pcapng: cannot read: No space left on
    device`, blaming its input, and capture --tables printed pyarrow's
    tracebacks and left its work directory."""
    with mounted(tmp_path / "full", "size=256k") as full:
        res = run_cli("capture", str(SHORT), "-o", str(full / "out.jsonl"), timeout=300)
        refused(res, "capture", f"-o {full / 'out.jsonl'}: cannot write: No space left on device")
        assert os.listdir(full) == []
        with open(full / "redirected.jsonl", "wb") as shell_redirect:  # as `> FILE` does
            res = subprocess.run(
                [*LBPARSE, "capture", str(SHORT)],
                stdout=shell_redirect,
                stderr=subprocess.PIPE,
                timeout=300,
            )
        refused(res, "capture", "standard output: cannot write: No space left on device")
        os.unlink(full / "redirected.jsonl")
        res = run_cli("capture", str(SHORT), "--tables", str(full / "t"), timeout=300)
        refused(res, "capture", f"--tables {full / 't'}: cannot write: No space left on device")
        assert os.listdir(full) == []
        res = run_cli("report", str(SHORT), "-q", "-o", str(full / "r.html"), timeout=300)
        refused(res, "report", f"-o {full / 'r.html'}: cannot write: No space left on device")
        assert os.listdir(full) == []
