"""Every chart (:mod:`tunnelbench.report.charts`) drawn by one renderer, matplotlib: as
inline SVG for the HTML pages (:func:`svg`) and as PNG files for the Markdown
(:func:`png`), so that the two cannot drift apart.

Bars, boxes and forest rows are horizontal, one row per category in reading order, so
long configuration labels stay readable; lines run left to right over their categories.
Only matplotlib's object-oriented API is used (a :class:`Figure` on an Agg canvas): no
pyplot, no display needed. The SVG keeps its text as text (``svg.fonttype: none``, the
page's font is the one laid out: DejaVu Sans), holds no script and refers to nothing
outside itself; its ids are prefixed with the chart's, so that several sit in one page.
"""

import io
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tunnelbench.report import files
from tunnelbench.report.charts import Chart, Reference, Series
from tunnelbench.report.timeline import Timeline

if TYPE_CHECKING:  # matplotlib itself is imported when a chart is drawn (see figure)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH_IN = 9.0
DPI = 110
ROW_IN = 0.32  # height of one horizontal bar row
NO_DATA = "no data"
LEGEND_CHARS = 120  # characters of legend text across the figure at font size 8
LEGEND_ROW_IN = 0.2
PANEL_IN = 1.5  # height of one timeline panel
MULTIPLE_IN = 1.6  # height of one row of small multiples
STRIP_IN = 0.5  # and of its CPU strip
MULTIPLES_COLUMNS = 2
HORIZONTAL = ("bar", "stacked", "box", "forest")


def _values(values: Sequence[float | None]) -> list[float]:
    return [math.nan if v is None else v for v in values]


def _plain(text: str) -> str:
    """A label drawn as written: matplotlib reads text between dollars as mathematics."""
    return text.replace("$", r"\$")


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
        label = None if ref.label in labelled else _plain(ref.label)
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


