"""One trial over its measured window at the rate its instruments sample: goodput,
round trip and per-core CPU on one time axis, for the median run of each configuration
(what a median hides: a stall, a slow start, a core that saturates only at times).

Read from what the trial stored:

- goodput from the receivers' own intervals in the generator's documents (``iperf3``):
  every 0.1 s for clients measured over a common window (the "auto" warm-up's, the
  default), else every second; the trial's 1 s series (``intervals``) where there are no
  documents to read (iperf2);
- every ping that returned in the window, sent every 100 ms (``probe_readings.rtt``),
  counted as the probe counted its loaded figures (:func:`tunnelbench.probes.rtt.in_window`);
- the sampler's 10 Hz per-core series (``probes.series``).

Time 0 is the start of the measured window, the warm-up excluded, for all three. A
:class:`Timeline` is a stack of ``time`` charts over the same window; one renderer
draws it (inline SVG in HTML, PNG for Markdown).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.model import metrics as metric
from tunnelbench.model.records import TrialRecord, TrialStatus
from tunnelbench.probes.rtt import stored_window
from tunnelbench.report.charts import ArtifactLookup, Chart, Series, config_labels
from tunnelbench.traffic import iperf3_json
from tunnelbench.units import mbit

#: Beyond this many configurations the timelines are drawn small (goodput and round trip,
#: and the busiest core's whole share), several to a row: the small-multiples view.
COMPACT_FROM = 5
#: The CPU panels show at most this many cores of a configuration: its busiest.
CORES_SHOWN = 2
CPU_PARTS = ("user", "system", "softirq")

Points = tuple[tuple[float, ...], tuple[float, ...]]  # (seconds into the window, values)


@dataclass(frozen=True)
class Timeline:
    id: str
    title: str
    note: str
    panels: tuple[Chart, ...]  # ``time`` charts over the same window
    seconds: float  # the measured window's length
    compact: bool = False
    step_s: float = 1.0  # how often the goodput was reported


def median_run(summary: ConfigSummary) -> TrialRecord | None:
    """The run whose goodput is the median of the configuration's (the lower middle one
    of an even count)."""
    ok = sorted(
        (t for t in summary.trials if t.status is TrialStatus.OK),
        key=lambda t: t.metrics[metric.GOODPUT.name],
    )
    return ok[(len(ok) - 1) // 2] if ok else None


def goodput_points(documents: Any, intervals: Sequence[float]) -> tuple[Points, float]:
    """Goodput (Mbit/s) at the middle of each of the receivers' steps, every client
    summed, and the step (s): 0.1 s where every client reported that often, else 1 s.
    From the stored 1 s series where there are no documents (iperf2's trials)."""
    seconds = len(intervals)
    step, rates = 1.0, [float(v) for v in intervals]
    if documents:  # the same documents the trial's goodput was read from, read alike
        step = max(iperf3_json.interval_s(d) for d in documents)
        per_client = [iperf3_json.series(d, seconds, step) for d in documents]
        rates = [sum(column) for column in zip(*per_client, strict=True)]
    at = tuple(round((n + 0.5) * step, 3) for n in range(len(rates)))
    return (at, tuple(mbit(v) for v in rates)), step


def rtt_points(rtt: dict[str, Any]) -> Points:
    """Every ping that returned in the window: when it arrived, and its round trip (ms);
    none for a trial whose pings did not run (:func:`~tunnelbench.probes.rtt.stored_window`)."""
    begin, replies = stored_window(rtt)
    return tuple(round(r.at - begin, 3) for r in replies), tuple(r.rtt_ms for r in replies)


def cpu_points(series: Sequence[dict[str, Any]], seconds: float) -> dict[int, dict[str, Points]]:
    """Per core, each part's share in each of the sampler's samples in the window (at
    its end: a sample is the share over the 0.1 s before it); ``busy`` alone for runs
    recorded before the sampler kept the parts."""
    parts = [p for p in (*CPU_PARTS, "busy") if series and p in series[0]]
    if "user" in parts:
        parts.remove("busy")
    inside = [s for s in series if 0 < s["t"] <= seconds + 1e-6]
    cores = len(series[0]["busy"]) if series else 0
    at = tuple(round(float(s["t"]), 3) for s in inside)
    return {
        core: {part: (at, tuple(float(s[part][core]) for s in inside)) for part in parts}
        for core in range(cores)
    }


def _busiest(cpu: dict[int, dict[str, Points]], count: int) -> list[int]:
    def load(core: int) -> float:
        return sum(sum(values) for _, values in cpu[core].values())

    return sorted(sorted(cpu, key=load, reverse=True)[:count])


def timeline(
    summary: ConfigSummary, label: str, artifact: ArtifactLookup, *, compact: bool
) -> Timeline | None:
    """The median run of ``summary`` over its window; None when it stored no intervals."""
    trial = median_run(summary)
    if trial is None:
        return None
    intervals = artifact(trial.id, "intervals") or []
    if not intervals:
        return None
    seconds = len(intervals)

    def panel(name: str, unit: str, series: tuple[Series, ...], top: float | None = None) -> Chart:
        return Chart(
            id=f"timeline-{trial.id}-{name}",
            title=name,
            kind="time",
            x_label="seconds into the measured window",
            y_label=unit,
            categories=(),
            series=series,
            value_max=top,
        )

    (at, values), step = goodput_points(artifact(trial.id, "iperf3"), intervals)
    panels = [panel("goodput", "goodput (Mbit/s)", (Series("goodput", values, at=at),))]
    readings = artifact(trial.id, "probe_readings") or {}
    if "rtt" in readings:
        at, values = rtt_points(readings["rtt"])
        panels.append(panel("rtt", "round trip (ms)", (Series("each ping", values, at=at),)))
    probes = artifact(trial.id, "probes") or {}
    cpu = cpu_points(probes.get("series") or [], seconds)
    for core in _busiest(cpu, 1 if compact else CORES_SHOWN):
        parts = tuple(Series(part, v, at=t) for part, (t, v) in cpu[core].items())
        if compact:  # one line: the parts' sum
            busy = tuple(map(sum, zip(*(p.values for p in parts), strict=True)))
            parts = (Series("busy", busy, at=parts[0].at),)
        panels.append(panel(f"cpu{core}", f"cpu{core} (%)", parts, top=100.0))
    g = summary.goodput
    runs = len([t for t in summary.trials if t.status is TrialStatus.OK])
    every = "0.1 s" if step < 1 else "second (this generator's report)"
    return Timeline(
        id=f"timeline-{trial.id}",
        title=label,
        note=(
            f"Trial {trial.id}, run {trial.repetition}: the median of {runs} runs"
            f" ({mbit(g.median) if g else 0:,.0f} Mbit/s), over its measured window: the"
            f" receivers' goodput every {every}, each ping that returned, and the busiest"
            " cores' shares every 0.1 s."
        ),
        panels=tuple(panels),
        seconds=seconds,
        compact=compact,
        step_s=step,
    )


def timelines(summaries: Sequence[ConfigSummary], artifact: ArtifactLookup) -> list[Timeline]:
    """A timeline per measured configuration, in the run's order; small beyond
    :data:`COMPACT_FROM` configurations."""
    labels = config_labels(summaries)
    measured = [s for s in summaries if s.goodput is not None]
    compact = len(measured) >= COMPACT_FROM
    found = (timeline(s, labels[s.key], artifact, compact=compact) for s in measured)
    return [t for t in found if t is not None]
