"""The report's charts: Vega-Lite specs, holding no data.

Each chart names the datasets it draws (`vl.NamedData`); the page gives
them the arrays of the report's data model under those names (render.py),
so what is drawn is exactly what `--json` writes. `chart_list(model)`
returns, section by section, every chart with its title, a sentence on
how to read it, and the model paths of its data; a chart whose data is
empty in this input is replaced by a line saying so (`Chart.empty`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Altair's API for the charts, building the dicts Altair writes (lbparse.report.vegalite:
# Altair's own objects cost three times the capture's reading on a real page).
from lbparse.report import vegalite as vl

WIDTH = "container"
HEIGHT = 190
TIME_FORMAT = "%H:%M:%S"
MAX_LEGEND = 24


@dataclass
class Chart:
    """One chart of the page: its Vega-Lite spec and the model paths it draws.

    Attributes:
        id: The chart's id in the page (data-chart), unique.
        section: The page section it belongs to.
        title: Its heading.
        about: A sentence on how to read it.
        data: Dataset name -> model path of its rows ("traffic.by_msg_type").
        spec: The Vega-Lite spec (no data in it), or None when `empty` says why
            nothing is drawn.
        empty: Why nothing is drawn (this input has no such data), else "".
        notes: Further lines shown under the chart.
    """

    id: str
    section: str
    title: str
    about: str
    data: dict[str, str]  # dataset name -> model path ("traffic.by_msg_type")
    spec: dict[str, Any] | None  # None when `empty` says why nothing is drawn
    empty: str = ""
    notes: list[str] = field(default_factory=list)


def dataset_name(path: str) -> str:
    """The dataset name a chart gives the model path it draws.

    Args:
        path: A dotted model path ("latency.histogram").

    Returns:
        The path with dots as double underscores ("latency__histogram").
    """
    return path.replace(".", "__")


def get_path(model: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of the model.

    Args:
        model: The report's data model.
        path: A dotted path of dict keys ("cluster.raft.terms").

    Returns:
        The value there, or None if any key on the way is missing.
    """
    value: Any = model
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _time(field: str = "t", title: str = "time (UTC)") -> vl.X:
    return vl.X(
        f"{field}:T",
        title=title,
        scale=vl.Scale(type="utc"),
        axis=vl.Axis(format=TIME_FORMAT, labelOverlap=True),
    )


def _tooltip_time(field: str = "t", title: str = "time") -> vl.Tooltip:
    return vl.Tooltip(f"{field}:T", title=title, format="%H:%M:%S.%L", formatType="utc")


def _binned_bars(
    name: str, key: str, value: str, bin_ms: float, y_title: str, legend: str
) -> dict[str, Any]:
    """Stacked bars over time bins: one row per (bin, key)."""
    chart = (
        vl.Chart(vl.NamedData(name))
        .transform_calculate(t_end=f"datum.t + {bin_ms}")
        .mark_bar(opacity=0.9)
        .encode(
            x=_time(),
            x2=vl.X2("t_end:T"),
            y=vl.Y(f"sum({value}):Q", title=y_title, stack="zero"),
            color=vl.Color(
                f"{key}:N",
                title=legend,
                legend=vl.Legend(symbolLimit=MAX_LEGEND),
                scale=vl.Scale(scheme="tableau20"),
            ),
            tooltip=[
                _tooltip_time(),
                vl.Tooltip(f"{key}:N", title=legend),
                vl.Tooltip(f"{value}:Q", title=y_title),
            ],
        )
        .properties(width=WIDTH, height=HEIGHT)
    )
    return _spec(chart)


# Tableau 10: one colour per node, the same in every chart of the page.
NODE_COLOURS = (
    "#4c78a8",
    "#f58518",
    "#e45756",
    "#72b7b2",
    "#54a24b",
    "#eeca3b",
    "#b279a2",
    "#ff9da6",
    "#9d755d",
    "#bab0ac",
)


def node_scale(model: dict[str, Any]) -> vl.Scale:
    """Nodes (and connections not tied to one) in one colour each, page-wide.

    Args:
        model: The report's data model; the leaders it names are the domain.

    Returns:
        A colour scale: node names first, then endpoints, each its colour.
    """
    names = {
        row["leader"]
        for path in ("partitions.leaders", "cluster.metadata_leaders", "cluster.raft.terms")
        for row in (get_path(model, path) or [])
    }
    domain = sorted(names, key=lambda n: (n.count(":"), n))  # node names before endpoints
    return vl.Scale(
        domain=domain, range=[NODE_COLOURS[k % len(NODE_COLOURS)] for k in range(len(domain))]
    )


