"""The capture hot path compiled to C with mypyc, when it can be.

lbparse/capture's packet loop, TCP reassembly, NATS framing, pcap reading and
records are plain, type-annotated Python; mypyc compiles those same files into
extension modules that run them about 1.3x faster (bench/bench_capture.py).
Compiling is optional: without a C compiler, or with
LBPARSE_PURE_PYTHON=1, or if mypyc refuses the code, the package installs
as pure Python and behaves the same (tests/test_compiled.py holds the two
equal). Everything else about the package is declared in pyproject.toml.
"""

import os
import sys

from setuptools import setup

COMPILED = ["lbparse/capture/nats.py", "lbparse/capture/tcp.py", "lbparse/capture/pcap.py",
            "lbparse/capture/reader.py", "lbparse/capture/records.py"]


def ext_modules() -> list:
    if os.environ.get("LBPARSE_PURE_PYTHON"):
        return []
    try:
        from mypyc.build import mypycify

        # Type-check only these files; what they import is taken as declared.
        exts = mypycify(["--ignore-missing-imports", "--follow-imports=silent", *COMPILED],
                        opt_level="3")
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error
        print(f"lbparse: not compiling the capture modules ({exc!r}); pure Python",
              file=sys.stderr)
        return []
    for ext in exts:
        ext.optional = True  # a failed C build leaves the pure Python modules
    return exts


setup(ext_modules=ext_modules())
