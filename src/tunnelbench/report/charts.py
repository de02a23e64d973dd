"""The charts of a run as data: what to draw, not how.

One renderer (:mod:`tunnelbench.report.figures`, matplotlib) draws every :class:`Chart`,
as inline SVG in the HTML pages and as PNG files beside the Markdown, so the formats
cannot drift apart. Conventions:

- ``categories`` are the positions along the category axis (one per bar, per stacked bar
  or per point of a line); ``x_label`` names that axis and ``y_label`` the value axis,
  whatever the orientation the renderer picks (horizontal bars for many categories).
- Each :class:`Series` has one value per category; ``None`` means no data (a skipped or
  failed configuration, or a point a line does not have). ``low``/``high``, when present,
  give a whisker per value (min-max of the runs).
- ``kind``: ``bar`` draws the series side by side per category; ``stacked`` stacks them;
  ``line`` joins each series' points in category order.
- The CPU chart's categories read ``<configuration label> · cpu<N>``, consecutive for
  one configuration; a renderer may show the configuration once as a heading.
- ``scatter``: each category is one point (a configuration), numbered in the legend;
  the one series gives its vertical value and ``x`` its horizontal one, each with
  whiskers; ``x_label`` then names the horizontal value axis.
- ``box``: a box plot per category of ``samples`` (the runs), each run a dot on it.
- ``cdf``: the empirical distribution of each category's ``samples`` (a line each);
  ``x_label`` names the values' axis, ``x_log`` puts it in decades.
- ``x_log`` on a ``bar`` chart puts its value axis in decades (bars are drawn
  horizontally, so that axis is the horizontal one): round trips, where a sub-millisecond
  bar would vanish beside a bloated queue's tens of ms (:func:`ms_axis`).
- ``time``: each series is a line over its own ``at`` (seconds), not the categories.
- ``forest``: a point per category (a pair) with its interval as whiskers, on a ratio
  axis; a :class:`Reference` marks "no change".
- A :class:`Reference` with ``category=None`` is a dashed line across the whole chart;
  with a category it marks only that category's bar (e.g. the baseline of one
  configuration).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tunnelbench.analysis.stats import summarize
from tunnelbench.analysis.summary import (
    GENERATOR_RETRANSMITS,
    KERNEL_RETRANSMITS,
    ConfigSummary,
    varying_axes,
)
from tunnelbench.model import metrics as metric_names
from tunnelbench.model.metrics import GOODPUT, RTT_IDLE, RTT_LOADED_P95, UDP_LOST_PACKETS
from tunnelbench.model.records import TrialRecord, TrialStatus
from tunnelbench.probes.rtt import stored_window
from tunnelbench.report.table import (
    AXIS_HEADINGS,
    axis_value,
    generators_counting,
    retransmits_note,
)
from tunnelbench.units import mbit

ChartKind = Literal["bar", "line", "stacked", "scatter", "box", "cdf", "time", "forest"]
ArtifactLookup = Callable[
    [int, str], Any
]  # (trial id, artifact name) -> content, e.g. Store.artifact

MTU_AXES = ("lab.lan_mtu", "lab.wan.mtu", "tunnel.mtu")
# Axes whose value reads on its own in a label, without its heading.
BARE_AXES = {"traffic.direction", "traffic.protocol", "lab.topology", "traffic.stream_mode"}
# The per-core rows of the CPU chart are capped so that 50 configurations stay readable.
MAX_CPU_ROWS = 160


@dataclass(frozen=True)
class Series:
    name: str
    values: tuple[float | None, ...]
    low: tuple[float | None, ...] | None = None
    high: tuple[float | None, ...] | None = None
    samples: tuple[tuple[float, ...], ...] | None = None  # box, cdf: per category
    at: tuple[float, ...] | None = None  # time: where each value lies (s)


@dataclass(frozen=True)
class Reference:
    label: str
    value: float
    category: str | None = None  # None: across the chart; else only on that category


@dataclass(frozen=True)
class Chart:
    id: str  # stable, usable as an HTML id or a file name: throughput, streams, ...
    title: str
    kind: ChartKind
    x_label: str  # the category axis
    y_label: str  # the value axis, with its unit
    categories: tuple[str, ...]
    series: tuple[Series, ...]
    reference_lines: tuple[Reference, ...] = ()
    note: str = ""  # one or two sentences shown under the chart
    value_max: float | None = None  # fixed top of the value axis (100 for CPU %), else auto
    x: Series | None = None  # a scatter's horizontal values, one per category
    x_log: bool = False  # the horizontal value axis in decades (values that span them)
    # (a bar chart's value axis: its bars are horizontal)


# --- configuration labels ---


def label_axes(summaries: Sequence[ConfigSummary]) -> list[str]:
    return [
        a
        for a in varying_axes(list(summaries))
        if a in AXIS_HEADINGS and a not in ("tunnel.kind", "tunnel.implementation")
    ]


def setting_parts(summary: ConfigSummary, axes: Sequence[str]) -> list[str]:
    """The settings of ``axes`` as a label names them (``queue pfifo``, ``upload``)."""
    parts = []
    for axis in axes:
        value = axis_value(summary, axis)
        if value == "-":  # e.g. the tunnel MTU of the baseline
            continue
        parts.append(value if axis in BARE_AXES else f"{AXIS_HEADINGS[axis]} {value}")
    return parts


def _label(summary: ConfigSummary, axes: Sequence[str]) -> str:
    return " · ".join([summary.label, *setting_parts(summary, axes)])


def config_labels(summaries: Sequence[ConfigSummary]) -> dict[str, str]:
    """A short, unique label per configuration key: the tunnel and the settings that vary
    in this run (``wireguard (wireguard-go) · queue pfifo · limit 50 · upload``)."""
    axes = label_axes(summaries)
    labels: dict[str, str] = {}
    seen: dict[str, int] = {}
    for s in summaries:
        label = _label(s, axes)
        seen[label] = seen.get(label, 0) + 1
        labels[s.key] = label if seen[label] == 1 else f"{label} #{seen[label]}"
    return labels


# --- helpers ---


def _measured(summaries: Sequence[ConfigSummary]) -> list[ConfigSummary]:
    return [s for s in summaries if s.goodput is not None]


def _ok(summary: ConfigSummary) -> list[TrialRecord]:
    return [t for t in summary.trials if t.status is TrialStatus.OK]


def _median(values: Sequence[float]) -> float | None:
    summary = summarize(values)
    return summary.median if summary else None


def spread(
    summaries: Sequence[ConfigSummary | None], metric: Callable[[TrialRecord], float | None]
) -> tuple[tuple[float | None, ...], tuple[float | None, ...], tuple[float | None, ...]]:
    """Median, min and max of a per-trial metric over each configuration's good trials
    (None where a configuration is missing or has no value)."""
    med: list[float | None] = []
    low: list[float | None] = []
    high: list[float | None] = []
    for s in summaries:
        values = [] if s is None else [v for v in (metric(t) for t in _ok(s)) if v is not None]
        summary = summarize(values)
        med.append(summary.median if summary else None)
        low.append(summary.minimum if summary else None)
        high.append(summary.maximum if summary else None)
    return tuple(med), tuple(low), tuple(high)


def _not_measured(summaries: Sequence[ConfigSummary]) -> str:
    """A sentence on the configurations a chart leaves out (they have no numbers)."""
    skipped = sum(1 for s in summaries if s.skipped is not None)
    failed = sum(1 for s in summaries if s.skipped is None and s.goodput is None)
    parts = []
    if skipped:
        parts.append(f"{skipped} skipped on this machine")
    if failed:
        parts.append(f"{failed} whose runs all failed")
    if not parts:
        return ""
    return f"Not shown: {' and '.join(parts)} (see the results table)."


def _generator_series(summaries: Sequence[ConfigSummary]) -> str:
    """The name of the series of generators' own retransmit counts."""
    return f"TCP retransmits ({', '.join(generators_counting(list(summaries)))}'s count)"