def _spec(chart: Any) -> dict[str, Any]:
    """A chart's Vega-Lite spec (`chart` an Altair chart too: the tests' reference).

    Not checked against the Vega-Lite schema here: that took two thirds of a
    page's rendering, for specs made by this module's code alone
    (tests/report/test_chart_specs.py checks every chart of real pages)."""
    spec: dict[str, Any] = chart.to_dict(validate=False)
    return spec


def _spec_or_empty(
    model: dict[str, Any], paths: dict[str, str], why: str, make: Any
) -> tuple[dict[str, Any] | None, str]:
    if all(not get_path(model, p) for p in paths.values()):
        return None, why
    return make(), ""


def traffic_charts(model: dict[str, Any], bin_ms: float) -> list[Chart]:
    """The traffic section: message rates by MsgType and by stream, bytes per second.

    Args:
        model: The report's data model (Aggregator.model / `--json`).
        bin_ms: The time bins' width in milliseconds (bars span one bin).

    Returns:
        The section's charts, in page order.
    """
    out = []
    for cid, path, key, legend, title, about in (
        (
            "rate_by_msg_type",
            "traffic.by_msg_type",
            "msg_type",
            "MsgType",
            "Messages per second by MsgType",
            "Every NATS message the capture holds, once per direction (a PUB and each MSG that "
            "delivers it), by the envelope's MsgType; payloads that are no envelope by layout.",
        ),
        (
            "rate_by_stream",
            "traffic.by_stream",
            "stream",
            "stream",
            "Messages per second by stream",
            "Messages about a stream: publishes and acks (their stream field), replication and "
            "leader-epoch requests and their responses (the partition in the request subject).",
        ),
    ):
        name = dataset_name(path)
        spec, empty = _spec_or_empty(
            model,
            {name: path},
            "No message in this input names a stream.",
            lambda name=name, key=key, legend=legend: _binned_bars(
                name, key, "rate", bin_ms, "messages/s", legend
            ),
        )
        out.append(Chart(cid, "Traffic", title, about, {name: path}, spec, empty))
    name = dataset_name("traffic.bytes")
    spec, empty = _spec_or_empty(
        model,
        {name: "traffic.bytes"},
        "No messages.",
        lambda: _binned_bars(
            name, "direction", "bytes_per_s", bin_ms, "payload bytes/s", "direction"
        ),
    )
    out.append(
        Chart(
            "bytes",
            "Traffic",
            "Payload bytes per second",
            "NATS payload bytes (envelopes included), client-to-server (PUB) and "
            "server-to-client (MSG).",
            {name: "traffic.bytes"},
            spec,
            empty,
        )
    )
    return out


