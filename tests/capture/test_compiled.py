"""The compiled capture modules behave exactly as their Python source.

setup.py compiles lbparse.capture's hot modules with mypyc when it can;
the same .py files are the pure-Python fallback. These tests hold the two
equal: the NATS parser on random streams cut at random places (the pure
module loaded from its source file beside the compiled one), and whole
captures, damaged ones included, read in a subprocess from a copy of the
package without any compiled module. Skipped on a pure-Python install,
where there is nothing to compare (unless LBPARSE_EXPECT_COMPILED is set,
as CI sets it: then a pure install is a failure).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.damage import damaged_captures
from support.reading import read_all
from support.shared import CAPTURES

from lbparse.capture import HOT_MODULES, compiled_modules
from lbparse.capture.nats import NatsParser

ROOT = Path(__file__).resolve().parents[2]
SHARED = CAPTURES
COMPILED = compiled_modules()

needs_compiled = pytest.mark.skipif(
    not COMPILED, reason="pure-Python install (setup.py compiled nothing): nothing to compare"
)


def test_compiled_when_expected() -> None:
    if os.environ.get("LBPARSE_EXPECT_COMPILED"):
        assert COMPILED == list(HOT_MODULES), f"compiled: {COMPILED}"


def test_setup_compiles_the_hot_modules() -> None:
    """setup.py cannot import lbparse at build time; its list must be HOT_MODULES."""
    listed = re.findall(r'"(lbparse/capture/\w+)\.py"', (ROOT / "setup.py").read_text())
    assert [p.replace("/", ".") for p in listed] == list(HOT_MODULES)


def _pure_nats() -> Any:
    spec = importlib.util.spec_from_file_location(
        "lbparse_pure_nats", ROOT / "lbparse" / "capture" / "nats.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_LINES = [
    b"PUB a.b 5\r\nhello\r\n",
    b"PUB  a.b  r.1  3\r\nxyz\r\n",
    b"MSG a.b 7 2\r\nhi\r\n",
    b"MSG a.b 7 _INBOX.x 0\r\n\r\n",
    b"HPUB h 12 14\r\nNATS/1.0\r\n\r\nok\r\n",
    b"HMSG h 1 r 12 12\r\nNATS/1.0\r\n\r\n\r\n",
    b"PING\r\n",
    b"+OK\r\n",
    b"pub x 1\r\nz\r\n",
    b"-ERR 'boom'\r\n",
    b'INFO {"a":1}\r\n',
    b"MSG bad\r\n",
    b"PUB a 3\r\nxyzW\r\n",
    b"garbage\r\n",
    b"PUB a 99999999999\r\n",
    b"HPUB a 9 3\r\n",
    b"\r\n",
]


@pytest.mark.slow
@needs_compiled
@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(_LINES) | st.binary(max_size=12), max_size=20),
    cuts=st.lists(st.integers(0, 400), max_size=8),
    resync=st.booleans(),
    max_frame=st.sampled_from([64 << 20, 4]),
)
def test_nats_parser_compiled_equals_source(
    pieces: list[bytes], cuts: list[int], resync: bool, max_frame: int
) -> None:
    assert "lbparse.capture.nats" in COMPILED
    stream = b"".join(pieces)
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    chunks = [stream[a:b] for a, b in zip(bounds, bounds[1:])]
    pure = _pure_nats().NatsParser(resync=resync, max_frame=max_frame)
    compiled = NatsParser(resync=resync, max_frame=max_frame)
    for chunk in chunks:
        assert _plain(compiled.feed(chunk)) == _plain(pure.feed(chunk))
        assert compiled.busy == pure.busy
    gap: list[Any] = []
    assert compiled.gap(gap) == pure.gap(expected := [])
    assert _plain(gap) == _plain(expected)
    assert compiled.finish() == pure.finish()


def _plain(items: list[Any]) -> list[tuple[Any, ...]]:
    """Parser output as plain tuples: the compiled module's Frame, Control
    and Problem are other classes than the pure module's, so compare fields."""
    out: list[tuple[Any, ...]] = []
    for item in items:
        kind = type(item).__name__
        if kind == "Frame":
            out.append((kind, *item.fields()))
        elif kind == "Control":
            out.append((kind, item.verb, item.text))
        else:
            assert kind == "Problem", kind
            out.append((kind, item.message, item.limit))
    return out


_READ = """
import json, sys
# An editable install may map `lbparse` to the checkout (compiled modules
# and all): drop its finder so that only PYTHONPATH's copy can be found.
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
from lbparse.capture import compiled_modules
from support.reading import read_all
assert not compiled_modules(), compiled_modules()
for path in sys.argv[1:]:
    print(json.dumps(read_all(path)))
"""


@pytest.mark.slow
@needs_compiled
def test_captures_compiled_equal_source(tmp_path: Path) -> None:
    paths = [str(p) for p in sorted(SHARED.glob("*.pcap*"))]
    for fmt in ("pcap", "pcapng"):
        paths += [c.path for c in damaged_captures(tmp_path / fmt, fmt)]
    assert len(paths) > 10
    # A copy of the package with no compiled module in it: the pure source.
    pure = tmp_path / "pure"
    shutil.copytree(
        ROOT / "lbparse", pure / "lbparse", ignore=shutil.ignore_patterns("*.so", "__pycache__")
    )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(pure), str(ROOT / "generated"), *sys.path])
    )
    out = subprocess.run(
        [sys.executable, "-c", _READ, *paths],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    source = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(source) == len(paths)
    for path, expected in zip(paths, source):
        assert read_all(path) == expected, path


def test_dist_zip_carries_source_not_compiled_modules(tmp_path: Path) -> None:
    """A zip on --py-files cannot load extension modules; the .py beside them runs."""
    import zipfile

    from support.tools import load_tool

    build = load_tool("dist").build

    zpath = next(p for p in build(tmp_path) if p.suffix == ".zip")
    names = zipfile.ZipFile(zpath).namelist()
    assert "lbparse/capture/nats.py" in names
    assert not [n for n in names if n.endswith((".so", ".pyd"))]


def _growth(call: Any, times: int = 20_000) -> int:
    """Bytes still held after `times` calls that should each leave nothing."""
    import gc
    import tracemalloc

    call()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(times):
            call()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


IPV6_TCP = bytes([0x60, 0, 0, 0, 0, 20, 6, 64]) + bytes(range(32)) + bytes(12) + b"\x50" + bytes(7)


@pytest.mark.slow  # 45,000 calls under tracemalloc: seconds
def test_the_compiled_reader_does_not_leak_keys() -> None:
    """mypyc 1.13 leaks the left operand of bytes + bytes: the flow key of
    every IPv6 packet (~80 MB a million packets) and of every flow made or
    dropped, and each header block built, stayed in memory for good."""
    from lbparse.capture import reader
    from lbparse.capture.records import build_header_block
    from lbparse.codec.limits import Limits

    assert reader.dissect(229, IPV6_TCP, 0, len(IPV6_TCP)) is not None  # LINKTYPE_IPV6
    assert _growth(lambda: reader.dissect(229, IPV6_TCP, 0, len(IPV6_TCP))) < 64_000
    key = bytes(range(8)) + b"\x10\x00\x5e\xed"
    flows: dict = {}
    limits = Limits()

    def flow() -> None:
        reader._new_flow(flows, key, limits)
        reader._drop_flow(flows, key)

    assert _growth(flow, 5_000) < 64_000
    headers = [("Status", "503"), ("Description", "No Responders"), ("a", "b")]
    assert _growth(lambda: build_header_block(headers)) < 64_000
