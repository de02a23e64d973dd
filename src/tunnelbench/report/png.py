"""The charts of a run (:mod:`tunnelbench.report.charts`) drawn as PNG files with
matplotlib, for the Markdown report.

Bars are horizontal, one row per category in reading order, so long configuration labels
stay readable; lines run left to right over their categories. Only matplotlib's
object-oriented API is used (a :class:`Figure` on an Agg canvas): no pyplot, no global
state, no display needed.
"""

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tunnelbench.report.charts import Chart, Reference, Series
from tunnelbench.report.timeline import Timeline

if TYPE_CHECKING:  # matplotlib itself is imported when a chart is drawn (see figure)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

WIDTH_IN = 9.0
DPI = 110
ROW_IN = 0.32  # height of one horizontal bar row
NO_DATA = "no data"
LEGEND_CHARS = 120  # characters of legend text across the figure at font size 8
LEGEND_ROW_IN = 0.2
PANEL_IN = 1.5  # height of one timeline panel
MULTIPLE_IN = 1.6  # height of one row of small multiples
MULTIPLES_COLUMNS = 2


def _values(values: Sequence[float | None]) -> list[float]:
    return [math.nan if v is None else v for v in values]


def _errors(series: Series) -> list[list[float]] | None:
    """Whisker lengths below and above each value, as matplotlib wants them."""
    if series.low is None or series.high is None:
        return None
    below, above = [], []
    for v, lo, hi in zip(series.values, series.low, series.high, strict=True):
        below.append(math.nan if v is None or lo is None else v - lo)
        above.append(math.nan if v is None or hi is None else hi - v)
    return [below, above]


def _references(ax: "Axes", chart: Chart, *, horizontal: bool, positions: dict[str, float]) -> None:
    """Dashed lines: across the chart, or over one category's bar only."""
    labelled: set[str] = set()
    styles = ["#444444", "#b22222", "#2e8b57"]
    colors: dict[str, str] = {}
    for ref in chart.reference_lines:
        color = colors.setdefault(ref.label, styles[len(colors) % len(styles)])
        label = None if ref.label in labelled else ref.label
        labelled.add(ref.label)
        _reference(ax, ref, color, label, horizontal=horizontal, positions=positions)


def _reference(
    ax: "Axes",
    ref: Reference,
    color: str,
    label: str | None,
    *,
    horizontal: bool,
    positions: dict[str, float],
) -> None:
    style = {"color": color, "linestyle": "--", "linewidth": 1.2, "label": label}
    if ref.category is None:
        if horizontal:
            ax.axvline(ref.value, **style)  # type: ignore[arg-type]
        else:
            ax.axhline(ref.value, **style)  # type: ignore[arg-type]
        return
    if ref.category not in positions:
        return
    at = positions[ref.category]
    if horizontal:
        ax.plot([ref.value, ref.value], [at - 0.45, at + 0.45], **style)  # type: ignore[arg-type]
    else:
        ax.plot([at - 0.45, at + 0.45], [ref.value, ref.value], **style)  # type: ignore[arg-type]


def _bars(ax: "Axes", chart: Chart) -> None:
    """Horizontal bars: side by side (``bar``) or stacked (``stacked``) per category."""
    n = len(chart.categories)
    rows = list(range(n))
    stacked = chart.kind == "stacked"
    groups = 1 if stacked else max(1, len(chart.series))
    height = 0.8 / groups
    left = [0.0] * n
    for i, series in enumerate(chart.series):
        values = _values(series.values)
        if stacked:
            widths = [0.0 if math.isnan(v) else v for v in values]
            ax.barh(rows, widths, 0.8, left=left, label=series.name)
            left = [a + (0.0 if math.isnan(v) else v) for a, v in zip(left, values, strict=True)]
            continue
        offset = (i - (groups - 1) / 2) * height
        errors = _errors(series)
        at = [r + offset for r in rows]
        capsize = 3 if errors else 0
        ax.barh(at, values, height, xerr=errors, capsize=capsize, label=series.name)
    missing = [r for r in rows if all(s.values[r] is None for s in chart.series)]
    for r in missing:
        ax.text(0, r, f" {NO_DATA}", va="center", ha="left", fontsize=8, color="#777777")
    ax.set_yticks(rows, [_short(c) for c in chart.categories], fontsize=8)
    ax.set_ylim(n - 0.5, -0.5)  # first category on top
    ax.set_xlabel(chart.y_label)
    ax.set_ylabel(chart.x_label)
    ax.set_xlim(0, _top(chart))
    ax.grid(axis="x", alpha=0.3)
    positions = {c: float(r) for r, c in enumerate(chart.categories)}
    _references(ax, chart, horizontal=True, positions=positions)