def _rows(ax: "Axes", chart: Chart) -> list[int]:
    """The category axis of a horizontal chart: a row per category, the first on top."""
    rows = list(range(len(chart.categories)))
    ax.set_yticks(rows, [_plain(_short(c)) for c in chart.categories], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(_plain(chart.y_label))
    ax.set_ylabel(_plain(chart.x_label))
    ax.grid(axis="x", alpha=0.3)
    return rows


def _no_data(ax: "Axes", rows: Sequence[int], at: float = 0.0) -> None:
    for r in rows:
        ax.text(at, r, f" {NO_DATA}", va="center", ha="left", fontsize=8, color="#777777")


def _bars(ax: "Axes", chart: Chart) -> None:
    """Horizontal bars: side by side (``bar``) or stacked (``stacked``) per category."""
    rows = _rows(ax, chart)
    stacked = chart.kind == "stacked"
    groups = 1 if stacked else max(1, len(chart.series))
    height = 0.8 / groups
    left = [0.0] * len(rows)
    for i, series in enumerate(chart.series):
        values = _values(series.values)
        if stacked:
            widths = [0.0 if math.isnan(v) else v for v in values]
            ax.barh(rows, widths, 0.8, left=left, label=_plain(series.name))
            left = [a + (0.0 if math.isnan(v) else v) for a, v in zip(left, values, strict=True)]
            continue
        offset = (i - (groups - 1) / 2) * height
        errors = _errors(series)
        at = [r + offset for r in rows]
        capsize = 3 if errors else 0
        ax.barh(at, values, height, xerr=errors, capsize=capsize, label=_plain(series.name))
    start = _log_start(chart) if chart.x_log and not stacked else 0.0
    _no_data(ax, [r for r in rows if all(s.values[r] is None for s in chart.series)], start)
    if start:
        _log_x(ax, True)
        ax.set_xlim(start, _top(chart) * 1.5)  # on a log axis, a margin is a factor
    else:
        ax.set_xlim(0, _top(chart))
    positions = {c: float(r) for r, c in enumerate(chart.categories)}
    _references(ax, chart, horizontal=True, positions=positions)


def _boxes(ax: "Axes", chart: Chart) -> None:
    """A box per category over its runs (median, quartiles, whiskers to the extremes),
    every run a dot on it: with 3-10 runs the dots are the data, the box their summary."""
    rows = _rows(ax, chart)
    samples = chart.series[0].samples or ()
    drawn = [(r, list(v)) for r, v in zip(rows, samples, strict=True) if v]
    if drawn:
        ax.boxplot([v for _, v in drawn], positions=[r for r, _ in drawn], orientation="horizontal",
                   widths=0.6, whis=(0, 100), showfliers=False, manage_ticks=False,
                   medianprops={"color": "#D55E00", "linewidth": 1.6})  # fmt: skip
        xs = [x for _, v in drawn for x in v]
        ys = [r + _jitter(i, len(v)) for r, v in drawn for i in range(len(v))]
        ax.plot(xs, ys, "o", markersize=3.5, color="#0072B2", alpha=0.8, label="a run")
    # Not from 0: the spread of the runs is what this chart is for.
    _no_data(ax, [r for r, v in zip(rows, samples, strict=True) if not v], at=ax.get_xlim()[0])
    _references(ax, chart, horizontal=True,
                positions={c: float(r) for r, c in enumerate(chart.categories)})  # fmt: skip


def _jitter(i: int, n: int) -> float:
    """A run's offset within its row, spread evenly: dots of equal value stay apart."""
    return 0.0 if n == 1 else -0.2 + 0.4 * i / (n - 1)


def _forest(ax: "Axes", chart: Chart) -> None:
    """A point per category and series with its interval, on a ratio axis."""
    rows = _rows(ax, chart)
    groups = max(1, len(chart.series))
    for i, series in enumerate(chart.series):
        offset = (i - (groups - 1) / 2) * 0.8 / groups
        errors = _errors(series)
        ax.errorbar(_values(series.values), [r + offset for r in rows], xerr=errors, fmt="o",
                    capsize=3, markersize=5, label=_plain(series.name))  # fmt: skip
    _no_data(ax, [r for r in rows if all(s.values[r] is None for s in chart.series)], at=1.0)
    _references(ax, chart, horizontal=True, positions={})
    _log_x(ax, chart.x_log)


def _lines(ax: "Axes", chart: Chart) -> None:
    """One line per series over the categories, left to right, with whiskers."""
    xs = list(range(len(chart.categories)))
    for series in chart.series:
        values, errors = _values(series.values), _errors(series)
        ax.errorbar(xs, values, yerr=errors, marker="o", markersize=4, capsize=3,
                    label=_plain(series.name))  # fmt: skip
    step = max(1, math.ceil(len(xs) / 20))  # at most ~20 tick labels
    ax.set_xticks(xs[::step], [_plain(c) for c in chart.categories][::step], fontsize=8)
    ax.set_xlabel(_plain(chart.x_label))
    ax.set_ylabel(_plain(chart.y_label))
    ax.set_ylim(0, _top(chart))
    ax.grid(alpha=0.3)
    positions = {c: float(x) for x, c in enumerate(chart.categories)}
    _references(ax, chart, horizontal=False, positions=positions)


def _time(ax: "Axes", chart: Chart, *, marker: str = "") -> None:
    """Each series over its own times (s)."""
    for series in chart.series:
        ax.plot(series.at or (), _values(series.values), marker=marker, markersize=2.5,
                linewidth=1.1, label=_plain(series.name))  # fmt: skip
    ax.set_ylabel(_plain(chart.y_label), fontsize=8)
    ax.set_ylim(0, _top(chart))
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)


def _cdf(ax: "Axes", chart: Chart) -> None:
    """Each category's values as the share of them at or below each value."""
    for label, values in zip(chart.categories, chart.series[0].samples or (), strict=True):
        if not values:
            continue
        ordered = sorted(values)
        shares = [100.0 * (i + 1) / len(ordered) for i in range(len(ordered))]
        ax.step(ordered, shares, where="post", linewidth=1.3,
                label=_plain(_short(f"{label} ({len(ordered)})")))  # fmt: skip
    ax.set_xlabel(_plain(chart.x_label))
    ax.set_ylabel(_plain(chart.y_label))
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    _log_x(ax, chart.x_log)


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
                    label=_plain(_short(f"{n}  {label}")))  # fmt: skip
        ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlabel(_plain(chart.x_label))
    ax.set_ylabel(_plain(chart.y_label))
    if chart.x_log:
        _log_x(ax, True)
    else:
        ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)


def _log_x(ax: "Axes", log: bool) -> None:
    """The horizontal axis in decades, labelled as plain numbers (0.01, 0.1, 1, 10: not
    10⁻², nor a label on every minor tick)."""
    if not log:
        return
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.10g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _log_start(chart: Chart) -> float:
    """Where the bars of a log value axis start: below the smallest value drawn (a bar
    has no zero to start from in decades) by at least half of it, at a power of ten so
    that the ticks read plainly."""
    drawn = [v for s in chart.series for v in (*s.values, *(s.low or ())) if v and v > 0]
    if not drawn:
        return 0.0
    return float(10 ** math.floor(math.log10(min(drawn) / 2)))


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


