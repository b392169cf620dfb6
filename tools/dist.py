"""`make dist`: what a Spark cluster needs to run the pipeline.

    python tools/dist.py [DIR] [--no-env] [--wheel=WHEEL]     (default: dist)

writes
  DIR/lbparse-env.tar.gz    a packed virtualenv (venv-pack) holding lbparse, built
                            with its compiled modules, and every dependency: what
                            Spark's documentation recommends for shipping a Python
                            environment with compiled code (--archives)
  DIR/lbparse.zip           lbparse and lbparse_generated, for --py-files
  DIR/lbparse_pipeline.py   the application file spark-submit runs
  DIR/requirements.txt      the pinned dependencies executors need with the zip

With the packed environment (the executors run lbparse's compiled
capture loop and C kernels; Spark unpacks the archive in each executor's
working directory under the name after '#'):

  PYSPARK_PYTHON=./environment/bin/python spark-submit --master spark://HOST:7077 \\
      --archives DIR/lbparse-env.tar.gz#environment DIR/lbparse_pipeline.py INPUT... --out OUT

venv-pack does not carry the interpreter itself: the environment's python
is a link to the Python that built it (here: sys.executable's
installation), which must be at the same path on every worker.

With the zip, for clusters that cannot take --archives: the zip holds only
lbparse's own Python (a zip on the Python path cannot load extension
modules, so the executors run the pure-Python fallbacks), and every
executor's Python needs requirements.txt installed (`pip install -r
DIR/requirements.txt`), and PYSPARK_PYTHON must name that Python. Then:

  spark-submit --master spark://HOST:7077 --py-files DIR/lbparse.zip \\
      DIR/lbparse_pipeline.py INPUT... --out OUT
"""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

__all__ = ["ENV_ARCHIVE", "build", "build_env"]

ENV_ARCHIVE = "lbparse-env.tar.gz"

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = '''\
"""spark-submit's application file: `lbparse pipeline` with these arguments."""
import sys

from lbparse.cli import main

sys.exit(main(["pipeline", *sys.argv[1:]]))
'''


def _packages() -> list[tuple[Path, str]]:
    """(directory, name inside the zip) of the packages to ship."""
    import lbparse
    import lbparse_generated

    return [
        (Path(lbparse.__file__).parent, "lbparse"),
        (Path(lbparse_generated.__file__).parent, "lbparse_generated"),
    ]


def _requirements() -> list[str]:
    """lbparse's pinned dependencies and its `spark` extra, as tools/pins.py reads them."""
    pins = runpy.run_path(str(Path(__file__).with_name("pins.py")))
    return list(pins["requirements"](["spark"]))


def build(out: str | os.PathLike[str] = "dist") -> list[Path]:
    """Write the zip, the launcher and requirements.txt to `out`; returns their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    zpath = out / "lbparse.zip"
    # A new file of a random name beside the zip (O_EXCL), not a fixed
    # `lbparse.zip.tmp` that someone sharing the directory could plant.
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".lbparse.zip.", suffix=".tmp")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as z:
        for src, name in _packages():
            for path in sorted(src.rglob("*")):
                # Compiled modules (setup.py) cannot load from a zip, and
                # their .py source beside them is what runs from one.
                if (
                    path.is_file()
                    and "__pycache__" not in path.parts
                    and path.suffix not in (".pyc", ".so", ".pyd")
                ):
                    z.write(path, f"{name}/{path.relative_to(src)}")
    os.replace(tmp, zpath)
    launcher = out / "lbparse_pipeline.py"
    launcher.write_text(LAUNCHER)
    reqs = out / "requirements.txt"
    reqs.write_text(
        "# what every executor's Python needs (pinned as lbparse pins them)\n"
        + "".join(f"{r}\n" for r in _requirements())
    )
    return [zpath, launcher, reqs]


def _env_requirements() -> list[str]:
    """What the executors import besides lbparse's own dependencies: pandas (PySpark's
    Arrow paths import it). PySpark itself is not packed: Spark puts its own
    pyspark.zip on the executors' Python path."""
    return [r for r in _requirements() if not r.startswith("pyspark")]