def _lines(ax: "Axes", chart: Chart) -> None:
    """One line per series over the categories, left to right, with whiskers."""
    xs = list(range(len(chart.categories)))
    for series in chart.series:
        values, errors = _values(series.values), _errors(series)
        ax.errorbar(xs, values, yerr=errors, marker="o", markersize=4, capsize=3, label=series.name)
    step = max(1, math.ceil(len(xs) / 20))  # at most ~20 tick labels
    ax.set_xticks(xs[::step], list(chart.categories)[::step], fontsize=8)
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(chart.y_label)
    ax.set_ylim(0, _top(chart))
    ax.grid(alpha=0.3)
    positions = {c: float(x) for x, c in enumerate(chart.categories)}
    _references(ax, chart, horizontal=False, positions=positions)


def _whisker(s: Series, i: int, at: float) -> list[list[float]] | None:
    """Matplotlib's error bar of value ``i`` of ``s`` (its distance to min and max)."""
    low = s.low[i] if s.low is not None else None
    high = s.high[i] if s.high is not None else None
    if low is None or high is None:
        return None
    return [[at - low], [high - at]]


def _scatter(ax: "Axes", chart: Chart) -> None:
    """A numbered point per category with min-max whiskers both ways."""
    assert chart.x is not None
    ys, xs = chart.series[0], chart.x
    n = 0
    for i, label in enumerate(chart.categories):
        x, y = xs.values[i], ys.values[i]
        if x is None or y is None:
            continue
        n += 1

        ax.errorbar([x], [y], xerr=_whisker(xs, i, x), yerr=_whisker(ys, i, y), fmt="o", capsize=3,
                    label=_short(f"{n}  {label}"))  # fmt: skip
        ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(chart.y_label)
    if chart.x_log:
        ax.set_xscale("log")
    else:
        ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)


def _top(chart: Chart) -> float:
    """The end of the value axis: the chart's own, else a margin above everything drawn
    (stacked bars end at their sum)."""
    if chart.value_max is not None:
        return chart.value_max
    if chart.kind == "stacked":
        columns = zip(*(s.values for s in chart.series), strict=True)
        ends = [sum(v or 0.0 for v in column) for column in columns]
    else:
        ends = [v for s in chart.series for v in (*s.values, *(s.high or ())) if v is not None]
    ends += [r.value for r in chart.reference_lines]
    return max(ends, default=0.0) * 1.08 or 1.0


def _short(label: str, limit: int = 70) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def figure(chart: Chart) -> "Figure":
    """The chart drawn on a new figure."""
    horizontal = chart.kind in ("bar", "stacked")
    rows = len(chart.categories) * (1 if chart.kind == "stacked" else max(1, len(chart.series)))
    height = max(3.0, 1.6 + ROW_IN * rows) if horizontal else 4.5
    # Imported here, not with the module: matplotlib takes a quarter of a second and
    # writes a cache under $HOME when imported, which every `tunnelbench` command (even
    # one run by a user whose HOME is not writable) would otherwise pay for.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(chart.title, fontsize=11)
    if horizontal:
        _bars(ax, chart)
    elif chart.kind == "scatter":
        _scatter(ax, chart)
    else:
        _lines(ax, chart)
    handles, labels = ax.get_legend_handles_labels()
    if len(handles) > 1 or chart.reference_lines:
        columns = _legend_columns(labels)
        fig.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize=8,
                   frameon=False)  # fmt: skip
        if not horizontal:  # the legend takes its room from the plot: give it more
            fig.set_figheight(height + LEGEND_ROW_IN * math.ceil(len(labels) / columns))
    return fig


def write_summary(title: str, panels: Sequence[Chart], path: Path) -> bool:
    """Bar charts of one run side by side on one image (the forum report's): their rows
    are the same configurations, named once, on the left. False, and nothing written,
    when there is nothing to draw."""
    panels = [c for c in panels if drawable(c)]
    if not panels:
        return False
    rows = max(len(c.categories) * max(1, len(c.series)) for c in panels)
    fig = _figure(WIDTH_IN * (1 + 0.5 * (len(panels) - 1)), max(3.0, 1.9 + ROW_IN * rows))
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    fig.suptitle(_short(title, 100), fontsize=11)
    for ax, chart in zip(axes, panels, strict=True):
        _bars(ax, chart)
        ax.set_title(chart.title, fontsize=10)
        ax.set_ylabel("")
        handles, labels = ax.get_legend_handles_labels()
        if len(handles) > 1:
            ax.legend(handles, labels, fontsize=7, loc="lower right")
    fig.savefig(path, metadata={"Software": None})
    return True


