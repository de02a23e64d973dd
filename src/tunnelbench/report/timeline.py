"""One trial second by second: goodput, round trip and per-core CPU on one time axis,
for the median run of each configuration (what a median hides: a stall, a slow start,
a core that saturates only at times).

Read from what the trial stored: the receiver's 1 s intervals (``intervals``), the
pings sent every 100 ms during the trial (``probe_readings.rtt``) and the sampler's
10 Hz per-core series (``probes.series``). Second ``n`` is ``[n-1, n)`` from the start
of the measured window, the warm-up excluded, for all three.

A :class:`Timeline` is a stack of line charts over the same seconds; the renderers draw
it as panels sharing the time axis (inline SVG in HTML, one PNG for Markdown).
"""

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.errors import LabError
from tunnelbench.model import metrics as metric
from tunnelbench.model.records import TrialRecord, TrialStatus
from tunnelbench.probes.rtt import parse_ping
from tunnelbench.report.charts import ArtifactLookup, Chart, Series, config_labels
from tunnelbench.units import mbit

#: Beyond this many configurations the timelines are drawn small (goodput and round
#: trip only), several to a row: the small-multiples view.
COMPACT_FROM = 5
#: The CPU panels show at most this many cores of a configuration: its busiest.
CORES_SHOWN = 2
CPU_PARTS = ("user", "system", "softirq")


@dataclass(frozen=True)
class Timeline:
    id: str
    title: str
    note: str
    panels: tuple[Chart, ...]  # line charts over the same categories (seconds)
    compact: bool = False


def median_run(summary: ConfigSummary) -> TrialRecord | None:
    """The run whose goodput is the median of the configuration's (the lower middle one
    of an even count)."""
    ok = sorted(
        (t for t in summary.trials if t.status is TrialStatus.OK),
        key=lambda t: t.metrics[metric.GOODPUT.name],
    )
    return ok[(len(ok) - 1) // 2] if ok else None


def goodput_seconds(intervals: Sequence[float]) -> list[float]:
    return [mbit(v) for v in intervals]


def rtt_seconds(rtt: dict[str, Any], seconds: int) -> list[float | None]:
    """The median round trip of the replies that arrived in each second of the window;
    None for a second without one, and for every second of a trial whose pings did not
    run (a real client that cannot stamp times records only why: ``not_measured``)."""
    if "window" not in rtt:
        return [None] * seconds
    try:
        replies = parse_ping(rtt.get("loaded", "")).replies
    except LabError:
        return [None] * seconds  # cut short: no second can be told
    begin = rtt["window"][0]
    buckets: list[list[float]] = [[] for _ in range(seconds)]
    for reply in replies:
        index = int(reply.at - begin)
        if reply.at - begin >= 0 and index < seconds:
            buckets[index].append(reply.rtt_ms)
    return [statistics.median(b) if b else None for b in buckets]


def cpu_seconds(
    series: Sequence[dict[str, Any]], seconds: int
) -> dict[int, dict[str, list[float | None]]]:
    """Per core, each part's mean share in each second of the window (``busy`` alone for
    runs recorded before the sampler kept the parts)."""
    parts = [p for p in (*CPU_PARTS, "busy") if series and p in series[0]]
    if "user" in parts:
        parts.remove("busy")
    cores = len(series[0]["busy"]) if series else 0
    out: dict[int, dict[str, list[float | None]]] = {}
    for core in range(cores):
        out[core] = {}
        for part in parts:
            per_second: list[float | None] = []
            for second in range(seconds):
                values = [s[part][core] for s in series if second < s["t"] <= second + 1]
                per_second.append(statistics.fmean(values) if values else None)
            out[core][part] = per_second
    return out


def _busiest(cpu: dict[int, dict[str, list[float | None]]], count: int) -> list[int]:
    def load(core: int) -> float:
        return sum(v or 0.0 for part in cpu[core].values() for v in part)

    return sorted(sorted(cpu, key=load, reverse=True)[:count])


def timeline(
    summary: ConfigSummary, label: str, artifact: ArtifactLookup, *, compact: bool
) -> Timeline | None:
    """The median run of ``summary`` second by second; None when it stored no intervals."""
    trial = median_run(summary)
    if trial is None:
        return None
    intervals = artifact(trial.id, "intervals") or []
    if not intervals:
        return None
    seconds = len(intervals)
    axis = tuple(str(i + 1) for i in range(seconds))

    def panel(
        name: str, title: str, unit: str, series: tuple[Series, ...], top: float | None = None
    ) -> Chart:
        return Chart(
            id=f"timeline-{trial.id}-{name}",
            title=title,
            kind="line",
            x_label="second of the measured window",
            y_label=unit,
            categories=axis,
            series=series,
            value_max=top,
        )

    panels = [
        panel(
            "goodput",
            "goodput",
            "goodput (Mbit/s)",
            (Series("goodput", tuple(goodput_seconds(intervals))),),
        )
    ]
    readings = artifact(trial.id, "probe_readings") or {}
    if "rtt" in readings:
        rtt = tuple(rtt_seconds(readings["rtt"], seconds))
        panels.append(
            panel(
                "rtt", "round trip", "round trip (ms)", (Series("median ping in the second", rtt),)
            )
        )
    probes = artifact(trial.id, "probes") or {}
    cpu = cpu_seconds(probes.get("series") or [], seconds)
    for core in _busiest(cpu, 0 if compact else CORES_SHOWN):
        parts = tuple(Series(part, tuple(values)) for part, values in cpu[core].items())
        panels.append(panel(f"cpu{core}", f"cpu{core}", f"cpu{core} (%)", parts, top=100.0))
    g = summary.goodput
    runs = len([t for t in summary.trials if t.status is TrialStatus.OK])
    return Timeline(
        id=f"timeline-{trial.id}",
        title=label,
        note=(
            f"Trial {trial.id}, run {trial.repetition}: the median of {runs} runs"
            f" ({mbit(g.median) if g else 0:,.0f} Mbit/s). Each point is one second of the"
            " measured window: the receiver's goodput, the median ping that returned in it,"
            " and the mean share of the busiest cores (10 samples a second)."
        ),
        panels=tuple(panels),
        compact=compact,
    )


def timelines(summaries: Sequence[ConfigSummary], artifact: ArtifactLookup) -> list[Timeline]:
    """A timeline per measured configuration, in the run's order; small beyond
    :data:`COMPACT_FROM` configurations."""
    labels = config_labels(summaries)
    measured = [s for s in summaries if s.goodput is not None]
    compact = len(measured) >= COMPACT_FROM
    found = (timeline(s, labels[s.key], artifact, compact=compact) for s in measured)
    return [t for t in found if t is not None]