def _installed(requirements: list[str]) -> list[metadata.Distribution]:
    """The distributions installed here that `requirements` need, with theirs,
    each checked against its pin."""
    from packaging.requirements import Requirement

    found: dict[str, metadata.Distribution] = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # another platform's, or an extra's
        dist = metadata.distribution(req.name)
        if not req.specifier.contains(dist.version, prereleases=True):
            raise SystemExit(
                f"dist: {req.name} {dist.version} is installed here, lbparse pins {req}"
            )
        key = dist.metadata["Name"].lower()
        if key not in found:
            found[key] = dist
            todo += [Requirement(r) for r in dist.requires or ()]
    return list(found.values())


def _copy_installed(requirements: list[str], site: Path) -> None:
    """Put the installed files of `requirements` (_installed) into `site`, a
    site-packages: linked where it can be, copied where not. Files installed
    outside site-packages (scripts) are left out: the executors import only."""
    for dist in _installed(requirements):
        for f in dist.files or ():
            if f.parts[0] == "..":
                continue
            src, dst = Path(str(f.locate())), site / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)


def _wheel_here(out: Path, env: dict[str, str]) -> Path:
    """lbparse's wheel built from this tree with the build tools installed here."""
    wheels = out / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
        env=env,
        cwd=str(out),
    )
    (found,) = wheels.glob("lbparse-*.whl")
    return found


def build_env(
    out: str | os.PathLike[str] = "dist",
    wheel: Path | None = None,
    compress_level: int = 4,
    from_here: bool = False,
) -> Path:
    """A fresh virtualenv with lbparse installed from this tree (compiled modules
    required), packed by venv-pack into out/lbparse-env.tar.gz; returns its path.
    `wheel`: lbparse's wheel already built from this tree (`make wheel`), installed
    instead of building again (the compiled modules take minutes to build).
    `from_here`: no package index: lbparse built with the build tools installed
    here, its dependencies the ones installed here (their pinned versions, or
    an error); what the tests use (network only to 127.0.0.1)."""
    import venv_pack

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "build-env"
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "venv", *(["--without-pip"] * from_here), str(work)], check=True
    )
    python = str(work / "bin" / "python")
    # A build without the C modules is refused: the point of the archive is them.
    env = dict(os.environ, LBPARSE_EXPECT_COMPILED="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)  # the new environment's own packages only
    if from_here:
        site = Path(
            subprocess.run(
                [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                check=True,
                capture_output=True,
                text=True,
                env=env,
            ).stdout.strip()
        )
        _copy_installed(_env_requirements(), site)
        if wheel is None:  # built by this Python: the new environment has no setuptools
            wheel = _wheel_here(out, env)
        # this Python's pip, installing into the new environment (`--python`)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                python,
                "install",
                "-q",
                "--no-index",
                "--no-deps",
                str(wheel),
            ],
            check=True,
            env=env,
            cwd=str(out),
        )
    else:
        subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-cache-dir",
                str(wheel or ROOT),
                *_env_requirements(),
            ],
            check=True,
            env=env,
            cwd=str(out),
        )
    check = subprocess.run(
        [
            python,
            "-c",
            "from lbparse.capture import compiled_modules, HOT_MODULES;"
            "from lbparse.columnar import crc; import sys;"
            "sys.exit(0 if len(compiled_modules()) == len(HOT_MODULES) and crc._native else 1)",
        ],
        env=env,
        cwd=str(out),
    )
    if check.returncode != 0:
        raise SystemExit(
            "dist: lbparse installed without its compiled modules (a C compiler is needed: gcc)"
        )
    archive = out / ENV_ARCHIVE
    venv_pack.pack(
        prefix=str(work),
        output=str(archive),
        force=True,
        verbose=False,
        compress_level=compress_level,
    )
    shutil.rmtree(work, ignore_errors=True)
    return archive


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    out = args[0] if args else "dist"
    paths = build(out)
    wheels = [Path(a.split("=", 1)[1]) for a in argv if a.startswith("--wheel=")]
    if "--no-env" not in argv:
        paths.insert(0, build_env(out, wheel=wheels[-1] if wheels else None))
    for p in paths:
        print(f"{p}  ({p.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