def _retransmit_series(summaries: Sequence[ConfigSummary]) -> list[Series]:
    """TCP retransmits per run (median, min-max) as the results table shows them: one
    series for the kernel's window count and one for a generator's own count (runs
    recorded before the kernel's window counters), never one series of both."""
    series = []
    for metric, name in (
        (KERNEL_RETRANSMITS, "TCP retransmits"),
        (GENERATOR_RETRANSMITS, _generator_series(summaries)),
    ):
        shown = [s.retransmits if s.retransmits_metric == metric else None for s in summaries]
        if any(r is not None for r in shown):
            series.append(
                Series(
                    name,
                    tuple(None if r is None else r.median for r in shown),
                    tuple(None if r is None else r.minimum for r in shown),
                    tuple(None if r is None else r.maximum for r in shown),
                )
            )
    return series


# --- the charts ---


def throughput_chart(summaries: Sequence[ConfigSummary], labels: dict[str, str]) -> Chart:
    """Median goodput per configuration, min-max whiskers, baseline and link rate marked."""
    everything, summaries = summaries, _measured(summaries)
    categories = tuple(labels[s.key] for s in summaries)
    med, low, high = spread(summaries, lambda t: mbit(t.metrics[GOODPUT.name]))
    by_key = {s.key: s for s in summaries}
    refs: list[Reference] = []
    for s in summaries:
        base = by_key.get(s.baseline_key or "")
        if base is not None and base.goodput is not None:
            refs.append(Reference("baseline (no tunnel)", mbit(base.goodput.median), labels[s.key]))
    rates = {s.config.lab.wan.rate for s in summaries}
    if len(rates) == 1 and None not in rates:
        refs.append(Reference("WAN rate", mbit(rates.pop() or 0)))
    else:
        refs += [
            Reference("WAN rate", mbit(s.config.lab.wan.rate), labels[s.key])
            for s in summaries
            if s.config.lab.wan.rate is not None
        ]
    n = max((s.goodput.n for s in summaries if s.goodput), default=0)
    note = f"Bars: median of {n} runs; whiskers: min-max."
    # Only the marks drawn: a tuning session of a tunnel measures no baseline.
    marks = [
        text
        for label, text in (
            ("baseline (no tunnel)", "the no-tunnel baseline of the same lab and traffic"),
            ("WAN rate", "the shaped WAN rate"),
        )
        if any(r.label == label for r in refs)
    ]
    if marks:
        note += f" Marks: {' and '.join(marks)}."
    extra = _not_measured(everything)
    return Chart(
        id="throughput",
        title="Throughput per configuration",
        kind="bar",
        x_label="configuration",
        y_label="goodput (Mbit/s)",
        categories=categories,
        series=(Series("median goodput", med, low, high),),
        reference_lines=tuple(refs),
        note=f"{note} {extra}".strip(),
    )


