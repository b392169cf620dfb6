"""make sanitize: lbparse's C modules under AddressSanitizer and UndefinedBehaviorSanitizer.

    python tools/sanitize.py [--cc clang|gcc] [--keep] [pytest args...]

Copies the package to build/sanitize/ (without any compiled module, so the
mypyc modules run as their Python source there), compiles every C module
of setup.py's NATIVE list into it with -fsanitize=address,undefined (every
UB check fatal), and runs, with the sanitizer runtime preloaded into
Python: the tests that feed the C modules hostile input (the damaged
captures, hostile bytes and hypothesis-made captures of
tests/capture/test_native_capture.py, the kernels' and the batch decoder's
differential tests), then every seed of the fuzz corpus through the native
fuzz targets (fuzz/harness.py's `native_*` checks, called directly). A
memory error or undefined behaviour aborts with the sanitizer's report;
exit status 0 only when everything ran clean. The same builder makes the
libFuzzer-instrumented modules of `make fuzz` (fuzz/run.py --native).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The C modules setup.py builds (NATIVE there; tests/capture/test_native_capture.py
# holds the two lists equal): module name, source.
MODULES = [
    ("lbparse.columnar._kernels", "lbparse/columnar/_kernels.c"),
    ("lbparse.capture._native", "lbparse/capture/_native.c"),
    ("lbparse.columnar._structs", "lbparse/columnar/_structs.c"),
    ("lbparse.storage._scan", "lbparse/storage/_scan.c"),
    ("lbparse.raft._transport", "lbparse/raft/_transport.c"),
]
SANITIZE = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
    "-O1",
    "-g",
]
# Tests whose inputs reach the C modules, hostile ones above all.
TESTS = [
    "tests/capture/test_native_capture.py",
    "tests/columnar/test_kernels.py",
    "tests/columnar/test_arrow_api.py",
    "tests/columnar/test_native_decode.py",
    "tests/columnar/test_envelope_pass.py",
    "tests/spark/test_decoder.py",
    "tests/spark/test_batch_composition.py",
    "tests/storage/test_storage_native.py",
    "tests/raft/test_transport_native.py",
]
ASAN_OPTIONS = (
    "detect_leaks=0:abort_on_error=1:allocator_may_return_null=1:"
    "handle_abort=1:detect_stack_use_after_return=0"
)
UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1"


def compiler(preferred: str | None = None) -> str:
    for cc in [preferred] if preferred else ["clang", "gcc"]:
        if cc and shutil.which(cc):
            return cc
    sys.exit("sanitize: no C compiler (clang or gcc) found; `make install` installs them")


def runtime(cc: str, name: str = "asan") -> str:
    """The shared sanitizer runtime to preload into Python."""
    lib = f"libclang_rt.{name}-x86_64.so" if "clang" in cc else f"lib{name}.so"
    path = subprocess.run(
        [cc, f"-print-file-name={lib}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not os.path.isabs(path) or not os.path.exists(path):
        sys.exit(f"sanitize: {cc} has no {lib} (its sanitizer runtime package is missing)")
    return path


def build(out: Path, cc: str, flags: list[str]) -> Path:
    """A copy of the package in `out`, its C modules compiled with `flags`,
    side by side (one compiler a core: the modules are independent)."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(
        ROOT / "lbparse",
        out / "lbparse",
        ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"),
    )
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    cmds = [
        [
            cc,
            "-shared",
            "-fPIC",
            *flags,
            f"-I{include}",
            f"-I{ROOT / 'lbparse' / '_c'}",
            str(ROOT / source),
            "-o",
            str(out / (module.replace(".", "/") + suffix)),
            "-lm",
        ]
        for module, source in MODULES
    ]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        done = list(pool.map(lambda cmd: subprocess.run(cmd, capture_output=True, text=True), cmds))
    for (_, source), cmd, proc in zip(MODULES, cmds, done):
        if proc.returncode:
            sys.exit(f"sanitize: compiling {source} failed:\n{' '.join(cmd)}\n{proc.stderr}")
    return out


