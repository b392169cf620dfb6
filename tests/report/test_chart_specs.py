"""Every chart of the report is valid Vega-Lite.

lbparse.report.charts makes its specs without Altair's schema validation
(two thirds of a page's rendering, for specs that only this code makes):
this is where they are checked instead, every drawn chart of real pages
against Altair's Vega-Lite schema (check_page in test_report_browser.py
does it for the cluster stories' pages too). The page those charts make
is the page Altair's validating path makes, byte for byte.
"""

from __future__ import annotations

import contextlib
from functools import cache
from importlib import resources
from typing import Any

import altair as alt
import pytest
from altair.utils import schemapi
from altair.utils.schemapi import validate_jsonschema
from altair.vegalite.v6.schema.core import load_schema
from support.shared import LIFTBRIDGE

import lbparse.report.charts as charts
from lbparse.report import build_model, render_html
from lbparse.report.charts import chart_list

pytestmark = pytest.mark.slow  # three real captures' reports, rendered twice: seconds


@cache
def _schema() -> dict[str, Any]:
    return load_schema()


def vega_lite_errors(spec: dict[str, Any]) -> list[str]:
    """What Vega-Lite's JSON schema (Altair's copy) finds wrong with `spec`."""
    try:
        validate_jsonschema(spec, _schema(), rootschema=_schema())
    except Exception as exc:  # jsonschema's ValidationError, or Altair's wrapper of it
        return [str(exc).splitlines()[0]]
    return []


def _models() -> dict[str, dict[str, Any]]:
    captures = {
        "bundled sample": str(resources.files("lbparse.examples").joinpath("sample.pcap")),
        "short": str(LIFTBRIDGE / "samples" / "short.pcapng"),
        "api-short": str(LIFTBRIDGE / "samples" / "api-short.pcapng"),
    }
    return {name: build_model([path]) for name, path in captures.items()}


@pytest.fixture(scope="module")
def models() -> dict[str, dict[str, Any]]:
    if not (LIFTBRIDGE / "samples" / "api-short.pcapng").is_file():
        pytest.skip("shared captures missing")
    return _models()


def test_every_chart_of_real_pages_is_valid_vega_lite(models: dict[str, dict[str, Any]]) -> None:
    drawn = 0
    for name, model in models.items():
        for chart in chart_list(model):
            if chart.spec is not None:
                drawn += 1
                assert vega_lite_errors(chart.spec) == [], (name, chart.id)
    assert drawn >= 30  # the check saw charts (33 on these pages)


def test_the_check_finds_a_wrong_spec(models: dict[str, dict[str, Any]]) -> None:
    spec = next(c.spec for c in chart_list(models["short"]) if c.spec is not None)
    assert vega_lite_errors({**spec, "mark": {"type": "no-such-mark"}})
    assert vega_lite_errors({**spec, "encoding": {"x": {"field": "t", "type": "timely"}}})


def test_the_page_is_the_validating_paths(
    models: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With Altair's validation on (its to_dict default, its debug mode's checks
    as objects are made), the same page."""
    fast = {name: render_html(model) for name, model in models.items()}
    monkeypatch.setattr(charts, "_spec", lambda chart: chart.to_dict())
    monkeypatch.setattr(charts, "debug_mode", lambda on: contextlib.nullcontext())
    with alt.utils.schemapi.debug_mode(True):
        for name, model in models.items():
            assert render_html(model) == fast[name], name


def test_no_encoding_goes_through_altairs_class_table(
    models: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every encoding is given as its channel object: a shorthand string or a
    dict makes Altair build its table of every schema class again (7 ms each:
    78 of them made up half of a page's rendering). Counted, not timed."""
    made = []
    real = schemapi._FromDict.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(schemapi._FromDict, "__init__", counting)
    for model in models.values():
        render_html(model)
    assert made == []
    alt.Chart().mark_point().encode(x="t:T")  # the count sees a shorthand
    assert made