def latency_charts(model: dict[str, Any], bin_ms: float) -> list[Chart]:
    """The latency section: publish-to-ack histogram, latency over time, unacked.

    Args:
        model: The report's data model (Aggregator.model / `--json`).
        bin_ms: The time bins' width in milliseconds (bars span one bin).

    Returns:
        The section's charts, in page order.
    """
    out = []
    hist = dataset_name("latency.histogram")

    def histogram() -> dict[str, Any]:
        return _spec(
            vl.Chart(vl.NamedData(hist))
            .mark_bar(opacity=0.75)
            .encode(
                x=vl.X(
                    "lo_ms:Q", title="publish -> ack (ms, log scale)", scale=vl.Scale(type="log")
                ),
                x2=vl.X2("hi_ms:Q"),
                y=vl.Y("count:Q", title="publishes", stack=None),
                color=vl.Color("ack_policy:N", title="AckPolicy"),
                tooltip=[
                    vl.Tooltip("ack_policy:N"),
                    vl.Tooltip("lo_ms:Q", title="from ms", format=".3f"),
                    vl.Tooltip("hi_ms:Q", title="to ms", format=".3f"),
                    vl.Tooltip("count:Q"),
                ],
            )
            .properties(width=WIDTH, height=HEIGHT)
        )

    spec, empty = _spec_or_empty(
        model,
        {hist: "latency.histogram"},
        "No Publish was paired with its Ack in this input.",
        histogram,
    )
    out.append(
        Chart(
            "latency_histogram",
            "Publish → Ack latency",
            "Latency distribution",
            "Each Publish paired with its Ack by ack inbox and correlation id; the time "
            "between the two as captured, by the Publish's AckPolicy.",
            {hist: "latency.histogram"},
            spec,
            empty,
        )
    )
    over = dataset_name("latency.over_time")

    def over_time() -> dict[str, Any]:
        base = vl.Chart(vl.NamedData(over)).transform_fold(
            ["p50_ms", "p99_ms", "max_ms"], as_=["quantile", "ms"]
        )
        return _spec(
            base.mark_point(filled=True, size=28, opacity=0.8)
            .encode(
                x=_time(title="time the Publish was sent (UTC)"),
                y=vl.Y("ms:Q", title="ms (log scale)", scale=vl.Scale(type="log")),
                color=vl.Color("ack_policy:N", title="AckPolicy"),
                shape=vl.Shape(
                    "quantile:N", title="statistic", sort=["p50_ms", "p99_ms", "max_ms"]
                ),
                tooltip=[
                    _tooltip_time(),
                    vl.Tooltip("ack_policy:N"),
                    vl.Tooltip("quantile:N"),
                    vl.Tooltip("ms:Q", format=".3f"),
                    vl.Tooltip("count:Q"),
                ],
            )
            .properties(width=WIDTH, height=HEIGHT)
        )

    spec, empty = _spec_or_empty(
        model,
        {over: "latency.over_time"},
        "No Publish was paired with its Ack in this input.",
        over_time,
    )
    out.append(
        Chart(
            "latency_over_time",
            "Publish → Ack latency",
            "Latency over time (median, p99, max per time bin)",
            "By the time bin the Publish was sent in; a failover shows as publishes "
            "that waited seconds for their ack.",
            {over: "latency.over_time"},
            spec,
            empty,
        )
    )
    unacked = dataset_name("latency.unacked_over_time")
    spec, empty = _spec_or_empty(
        model,
        {unacked: "latency.unacked_over_time"},
        "Every Publish that asked for an ack got one.",
        lambda: _binned_bars(unacked, "ack_policy", "count", bin_ms, "publishes", "AckPolicy"),
    )
    out.append(
        Chart(
            "unacked",
            "Publish → Ack latency",
            "Publishes never acked",
            "Publishes whose AckPolicy asks for an ack (LEADER, ALL) and whose Ack the "
            "capture does not hold, by the time they were sent.",
            {unacked: "latency.unacked_over_time"},
            spec,
            empty,
        )
    )
    return out