def environment(out: Path, preload: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LBPARSE_EXPECT_COMPILED", None)  # the mypyc modules are not in the copy
    env.update(
        LD_PRELOAD=preload,
        ASAN_OPTIONS=ASAN_OPTIONS,
        UBSAN_OPTIONS=UBSAN_OPTIONS,
        LBPARSE_SANITIZED=str(out),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=os.pathsep.join([str(out), str(ROOT / "generated"), str(ROOT / "tests")]),
    )
    return env


FUZZ_FLAGS = ["-fsanitize=address,fuzzer-no-link", "-fno-omit-frame-pointer", "-O1", "-g"]


def fuzzer_runtime(out: Path) -> Path:
    """AddressSanitizer and libFuzzer in one shared library to preload (what
    atheris's documentation builds as asan_with_fuzzer.so): atheris then runs
    this libFuzzer, which sees the coverage of the instrumented C modules as
    well as of the Python code."""
    lib = out / "asan_with_fuzzer.so"
    rd = (
        Path(
            subprocess.run(
                ["clang", "-print-resource-dir"], capture_output=True, text=True, check=True
            ).stdout.strip()
        )
        / "lib"
        / "linux"
    )
    asan, fuzzer = rd / "libclang_rt.asan-x86_64.a", rd / "libclang_rt.fuzzer_no_main-x86_64.a"
    for a in (asan, fuzzer):
        if not a.exists():
            sys.exit(f"fuzz: clang has no {a.name} (its runtime package is missing)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["ar", "x", str(asan)], cwd=tmp, check=True)
        # A shared library cannot carry ASan's .preinit_array: preloading does its job.
        objs = sorted(
            str(p) for p in Path(tmp).glob("*.o") if not p.name.startswith("asan_preinit")
        )
        subprocess.run(
            [
                "clang++",
                "-shared",
                "-o",
                str(lib),
                *objs,
                "-Wl,--whole-archive",
                str(fuzzer),
                "-Wl,--no-whole-archive",
                "-lpthread",
                "-ldl",
                "-lrt",
                "-lm",
            ],
            check=True,
        )
    return lib


def fuzz_environment() -> dict[str, str] | None:
    """The environment of the native fuzz targets: the C modules built with
    libFuzzer's coverage and ASan (build/fuzz-native), the runtime preloaded;
    None without clang (the targets then run the normal build, Python
    coverage only)."""
    if not shutil.which("clang") or not shutil.which("clang++"):
        return None
    out = build(ROOT / "build" / "fuzz-native", "clang", FUZZ_FLAGS)
    env = environment(out, str(fuzzer_runtime(out)))
    env["LBPARSE_FUZZ_NATIVE"] = "1"
    env["ASAN_OPTIONS"] = "detect_leaks=0:allocator_may_return_null=1"
    return env


# Every module of MODULES, imported from the sanitized build (not from the
# installed package), with the sanitizer runtime in the process.
_CHECK = """
import importlib, sys, os
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
out = os.environ["LBPARSE_SANITIZED"]
mods = [importlib.import_module(name) for name in sys.argv[1:]]
for m in mods:
    assert m.__file__.startswith(out), f"{m.__name__} from {m.__file__}, not {out}"
maps = open("/proc/self/maps").read()
assert "asan" in maps, "no sanitizer runtime in the process"
print("sanitized modules:", *(m.__file__ for m in mods))
"""


def main() -> int:
    args = sys.argv[1:]
    cc = None
    if args[:1] == ["--cc"]:
        cc, args = args[1], args[2:]
    keep = "--keep" in args
    args = [a for a in args if a != "--keep"]
    cc = compiler(cc)
    out = build(ROOT / "build" / "sanitize", cc, SANITIZE)
    preload = runtime(cc)
    env = environment(out, preload)
    print(f"sanitize: {cc}, {' '.join(SANITIZE)}; runtime {preload}", flush=True)
    steps = [
        [sys.executable, "-P", "-c", _CHECK, *(name for name, _ in MODULES)],
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--capture=sys",  # a sanitizer's report (fd 2) reaches the log when it aborts
            *[t for t in TESTS if (ROOT / t).exists()],
            *args,
        ],
        [sys.executable, "-P", str(ROOT / "fuzz" / "replay.py"), "--native"],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, env=env, cwd=ROOT)
        if proc.returncode:
            print(
                f"sanitize: FAILED (exit {proc.returncode}): {' '.join(cmd[1:3])}", file=sys.stderr
            )
            return 1
    if not keep:
        shutil.rmtree(out, ignore_errors=True)
    print("sanitize: clean (AddressSanitizer, UndefinedBehaviorSanitizer)")
    return 0


if __name__ == "__main__":
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__)
        sys.exit(0)
    sys.exit(main())