def _legend_columns(labels: Sequence[str]) -> int:
    """As many columns (up to 4) as the longest label lets fit across the figure."""
    longest = max((len(label) for label in labels), default=1)
    return max(1, min(4, len(labels), LEGEND_CHARS // (longest + 8)))


def drawable(chart: Chart) -> bool:
    """Whether the chart has a value to draw (a run that measured nothing has none)."""
    return any(v is not None for s in chart.series for v in s.values)


def write_charts(charts: Sequence[Chart], directory: Path) -> list[tuple[Chart, Path]]:
    """Draw each chart that has data into ``directory/<chart id>.png``; return each chart
    drawn with its file, in order. The directory is created when there is a chart."""
    written: list[tuple[Chart, Path]] = []
    used: set[str] = set()
    for chart in filter(drawable, charts):
        directory.mkdir(exist_ok=True)
        name = chart.id
        while name in used:
            name += "-2"
        used.add(name)
        path = directory / f"{name}.png"
        figure(chart).savefig(path, metadata={"Software": None})
        written.append((chart, path))
    return written


def _figure(
    width: float, height: float, layout: Literal["constrained"] | None = "constrained"
) -> "Figure":
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def timeline_figure(t: Timeline) -> "Figure":
    """A timeline's panels stacked on one shared time axis."""
    fig = _figure(WIDTH_IN, 1.0 + PANEL_IN * len(t.panels))
    axes = fig.subplots(len(t.panels), 1, sharex=True, squeeze=False)[:, 0]
    fig.suptitle(_short(t.title, 100), fontsize=11)
    for ax, panel in zip(axes, t.panels, strict=True):
        xs = [int(c) for c in panel.categories]
        for series in panel.series:
            ax.plot(xs, _values(series.values), marker="o", markersize=3, label=series.name)
        ax.set_ylabel(panel.y_label, fontsize=8)
        ax.set_ylim(0, panel.value_max or _top(panel))
        ax.grid(alpha=0.3)
        if len(panel.series) > 1:
            ax.legend(fontsize=7, loc="upper right", ncols=len(panel.series), frameon=False)
    axes[-1].set_xlabel(t.panels[0].x_label)
    axes[-1].xaxis.set_major_locator(_whole_seconds())
    return fig


def _whole_seconds() -> "MaxNLocator":
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def multiples_figure(found: Sequence[Timeline]) -> "Figure":
    """Small multiples: each configuration's goodput (and round trip, on the right-hand
    axis) second by second, several to a row."""
    columns = min(MULTIPLES_COLUMNS, len(found))
    rows = math.ceil(len(found) / columns)
    height = 0.4 + MULTIPLE_IN * rows
    # Margins set here, in inches, rather than solved by the constrained layout, which
    # draws the figure twice to solve it for every small axis and its twin: a
    # 16-configuration Markdown report took 8.8 s with it and 7.4 s without.
    fig = _figure(WIDTH_IN, height, layout=None)
    grid = fig.subplots(
        rows, columns, squeeze=False,
        gridspec_kw={
            "left": 0.45 / WIDTH_IN, "right": 1 - 0.45 / WIDTH_IN,
            "bottom": 0.3 / height, "top": 1 - 0.55 / height,
            "wspace": 0.3, "hspace": 0.36 * 1.6 / MULTIPLE_IN,
        },
    )  # fmt: skip
    for n, ax in enumerate(grid.flat):
        if n >= len(found):
            ax.set_visible(False)
            continue
        t = found[n]
        goodput = t.panels[0]
        xs = [int(c) for c in goodput.categories]
        ax.plot(xs, _values(goodput.series[0].values), color="#0072B2", linewidth=1.2)
        ax.set_ylim(0, _top(goodput))
        ax.set_title(_short(t.title, 64), fontsize=7)
        ax.tick_params(labelsize=6)
        ax.xaxis.set_major_locator(_whole_seconds())
        rtt = next((p for p in t.panels if p.id.endswith("-rtt")), None)
        if rtt is not None:
            right = ax.twinx()
            right.plot(xs, _values(rtt.series[0].values), color="#D55E00", linewidth=0.8,
                       linestyle="--")  # fmt: skip
            right.set_ylim(bottom=0)
            right.tick_params(labelsize=6, colors="#D55E00")
    fig.suptitle(
        "goodput (Mbit/s, solid, left) and round trip (ms, dashed, right) per second", fontsize=9
    )
    return fig


def write_timelines(found: Sequence[Timeline], directory: Path) -> list[Path]:
    """The timelines as PNG files in ``directory``: one per configuration, or one file of
    small multiples when they are compact."""
    if not found:
        return []
    directory.mkdir(exist_ok=True)
    if found[0].compact:
        path = directory / "timelines.png"
        multiples_figure(found).savefig(path, metadata={"Software": None})
        return [path]
    paths = []
    for t in found:
        path = directory / f"{t.id}.png"
        timeline_figure(t).savefig(path, metadata={"Software": None})
        paths.append(path)
    return paths