def partition_charts(model: dict[str, Any], bin_ms: float) -> list[Chart]:
    """The partitions section: leaders over time, leader epochs, replication lag.

    Args:
        model: The report's data model (Aggregator.model / `--json`).
        bin_ms: The time bins' width in milliseconds (bars span one bin).

    Returns:
        The section's charts, in page order.
    """
    out = []
    leaders = dataset_name("partitions.leaders")
    changes = dataset_name("partitions.leader_changes")
    isr = dataset_name("partitions.isr_events")

    def timeline() -> dict[str, Any]:
        y = vl.Y("partition_key:N", title="partition")
        bars = (
            vl.Chart(vl.NamedData(leaders))
            .transform_calculate(end2=f"max(datum.end, datum.start + {bin_ms})")
            .mark_bar(height=14)
            .encode(
                x=_time("start"),
                x2=vl.X2("end2:T"),
                y=y,
                color=vl.Color("leader:N", title="leader", scale=node_scale(model)),
                tooltip=[
                    vl.Tooltip("partition_key:N"),
                    vl.Tooltip("leader:N"),
                    vl.Tooltip("epoch:Q"),
                    _tooltip_time("start", "from"),
                    _tooltip_time("end", "to"),
                    vl.Tooltip("observations:Q"),
                ],
            )
        )
        labels = (
            vl.Chart(vl.NamedData(leaders))
            .mark_text(align="left", dx=3, dy=-11, fontSize=9)
            .encode(x=_time("start"), y=y, text=vl.Text("epoch:Q"))
        )
        layers = [bars, labels]
        if get_path(model, "partitions.isr_events"):
            layers.append(
                vl.Chart(vl.NamedData(isr))
                .mark_point(filled=True, size=60, yOffset=9)
                .encode(
                    x=_time(),
                    y=y,
                    shape=vl.Shape("op:N", title="metadata op"),
                    color=vl.ColorValue("#333"),
                    tooltip=[
                        _tooltip_time(),
                        vl.Tooltip("op:N"),
                        vl.Tooltip("partition_key:N"),
                        vl.Tooltip("replica:N"),
                        vl.Tooltip("leader:N"),
                        vl.Tooltip("epoch:Q"),
                        vl.Tooltip("source:N"),
                    ],
                )
            )
        if get_path(model, "partitions.leader_changes"):
            layers.append(
                vl.Chart(vl.NamedData(changes))
                .mark_tick(color="#d62728", thickness=2, size=22)
                .encode(
                    x=_time(),
                    y=y,
                    tooltip=[
                        _tooltip_time(),
                        vl.Tooltip("partition_key:N"),
                        vl.Tooltip("from_leader:N"),
                        vl.Tooltip("to_leader:N"),
                        vl.Tooltip("from_epoch:Q"),
                        vl.Tooltip("to_epoch:Q"),
                    ],
                )
            )
        n = len({row["partition_key"] for row in get_path(model, "partitions.leaders")})
        return _spec(vl.layer(*layers).properties(width=WIDTH, height=max(80, 30 * n)))

    data = {
        leaders: "partitions.leaders",
        changes: "partitions.leader_changes",
        isr: "partitions.isr_events",
    }
    spec, empty = _spec_or_empty(
        model,
        {leaders: "partitions.leaders"},
        "No ReplicationResponse, ISR change or ChangeLeader names a "
        "partition leader in this input.",
        timeline,
    )
    out.append(
        Chart(
            "leaders",
            "Partitions",
            "Partition leaders over time",
            "Bars: the leader answering each partition's followers, labelled with its "
            "leader epoch; red ticks: leader changes; dots: ISR shrinks/expands and "
            "leader reports sent to the metadata leader.",
            data,
            spec,
            empty,
        )
    )

    def epochs() -> dict[str, Any]:
        return _spec(
            vl.Chart(vl.NamedData(leaders))
            .mark_line(interpolate="step-after", point=True)
            .encode(
                x=_time("start"),
                y=vl.Y("epoch:Q", title="leader epoch"),
                color=vl.Color("partition_key:N", title="partition"),
                tooltip=[
                    vl.Tooltip("partition_key:N"),
                    vl.Tooltip("leader:N"),
                    vl.Tooltip("epoch:Q"),
                    _tooltip_time("start", "from"),
                ],
            )
            .properties(width=WIDTH, height=HEIGHT)
        )

    spec, empty = _spec_or_empty(
        model, {leaders: "partitions.leaders"}, "No leader epoch seen in this input.", epochs
    )
    out.append(
        Chart(
            "epochs",
            "Partitions",
            "Leader epoch of each partition",
            "The leader epoch the leader's ReplicationResponses (or the metadata ops) "
            "carry; it rises at every leader change.",
            {leaders: "partitions.leaders"},
            spec,
            empty,
        )
    )
    lag = dataset_name("partitions.lag")

    def lag_chart() -> dict[str, Any]:
        return _spec(
            vl.Chart(vl.NamedData(lag))
            .mark_line(interpolate="step-after")
            .encode(
                x=_time(),
                y=vl.Y("lag:Q", title="messages behind HW"),
                color=vl.Color(
                    "series:N",
                    title="partition, follower",
                    legend=vl.Legend(symbolLimit=MAX_LEGEND),
                ),
                tooltip=[_tooltip_time(), vl.Tooltip("series:N"), vl.Tooltip("lag:Q")],
            )
            .properties(width=WIDTH, height=HEIGHT)
        )

    spec, empty = _spec_or_empty(
        model,
        {lag: "partitions.lag"},
        "No ReplicationRequest was answered in this input.",
        lag_chart,
    )
    out.append(
        Chart(
            "lag",
            "Partitions",
            "Follower lag",
            "The leader's high watermark minus the offset the follower asked from, "
            "largest per time bin.",
            {lag: "partitions.lag"},
            spec,
            empty,
        )
    )
    return out


