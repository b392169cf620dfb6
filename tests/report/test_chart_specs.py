"""Every chart of the report is valid Vega-Lite.

lbparse.report.charts makes its specs with lbparse.report.vegalite, Altair's
API building Altair's dicts, without Altair's objects or its schema
validation (most of a page's rendering, for specs that only this code
makes): this is where they are checked instead, every drawn chart of real
pages against Altair's Vega-Lite schema (check_page in
test_report_browser.py does it for the cluster stories' pages too). The
page those charts make is the page Altair itself makes, validating, byte
for byte, and every call of that API gives Altair's spec.
"""

from __future__ import annotations

import json
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
import lbparse.report.vegalite as vegalite
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


def test_the_specs_schema_is_the_pinned_altairs() -> None:
    """The Vega-Lite version written into the specs and bundled into the page
    (vegalite.SCHEMA_VERSION: the page imports no Altair) is Altair's."""
    from altair.vegalite import SCHEMA_URL, SCHEMA_VERSION

    assert vegalite.SCHEMA_VERSION == SCHEMA_VERSION and vegalite.SCHEMA_URL == SCHEMA_URL


def test_the_page_is_altairs(
    models: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The charts made with Altair itself (lbparse.report.vegalite is its API
    for them), its validation on (its to_dict default, its debug mode's checks
    as objects are made): the same page, byte for byte."""
    fast = {name: render_html(model) for name, model in models.items()}
    monkeypatch.setattr(charts, "vl", alt)
    monkeypatch.setattr(charts, "_spec", lambda chart: chart.to_dict())
    with alt.utils.schemapi.debug_mode(True):
        for name, model in models.items():
            assert render_html(model) == fast[name], name


def _every_call(vl: Any) -> list[Any]:
    """Charts using every part of the API lbparse.report.vegalite has, made
    with `vl` (it, or Altair): the branches real pages may not take."""
    d = vl.NamedData("d")
    base = (
        vl.Chart(d)
        .transform_calculate(t_end="datum.t + 1000.0", other="datum.x * 2")
        .transform_fold(["p50_ms", "max_ms"], as_=["quantile", "ms"])
        .transform_filter("datum.ms != null")
    )
    unit = base.mark_bar(opacity=0.9, height=14).encode(
        x=vl.X(
            "t:T",
            title="time",
            scale=vl.Scale(type="utc"),
            axis=vl.Axis(format="%H", labelOverlap=True),
        ),
        x2=vl.X2("t_end:T"),
        y=vl.Y("sum(ms):Q", title="ms", stack=None),
        color=vl.Color(
            "quantile:N",
            legend=vl.Legend(symbolLimit=24),
            scale=vl.Scale(domain=["a", "b"], range=["#111", "#222"]),
            sort=["b", "a"],
        ),
        tooltip=[vl.Tooltip("t:T", format="%H:%M", formatType="utc"), vl.Tooltip("ms:Q")],
    )
    marks = [
        vl.Chart(vl.NamedData("e")).mark_line(point=True).encode(x=vl.X("a:O"), y=vl.Y("b:Q")),
        vl.Chart(vl.NamedData("e"))
        .mark_point(filled=True, size=28)
        .encode(shape=vl.Shape("op:N", title="op"), color=vl.ColorValue("#333")),
        vl.Chart(vl.NamedData("e")).mark_rect().encode(x=vl.X("a:N"), y=vl.Y("count(b):Q")),
        vl.Chart(vl.NamedData("e")).mark_rule(strokeDash=[4, 2]).encode(x=vl.X("a:T")),
        vl.Chart(vl.NamedData("e")).mark_text(align="left", dx=3).encode(text=vl.Text("n:Q")),
        vl.Chart(vl.NamedData("e")).mark_tick(thickness=2).encode(y=vl.Y("n:Q"), x2=vl.X2("m")),
    ]
    shared = vl.Chart(d).mark_bar()
    return [
        unit.properties(width="container", height=190),
        *marks,
        vl.layer(unit, *marks).properties(width="container", height=70),
        vl.layer(shared, shared.mark_point()).properties(height=5),  # data of all: the top's
        vl.layer(base.mark_bar(), vl.Chart(d).mark_point()),  # not the same object: each its own
    ]


def test_every_call_gives_altairs_spec() -> None:
    from lbparse.report import vegalite

    with alt.utils.schemapi.debug_mode(False):
        want = [c.to_dict(validate=False) for c in _every_call(alt)]
    got = [c.to_dict() for c in _every_call(vegalite)]
    for g, w in zip(got, want, strict=True):
        assert g == w
        assert json.dumps(g) == json.dumps(w)  # the page's JSON: the same keys in the same order
        assert vega_lite_errors(g) == []


def test_a_shorthand_it_does_not_read_is_refused() -> None:
    from lbparse.report import vegalite

    assert vegalite.X("sum(ms):Q").to_dict() == {
        "aggregate": "sum",
        "field": "ms",
        "type": "quantitative",
    }
    for shorthand in ("ms", "ms:quantitative", "a:b:Q", "", "sum(ms", "f(g(x)):Q"):
        with pytest.raises(ValueError, match="not a field shorthand"):
            vegalite.X(shorthand)


def test_the_page_makes_no_altair_object(
    models: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Altair object is made for a page: making them, and turning them
    into dicts, was three times the capture's reading of a real cluster's
    run (~70 ms of an 85 ms render). Counted, not timed."""
    made = []
    real = schemapi.SchemaBase.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(type(self).__name__)
        real(self, *args, **kwargs)

    monkeypatch.setattr(schemapi.SchemaBase, "__init__", counting)
    for model in models.values():
        render_html(model)
    assert made == []
    alt.Chart().mark_point()  # the count sees Altair's objects
    assert made
