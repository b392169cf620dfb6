"""The optional parts of lbparse and the extra that installs each.

`pip install lbparse` brings what decoding, captures, data directories and
the tables need. The rest comes with an extra (pyproject.toml's
[project.optional-dependencies]); this table is the one place that knows
which module comes with which, so a command whose extra is missing says in
one line what fixes it (`missing_extra`, called by lbparse.cli.main).
tests/test_extras.py holds this table equal to pyproject.toml.
"""

from __future__ import annotations

__all__ = ["EXTRAS", "MODULES", "missing_extra"]

# extra -> what it is for
EXTRAS: dict[str, str] = {
    "spark": "lbparse pipeline, demo and the Spark data source",
    "report": "lbparse report",
    "live": "lbparse tap and record (live NATS servers)",
    "generate": "lbparse generate's descriptor sets (protoc)",
}

# top-level module -> (the distribution that brings it, its extra)
MODULES: dict[str, tuple[str, str]] = {
    "pyspark": ("pyspark", "spark"), "py4j": ("pyspark", "spark"),
    "pandas": ("pandas", "spark"),
    "altair": ("altair", "report"), "vl_convert": ("vl-convert-python", "report"),
    "websocket": ("websocket-client", "report"),
    "nats": ("nats-py", "live"), "nkeys": ("nkeys", "live"), "nacl": ("PyNaCl", "live"),
    "grpc_tools": ("grpcio-tools", "generate"), "grpc": ("grpcio-tools", "generate"),
}


def missing_extra(exc: BaseException) -> str | None:
    """The one line that says which `pip install` fixes `exc` (a ModuleNotFoundError
    of an optional module), or None when it is no such error."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    found = MODULES.get(exc.name.split(".")[0])
    if found is None:
        return None
    dist, extra = found
    return (f"{dist} is not installed: it comes with the extra {extra!r} ({EXTRAS[extra]}): "
            f"pip install 'lbparse[{extra}]' (or 'lbparse[all]')")