def cluster_charts(model: dict[str, Any], bin_ms: float) -> list[Chart]:
    """The cluster section: unanswered requests (503), metadata leader, metadata ops.

    Args:
        model: The report's data model (Aggregator.model / `--json`).
        bin_ms: The time bins' width in milliseconds (bars span one bin).

    Returns:
        The section's charts, in page order.
    """
    out = []
    nr = dataset_name("cluster.no_responders")
    spec, empty = _spec_or_empty(
        model,
        {nr: "cluster.no_responders"},
        "No request went unanswered (no NATS 503 status in this input).",
        lambda: _binned_bars(nr, "target", "count", bin_ms, "503 replies", "request subject"),
    )
    out.append(
        Chart(
            "no_responders",
            "Cluster",
            "NATS 503: requests nobody was there to answer",
            "The NATS server's no-responders status (HMSG 'NATS/1.0 503') to a request, "
            "by the request's subject: a node that was down, a partition without a "
            "leader.",
            {nr: "cluster.no_responders"},
            spec,
            empty,
        )
    )
    terms = dataset_name("cluster.raft.terms")
    answers = dataset_name("cluster.metadata_leaders")
    elections = dataset_name("cluster.raft.elections")
    raft_decoded = bool(get_path(model, "cluster.raft.decoded"))
    leader_path = (
        "cluster.raft.terms"
        if raft_decoded and get_path(model, "cluster.raft.terms")
        else "cluster.metadata_leaders"
    )
    leader_name = terms if leader_path == "cluster.raft.terms" else answers

    def metadata_leader() -> dict[str, Any]:
        tips: list[Any] = [
            vl.Tooltip("leader:N"),
            _tooltip_time("start", "from"),
            _tooltip_time("end", "to"),
            vl.Tooltip("term:Q" if leader_path == "cluster.raft.terms" else "answers:Q"),
        ]
        bars = (
            vl.Chart(vl.NamedData(leader_name))
            .transform_calculate(
                end2=f"max(datum.end, datum.start + {bin_ms})", row="'metadata leader'"
            )
            .mark_bar(height=16)
            .encode(
                x=_time("start"),
                x2=vl.X2("end2:T"),
                y=vl.Y("row:N", title=None),
                color=vl.Color("leader:N", title="metadata leader", scale=node_scale(model)),
                tooltip=tips,
            )
        )
        layers = [bars]
        if raft_decoded and get_path(model, "cluster.raft.elections"):
            layers.append(
                vl.Chart(vl.NamedData(elections))
                .mark_rule(color="#d62728", strokeWidth=2)
                .encode(
                    x=_time(),
                    tooltip=[_tooltip_time(), vl.Tooltip("term:Q"), vl.Tooltip("candidate:N")],
                )
            )
        return _spec(vl.layer(*layers).properties(width=WIDTH, height=70))

    data = {leader_name: leader_path}
    if raft_decoded:
        data[elections] = "cluster.raft.elections"
    why = "No metadata leader seen in this input."
    if get_path(model, "storage.raft_dbs"):
        why = (
            "No metadata leader seen in this input: raft.db keeps each node's current term "
            "and vote, not who led."
        )
    spec, empty = _spec_or_empty(model, {leader_name: leader_path}, why, metadata_leader)
    source = (
        "the leader of each Raft term (AppendEntries); red rules: elections (RequestVote)"
        if leader_path == "cluster.raft.terms"
        else "the node answering PropagatedRequests and RaftJoinRequests"
    )
    out.append(
        Chart(
            "metadata_leader",
            "Cluster",
            "Metadata (Raft) leader",
            source[:1].upper() + source[1:] + ".",
            data,
            spec,
            empty,
        )
    )
    ops_path = (
        "cluster.raft.log_ops"
        if raft_decoded and get_path(model, "cluster.raft.log_ops")
        else "cluster.propagated_ops"
    )
    ops = dataset_name(ops_path)
    spec, empty = _spec_or_empty(
        model,
        {ops: ops_path},
        _no_ops(model),
        lambda: _binned_bars(ops, "op", "count", bin_ms, "operations", "operation"),
    )
    out.append(
        Chart(
            "metadata_ops",
            "Cluster",
            "Metadata operations",
            "Operations in the Raft log, each counted once (AppendEntries)"
            if ops_path == "cluster.raft.log_ops"
            else "Operations proposed to the metadata leader (PropagatedRequest): ISR "
            "changes, leader reports, stream changes.",
            {ops: ops_path},
            spec,
            empty,
        )
    )
    return out


