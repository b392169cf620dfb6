"""Numbers read from text are ASCII digits (lbparse.digits), at every place that
reads one: `str.isdigit()` takes '²' and other scripts' digits, which `int()`
then refuses or reads; each such text is now refused in the place's own way
(None, a one-line error), never a raw ValueError naming nothing."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from support.cli import run_cli

from lbparse.codec.flatbuf import _whole
from lbparse.digits import ascii_int
from lbparse.storage.datadir import partition_number, segment_name
from lbparse.storage.segment import base_offset_of

SHAPES = ["\u00b2", "\u0663", "\uff15", "12\u00b2", "-1", "+1", " 1", "1 ", "", "1.0", "1e3"]


@pytest.mark.parametrize("text", SHAPES)
def test_only_ascii_digits_are_numbers(text: str) -> None:
    assert ascii_int(text) is None


def test_ascii_digits_up_to_a_bound() -> None:
    assert ascii_int("0") == 0 and ascii_int("007") == 7
    assert ascii_int("9" * 20) == int("9" * 20) and ascii_int("9" * 21) is None
    assert ascii_int("65535", 65535) == 65535 and ascii_int("65536", 65535) is None


def test_file_and_subject_names_that_look_like_numbers_are_not() -> None:
    from lbparse.report.nodes import partition_of_subject

    assert segment_name("\u00b2" * 20 + ".log") is None
    assert segment_name("0" * 19 + "7.log") == (7, ".log")
    assert partition_number("\u00b2") is None and partition_number("2147483648") is None
    assert base_offset_of("\u0663" * 20 + ".log") is None
    assert partition_of_subject("liftbridge-default.orders.\u00b2.replicate") is None


def test_options_that_look_like_numbers_are_one_line_errors() -> None:
    from lbparse.cli.common import _depth
    from lbparse.pipeline.preflight import check_master
    from lbparse.streams.client import StreamsError, parse_servers

    with pytest.raises(argparse.ArgumentTypeError, match="a depth is 1..100"):
        _depth("\u00b2")
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        check_master("spark://host:\u00b2")
    with pytest.raises(StreamsError, match="is not host:port"):
        parse_servers("127.0.0.1:\u00b2")
    with pytest.raises(ValueError, match="not a whole number"):
        _whole("\u00b2", "offset")
    assert _whole("-12", "offset") == -12 and _whole(12, "offset") == 12


@pytest.mark.slow  # a run of lbparse in a process of its own (make test-fast leaves those out)
def test_a_data_directory_with_such_names_is_read(tmp_path: Path) -> None:
    """A partition folder named '²' and a segment file of 20 '²': not taken for
    numbers (they were: int() then raised, and the run stopped)."""
    part = tmp_path / "streams" / "orders" / "\u00b2"
    part.mkdir(parents=True)
    (part / ("\u00b2" * 20 + ".log")).write_bytes(b"\x00" * 64)
    (part / "replication-offset-checkpoint").write_text("0\n")
    out = run_cli("segments", str(tmp_path))
    assert b"Traceback" not in out.stderr and out.returncode in (0, 1, 2), out.stderr[-2000:]
    assert b"invalid literal" not in out.stderr + out.stdout
    assert len(out.stderr.decode().strip().splitlines()) <= 3
