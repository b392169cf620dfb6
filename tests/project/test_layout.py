"""The tests tree mirrors lbparse's: one folder for each wing of lbparse/
(tests/capture tests lbparse/capture, ...), and a few folders of the house,
each said here. A test file flat in tests/, or in a folder that is neither,
is a test nobody will look for where it is."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import lbparse

TESTS = Path(__file__).resolve().parents[1]
PACKAGE = Path(lbparse.__file__).resolve().parent

# Folders of tests/ that are not a wing of lbparse/, and what each holds.
HOUSE = {
    "base": "lbparse's top-level modules (errors, digits, outputs, scratch, ...)",
    "project": "the house: the manual, the install, import contracts, conventions, fuzz targets",
    "support": "the `support` package the tests import, and its own checks",
    "data": "the reference vectors and the fuzz campaigns' finds (no test file)",
    "langs": "the other languages' conformance drivers (no test file)",
}
# Test files flat in tests/ (none: each has its folder).
FLAT: set[str] = set()
# Packages of lbparse/ that are not a wing: package data, read by base's tests.
NOT_WINGS = {"examples"}


def wings() -> set[str]:
    return {
        d.name
        for d in PACKAGE.iterdir()
        if (d / "__init__.py").is_file() and not d.name.startswith("_")
    } - NOT_WINGS


def test_no_test_file_is_flat_in_tests() -> None:
    flat = {p.name for p in TESTS.glob("test_*.py")} - FLAT
    assert not flat, f"put each in the folder of the wing it tests (or tests/project): {flat}"


def test_every_folder_of_tests_is_a_wing_or_the_houses() -> None:
    folders = {d.name for d in TESTS.iterdir() if d.is_dir() and not d.name.startswith((".", "__"))}
    assert folders - wings() - set(HOUSE) == set()


def test_every_wing_has_its_folder_of_tests() -> None:
    missing = {w for w in wings() if not any((TESTS / w).glob("test_*.py"))}
    assert not missing, f"wings of lbparse/ without tests/WING: {missing}"


def test_the_houses_data_folders_hold_no_test() -> None:
    for name in ("data", "langs"):
        assert not list((TESTS / name).rglob("test_*.py")), name


def test_no_two_test_files_share_a_name() -> None:
    """The test folders are not packages (pytest's rootdir-relative `prepend`
    import): two files of one name in two folders fail the collection with
    "import file mismatch", far from the cause."""
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if "langs" not in p.parts)
    assert [n for n, k in names.items() if k > 1] == []
