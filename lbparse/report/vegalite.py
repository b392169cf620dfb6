"""Vega-Lite specs as plain dicts, with the part of Altair's chart API the report uses.

The report's charts (lbparse.report.charts) were built with Altair, whose
objects cost more to make and to turn into dicts (copies, schema lookups)
than the rest of a page: ~70 ms of a real cluster's 85 ms render, three
times the capture's reading. Here the same calls (`Chart(NamedData(name))
.mark_bar(...).encode(x=X("t:T", ...), ...).properties(...)`, `layer`)
build the same dicts directly: what Altair's `to_dict` gives for them,
key for key (tests/report/test_chart_specs.py holds every chart of real
pages equal to Altair's). Only what the charts use is here; anything else
is refused, not guessed: a shorthand that is not `field:T` or
`agg(field):T` (`field` alone for x2) raises ValueError.
"""

from __future__ import annotations

import copy
import re
from typing import Any

__all__ = [
    "Axis",
    "Chart",
    "Color",
    "ColorValue",
    "LayerChart",
    "Legend",
    "NamedData",
    "Scale",
    "Shape",
    "Text",
    "Tooltip",
    "X",
    "X2",
    "Y",
    "layer",
]

# The Vega-Lite version the specs are written for: the schema of the pinned
# Altair (pyproject.toml's dev pin), whose dicts these are, and the version of
# the runtimes the page inlines (bundle.py). Written here so that a page needs
# no Altair (importing it took about half a second of each `lbparse report`);
# tests/report/test_chart_specs.py holds it equal to Altair's.
SCHEMA_VERSION = "v6.4.1"
SCHEMA_URL = f"https://vega.github.io/schema/vega-lite/{SCHEMA_VERSION}.json"

# What Altair puts at the top of every chart it writes.
_CONFIG = {"view": {"continuousWidth": 300, "continuousHeight": 300}}
_TYPES = {"Q": "quantitative", "N": "nominal", "O": "ordinal", "T": "temporal"}
_SHORTHAND = re.compile(
    r"(?:(?P<aggregate>[a-z]+)\((?P<inner>[^()]*)\)|(?P<field>[^():]+))(?::(?P<type>[QNOT]))?"
)


def _value(v: Any) -> Any:
    """A keyword's value in the spec: a helper object as its dict, lists item by item."""
    if isinstance(v, _Params):
        return v.to_dict()
    if isinstance(v, list):
        return [_value(x) for x in v]
    return v


class _Params:
    """A Vega-Lite object given as keywords (Scale, Axis, Legend); keys in
    alphabetical order, as Altair's generated classes list them."""

    def __init__(self, **kwds: Any) -> None:
        self.kwds = kwds

    def to_dict(self) -> dict[str, Any]:
        """The object's spec.

        Returns:
            Its keywords, their values as specs, by key.
        """
        return {k: _value(self.kwds[k]) for k in sorted(self.kwds)}


class Scale(_Params):
    """An encoding's scale (`type`, `domain`, `range`, `scheme`...)."""


class Axis(_Params):
    """A positional encoding's axis (`format`, `labelOverlap`...)."""


class Legend(_Params):
    """A colour or shape encoding's legend (`symbolLimit`...)."""


class _Channel(_Params):
    """An encoding channel: a field by Altair's shorthand, and keywords."""

    typed = True  # x2 and the like take their type from their main channel

    def __init__(self, shorthand: str, **kwds: Any) -> None:
        super().__init__(**kwds)
        m = _SHORTHAND.fullmatch(shorthand)
        if m is None:
            raise ValueError(f"not a field shorthand this module reads: {shorthand!r}")
        parsed: dict[str, Any] = {}
        if m["aggregate"] is not None:
            parsed["aggregate"] = m["aggregate"]
            parsed["field"] = m["inner"]
        else:
            parsed["field"] = m["field"]
        if m["type"] is not None and self.typed:
            parsed["type"] = _TYPES[m["type"]]
        elif self.typed:  # Altair infers it from a DataFrame; named data has none
            raise ValueError(f"not a field shorthand this module reads (no type): {shorthand!r}")
        self.parsed = parsed

    def to_dict(self) -> dict[str, Any]:
        """The channel's spec.

        Returns:
            The parsed shorthand and the keywords, by key.
        """
        d = {**self.parsed, **self.kwds}
        return {k: _value(d[k]) for k in sorted(d)}


