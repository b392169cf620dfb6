"""The report's page: one self-contained HTML file rendered from the data model alone.

`render_html(model)` writes the header (what was read, the time span, the
counts), the charts of `charts.chart_list(model)` and a few tables, all
from `model`. The page embeds the model once (a JSON script element); the
Vega-Lite specs name their datasets, and a short script hands each chart
its arrays from the embedded model before vega-embed draws it. The Vega,
Vega-Lite and vega-embed runtimes are inlined (`vega_bundle`), so the page
needs no network. When every chart has been drawn, the page sets
`document.body.dataset.rendered` to "ok" (or to "error: ..."), which the
headless-browser check waits for.
"""

from __future__ import annotations

import datetime
import html
import json
from typing import Any

from lbparse.codec.jsonform import to_json_value
from lbparse.report.bundle import vega_bundle
from lbparse.report.charts import CLIENT, Chart, chart_list, get_path
from lbparse.report.timebins import utc_text

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;
     background:#f6f7f9}
header{background:#1f2d3d;color:#fff;padding:14px 28px}
header h1{font-size:20px;margin:0 0 4px}
header .sub{color:#c9d3de;font-size:13px}
main{max-width:1400px;margin:0 auto;padding:8px 24px 40px}
section{margin-top:18px}
h2{font-size:17px;border-bottom:2px solid #d5dbe3;padding-bottom:3px;margin:18px 0 8px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:14px}
.card{background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:10px 14px}
.card h3{font-size:14px;margin:0 0 2px}
.card p.about{font-size:12px;color:#56606b;margin:0 0 6px}
.chart{width:100%;min-height:60px}
.empty{color:#2d7a3e;font-style:italic;padding:14px 4px}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0}
td,th{padding:2px 10px 2px 0;text-align:left;vertical-align:top}
th{color:#56606b;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.kpis{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.kpi{background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:6px 12px;min-width:120px}
.kpi b{display:block;font-size:18px}
.kpi span{font-size:12px;color:#56606b}
.warn b{color:#b3261e}
code{font-size:12px}
"""

SCRIPT = """
(function () {
  const model = JSON.parse(document.getElementById('lbparse-report-data').textContent);
  const charts = JSON.parse(document.getElementById('lbparse-report-charts').textContent);
  function get(path) {
    return path.split('.').reduce((v, k) => (v && typeof v === 'object') ? v[k] : undefined, model);
  }
  const jobs = charts.map(function (c) {
    const spec = c.spec;
    spec.datasets = {};
    for (const [name, path] of Object.entries(c.data)) spec.datasets[name] = get(path) || [];
    return vegaEmbed('#chart-' + c.id, spec, {actions: false, renderer: 'canvas'});
  });
  Promise.all(jobs).then(
    function () { document.body.dataset.rendered = 'ok'; },
    function (err) { document.body.dataset.rendered = 'error: ' + err; console.error(err); });
})();
"""


def _e(value: Any) -> str:
    """A value as HTML text; a missing one (an empty partition's offsets) as —, never None."""
    return "—" if value is None else html.escape(str(value), quote=True)


def _when_ns(ns: Any) -> str:
    """An exact time of the model (nanoseconds, an int or its decimal string) as UTC text."""
    if ns is None:
        return "—"
    text = utc_text(int(ns))
    return "—" if text is None else text.replace("T", " ").rstrip("Z") + " UTC"


def _when_of(d: dict[str, Any], prefix: str) -> str:
    """`d`'s time `prefix`: exact when the model has its nanoseconds, else its milliseconds."""
    ns = d.get(f"{prefix}_ns")
    return _when_ns(ns) if ns is not None else _when(d.get(prefix))


def _when(ms: float | None) -> str:
    if ms is None:
        return "—"
    try:
        return (
            datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime(
                "%Y-%m-%d %H:%M:%S.%f"
            )[:-3]
            + " UTC"
        )
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else _e(value)


# Inside a <script> element the HTML parser still reads `</script`, and `<!--`
# followed by `<script` makes it skip the next `</script>` (the page went blank).
# JSON has these characters only inside strings, where \uXXXX means the same;
# U+2028/U+2029 are line ends to older JavaScript.
_SCRIPT_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def _script_json(obj: Any) -> str:
    """JSON inside a <script> element: no string in it can end or change the element."""
    return json.dumps(to_json_value(obj), ensure_ascii=False, separators=(",", ":")).translate(
        _SCRIPT_ESCAPES
    )


def _table(head: list[str], rows: list[list[Any]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        out.append(
            "<tr>"
            + "".join(
                f"<td class=n>{_n(v)}</td>" if i in numeric else f"<td>{_e(v)}</td>"
                for i, v in enumerate(row)
            )
            + "</tr>"
        )
    out.append("</table>")
    return "".join(out)


def _counts_table(title: str, counts: dict[str, int]) -> str:
    if not counts:
        return ""
    return (
        f"<div><h3>{_e(title)}</h3>"
        + _table(["", "messages"], [[k, v] for k, v in counts.items()], {1})
        + "</div>"
    )


def _format(item: dict[str, Any]) -> str:
    if item["format"] == "data directory":
        return (
            f"data directory: {item.get('nodes', 0)} node(s), {item.get('partitions', 0)} "
            f"partition replicas, {item.get('stored_messages', 0):,} stored messages"
        )
    return str(item["format"])


def _kpi(label: str, value: Any, warn: bool = False) -> str:
    cls = "kpi warn" if warn else "kpi"
    return f"<div class='{cls}'><b>{_n(value)}</b><span>{_e(label)}</span></div>"


def header_html(model: dict[str, Any]) -> str:
    rep, totals = model["report"], model["totals"]
    lat, cl, parts = model["latency"], model["cluster"], model["partitions"]
    span = rep.get("duration_s")
    kpis = "".join(
        [
            _kpi("NATS messages", totals.get("messages", 0)),
            _kpi("payload bytes", totals.get("payload_bytes", 0)),
            _kpi("publishes acked", lat["acked"]),
            _kpi("publishes never acked", lat["unacked"], lat["unacked"] > 0),
            _kpi(
                "partition leader changes",
                sum(1 for c in parts["leader_changes"] if c["leader_changed"]),
            ),
            _kpi(
                "NATS 503 (no responders)", cl["no_responders_total"], cl["no_responders_total"] > 0
            ),
            _kpi("problems", model["problems"]["total"], model["problems"]["total"] > 0),
            # normal client and capture behaviour (a cancelled call...): never red
            *(
                [_kpi("notes (not problems)", model["problems"]["notes"]["total"])]
                if model["problems"].get("notes", {}).get("total")
                else []
            ),
        ]
    )
    inputs = _table(
        ["input", "format", "messages", "problems", "first", "last"],
        [
            [
                i["path"],
                _format(i),
                i["messages"],
                i["problems"],
                _when_of(i, "first"),
                _when_of(i, "last"),
            ]
            for i in model["inputs"]
        ],
        {2, 3},
    )
    read = (
        f"{_n(totals.get('packets', 0))} packets, {_n(totals.get('bytes_read', 0))} bytes read, "
        f"{_n(totals.get('gaps', 0))} gaps; per verb: "
        + ", ".join(f"{_e(k)} {_n(v)}" for k, v in totals.get("per_verb", {}).items())
    )
    return (
        f"<header><h1>Liftbridge report</h1><div class=sub>{_e(_when_of(rep, 'first'))} — "
        f"{_e(_when_of(rep, 'last'))} ({'—' if span is None else f'{span:,.1f} s'}), "
        f"time bins of {rep['bin_s']:g} s · {_e(rep['generator'])}</div></header>"
        f"<main><div class=kpis>{kpis}</div><section><h2>What was read</h2>"
        f"<div class=card>{inputs}<p>{read}</p>"
        f"<div class=grid>{_counts_table('per MsgType', totals.get('per_msg_type', {}))}"
        f"{_counts_table('per layout', totals.get('per_layout', {}))}"
        f"{_counts_table('errors by kind', totals.get('errors', {}))}"
        f"{_counts_table('capture notices', totals.get('notices', {}))}</div></div></section>"
    )


def chart_html(c: Chart) -> str:
    body = (
        f"<div class=chart id='chart-{_e(c.id)}' data-chart='{_e(c.id)}'></div>"
        if c.spec is not None
        else f"<div class=empty data-empty='{_e(c.id)}'>{_e(c.empty)}</div>"
    )
    return f"<div class=card><h3>{_e(c.title)}</h3><p class=about>{_e(c.about)}</p>{body}</div>"


def tables_html(model: dict[str, Any], section: str) -> str:
    """The tables under a section's charts."""
    if section == "Publish → Ack latency":
        lat = model["latency"]
        rows = [
            [
                p,
                s["count"],
                s["p50_ms"],
                s["p90_ms"],
                s["p99_ms"],
                s["max_ms"],
                (lat["commit_summary"].get(p) or {}).get("p50_ms", "—"),
            ]
            for p, s in lat["summary"].items()
        ]
        facts = (
            f"{_n(lat['publishes'])} publishes ({_n(lat['no_ack_expected'])} expected no ack), "
            f"{_n(lat['acks'])} acks ({_n(lat['acks_without_publish'])} without their "
            "publish in the capture); ack errors: "
            + (", ".join(f"{k} {_n(v)}" for k, v in lat["ack_errors"].items()) or "none")
        )
        return (
            "<div class=card>"
            + _table(
                [
                    "AckPolicy",
                    "pairs",
                    "p50 ms",
                    "p90 ms",
                    "p99 ms",
                    "max ms",
                    "server commit p50 ms",
                ],
                rows,
                {1},
            )
            + f"<p>{facts}</p></div>"
        )
    if section == CLIENT:
        return _client_tables(model["client"])
    if section == "Partitions":
        changes = model["partitions"]["leader_changes"]
        return (
            "<div class=card><h3>Leader changes</h3>"
            + (
                _table(
                    ["time", "partition", "from", "to", "epochs", "new leader named by"],
                    [
                        [
                            _when_of(c, "t") + (f" ({c['inferred']})" if c.get("inferred") else ""),
                            c["partition_key"],
                            c["from_leader"],
                            c["to_leader"],
                            f"{c['from_epoch']} → {c['to_epoch']}",
                            c.get("to_leader_source", ""),
                        ]
                        for c in changes
                    ],
                )
                if changes
                else "<p>none</p>"
            )
            + "</div>"
        )
    if section == "Cluster":
        cl = model["cluster"]
        targets = _table(
            ["request subject", "503s", "first", "last"],
            [
                [t["subject"], t["count"], _when(t["first"]), _when(t["last"])]
                for t in cl["no_responders_by_target"][:20]
            ],
            {1},
        )
        raft = cl["raft"]
        raft_note = (
            f"Raft transport decoded: {_n(raft['transport_messages'])} messages, "
            f"{len(raft['elections'])} elections."
            if raft.get("decoded")
            else f"Raft transport not decoded: {_e(raft.get('why', ''))}."
        )
        return (
            f"<div class=card>{targets if cl['no_responders_by_target'] else ''}"
            f"<p>{raft_note}</p>{_leaders_table(cl)}{_silences_table(cl)}"
            f"{_nodes_table(cl)}</div>"
        )
    if section == "Data directories":
        st = model["storage"]
        rows = [
            [
                r["node"],
                r["partition_key"],
                r["entries"],
                r["first_offset"],
                r["last_offset"],
                r["hw"],
                " ".join(f"{e}@{o}" for e, o in r["epochs"]),
                r["damage"],
            ]
            for r in st["replicas"]
        ]
        dbs = (
            "; ".join(
                f"{d['node']}: {d['entries']} log entries, "
                + ", ".join(f"{k} {v}" for k, v in d["stable"].items())
                for d in st["raft_dbs"]
            )
            or "no raft.db"
        )
        return (
            "<div class=card><h3>Replicas</h3>"
            + _table(
                [
                    "node",
                    "partition",
                    "entries",
                    "first offset",
                    "last offset",
                    "HW",
                    "leader epochs (epoch@start offset)",
                    "damage",
                ],
                rows,
                {2, 3, 4, 5, 7},
            )
            + f"<p>raft.db: {_e(dbs)}</p></div>"
        )
    if section == "Problems":
        out = ""
        for title, examples in (
            ("First examples", model["problems"]["examples"]),
            (
                "Notes: normal client and capture behaviour, not problems (first examples)",
                model["problems"].get("notes", {}).get("examples", {}),
            ),
        ):
            rows = [
                [kind, _when_of(x, "t"), x["where"], x["message"]]
                for kind, xs in examples.items()
                for x in xs
            ]
            if rows:
                out += (
                    f"<div class=card><h3>{_e(title)}</h3>"
                    + _table(["kind", "time", "where", "message"], rows)
                    + "</div>"
                )
        return out
    return ""


LEADER_ROWS_SHOWN = 200  # terms on the page; --json has them all


def _leaders_table(cl: dict[str, Any]) -> str:
    """Each metadata leader's term, from its win to its loss (report.leaders),
    then the nodes that answered PropagatedRequests, beside the Raft terms."""
    terms = cl.get("leader_terms") or []
    out = ""
    if terms:
        shown = terms[:LEADER_ROWS_SHOWN]
        out = (
            "<h3>Metadata leaders (each term, from its win to its loss)</h3>"
            + _table(
                [
                    "leader",
                    "term",
                    "from",
                    "from: inferred from",
                    "to",
                    "to: inferred from",
                    "seconds",
                    "answers",
                ],
                [
                    [
                        x["leader"],
                        "—" if x["term"] is None else x["term"],
                        _when_of(x, "start"),
                        x["won_from"],
                        _when_of(x, "end"),
                        x["lost_from"],
                        x["seconds"],
                        x["answers"],
                    ]
                    for x in shown
                ],
                {1, 6, 7},
            )
            + (
                f"<p>and {_n(len(terms) - len(shown))} terms more (in --json)</p>"
                if len(terms) > len(shown)
                else ""
            )
        )
    leaders = cl["metadata_leaders"]
    if not leaders:
        return out
    agree = {True: "yes", False: "NO", None: "no term decoded"}
    # An answer is the leader's act, but the first and last answers are not
    # when it won and lost: a leader may go on leading long after answering.
    return (
        out
        + (
            "<h3>Nodes answering PropagatedRequests (the metadata leader's act; "
            "first and last answer, not the term)</h3>"
        )
        + _table(
            [
                "leader",
                "named by",
                "answers",
                "Raft terms' leader",
                "agrees",
                "first answer",
                "last answer",
            ],
            [
                [
                    x["leader"],
                    x.get("leader_source", ""),
                    x["answers"],
                    ", ".join(x.get("raft_leaders", [])) or "—",
                    agree[x.get("agrees_with_raft")],
                    _when_of(x, "start"),
                    _when_of(x, "end"),
                ]
                for x in leaders
            ],
            {2},
        )
    )


def _silences_table(cl: dict[str, Any]) -> str:
    """Nodes none of whose connections said or heard anything for a while
    (report.failovers.Activity): down, or cut off from NATS."""
    silences = cl.get("node_silences") or []
    if not silences:
        return ""
    return "<h3>Nodes silent (no connection of theirs sent or received)</h3>" + _table(
        ["node", "from", "to", "seconds"],
        [
            [
                x["node"],
                _when_of(x, "start"),
                _when_of(x, "end") if x["end"] is not None else "end of capture",
                x["seconds"] if x["seconds"] is not None else "—",
            ]
            for x in silences
        ],
        {3},
    )


def _nodes_table(cl: dict[str, Any]) -> str:
    """Each connection's node and how it is known (a CONNECT name is a fact, a
    name from deliveries is inferred); connections nothing names are unknown."""
    nodes, how = cl["nodes"], cl.get("node_sources", {})
    connections = cl.get("connections", {})
    endpoints = sorted(set(nodes) | set(connections))
    if not endpoints:
        return "<p>Connections named: none</p>"
    rows = [
        [e, nodes.get(e, "unknown"), how.get(e, "unknown"), connections.get(e, "—")]
        for e in endpoints
    ]
    conflicts = "".join(
        f"<p>{_e(c['endpoint'])}: its messages say {_e(c['messages_say'])}, its CONNECT "
        f"name {_e(c['connect_name'])}; the CONNECT name holds.</p>"
        for c in cl.get("node_conflicts", [])
    )
    return (
        "<h3>Connections</h3>"
        + _table(["connection", "node", "named by", "CONNECT name"], rows)
        + conflicts
    )


def _client_tables(cl: dict[str, Any]) -> str:
    """Latency per method, PublishAsync's per AckPolicy, the subscriptions."""

    def lat(s: dict[str, Any]) -> list[Any]:
        return [s["p50_ms"], s["p90_ms"], s["max_ms"]]

    methods = [
        [
            m["method"],
            m["calls"],
            ", ".join(f"{k} {_n(v)}" for k, v in m["outcomes"].items()),
            *lat(m["latency"]),
        ]
        for m in cl["methods"]
    ]
    pa_ = cl["publish_async"]
    policies = [
        [p["ack_policy"], p["requests"], p["answered"], *lat(p["latency"])]
        for p in pa_["by_policy"]
    ]
    subs = [
        [
            s["stream"],
            s["partition"],
            s["server"],
            s["messages"],
            s["outcome"],
            _when_of(s, "start"),
            s["duration_s"],
        ]
        for s in cl["subscriptions"]
    ]
    more = cl["more_subscriptions"]
    return (
        "<div class=card><h3>Calls by method (request to first response)</h3>"
        + _table(["method", "calls", "outcomes", "p50 ms", "p90 ms", "max ms"], methods, {1})
        + f"<p>{_n(cl['calls'])} calls, {_n(cl['messages'])} gRPC messages</p>"
        + "<h3>PublishAsync: PublishRequest to its PublishResponse (correlationId)</h3>"
        + _table(
            ["AckPolicy", "requests", "answered", "p50 ms", "p90 ms", "max ms"], policies, {1, 2}
        )
        + f"<p>{_n(pa_['async_errors'])} asyncErrors, {_n(pa_['unanswered'])} requests "
        f"unanswered, {_n(pa_['responses_without_request'])} responses without their "
        "request in the capture</p>"
        + _lookups_html(cl.get("metadata_lookups"))
        + _publish_join_html(cl.get("publish_join"))
        + "<h3>Subscriptions</h3>"
        + _table(
            ["stream", "partition", "server", "messages", "ended", "from", "seconds"], subs, {1, 3}
        )
        + (f"<p>and {_n(more)} more</p>" if more else "")
        + "</div>"
    )


def _lookups_html(ml: dict[str, Any] | None) -> str:
    """The metadata lookups during, after and away from failovers, and each failover's."""
    if not ml or not ml["lookups"]:
        return ""

    def lat(s: dict[str, Any]) -> list[Any]:
        return [s["latency"]["p50_ms"], s["latency"]["max_ms"]]

    groups = [[g["when"], g["lookups"], g["failed"], *lat(g)] for g in ml["groups"]]
    failovers = [
        [
            _when_of(f, "start"),
            "; ".join(f["changes"]),
            f["during"]["lookups"],
            f["after"]["lookups"],
            f["after"]["latency"]["max_ms"],
        ]
        for f in ml["failovers"]
    ]
    more = ml["more_lookups"]
    return (
        "<h3>Metadata lookups (FetchMetadata, FetchPartitionMetadata) and failovers</h3>"
        + _table(["when", "lookups", "not OK", "p50 ms", "max ms"], groups, {1, 2})
        + (
            _table(
                [
                    "failover from",
                    "what changed",
                    "lookups during",
                    "lookups after",
                    "max ms after",
                ],
                failovers,
                {2, 3},
            )
            if failovers
            else "<p>No failover in this input.</p>"
        )
        + (f"<p>and {_n(more)} lookups more, not placed</p>" if more else "")
    )


JOIN_ROWS_SHOWN = 100  # the page's table; --json lists up to publish_join.MAX_ROWS


def _publish_join_html(j: dict[str, Any] | None) -> str:
    """Each client publish beside its NATS Publish and Ack: times after the request."""
    if j is None:
        return ""
    rows = [
        [
            m["stream"],
            m["correlation_id"] or f"(to subject {m['subject']})",
            m["ack_policy"],
            _when_of(m, "request"),
            m["to_nats_publish_ms"],
            m["to_nats_ack_ms"],
            m["to_response_ms"],
            m["offset"],
            m["response_offset"],
            m["async_error"] or (m["ack_error"] if m["ack_error"] != "OK" else "") or "",
        ]
        for m in j["messages"][:JOIN_ROWS_SHOWN]
    ]
    hidden = len(j["messages"]) - len(rows) + j["more_messages"]
    return (
        "<h3>Client publishes joined to the cluster's NATS Publish and Ack "
        "(stream and correlationId; PublishToSubject by its ack inbox)</h3>"
        f"<p>{_n(j['client_publishes'])} client publishes: {_n(j['found_on_nats'])} found "
        f"on NATS, {_n(j['not_found_on_nats'])} not; {_n(j['acked_on_nats'])} of the "
        f"{_n(j['expecting_ack'])} expecting an ack acked on NATS; offsets of NATS Ack "
        f"and PublishResponse: {_n(j['offsets_agree'])} agree, "
        f"{_n(j['offsets_differ'])} differ</p>"
        + _table(
            [
                "stream",
                "correlationId",
                "AckPolicy",
                "request",
                "NATS publish ms",
                "NATS ack ms",
                "response ms",
                "offset (Ack)",
                "offset (response)",
                "error",
            ],
            rows,
            {4, 5, 6, 7, 8},
        )
        + (
            f"<p>and {_n(hidden)} more (in --json up to the first {_n(len(j['messages']))})</p>"
            if hidden
            else ""
        )
    )


def render_html(model: dict[str, Any]) -> str:
    """The page, from the model alone.

    One self-contained HTML document: the Vega runtimes, the model and the
    charts' specs inlined (nothing is fetched when it is opened).

    Args:
        model: The report's data model (build_model / `--json`).

    Returns:
        The HTML text.
    """
    charts = chart_list(model)
    sections: dict[str, list[Chart]] = {}
    for c in charts:
        sections.setdefault(c.section, []).append(c)
    body = [header_html(model)]
    for name, cs in sections.items():
        body.append(
            f"<section><h2>{_e(name)}</h2><div class=grid>"
            + "".join(chart_html(c) for c in cs)
            + "</div>"
            + tables_html(model, name)
            + "</section>"
        )
    body.append("</main>")
    drawn = [{"id": c.id, "spec": c.spec, "data": c.data} for c in charts if c.spec is not None]
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset='utf-8'>"
        "<meta name=viewport content='width=device-width,initial-scale=1'>"
        f"<title>Liftbridge report</title><style>{CSS}</style>"
        f"<script>{vega_bundle()}</script></head><body>"
        + "".join(body)
        + f"<script type='application/json' id='lbparse-report-data'>{_script_json(model)}"
        "</script>"
        f"<script type='application/json' id='lbparse-report-charts'>{_script_json(drawn)}"
        f"</script><script>{SCRIPT}</script></body></html>"
    )


__all__ = ["get_path", "render_html"]
