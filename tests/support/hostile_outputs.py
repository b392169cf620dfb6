"""lbparse.outputs on any name and content (issue #47): the `outputs` fuzz
target's check.

Each execution makes a fresh place, `base/work/`, holding one of each kind
of thing an output may be named (a regular file, a directory, a FIFO, links
to a file, a directory, /dev/null and a file outside work/), writes the
content under a name built of the input (a template: '', a file, a
directory, '../', a name past NAME_MAX or a path past PATH_MAX...; then the
input's own bytes, as argv would decode them, NUL and '/' among them), by
one of the module's two ways (`check_file(...).write`, `StreamedOutput`
committed or discarded), and holds it to what the module promises:

- written: the name is now a regular file holding exactly the content (its
  old permission bits kept), or the FIFO or /dev/null it names got it in
  place; nothing else under base/ changed;
- refused: an OutputError (lbparse's error family), and nothing under base/
  changed;
- either way, no temporary file is left and nothing was written through a
  link to a regular file.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile

from lbparse import outputs
from lbparse.errors import LbparseError
from support.system import read_available

OLD = b"old\n"
TEMPLATES = (
    "",
    "new",
    "file",
    "dir",
    "dir/",
    "link",
    "devlink",
    "fifo",
    "dirlink/",
    "outlink",
    "missing/",
    "../",
    "a" * 300,
    "d/" * 2100,
    "file/",
    "dir/../",
)


def _place() -> tuple[str, str, int]:
    """A fresh base/work/ (the module's doc) and a reader of its FIFO (so that
    a write to it neither blocks nor is lost)."""
    # removed by the execution itself: libFuzzer ends the process without atexit
    base = tempfile.mkdtemp(prefix="lbparse-outputs-fuzz-")
    work = os.path.join(base, "work")
    os.mkdir(work)
    with open(os.path.join(base, "outside"), "wb") as f:
        f.write(OLD)
    with open(os.path.join(work, "file"), "wb") as f:
        f.write(OLD)
    os.chmod(os.path.join(work, "file"), 0o640)
    os.mkdir(os.path.join(work, "dir"))
    os.mkfifo(os.path.join(work, "fifo"))
    os.symlink("file", os.path.join(work, "link"))
    os.symlink("dir", os.path.join(work, "dirlink"))
    os.symlink("/dev/null", os.path.join(work, "devlink"))
    os.symlink("../outside", os.path.join(work, "outlink"))
    reader = os.open(os.path.join(work, "fifo"), os.O_RDONLY | os.O_NONBLOCK)
    return base, work, reader


def _snapshot(base: str) -> dict[str, tuple[object, ...]]:
    """Everything under `base`: each name's kind, permission bits, content
    (a regular file's) or target (a link's)."""
    out: dict[str, tuple[object, ...]] = {}
    for folder, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, base)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    out[rel] = ("file", stat.S_IMODE(st.st_mode), f.read())
            elif stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            else:
                out[rel] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
    return out


def check_outputs(data: bytes) -> None:
    """One output written as `data` says (the module's doc)."""
    if len(data) < 2:
        return
    how, size = data[0], data[1]
    raw_name, content = data[2 : 2 + (size & 127)], data[2 + (size & 127) :]
    name = TEMPLATES[how & 15] + os.fsdecode(raw_name)
    text = bool(how & 128)
    value: bytes | str = content.decode("utf-8", "replace") if text else content
    expected = value.encode("utf-8") if isinstance(value, str) else value
    base, work, reader = _place()
    try:
        path = os.path.join(work, name) if name else ""
        # a name may climb out of work/ ('../'), never out of base/
        if path and not os.path.normpath(path).startswith(base + os.sep):
            return
        inputs = [os.path.join(work, "file")] if size & 128 else []
        before = _snapshot(base)
        committed = True
        try:
            if how & 16:
                out = outputs.StreamedOutput(path, "-o", inputs, grow_new=bool(how & 32))
                f = out.open()
                try:
                    f.write(expected)
                    f.close()
                except BaseException:
                    out.discard()
                    raise
                if how & 64:
                    out.discard()
                    committed = False
                else:
                    out.commit()
            else:
                outputs.check_file(path, "-o", inputs).write(value)
        except LbparseError as exc:
            assert isinstance(exc, outputs.OutputError), repr(exc)
            assert _snapshot(base) == before, f"refused {name!r} ({exc}) but changed the place"
            return
        _written(base, path, expected, before, committed, read_available(reader))
    finally:
        os.close(reader)
        shutil.rmtree(base, ignore_errors=True)


def _written(
    base: str,
    path: str,
    expected: bytes,
    before: dict[str, tuple[object, ...]],
    committed: bool,
    piped: bytes,
) -> None:
    after = _snapshot(base)
    real = os.path.realpath(path)
    fifo = before.get(os.path.relpath(real, base), ("",))[0] == stat.S_IFIFO
    if real == "/dev/null" or fifo:
        assert after == before, f"{path!r}: written in place, yet the place changed"
        if fifo:
            assert piped == expected, (piped, expected)
        return
    assert not piped, path
    if not committed:
        assert after == before, f"{path!r}: discarded, yet the place changed"
        return
    rel = os.path.relpath(real, base)
    assert not os.path.islink(path), f"{path!r}: written through a link"
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed <= {rel}, (path, changed)  # no temporary file left, nothing else touched
    kind, mode, content = after[rel]
    assert kind == "file" and content == expected, (path, content[:40], expected[:40])
    if rel in before:
        assert mode == before[rel][1], (path, oct(mode))  # the old permission bits kept