def _height(chart: Chart) -> float:
    if chart.kind not in HORIZONTAL:
        return 4.5
    per = 1 if chart.kind in ("stacked", "box") else max(1, len(chart.series))
    return max(3.0, 1.6 + ROW_IN * len(chart.categories) * per)


def figure(chart: Chart, *, titled: bool = True) -> "Figure":
    """The chart drawn on a new figure; ``titled``: with its title (an HTML page has it
    as the figure's heading)."""
    height = _height(chart)
    fig = _figure(WIDTH_IN, height)
    ax = fig.add_subplot()
    if titled:
        ax.set_title(_plain(chart.title), fontsize=11)
    draw = {"bar": _bars, "stacked": _bars, "box": _boxes, "forest": _forest,
            "scatter": _scatter, "cdf": _cdf, "time": _time}  # fmt: skip
    draw.get(chart.kind, _lines)(ax, chart)
    if chart.kind == "time":
        ax.set_xlabel(_plain(chart.x_label))
    handles, labels = ax.get_legend_handles_labels()
    if len(handles) > 1 or chart.reference_lines or chart.kind == "box":
        columns = _legend_columns(labels)
        fig.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize=8,
                   frameon=False)  # fmt: skip
        if chart.kind not in HORIZONTAL:  # the legend takes its room from the plot
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
    fig.suptitle(_plain(_short(title, 100)), fontsize=11)
    for ax, chart in zip(axes, panels, strict=True):
        _bars(ax, chart)
        ax.set_title(_plain(chart.title), fontsize=10)
        ax.set_ylabel("")
        handles, labels = ax.get_legend_handles_labels()
        if len(handles) > 1:
            ax.legend(handles, labels, fontsize=7, loc="lower right")
    png(fig, path)
    return True


