"""The optional parts of lbparse and the extra that installs each.

`pip install lbparse` brings what decoding, captures, data directories and
the tables need. The rest comes with an extra (pyproject.toml's
[project.optional-dependencies]); this table is the one place that knows
which module comes with which, so a command whose extra is missing says in
one line what fixes it (`missing_extra`, called by lbparse.cli.main).
tests/project/test_extras.py holds this table equal to pyproject.toml.

`need(module)` is the one way a function imports at run time: an import
inside a function hides a circle from the reader, so everything else is
imported at the top, and tests/project/test_import_contracts.py fails on any other
function-local import that is not the standard library's. It takes:

- an optional module (MODULES) in a module that must work without its
  extra: the command line's modules (`lbparse COMMAND --help` imports its
  module, extra or not), lbparse.live.subscriber (tap's and record's options),
  lbparse.codegen.targets (protoc, for `generate`'s descriptor sets only),
  report.browser (websocket, for --screenshot only), pipeline.session and
  .output;
- an lbparse module that needs an extra (NEEDS_EXTRA), from a module that
  does not: the command line's way into the Spark job and the report's page;
- a hard dependency, or an lbparse module that imports one, kept out of
  startup on purpose (LATE): `import lbparse` imports neither pyarrow nor
  numpy (lbparse.columnar.api calls the columnar core late), flatbuffers
  imports numpy, pyarrow.dataset imports pandas where it is installed.

Where a whole wing needs its extra it imports it at the top: the Spark data
source (lbparse.spark), the Spark job (lbparse.pipeline.job and .schema),
the report's page (lbparse.report.render, .charts, .bundle). A missing extra
there is a ModuleNotFoundError too, which lbparse.cli.main turns into
`missing_extra`'s line.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import ClassVar

from lbparse.errors import OperationalError

__all__ = ["EXTRAS", "LATE", "MODULES", "NEEDS_EXTRA", "MissingExtra", "missing_extra", "need"]

# extra -> what it is for
EXTRAS: dict[str, str] = {
    "spark": "lbparse pipeline, demo and the Spark data source",
    "report": "lbparse report",
    "live": "lbparse tap and record (live NATS servers)",
    "generate": "lbparse generate's descriptor sets (protoc)",
    "streams": "reading Liftbridge streams through its gRPC API (lbparse.streams, "
    "format('liftbridge-streams'))",
}

# top-level module -> (the distribution that brings it, its extra)
MODULES: dict[str, tuple[str, str]] = {
    "pyspark": ("pyspark", "spark"),
    "py4j": ("pyspark", "spark"),
    "pandas": ("pandas", "spark"),
    "vl_convert": ("vl-convert-python", "report"),
    "websocket": ("websocket-client", "report"),
    "nats": ("nats-py", "live"),
    "nkeys": ("nkeys", "live"),
    "nacl": ("PyNaCl", "live"),
    "grpc_tools": ("grpcio-tools", "generate"),
    "grpc": ("grpcio", "streams"),
}


# lbparse modules that import an extra's module at their top -> the extra
NEEDS_EXTRA: dict[str, str] = {
    "lbparse.pipeline.job": "spark",
    "lbparse.report.render": "report",
    "lbparse.streams.client": "streams",
    "lbparse.spark.streams_source": "streams",
}

# Imported late on purpose (see the docstring): pyarrow and numpy, and the
# columnar core's modules that lbparse.columnar.api (in `import lbparse`) calls.
LATE: frozenset[str] = frozenset(
    {
        "pyarrow",
        "numpy",
        "flatbuffers",
        "lbparse.columnar.decode_arrow",
        "lbparse.columnar.grpctables",
        "lbparse.columnar.ordered",
        "lbparse.columnar.schema",
        "lbparse.columnar.sources",
        "lbparse.columnar.tables",
        "lbparse.cli.tables_out",  # `capture --tables`: the command's other runs need no pyarrow
        # read_capture_tables' hint of on_info (Notice): 28 ms import lbparse spares
        "lbparse.capture",
    }
)


class MissingExtra(OperationalError, ModuleNotFoundError):
    """An optional module is not installed; the message is missing_extra's line.

    Still a ModuleNotFoundError (`name` the module), as callers catch it.

    Args:
        kind: "missing_extra".
        message: The line saying which extra installs the module.
        name: The module that is missing.
    """

    KINDS: ClassVar[frozenset[str]] = frozenset({"missing_extra"})

    def __init__(self, kind: str, message: str, *, name: str | None = None) -> None:
        super().__init__(kind, message)
        self.name = name


def need(module: str) -> ModuleType:
    """Import `module` now, or say which extra installs it.

    `module` is an optional module, an lbparse module that needs one
    (NEEDS_EXTRA) or a module kept out of startup (LATE).

    Args:
        module: The dotted module name, as `importlib.import_module` takes it.

    Returns:
        The imported module.

    Raises:
        MissingExtra: An optional module is not installed; the message names
            the `pip install` that fixes it. A module missing that no extra
            installs is a broken install and raises its ModuleNotFoundError.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        line = missing_extra(exc)
        if line is None:
            raise  # not an optional module: a broken install, its traceback says which
        raise MissingExtra("missing_extra", line, name=exc.name) from None


def missing_extra(exc: BaseException) -> str | None:
    """Say which `pip install` fixes a missing optional module.

    Args:
        exc: Any exception; only a ModuleNotFoundError of an optional module
            (MODULES) has an answer.

    Returns:
        The one line naming the package, its extra and the `pip install`, or
        None when `exc` is no such error.
    """
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    found = MODULES.get(exc.name.split(".")[0])
    if found is None:
        return None
    dist, extra = found
    return (
        f"{dist} is not installed: it comes with the extra {extra!r} ({EXTRAS[extra]}): "
        f"pip install 'lbparse[{extra}]' (or 'lbparse[all]')"
    )