def _effective_mtu(s: ConfigSummary) -> int:
    """The largest packet the traffic can send: the LAN MTU capped by the tunnel's MTU, or
    by the WAN MTU when there is no tunnel."""
    tunnel_mtu = s.resolved.setup.mtu or s.config.tunnel.mtu
    path = tunnel_mtu if tunnel_mtu else s.config.lab.wan.mtu
    return int(min(s.config.lab.lan_mtu, path))


def _sweep_chart(
    summaries: Sequence[ConfigSummary],
    *,
    chart_id: str,
    title: str,
    x_label: str,
    x_of: Callable[[ConfigSummary], int],
    swept: Sequence[str],
) -> Chart:
    """Goodput against one numeric setting: one line per combination of the others."""
    measured = [s for s in summaries if s.goodput is not None]
    axes = label_axes(summaries)

    def lines(name_axes: list[str], strict: bool) -> dict[str, dict[int, ConfigSummary]] | None:
        out: dict[str, dict[int, ConfigSummary]] = {}
        for s in measured:
            line = out.setdefault(_label(s, name_axes), {})
            if strict and x_of(s) in line:
                return None
            line[x_of(s)] = s
        return out

    # Lines are named by the settings not swept; when two configurations of one line
    # share an x (e.g. WAN MTUs with one path MTU), name them by every other axis.
    points = (
        lines([a for a in axes if a not in swept], True)
        or lines([a for a in axes if a != swept[0]], True)
        or lines(axes, False)
        or {}
    )
    xs = sorted({x_of(s) for s in measured})
    named = any(" · " in name for name in points)
    series = []
    for name, line in points.items():

        def at(
            x: int, pick: Callable[[ConfigSummary], float], line: dict[int, Any] = line
        ) -> float | None:
            return pick(line[x]) if x in line else None

        series.append(
            Series(
                name,
                tuple(at(x, lambda s: mbit(s.goodput.median)) for x in xs),  # type: ignore[union-attr]
                tuple(at(x, lambda s: mbit(s.goodput.minimum)) for x in xs),  # type: ignore[union-attr]
                tuple(at(x, lambda s: mbit(s.goodput.maximum)) for x in xs),  # type: ignore[union-attr]
            )
        )
    return Chart(
        id=chart_id,
        title=title,
        kind="line",
        x_label=x_label,
        y_label="goodput (Mbit/s)",
        categories=tuple(str(x) for x in xs),
        series=tuple(series),
        note="Points: median of the runs; whiskers: min-max. "
        + (
            "One line per tunnel and combination of the other settings."
            if named
            else "One line per tunnel."
        ),
    )