def _legend_columns(labels: Sequence[str]) -> int:
    """As many columns (up to 4) as the longest label lets fit across the figure."""
    longest = max((len(label) for label in labels), default=1)
    return max(1, min(4, len(labels), LEGEND_CHARS // (longest + 8)))


def drawable(chart: Chart) -> bool:
    """Whether the chart has a value to draw (a run that measured nothing has none)."""
    return any(
        v is not None for s in chart.series for v in (*s.values, *(x for x in s.samples or () if x))
    )


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
        png(figure(chart), path)
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


def timeline_figure(t: Timeline, *, titled: bool = True) -> "Figure":
    """A timeline's panels stacked on one shared time axis."""
    height = (1.0 if titled else 0.6) + PANEL_IN * len(t.panels)
    # Margins in inches, not solved by the constrained layout (which draws the figure
    # once more to solve them): every label here is short, a number or a unit.
    fig = _figure(WIDTH_IN, height, layout=None)
    axes = fig.subplots(
        len(t.panels), 1, sharex=True, squeeze=False,
        gridspec_kw={
            "left": 0.85 / WIDTH_IN, "right": 1 - 0.15 / WIDTH_IN, "bottom": 0.5 / height,
            "top": 1 - (0.5 if titled else 0.1) / height, "hspace": 0.12,
        },
    )[:, 0]  # fmt: skip
    if titled:
        fig.suptitle(_plain(_short(t.title, 100)), fontsize=11)
    for ax, panel in zip(axes, t.panels, strict=True):
        _time(ax, panel, marker="." if len(panel.series[0].at or ()) <= 40 else "")
        if len(panel.series) > 1:
            ax.legend(fontsize=7, loc="upper right", ncols=len(panel.series), frameon=False)
    axes[-1].set_xlabel(_plain(t.panels[0].x_label))
    axes[-1].set_xlim(0, t.seconds)  # the whole window, not the first panel's points
    return fig


def multiples_figure(found: Sequence[Timeline]) -> "Figure":
    """Small multiples: each configuration's goodput (and round trip, on the right-hand
    axis) over its window, several to a row, and under it a strip of its busiest core's
    share."""
    columns = min(MULTIPLES_COLUMNS, len(found))
    rows = math.ceil(len(found) / columns)
    height = 0.4 + (MULTIPLE_IN + STRIP_IN) * rows
    # Margins set here, in inches, rather than solved by the constrained layout, which
    # draws the figure twice to solve it for every small axis and its twin: a
    # 16-configuration Markdown report took 8.8 s with it and 7.4 s without.
    fig = _figure(WIDTH_IN, height, layout=None)
    grid = fig.subplots(
        2 * rows, columns, squeeze=False,
        gridspec_kw={
            "left": 0.45 / WIDTH_IN, "right": 1 - 0.45 / WIDTH_IN,
            "bottom": 0.3 / height, "top": 1 - 0.55 / height,
            "wspace": 0.3, "hspace": 0.55, "height_ratios": [MULTIPLE_IN, STRIP_IN] * rows,
        },
    )  # fmt: skip
    for n in range(rows * columns):
        ax, strip = grid[2 * (n // columns), n % columns], grid[2 * (n // columns) + 1, n % columns]
        if n >= len(found):
            ax.set_visible(False)
            strip.set_visible(False)
            continue
        t = found[n]
        goodput = t.panels[0].series[0]
        ax.plot(goodput.at or (), _values(goodput.values), color="#0072B2", linewidth=1.0)
        ax.set_ylim(0, _top(t.panels[0]))
        ax.set_xlim(0, t.seconds)
        ax.set_title(_plain(_short(t.title, 64)), fontsize=7)
        ax.tick_params(labelsize=6, labelbottom=False)
        rtt = next((p for p in t.panels if p.id.endswith("-rtt")), None)
        if rtt is not None:
            right = ax.twinx()
            right.plot(rtt.series[0].at or (), _values(rtt.series[0].values), color="#D55E00",
                       linewidth=0.7, linestyle="--")  # fmt: skip
            right.set_ylim(bottom=0)
            right.tick_params(labelsize=6, colors="#D55E00")
        cpu = next((p for p in t.panels if p.title.startswith("cpu")), None)
        strip.set_xlim(0, t.seconds)
        strip.set_ylim(0, 100)
        strip.set_yticks([0, 100])
        strip.tick_params(labelsize=6)
        if cpu is not None:
            busy = cpu.series[0]
            strip.fill_between(busy.at or (), _values(busy.values), color="#999999", linewidth=0)
            strip.set_ylabel(cpu.title, fontsize=6)
    fig.suptitle(
        "goodput (Mbit/s, solid, left) and round trip (ms, dashed, right) over the window (s);"
        " under each, its busiest core's share (%)",
        fontsize=9,
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
        png(multiples_figure(found), path)
        return [path]
    paths = []
    for t in found:
        path = directory / f"{t.id}.png"
        png(timeline_figure(t), path)
        paths.append(path)
    return paths


def png(fig: "Figure", path: Path) -> None:
    """The figure as a PNG file (no software name in it: the same chart, the same bytes),
    written whole or not at all (:func:`tunnelbench.report.files.replace`)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    files.replace(path, buffer.getvalue())


@contextmanager
def _svg_settings(name: str) -> Iterator[None]:
    import matplotlib

    # Text as text (selectable, found by a search, read by a screen reader) in the font it
    # was laid out in; the ids of shared shapes salted by the chart, not by chance.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        yield


def svg(fig: "Figure", name: str, title: str) -> str:
    """The figure as an ``<svg>`` element to put in a page: id ``chart-<name>``, class
    ``chart``, a ``<title>``; every id inside it prefixed ``<name>-``, so that the
    references (markers, clip paths) of one chart never resolve into another's."""
    buffer = io.StringIO()
    with _svg_settings(name):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg ") :]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)
    # In a page the namespaces are the HTML parser's own: no URL is left in the page,
    # and href is SVG 2's name for xlink:href.
    text = re.sub(r' xmlns(:xlink)?="[^"]*"', "", text)
    text = text.replace("xlink:href=", "href=")
    text = re.sub(r'\bid="', f'id="{name}-', text)
    text = re.sub(r'(href="#|url\(#)', rf"\g<1>{name}-", text)
    # Its one style rule is for its own shapes, not the page's.
    text = text.replace('<style type="text/css">*{', f"<style>#chart-{name} *{{", 1)
    opening = text.index(">") + 1
    return (
        f'<svg id="chart-{escape(name)}" class="chart" role="img" '
        + text[len("<svg ") : opening]
        + f"<title>{escape(title)}</title>"
        + text[opening:].rstrip()
    )


def chart_svg(chart: Chart) -> str:
    """A chart for a page, whose figure heading names it."""
    return svg(figure(chart, titled=False), chart.id, chart.title)


def timeline_svg(t: Timeline) -> str:
    return svg(timeline_figure(t, titled=False), t.id, t.title)


def multiples_svg(found: Sequence[Timeline]) -> str:
    return svg(multiples_figure(found), "timelines", "goodput and round trip over the window")
