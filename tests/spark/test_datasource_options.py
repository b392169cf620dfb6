"""The data source's options checked on the driver, each error one line naming
the option, before any task runs (issue #27); paths as Spark gives them: a JSON
list, a JSON string or a plain path, `file:` URIs as plain paths, globs expanded."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import lbparse.spark


@pytest.fixture
def liftbridge(spark: Any) -> Any:
    lbparse.spark.register(spark)
    return spark.read.format("liftbridge")


def _message(exc: BaseException) -> str:
    """The InputError's line as Spark passes it on (inside its own exception,
    after the Python worker's traceback; a traceback names the class with its
    module: `lbparse.errors.InputError: ...`)."""
    lines = [
        line.strip()
        for line in str(exc).splitlines()
        if line.strip().startswith("lbparse.errors.InputError: ")
    ]
    assert lines, str(exc)[:3000]
    return lines[-1]


@pytest.mark.parametrize(
    "options, wanted",
    [
        (
            {"batchRows": "100000000000000000000", "path": "{capture}"},
            "option batchRows: '100000000000000000000' is not a whole number from 1 to 2147483647",
        ),
        ({"paths": "[1,2]"}, "option paths: 1 in '[1,2]' is not a path"),
        ({"paths": '["/x.pcap"'}, "option paths: '[\"/x.pcap\"' is not JSON"),
        ({"paths": "123"}, "no such input: 123"),
        ({"path": "hdfs://nn/x.pcap"}, "hdfs://nn/x.pcap: not a local file"),
    ],
)
def test_bad_options_are_one_line_when_the_dataframe_is_made(
    liftbridge: Any, inputs: dict[str, Path], options: dict[str, str], wanted: str
) -> None:
    options = {k: v.replace("{capture}", str(inputs["capture.pcap"])) for k, v in options.items()}
    with pytest.raises(Exception) as caught:
        liftbridge.options(**options).load().schema  # noqa: B018  (made, not run)
    assert wanted in _message(caught.value)
    assert "OverflowError" not in str(caught.value) and "TypeError" not in str(caught.value)


def test_a_missing_file_uri_is_refused_as_a_missing_path(liftbridge: Any, tmp_path: Path) -> None:
    missing = tmp_path / "missing.pcap"
    with pytest.raises(Exception) as caught:
        liftbridge.load(missing.as_uri()).schema  # noqa: B018
    assert f"no such input: {missing}" in _message(caught.value)


def test_a_glob_matching_nothing_is_a_missing_input(liftbridge: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception) as caught:
        liftbridge.load(str(tmp_path / "*.pcap")).schema  # noqa: B018
    assert "no such input" in _message(caught.value)


def test_paths_as_spark_gives_them_read_the_same_rows(
    liftbridge: Any, spark: Any, inputs: dict[str, Path], tmp_path: Path
) -> None:
    for name in ("capture.pcap", "gap.pcap", "records.jsonl"):
        shutil.copy(inputs[name], tmp_path / name)
    a, b = str(tmp_path / "capture.pcap"), str(tmp_path / "gap.pcap")

    def sources(df: Any) -> dict[str, int]:
        return {r["source"]: r["count"] for r in df.groupBy("source").count().collect()}

    both = sources(liftbridge.options(layout="v0").load([a, b]))
    assert set(both) == {a, b}
    reader = spark.read.format("liftbridge").options(layout="v0")
    assert sources(reader.option("paths", f'"{a}"').load()) == {a: both[a]}
    reader = spark.read.format("liftbridge").options(layout="v0")
    assert sources(reader.load(Path(a).as_uri())) == {a: both[a]}
    reader = spark.read.format("liftbridge").options(layout="v0")
    assert sources(reader.load(str(tmp_path / "*.pcap"))) == both
    reader = spark.read.format("liftbridge").options(layout="v0")
    assert sources(reader.load(str(tmp_path / "{capture,gap}.p?ap"))) == both


@pytest.mark.parametrize(
    "options, wanted",
    [
        ({"minFileAge": "soon"}, "option minFileAge: 'soon' is not a number of seconds"),
        ({"minFileAge": "-1"}, "option minFileAge: '-1' is not a number of seconds"),
        ({"maxFilesPerTrigger": "99999999999"}, "option maxFilesPerTrigger: '99999999999'"),
    ],
)
def test_bad_stream_options_fail_when_the_stream_is_made(
    spark: Any, inputs: dict[str, Path], tmp_path: Path, options: dict[str, str], wanted: str
) -> None:
    lbparse.spark.register(spark)
    with pytest.raises(Exception) as caught:
        spark.readStream.format("liftbridge").options(**options).load(str(tmp_path))
    assert wanted in _message(caught.value)