#: How far apart (a ratio) a scatter's round trips must lie for a log axis.
LOG_SPAN = 10.0


def spans_decades(values: Sequence[float | None]) -> bool:
    """Whether the positive values lie :data:`LOG_SPAN` or more apart (a log axis's)."""
    drawn = [v for v in values if v is not None and v > 0]
    return bool(drawn) and max(drawn) >= LOG_SPAN * min(drawn)


def ms_axis(name: str, values: Sequence[float | None]) -> tuple[str, bool]:
    """A round trip's axis label and whether it is in decades: a sub-millisecond path
    beside a bloated queue's 40 ms piles up at 0 on a linear axis, its points' numbers on
    top of each other."""
    log = spans_decades(values)
    return f"{name} (ms{', log scale' if log else ''})", log


def latency_chart(summaries: Sequence[ConfigSummary], labels: dict[str, str]) -> Chart | None:
    """Goodput against the round trip under load, a point per configuration (Flent's
    RRUL view): what each configuration's throughput costs in latency."""
    points = [s for s in _measured(summaries) if s.latency is not None and s.latency.p95_runs]
    if not points:
        return None
    goodput, goodput_low, goodput_high = spread(points, lambda t: mbit(t.metrics[GOODPUT.name]))
    rtt, rtt_low, rtt_high = spread(points, lambda t: t.metrics.get(RTT_LOADED_P95.name))
    x_label, log = ms_axis("round trip under load, 95th percentile", [*rtt_low, *rtt_high])
    return Chart(
        id="latency",
        title="Throughput against latency under load",
        kind="scatter",
        x_label=x_label,
        x_log=log,
        y_label="goodput (Mbit/s)",
        categories=tuple(labels[s.key] for s in points),
        series=(Series("goodput", goodput, goodput_low, goodput_high),),
        x=Series("loaded RTT p95", rtt, rtt_low, rtt_high),
        note=" ".join(
            part
            for part in (
                "Each point is a configuration: the median of its runs, whiskers min-max."
                " Up is faster, left is a shorter wait: pings every 100 ms from the client"
                " to the server while the traffic ran.",
                _not_measured(summaries),
            )
            if part
        ),
    )


def round_trip_chart(summaries: Sequence[ConfigSummary], labels: dict[str, str]) -> Chart | None:
    """The round trip idle and under load (95th percentile) per configuration, as bars
    beside the throughput's: the forum report's image shows both on one row each."""
    shown = _measured(summaries)
    if not any(s.latency is not None for s in shown):
        return None
    idle, _, _ = spread(shown, lambda t: t.metrics.get(RTT_IDLE.name))
    loaded, low, high = spread(shown, lambda t: t.metrics.get(RTT_LOADED_P95.name))
    y_label, log = ms_axis("round trip", [*idle, *loaded, *low, *high])
    return Chart(
        id="round-trip",
        title="Round trip, idle and under load",
        kind="bar",
        x_label="configuration",
        y_label=y_label,
        x_log=log,
        categories=tuple(labels[s.key] for s in shown),
        series=(Series("idle", idle), Series("under load, p95", loaded, low, high)),
        note="Pings every 100 ms from the client to the server; whiskers: min-max of the runs.",
    )


