"""`lbparse report`: what happened in a Liftbridge cluster, as one HTML page.

    >>> from lbparse.report import build_model, render_html     # doctest: +SKIP
    >>> model = build_model(["cluster.pcap"])                    # doctest: +SKIP
    >>> html = render_html(model)                                # doctest: +SKIP

`build_model` reads every input once (`inputs`) into an `Aggregator`
(`aggregate`: traffic, `latency`, `partitions`, `cluster`, `raft_events`,
`problems`, each in bounded memory over `timebins`) and returns the data
behind every chart as plain JSON values: what `--json` writes. The page is
rendered from that data alone (`render`, with the Vega-Lite specs of
`charts`), so a script can check every number the page shows.
"""

from typing import TYPE_CHECKING, Any

from lbparse.extras import need
from lbparse.report.build import build_model

if TYPE_CHECKING:
    from lbparse.report.render import render_html

__all__ = ["build_model", "render_html"]


def __getattr__(name: str) -> Any:
    # render_html when first asked for: the page needs Altair (the report
    # extra, about a second to import), which reading and aggregating do not.
    if name == "render_html":
        return need("lbparse.report.render").render_html
    raise AttributeError(f"module 'lbparse.report' has no attribute {name!r}")
