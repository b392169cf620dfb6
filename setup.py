"""The hot paths compiled to C, when they can be.

lbparse/capture's packet loop, TCP reassembly, NATS framing, pcap reading and
records are plain, type-annotated Python; mypyc compiles those same files into
extension modules that run them about 2.5x faster (bench/bench_capture.py).
Compiling is optional: without a C compiler, or with
LBPARSE_PURE_PYTHON=1, or if mypyc refuses the code, the package installs
as pure Python and behaves the same (tests/capture/test_compiled.py holds the two
equal).

The pipeline's per-byte loops (batch CRC-32C, the protobuf wire scan) are a
small C module, lbparse/columnar/_kernels.c, built the same optional way;
without it crc.py and wirescan.py run their Python versions
(tests/columnar/test_kernels.py holds the two equal). The whole capture loop, from
pcap/pcapng records to the columns of Arrow record batches, is
lbparse/capture/_native.c, also optional: without it the pipeline reads
captures with the Python reader (tests/capture/test_native_capture.py holds the two
equal, row for row); so is lbparse/columnar/_structs.c, protobuf straight
into Arrow struct columns (tests/columnar/test_native_decode.py). The segment
reader's entry loop is lbparse/storage/_scan.c, the same way
(tests/storage/test_storage_native.py), and so is the Raft transport's RPC
reader, lbparse/raft/_transport.c (tests/raft/test_transport_native.py).
Everything else about the package is declared in pyproject.toml.

The wheel also carries the spec and the Kaitai compiler's npm manifest as
package data (lbparse/_data, see BuildPy), so that an installed
`lbparse generate` needs no checkout.
"""

import glob
import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

COMPILED = [
    "lbparse/capture/nats.py",
    "lbparse/capture/tcp.py",
    "lbparse/capture/pcap.py",
    "lbparse/capture/reader.py",
    "lbparse/capture/records.py",
]
# The C modules' shared parts (CRC-32C, the varint) are written once, as
# headers in lbparse/_c (the sdist carries them: MANIFEST.in).
C_HEADERS = [
    "lbparse/_c/lb_arrow.h",
    "lbparse/_c/lb_be.h",
    "lbparse/_c/lb_crc.h",
    "lbparse/_c/lb_gbuf.h",
    "lbparse/_c/lb_msgpack.h",
    "lbparse/_c/lb_varint.h",
]


def _native(name: str, source: str) -> Extension:
    return Extension(
        name,
        [source],
        include_dirs=["lbparse/_c"],
        depends=C_HEADERS,
        extra_compile_args=["-O3"],
        optional=True,
    )


NATIVE = [
    _native("lbparse.columnar._kernels", "lbparse/columnar/_kernels.c"),
    _native("lbparse.capture._native", "lbparse/capture/_native.c"),
    _native("lbparse.columnar._structs", "lbparse/columnar/_structs.c"),
    _native("lbparse.storage._scan", "lbparse/storage/_scan.c"),
    _native("lbparse.raft._transport", "lbparse/raft/_transport.c"),
]


def ext_modules() -> list:
    if os.environ.get("LBPARSE_PURE_PYTHON"):
        return []
    return mypyc_modules() + NATIVE


def mypyc_modules() -> list:
    try:
        from mypyc.build import mypycify

        # Type-check only these files; what they import is taken as declared.
        exts = mypycify(
            ["--ignore-missing-imports", "--follow-imports=silent", *COMPILED], opt_level="3"
        )
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error
        print(f"lbparse: not compiling the capture modules ({exc!r}); pure Python", file=sys.stderr)
        remove_stale_builds()
        return []
    for ext in exts:
        ext.optional = True  # a failed C build leaves the pure Python modules
    return exts


def remove_stale_builds() -> None:
    """Compiled modules an earlier build left beside the sources (an editable
    install builds in place) would be imported instead of the .py files this
    build did not compile: remove them."""
    here = os.path.dirname(os.path.abspath(__file__))
    stale = glob.glob(os.path.join(here, "*__mypyc.*"))
    for path in COMPILED:
        stale += glob.glob(os.path.join(here, path[:-3] + ".*.so"))
        stale += glob.glob(os.path.join(here, path[:-3] + ".*.pyd"))
    for f in stale:
        print(
            f"lbparse: removing {os.path.relpath(f, here)}, left by an earlier build",
            file=sys.stderr,
        )
        os.remove(f)


# Package data copied from the checkout (lbparse/resources.py finds it):
# source folder or file -> path under lbparse/_data.
PACKAGE_DATA = [
    ("spec", "spec"),
    *(
        (f"tools/{name}", f"tools/{name}")
        for name in ("ksc.js", "package.json", "package-lock.json")
    ),
]


class BuildPy(build_py):
    """build_py, plus spec/ and the Kaitai compiler's manifest in lbparse/_data.

    An editable install reads spec/ and tools/ where they are (the checkout
    stays the one copy), so it gets nothing here."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        here = os.path.dirname(os.path.abspath(__file__))
        data = os.path.join(self.build_lib, "lbparse", "_data")
        for src, dst in PACKAGE_DATA:
            src, dst = os.path.join(here, src), os.path.join(data, dst)
            if not os.path.exists(src):  # an sdist made without MANIFEST.in
                raise SystemExit(f"lbparse: {src} is missing: the wheel would not generate code")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.isdir(src):
                shutil.copytree(
                    src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                shutil.copyfile(src, dst)


class BuildExt(build_ext):
    """build_ext with the extensions compiled side by side, one a core (unless
    --parallel says otherwise): mypyc's and the four C modules are
    independent (`python setup.py build_ext` here: 26 s one after the other,
    20-21 s side by side)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1


setup(ext_modules=ext_modules(), cmdclass={"build_py": BuildPy, "build_ext": BuildExt})