def _no_ops(model: dict[str, Any]) -> str:
    """Why the metadata operations chart is empty: none at all, or only raft.db
    entries without an append time (hashicorp/raft before AppendedAt), which
    cannot be drawn over time but are there."""
    untimed = get_path(model, "cluster.raft.log_ops_untimed") or {}
    if not untimed:
        return "No metadata operation in this input."
    ops = ", ".join(f"{op} {n:,}" for op, n in untimed.items())
    return (
        f"No metadata operation with a time: raft.db holds {sum(untimed.values()):,} log "
        f"entries without an append time ({ops})."
    )


def problem_charts(model: dict[str, Any], bin_ms: float) -> list[Chart]:
    """The problems section: decode errors and reader notices over time.

    Args:
        model: The report's data model (Aggregator.model / `--json`).
        bin_ms: The time bins' width in milliseconds (bars span one bin).

    Returns:
        A list of the one problems chart.
    """
    name = dataset_name("problems.over_time")
    spec, empty = _spec_or_empty(
        model,
        {name: "problems.over_time"},
        "No problems: every message was read and decoded, and the capture reader noticed nothing.",
        lambda: _binned_bars(name, "kind", "count", bin_ms, "problems", "kind"),
    )
    return [
        Chart(
            "problems",
            "Problems",
            "Problems over time",
            "Envelopes that did not decode (error:KIND) and what the capture reader "
            "noticed (notice:KIND: gaps, cut messages, bytes that are not NATS...).",
            {name: "problems.over_time"},
            spec,
            empty,
        )
    ]


def storage_charts(model: dict[str, Any], bin_ms: float) -> list[Chart]:
    """The data directories' section: only when data directories were read.

    Args:
        model: The report's data model (Aggregator.model / `--json`).
        bin_ms: The time bins' width in milliseconds (bars span one bin).

    Returns:
        The stored-messages chart, or an empty list if no data directory was read.
    """
    if not get_path(model, "storage.replicas"):
        return []
    name = dataset_name("storage.stored_by_stream")
    spec, empty = _spec_or_empty(
        model,
        {name: "storage.stored_by_stream"},
        "The partitions hold no messages.",
        lambda: _binned_bars(name, "stream", "count", bin_ms, "messages stored", "stream"),
    )
    return [
        Chart(
            "stored",
            "Data directories",
            "Messages stored, by their timestamp",
            "Every entry of every replica's segments (each replica counts: a message "
            "on three replicas counts three times), by the timestamp it was stored with.",
            {name: "storage.stored_by_stream"},
            spec,
            empty,
        )
    ]


CLIENT = "Client (gRPC API)"


def client_charts(model: dict[str, Any], bin_ms: float) -> list[Chart]:
    """The client's section, only when the inputs held gRPC calls (report.client_calls).

    Args:
        model: The report's data model (Aggregator.model / `--json`).
        bin_ms: The time bins' width in milliseconds (bars span one bin).

    Returns:
        Error statuses, metadata lookups and the publish join, or an empty list.
    """
    if not model.get("client"):
        return []
    errors = dataset_name("client.errors_over_time")
    spec, empty = _spec_or_empty(
        model,
        {errors: "client.errors_over_time"},
        "Every call that ended with a grpc-status had OK, and no PublishResponse an asyncError.",
        lambda: _binned_bars(errors, "error", "count", bin_ms, "calls", "method: status"),
    )
    return [
        Chart(
            "client_errors",
            CLIENT,
            "Error statuses over time",
            "Calls that ended with a grpc-status other than OK, by method, and "
            "PublishAsync's asyncErrors, by the time they ended.",
            {errors: "client.errors_over_time"},
            spec,
            empty,
        ),
        _lookups_chart(model),
        _publish_join_chart(model),
    ]