class X(_Channel):
    """The x channel."""


class Y(_Channel):
    """The y channel."""


class X2(_Channel):
    """The x2 channel: a field without a type."""

    typed = False


class Color(_Channel):
    """The color channel."""


class Shape(_Channel):
    """The shape channel."""


class Text(_Channel):
    """The text channel."""


class Tooltip(_Channel):
    """One field of the tooltip channel."""


class ColorValue(_Params):
    """A constant colour.

    Args:
        value: The colour (CSS).
    """

    def __init__(self, value: str) -> None:
        super().__init__(value=value)


class NamedData:
    """Data the page gives the chart by name.

    Args:
        name: The dataset's name.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def to_dict(self) -> dict[str, Any]:
        """The data's spec.

        Returns:
            {"name": name}.
        """
        return {"name": self.name}


class _Spec:
    """What a unit chart and a layer chart share: data, properties, a top level."""

    # Keys in the order Altair writes them; the others follow alphabetically.
    _FIRST: tuple[str, ...] = ("data", "mark", "encoding")

    def __init__(self, data: NamedData | None = None) -> None:
        self.data = data
        self.props: dict[str, Any] = {}

    def _copy(self) -> Any:
        new = copy.copy(self)
        new.props = dict(self.props)
        return new

    def properties(self, **kwds: Any) -> Any:
        """This chart with top-level properties set.

        Args:
            **kwds: `width`, `height` and the like.

        Returns:
            A new chart.
        """
        new = self._copy()
        new.props.update(kwds)
        return new

    def _own(self) -> dict[str, Any]:
        return {} if self.data is None else {"data": self.data.to_dict()}

    def _inner(self) -> dict[str, Any]:
        """The chart's spec without the top level's config and schema."""
        own = self._own()
        own.update(self.props)
        first = [k for k in self._FIRST if k in own]
        rest = sorted(k for k in own if k not in self._FIRST)
        return {k: _value(own[k]) for k in first + rest}

    def to_dict(self, validate: bool = False) -> dict[str, Any]:
        """The chart's Vega-Lite spec, as Altair's to_dict writes it.

        Args:
            validate: Ignored: nothing here checks against the schema
                (tests/report/test_chart_specs.py does).

        Returns:
            The spec: config first, then the chart, then `$schema`.
        """
        return {"config": copy.deepcopy(_CONFIG), **self._inner(), "$schema": SCHEMA_URL}


class Chart(_Spec):
    """A single-view chart.

    Args:
        data: The data it draws.
    """

    def __init__(self, data: NamedData | None = None) -> None:
        super().__init__(data)
        self.mark: dict[str, Any] | None = None
        self.encoding: dict[str, Any] = {}
        self.transform: list[dict[str, Any]] = []

    def _copy(self) -> Any:
        new = super()._copy()
        new.encoding = dict(self.encoding)
        new.transform = list(self.transform)
        return new

    def _mark(self, kind: str, kwds: dict[str, Any]) -> Chart:
        new: Chart = self._copy()
        new.mark = {"type": kind, **{k: kwds[k] for k in sorted(kwds)}}
        return new

    def mark_bar(self, **kwds: Any) -> Chart:
        """This chart drawn as bars.

        Args:
            **kwds: The mark's properties (opacity, size, filled...).

        Returns:
            A new chart.
        """
        return self._mark("bar", kwds)

    def mark_line(self, **kwds: Any) -> Chart:
        """This chart drawn as lines.

        Args:
            **kwds: The mark's properties (opacity, size, filled...).

        Returns:
            A new chart.
        """
        return self._mark("line", kwds)

    def mark_point(self, **kwds: Any) -> Chart:
        """This chart drawn as points.

        Args:
            **kwds: The mark's properties (opacity, size, filled...).

        Returns:
            A new chart.
        """
        return self._mark("point", kwds)

    def mark_rect(self, **kwds: Any) -> Chart:
        """This chart drawn as rectangles.

        Args:
            **kwds: The mark's properties (opacity, size, filled...).

        Returns:
            A new chart.
        """
        return self._mark("rect", kwds)

    def mark_rule(self, **kwds: Any) -> Chart:
        """This chart drawn as rules.

        Args:
            **kwds: The mark's properties (opacity, size, filled...).

        Returns:
            A new chart.
        """
        return self._mark("rule", kwds)

    def mark_text(self, **kwds: Any) -> Chart:
        """This chart drawn as text.

        Args:
            **kwds: The mark's properties (opacity, size, filled...).

        Returns:
            A new chart.
        """
        return self._mark("text", kwds)

    def mark_tick(self, **kwds: Any) -> Chart:
        """This chart drawn as ticks.

        Args:
            **kwds: The mark's properties (opacity, size, filled...).

        Returns:
            A new chart.
        """
        return self._mark("tick", kwds)

    def encode(self, **channels: _Params | list[_Params]) -> Chart:
        """This chart with these encoding channels.

        Args:
            **channels: Each channel by its name: x=X(...), tooltip=[Tooltip(...), ...].

        Returns:
            A new chart.
        """
        new: Chart = self._copy()
        new.encoding.update(channels)
        return new

    def transform_calculate(self, **exprs: str) -> Chart:
        """This chart with a field computed from each expression.

        Args:
            **exprs: Each new field's Vega expression, by the field's name.

        Returns:
            A new chart.
        """
        new: Chart = self._copy()
        new.transform.extend({"calculate": e, "as": name} for name, e in exprs.items())
        return new

    def transform_filter(self, expr: str) -> Chart:
        """This chart with the rows for which `expr` holds.

        Args:
            expr: A Vega expression.

        Returns:
            A new chart.
        """
        new: Chart = self._copy()
        new.transform.append({"filter": expr})
        return new

    def transform_fold(self, fold: list[str], as_: list[str]) -> Chart:
        """This chart with fields folded into rows of a key and a value.

        Args:
            fold: The fields folded.
            as_: The names of the key field and the value field.

        Returns:
            A new chart.
        """
        new: Chart = self._copy()
        new.transform.append({"fold": list(fold), "as": list(as_)})
        return new

    def _own(self) -> dict[str, Any]:
        own = super()._own()
        if self.mark is not None:
            own["mark"] = self.mark
        if self.encoding:
            own["encoding"] = {k: _value(self.encoding[k]) for k in sorted(self.encoding)}
        if self.transform:
            own["transform"] = [dict(t) for t in self.transform]
        return own


class LayerChart(_Spec):
    """Charts drawn over one another.

    Args:
        layers: The charts, bottom first.
    """

    _FIRST = ("layer", "data")

    def __init__(self, *layers: Chart) -> None:
        # As Altair: data every layer shares (the same object) is the top
        # level's, the layers' own then left out.
        shared = layers[0].data if layers else None
        if shared is not None and all(c.data is shared for c in layers):
            layers = tuple(_without_data(c) for c in layers)
        else:
            shared = None
        super().__init__(shared)
        self.layers = layers

    def _own(self) -> dict[str, Any]:
        own = super()._own()
        own["layer"] = [c._inner() for c in self.layers]
        return own


def _without_data(chart: Chart) -> Chart:
    new: Chart = chart._copy()
    new.data = None
    return new


def layer(*charts: Chart) -> LayerChart:
    """The charts drawn over one another, the first at the bottom.

    Args:
        charts: The layers.

    Returns:
        A layer chart.
    """
    return LayerChart(*charts)