def summary_charts(summaries: Sequence[ConfigSummary], labels: dict[str, str]) -> list[Chart]:
    """The run at a glance: throughput, and the round trip where it was measured."""
    found = [throughput_chart(summaries, labels), round_trip_chart(summaries, labels)]
    return [c for c in found if c is not None]


def cpu_chart(summaries: Sequence[ConfigSummary], labels: dict[str, str]) -> Chart | None:
    """Per-core CPU of each configuration, stacked user/system/softirq/irq (medians)."""
    rows: list[tuple[str, dict[str, float]]] = []
    measured = [s for s in summaries if any(metric_names.cores(t.metrics) for t in _ok(s))]
    if not measured:
        return None
    cores_total = max(
        len(metric_names.cores(n for t in _ok(s) for n in t.metrics)) for s in measured
    )
    per_config = max(1, min(cores_total, MAX_CPU_ROWS // len(measured)))
    for s in measured:
        ok = _ok(s)
        cores = []
        for core in metric_names.cores(n for t in ok for n in t.metrics):
            parts = {
                p: _median(
                    [t.metrics[n] for t in ok if (n := metric_names.cpu(core, p)) in t.metrics]
                )
                or 0.0
                for p in ("user", "system", "softirq", "irq", "idle")
            }
            cores.append((f"cpu{core}", parts))
        if per_config < len(cores):
            busiest = sorted(cores, key=lambda c: c[1]["idle"])[:per_config]
            cores = [c for c in cores if c in busiest]
        rows += [(f"{labels[s.key]} · {name}", parts) for name, parts in cores]
    kinds = ["user", "system", "softirq"]
    if any(parts["irq"] > 0 for _, parts in rows):
        kinds.append("irq")
    note = "Median share of each core over the measured window, across the runs."
    if per_config < cores_total:
        note += f" Only the {per_config} busiest of {cores_total} cores per configuration."
    return Chart(
        id="cpu",
        title="CPU per core",
        kind="stacked",
        x_label="configuration · core",
        y_label="CPU time (%)",
        categories=tuple(r[0] for r in rows),
        series=tuple(Series(k, tuple(parts[k] for _, parts in rows)) for k in kinds),
        note=note,
        value_max=100.0,
    )


def _tunnel_drops(trial: TrialRecord) -> float | None:
    drops = [
        v
        for n, v in trial.metrics.items()
        if (device := metric_names.parse_device(n, "tunnel")) and device[1].endswith("_dropped")
    ]
    return sum(drops) if drops else None


def losses_chart(summaries: Sequence[ConfigSummary], labels: dict[str, str]) -> Chart | None:
    """TCP retransmits, tunnel device drops and UDP lost packets per configuration."""
    everything, summaries = summaries, _measured(summaries)
    metrics: list[tuple[str, Callable[[TrialRecord], float | None]]] = [
        ("tunnel device drops", _tunnel_drops),
        ("UDP lost packets", lambda t: t.metrics.get(UDP_LOST_PACKETS.name)),
    ]
    series = _retransmit_series(summaries)
    for name, metric in metrics:
        med, low, high = spread(summaries, metric)
        if any(v is not None for v in med):
            series.append(Series(name, med, low, high))
    if not series:
        return None
    return Chart(
        id="losses",
        title="Retransmits and drops per configuration",
        kind="bar",
        x_label="configuration",
        y_label="packets per trial",
        categories=tuple(labels[s.key] for s in summaries),
        series=tuple(series),
        note=" ".join(
            part
            for part in (
                "Median per trial over the runs; whiskers: min-max. Tunnel drops add the"
                " rx/tx drop counters of the tunnel devices at both ends.",
                _not_measured(everything),
                retransmits_note(list(summaries), marked_as=_generator_series(summaries)),
            )
            if part
        ),
    )


def runs_chart(summaries: Sequence[ConfigSummary], labels: dict[str, str]) -> Chart | None:
    """Every run's goodput per configuration, as a box plot with each run a dot: what a
    median and its interval summarise (an outlier run, two clusters). None for runs of
    one repetition, whose box would be the bar."""
    shown = _measured(summaries)
    samples = tuple(tuple(mbit(t.metrics[GOODPUT.name]) for t in _ok(s)) for s in shown)
    if max((len(v) for v in samples), default=0) < 2:
        return None
    return Chart(
        id="runs",
        title="Goodput of every run",
        kind="box",
        x_label="configuration",
        y_label="goodput (Mbit/s)",
        categories=tuple(labels[s.key] for s in shown),
        series=(Series("goodput", tuple(_median(v) for v in samples), samples=samples),),
        note="Each dot is one run; the box spans the middle half of the runs, its line the"
        " median, its whiskers the slowest and the fastest run.",
    )


def latency_cdf_chart(
    summaries: Sequence[ConfigSummary], labels: dict[str, str], artifact: ArtifactLookup
) -> Chart | None:
    """The distribution of every ping under load, all runs of each configuration pooled
    (Flent's CDF): a tail that the 95th percentile hides, two modes of a queue."""
    shown, samples = [], []
    for s in _measured(summaries):
        found = [
            r.rtt_ms
            for t in _ok(s)
            for r in stored_window((artifact(t.id, "probe_readings") or {}).get("rtt", {}))[1]
        ]
        if found:
            shown.append(s)
            samples.append(tuple(found))
    if not samples:
        return None
    x_label, log = ms_axis("round trip under load", [x for v in samples for x in (min(v), max(v))])
    return Chart(
        id="latency-cdf",
        title="Round trip under load: every ping",
        kind="cdf",
        x_label=x_label,
        x_log=log,
        y_label="pings at or below (%)",
        categories=tuple(labels[s.key] for s in shown),
        series=(Series("round trip", tuple(_median(v) for v in samples), samples=tuple(samples)),),
        note="The share of the pings sent every 100 ms while the traffic ran that returned"
        " within each round trip, every run's measured window pooled (the legend counts"
        " them); a line further left is a shorter wait, a long flat tail a few slow pings.",
    )


def charts_for_run(
    summaries: Sequence[ConfigSummary], artifact: ArtifactLookup | None = None
) -> list[Chart]:
    """Every chart that applies to a run, in reading order (``summaries`` from
    :func:`tunnelbench.analysis.summary.summarize_run`; ``artifact`` reads what trials
    stored, for the charts of every ping); the time series of single runs are
    :mod:`tunnelbench.report.timeline`'s."""
    labels = config_labels(summaries)
    charts: list[Chart | None] = [
        throughput_chart(summaries, labels),
        runs_chart(summaries, labels),
    ]
    axes = varying_axes(list(summaries))
    if "traffic.streams" in axes:
        charts.append(
            _sweep_chart(
                summaries,
                chart_id="streams",
                title="Throughput against streams",
                x_label="parallel streams",
                x_of=lambda s: s.config.traffic.streams,
                swept=["traffic.streams"],
            )
        )
    if any(a in axes for a in MTU_AXES) and len({_effective_mtu(s) for s in summaries}) > 1:
        charts.append(
            _sweep_chart(
                summaries,
                chart_id="mtu",
                title="Throughput against MTU",
                x_label="MTU of the traffic's path (bytes)",
                x_of=_effective_mtu,
                swept=[a for a in MTU_AXES if a in axes],
            )
        )
    charts.append(latency_chart(summaries, labels))
    if artifact is not None:
        charts.append(latency_cdf_chart(summaries, labels, artifact))
    charts.append(cpu_chart(summaries, labels))
    charts.append(losses_chart(summaries, labels))
    return [c for c in charts if c is not None]