def _lookups_chart(model: dict[str, Any]) -> Chart:
    """Metadata lookups' latency over time, the failovers shaded behind them."""
    path, windows = "client.metadata_lookups.lookups", "client.metadata_lookups.failovers"
    name, wname = dataset_name(path), dataset_name(windows)

    def make() -> dict[str, Any]:
        during = (
            vl.Chart(vl.NamedData(wname))
            .mark_rect(color="#e45756", opacity=0.25)
            .encode(
                x=_time("start"),
                x2=vl.X2("end:T"),
                tooltip=[
                    _tooltip_time("start", "failover from"),
                    _tooltip_time("end", "to"),
                    vl.Tooltip("changes:N"),
                ],
            )
        )
        after = (
            vl.Chart(vl.NamedData(wname))
            .transform_filter("datum.after_end != null")
            .mark_rect(color="#e45756", opacity=0.08)
            .encode(
                x=_time("end"),
                x2=vl.X2("after_end:T"),
                tooltip=[
                    _tooltip_time("end", "old leader silent from"),
                    _tooltip_time("after_end", "until"),
                ],
            )
        )
        points = (
            vl.Chart(vl.NamedData(name))
            .transform_filter("datum.latency_ms != null && datum.latency_ms > 0")
            .mark_point(filled=True, size=36)
            .encode(
                x=_time(),
                y=vl.Y(
                    "latency_ms:Q",
                    title="ms to the answer (log scale)",
                    scale=vl.Scale(type="log"),
                ),
                color=vl.Color(
                    "when:N",
                    title="when",
                    sort=["during", "after", "calm"],
                    scale=vl.Scale(
                        domain=["during", "after", "calm"], range=["#e45756", "#f58518", "#4c78a8"]
                    ),
                ),
                shape=vl.Shape("method:N", title="method"),
                tooltip=[
                    _tooltip_time(),
                    vl.Tooltip("method:N"),
                    vl.Tooltip("server:N"),
                    vl.Tooltip("outcome:N"),
                    vl.Tooltip("latency_ms:Q", format=".3f"),
                    vl.Tooltip("when:N"),
                ],
            )
        )
        return _spec(vl.layer(during, after, points).properties(width=WIDTH, height=HEIGHT))

    spec, empty = _spec_or_empty(
        model,
        {name: path},
        "The client looked up no metadata (no FetchMetadata or FetchPartitionMetadata call).",
        make,
    )
    return Chart(
        "client_metadata_lookups",
        CLIENT,
        "Metadata lookups around failovers",
        "Each FetchMetadata and FetchPartitionMetadata call at its start, by the time "
        "to its answer. Dark bands: failovers (a leader gone until the next shows); "
        "light bands: the old leader's node still silent after it.",
        {name: path, wname: windows},
        spec,
        empty,
    )


def _publish_join_chart(model: dict[str, Any]) -> Chart:
    """Each client publish: after its request, the NATS Publish, the Ack, the response."""
    path = "client.publish_join.messages"
    name = dataset_name(path)
    steps = ["to_nats_publish_ms", "to_nats_ack_ms", "to_response_ms"]

    def make() -> dict[str, Any]:
        base = (
            vl.Chart(vl.NamedData(name))
            .transform_fold(steps, as_=["step", "ms"])
            .transform_filter("datum.ms != null && datum.ms > 0")
        )
        return _spec(
            base.mark_point(filled=True, size=28, opacity=0.8)
            .encode(
                x=_time("request", "time of the client's PublishRequest (UTC)"),
                y=vl.Y(
                    "ms:Q", title="ms after the request (log scale)", scale=vl.Scale(type="log")
                ),
                color=vl.Color("step:N", title="step", sort=steps),
                tooltip=[
                    _tooltip_time("request", "request"),
                    vl.Tooltip("stream:N"),
                    vl.Tooltip("correlation_id:N"),
                    vl.Tooltip("ack_policy:N"),
                    vl.Tooltip("step:N"),
                    vl.Tooltip("ms:Q", format=".3f"),
                    vl.Tooltip("offset:Q"),
                ],
            )
            .properties(width=WIDTH, height=HEIGHT)
        )

    spec, empty = _spec_or_empty(
        model, {name: path}, "No client publish named a correlationId.", make
    )
    return Chart(
        "client_publish_join",
        CLIENT,
        "Client publishes through the cluster",
        "Each Publish/PublishAsync request joined by stream and correlationId to the "
        "NATS Publish the node put on the stream's subject, the partition leader's Ack, "
        "and the PublishResponse back to the client: each as ms after the request.",
        {name: path},
        spec,
        empty,
    )


def chart_list(model: dict[str, Any]) -> list[Chart]:
    """Every chart of the page, section by section.

    Args:
        model: The report's data model; its report.bin_s sets the bars' width.

    Returns:
        The charts in page order; those without data say why (Chart.empty).
    """
    bin_ms = float(model["report"]["bin_s"]) * 1000
    return (
        traffic_charts(model, bin_ms)
        + latency_charts(model, bin_ms)
        + client_charts(model, bin_ms)
        + partition_charts(model, bin_ms)
        + cluster_charts(model, bin_ms)
        + storage_charts(model, bin_ms)
        + problem_charts(model, bin_ms)
    )
