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

from typing import Any

__all__ = ["build_model", "render_html"]


def __getattr__(name: str) -> Any:
    # Imported when first asked for: rendering imports Altair (about a second),
    # which reading and aggregating do not need.
    if name == "build_model":
        from lbparse.report.build import build_model

        return build_model
    if name == "render_html":
        from lbparse.report.render import render_html

        return render_html
    raise AttributeError(f"module 'lbparse.report' has no attribute {name!r}")
