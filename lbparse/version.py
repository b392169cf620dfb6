"""lbparse's version: one place, read by the package front, `lbparse --version`,
the report and the build (pyproject.toml)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
