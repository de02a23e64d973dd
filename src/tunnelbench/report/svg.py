"""Inline SVG of a :class:`~tunnelbench.report.charts.Chart`, with no script.

The drawings are responsive without scaling their text: horizontal positions are
percentages of the chart's width, vertical ones fixed pixels, and the SVG has no viewBox.
On a phone the bars get shorter while labels keep their size. Bar and stacked charts are
horizontal, one labelled row per configuration, so 50 configurations stay legible (the
chart grows in height); labels sit above their bars and wrap. Every bar and point has a
``<title>`` with its exact numbers (a tooltip, and text for screen readers).
"""

import math
from collections.abc import Sequence
from html import escape
from itertools import pairwise

from tunnelbench.report.charts import Chart, Reference, Series

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#7F7F7F")
DASHES = ("", "6 3", "2 3", "8 3 2 3")  # lines stay distinguishable in grey print
REF_COLOURS = ("#222222", "#B00020", "#5A3E99")
LINE_H = 15  # px per line of label text
LEGEND_H = 18
WRAP = 46  # characters per label line: fits a phone's width at 12 px
SPAN_BARS = 82.0  # % of the width the value axis spans; the rest holds value labels
GUTTER = 50  # px left of line plots (value ticks) and stacked rows (core names)
SPAN_GUTTER = 80.0
PLOT_H = 220  # px height of a line chart's plot area
# A value axis's tick labels, marked so that a reader (tests/browser) can check that they
# read as distinct numbers in order.
X_TICK, Y_TICK = {"class": "tick", "data-axis": "x"}, {"class": "tick", "data-axis": "y"}


def fmt(value: float) -> str:
    """A number for a label: thousands separated, one decimal below 100, two significant
    digits below 1 (a sub-millisecond round trip's axis read 0 0 0 0 0 with one decimal)."""
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) < 1:
        return f"{value:.2g}"
    return f"{value:.1f}".removesuffix(".0")


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top``."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    ticks = [0.0]
    while ticks[-1] < top - 1e-9 * top:
        ticks.append(ticks[-1] + step)
    return ticks


def decades(values: Sequence[float]) -> list[float]:
    """Powers of ten from at or below the smallest positive value to at or above the
    largest: a log axis's ticks (at least two)."""
    positive = [v for v in values if v > 0] or [1.0]
    first = math.floor(math.log10(min(positive)))
    last = max(first + 1, math.ceil(math.log10(max(positive))))
    return [10.0**k for k in range(first, last + 1)]


def wrap(text: str, width: int = WRAP) -> list[str]:
    """Split a label at its `` · `` separators into lines of about ``width`` characters."""
    lines: list[str] = []
    for part in text.split(" · "):
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    return lines


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _top(chart: Chart) -> float:
    if chart.value_max is not None:
        return chart.value_max
    values: list[float] = [r.value for r in chart.reference_lines]
    for s in chart.series:
        values += [v for v in s.values if v is not None]
        values += [v for v in s.high or () if v is not None]
    if chart.kind == "stacked":
        values += [
            sum(s.values[i] or 0.0 for s in chart.series) for i in range(len(chart.categories))
        ]
    return max(values, default=0.0)


def _pct(value: float, top: float, span: float) -> str:
    return f"{span * value / top:.3f}%" if top > 0 else "0%"


def _text(x: str, y: float, body: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x}" y="{y:.1f}"{extra}>{escape(body)}</text>'


def _legend(chart: Chart, y: float, marker: str) -> tuple[list[str], float]:
    """One row per series, then per kind of reference mark."""
    out: list[str] = []
    for i, s in enumerate(chart.series):
        colour = _colour(i)
        if marker == "line":
            dash = DASHES[i % len(DASHES)]
            out.append(
                f'<line x1="0" x2="22" y1="{y + 9}" y2="{y + 9}" stroke="{colour}" '
                f'stroke-width="2.5" stroke-dasharray="{dash}"/>'
            )
        else:
            out.append(f'<rect x="0" y="{y + 3}" width="22" height="12" fill="{colour}"/>')
        for n, line in enumerate(wrap(s.name)):
            out.append(_text("28", y + 13 + n * LINE_H, line))
        y += LEGEND_H + LINE_H * (len(wrap(s.name)) - 1)
    for j, (label, refs) in enumerate(_reference_kinds(chart.reference_lines).items()):
        value = f" ({fmt(refs[0].value)})" if refs[0].category is None else ""
        out.append(
            f'<line x1="11" x2="11" y1="{y + 1}" y2="{y + 17}" stroke="{REF_COLOURS[j % 3]}" '
            'stroke-width="2" stroke-dasharray="3 2"/>'
        )
        out.append(_text("28", y + 13, f"{label}{value}"))
        y += LEGEND_H
    return out, y + 6


def _reference_kinds(refs: Sequence[Reference]) -> dict[str, list[Reference]]:
    kinds: dict[str, list[Reference]] = {}
    for r in refs:
        kinds.setdefault(r.label, []).append(r)
    return kinds


def _value_axis(ticks: list[float], top: float, span: float, y: float, y_end: float) -> list[str]:
    """Vertical grid lines with their values above (y) the plot."""
    out = []
    for t in ticks:
        x = _pct(t, top, span)
        out.append(
            f'<line x1="{x}" x2="{x}" y1="{y + 4}" y2="{y_end}" stroke="#d0d0d0" stroke-width="1"/>'
        )
        out.append(_text(x, y, fmt(t), text_anchor="middle", fill="#555", **X_TICK))
    return out


def _bars(chart: Chart) -> tuple[list[str], float]:
    stacked = chart.kind == "stacked"
    top = _top(chart)
    ticks = nice_ticks(top) if chart.value_max is None else nice_ticks(chart.value_max, 4)
    top = ticks[-1]
    span = SPAN_GUTTER if stacked else SPAN_BARS
    out, y = _legend(chart, 0, "bar")
    out.append(_text("0", y + 12, chart.y_label, font_weight="bold"))
    y += LINE_H + 14
    axis_y = y
    y += 8
    plot: list[str] = []
    ref_colour = {label: REF_COLOURS[j % 3] for j, label in enumerate(_reference_kinds(
        chart.reference_lines
    ))}  # fmt: skip
    bar_h = 14 if len(chart.series) == 1 or stacked else 10
    heading = None
    for i, category in enumerate(chart.categories):
        group, item = category.rsplit(" · ", 1) if stacked and " · " in category else ("", "")
        if not stacked or group != heading:
            y += 6 if stacked and i else 0
            for line in wrap(group if stacked else category):
                plot.append(_text("0", y + 11, line))
                y += LINE_H
            heading = group
        row_top = y
        if stacked:
            plot += _stack(chart, i, category, item, top, span, y, bar_h)
            y += bar_h + 4
        else:
            marks = [r.value for r in chart.reference_lines if r.category in (None, category)]
            present = [k for k, s in enumerate(chart.series) if s.values[i] is not None]
            for k in present or [0]:
                s = chart.series[k]
                plot += _bar(s, i, category, _colour(k), top, span, y, bar_h, marks)
                y += bar_h + 2
        for r in chart.reference_lines:
            if r.category == category:
                x = _pct(r.value, top, span)
                dx = f' transform="translate({GUTTER},0)"' if stacked else ""
                plot.append(
                    f'<line x1="{x}" x2="{x}" y1="{row_top - 2}" y2="{y}" '
                    f'stroke="{ref_colour[r.label]}" stroke-width="2" stroke-dasharray="3 2"{dx}>'
                    f"<title>{escape(f'{r.label}: {fmt(r.value)}')}</title></line>"
                )
        y += 2 if stacked else 6
    grid = _value_axis(ticks, top, span, axis_y, y)
    for r in chart.reference_lines:
        if r.category is None:
            x = _pct(r.value, top, span)
            grid.append(
                f'<line x1="{x}" x2="{x}" y1="{axis_y + 4}" y2="{y}" '
                f'stroke="{ref_colour[r.label]}" stroke-width="2" stroke-dasharray="6 3">'
                f"<title>{escape(f'{r.label}: {fmt(r.value)}')}</title></line>"
            )
    if stacked:
        grid = [f'<g transform="translate({GUTTER},0)">', *grid, "</g>"]
    bottom = _value_axis(ticks, top, span, y + 14, y)
    if stacked:
        bottom = [f'<g transform="translate({GUTTER},0)">', *bottom, "</g>"]
    return [*out, *grid, *plot, *bottom], y + 22


def _bar(
    s: Series,
    i: int,
    category: str,
    colour: str,
    top: float,
    span: float,
    y: float,
    h: int,
    marks: Sequence[float],
) -> list[str]:
    """One bar with its whisker and value; the value is written right of the bar, its
    whisker and any reference mark on the row."""
    value = s.values[i]
    if value is None:
        return [_text("0", y + h - 2, "not measured", fill="#777", font_style="italic")]
    low = s.low[i] if s.low else None
    high = s.high[i] if s.high else None
    tip = f"{category}: {s.name} {fmt(value)}"
    if low is not None and high is not None:
        tip += f" (min {fmt(low)}, max {fmt(high)})"
    out = [
        f'<rect x="0" y="{y}" width="{_pct(value, top, span)}" height="{h}" fill="{colour}">'
        f"<title>{escape(tip)}</title></rect>"
    ]
    end = value
    if low is not None and high is not None and high > low:
        x1, x2, mid = _pct(low, top, span), _pct(high, top, span), y + h / 2
        out.append(
            f'<g stroke="#111" stroke-width="1.5"><line x1="{x1}" x2="{x2}" y1="{mid}" '
            f'y2="{mid}"/><line x1="{x1}" x2="{x1}" y1="{y + 2}" y2="{y + h - 2}"/>'
            f'<line x1="{x2}" x2="{x2}" y1="{y + 2}" y2="{y + h - 2}"/></g>'
        )
        end = max(end, high)
    end = max([end, *(m for m in marks if m <= end * 1.1)])
    out.append(_text(_pct(end, top, span), y + h - 2, fmt(value), dx="5", fill="#222"))
    return out


def _stack(
    chart: Chart, i: int, category: str, item: str, top: float, span: float, y: float, h: int
) -> list[str]:
    out = [_text("0", y + h - 2, item or category, fill="#333")]
    out.append(f'<g transform="translate({GUTTER},0)">')
    start = 0.0
    for k, s in enumerate(chart.series):
        value = s.values[i]
        if value is None or value <= 0:
            continue
        tip = f"{category}: {s.name} {fmt(value)}"
        out.append(
            f'<rect x="{_pct(start, top, span)}" y="{y}" width="{_pct(value, top, span)}" '
            f'height="{h}" fill="{_colour(k)}"><title>{escape(tip)}</title></rect>'
        )
        start += value
    out.append(_text(_pct(start, top, span), y + h - 2, fmt(start), dx="5", fill="#222"))
    out.append("</g>")
    return out


def _line(chart: Chart, plot_h: float = PLOT_H, x_axis: bool = True) -> tuple[list[str], float]:
    """``x_axis``: label the category axis (panels stacked on one axis label it once)."""
    top = _top(chart)
    ticks = nice_ticks(top, 4) if chart.value_max is None else nice_ticks(chart.value_max, 4)
    top = ticks[-1]
    out, y = _legend(chart, 0, "line") if len(chart.series) > 1 else ([], 0.0)
    out.append(_text("0", y + 12, chart.y_label, font_weight="bold"))
    y += LINE_H + 10
    plot_bottom = y + plot_h
    n = len(chart.categories)

    def xpos(i: int) -> str:
        return f"{2 + (SPAN_GUTTER - 4) * (i / (n - 1) if n > 1 else 0.5):.3f}%"

    def ypos(v: float) -> float:
        return plot_bottom - plot_h * v / top

    body = [f'<g transform="translate({GUTTER},0)">']
    for t in ticks:
        body.append(
            f'<line x1="0" x2="{SPAN_GUTTER}%" y1="{ypos(t):.1f}" y2="{ypos(t):.1f}" '
            'stroke="#d0d0d0" stroke-width="1"/>'
        )
    for j, (label, refs) in enumerate(_reference_kinds(chart.reference_lines).items()):
        for r in refs:
            body.append(
                f'<line x1="0" x2="{SPAN_GUTTER}%" y1="{ypos(r.value):.1f}" '
                f'y2="{ypos(r.value):.1f}" stroke="{REF_COLOURS[j % 3]}" stroke-width="2" '
                f'stroke-dasharray="3 2"><title>{escape(f"{label}: {fmt(r.value)}")}</title></line>'
            )
    for k, s in enumerate(chart.series):
        colour, dash = _colour(k), DASHES[k % len(DASHES)]
        points = [(i, v) for i, v in enumerate(s.values) if v is not None]
        for (i1, v1), (i2, v2) in pairwise(points):
            if i2 == i1 + 1:
                body.append(
                    f'<line x1="{xpos(i1)}" x2="{xpos(i2)}" y1="{ypos(v1):.1f}" '
                    f'y2="{ypos(v2):.1f}" stroke="{colour}" stroke-width="2.5" '
                    f'stroke-dasharray="{dash}"/>'
                )
        for i, v in points:
            low = s.low[i] if s.low else None
            high = s.high[i] if s.high else None
            tip = f"{s.name} at {chart.categories[i]}: {fmt(v)}"
            if low is not None and high is not None:
                tip += f" (min {fmt(low)}, max {fmt(high)})"
                if high > low:
                    body.append(
                        f'<line x1="{xpos(i)}" x2="{xpos(i)}" y1="{ypos(high):.1f}" '
                        f'y2="{ypos(low):.1f}" stroke="{colour}" stroke-width="1.5"/>'
                    )
            radius = 3.5 if n <= 30 else 2
            body.append(
                f'<circle cx="{xpos(i)}" cy="{ypos(v):.1f}" r="{radius}" fill="{colour}">'
                f"<title>{escape(tip)}</title></circle>"
            )
    step = max(1, math.ceil(n / 8))  # at most about 8 labels: they fit a phone's width
    shown = list(range(0, n, step))
    if n - 1 - shown[-1] >= step / 2:
        shown.append(n - 1)
    for i in shown if x_axis else []:
        body.append(
            _text(xpos(i), plot_bottom + 16, chart.categories[i], text_anchor="middle", fill="#333")
        )
    body.append("</g>")
    for t in ticks:
        body.append(
            _text(str(GUTTER - 6), ypos(t) + 4, fmt(t), text_anchor="end", fill="#555", **Y_TICK)
        )
    if not x_axis:
        return [*out, *body], plot_bottom + 8
    body.append(_text(f"{GUTTER}", plot_bottom + 36, chart.x_label, font_weight="bold"))
    return [*out, *body], plot_bottom + 44


def _scatter(chart: Chart) -> tuple[list[str], float]:
    """A point per category, numbered, with whiskers both ways; the legend names each
    number (colours repeat after seven points, the numbers do not)."""
    assert chart.x is not None and len(chart.series) == 1
    ys, xs = chart.series[0], chart.x
    points = [
        (i, x, y)
        for i, (x, y) in enumerate(zip(xs.values, ys.values, strict=True))
        if x is not None and y is not None
    ]
    y_ticks = nice_ticks(max([*(v for v in ys.high or ys.values if v is not None), 0.0]), 4)
    if chart.x_log:
        x_ticks = decades([v for v in (*(xs.low or ()), *(xs.high or xs.values)) if v])
    else:
        x_ticks = nice_ticks(max([*(v for v in xs.high or xs.values if v is not None), 0.0]), 4)
    out: list[str] = []
    y = 0.0
    for n, (i, _, _) in enumerate(points):
        out.append(f'<circle cx="8" cy="{y + 9}" r="5" fill="{_colour(n)}"/>')
        lines = wrap(f"{n + 1}  {chart.categories[i]}")
        for k, line in enumerate(lines):
            out.append(_text("28", y + 13 + k * LINE_H, line))
        y += LEGEND_H + LINE_H * (len(lines) - 1)
    out.append(_text("0", y + 18, chart.y_label, font_weight="bold"))
    y += LINE_H + 16
    plot_bottom = y + PLOT_H

    def xpos(v: float) -> str:
        if chart.x_log:
            first, last = math.log10(x_ticks[0]), math.log10(x_ticks[-1])
            share = (math.log10(max(v, x_ticks[0])) - first) / (last - first)
        else:
            share = v / x_ticks[-1]
        return f"{2 + (SPAN_GUTTER - 4) * share:.3f}%"

    def ypos(v: float) -> float:
        return plot_bottom - PLOT_H * v / y_ticks[-1]

    body = [f'<g transform="translate({GUTTER},0)">']
    for t in y_ticks:
        body.append(
            f'<line x1="0" x2="{SPAN_GUTTER}%" y1="{ypos(t):.1f}" y2="{ypos(t):.1f}" '
            'stroke="#d0d0d0" stroke-width="1"/>'
        )
    for t in x_ticks:
        body.append(
            f'<line x1="{xpos(t)}" x2="{xpos(t)}" y1="{ypos(y_ticks[-1]):.1f}" '
            f'y2="{plot_bottom:.1f}" stroke="#e4e4e4" stroke-width="1"/>'
        )
        body.append(
            _text(xpos(t), plot_bottom + 16, fmt(t), text_anchor="middle", fill="#333", **X_TICK)
        )
    for n, (i, x, v) in enumerate(points):
        colour = _colour(n)
        tip = f"{n + 1} {chart.categories[i]}: {fmt(v)} {ys.name}, {fmt(x)} {xs.name}"
        if ys.low and ys.high and (lo := ys.low[i]) is not None and (hi := ys.high[i]) is not None:
            body.append(
                f'<line x1="{xpos(x)}" x2="{xpos(x)}" y1="{ypos(hi):.1f}" y2="{ypos(lo):.1f}" '
                f'stroke="{colour}" stroke-width="1.5"/>'
            )
        if xs.low and xs.high and (lo := xs.low[i]) is not None and (hi := xs.high[i]) is not None:
            body.append(
                f'<line x1="{xpos(lo)}" x2="{xpos(hi)}" y1="{ypos(v):.1f}" y2="{ypos(v):.1f}" '
                f'stroke="{colour}" stroke-width="1.5"/>'
            )
        body.append(
            f'<circle cx="{xpos(x)}" cy="{ypos(v):.1f}" r="5" fill="{colour}">'
            f"<title>{escape(tip)}</title></circle>"
        )
        body.append(_text(xpos(x), ypos(v) - 8, str(n + 1), dx="6", fill="#222"))
    body.append("</g>")
    for t in y_ticks:
        body.append(
            _text(str(GUTTER - 6), ypos(t) + 4, fmt(t), text_anchor="end", fill="#555", **Y_TICK)
        )
    body.append(_text(f"{GUTTER}", plot_bottom + 36, chart.x_label, font_weight="bold"))
    return [*out, *body], plot_bottom + 44


def render(chart: Chart, plot_h: float | None = None, x_axis: bool = True) -> str:
    """The chart as one ``<svg>`` element, ``id="chart-<chart id>"``; for a line chart,
    ``plot_h`` the height of its plot area when not the default, and ``x_axis`` whether
    its category axis is labelled."""
    if chart.kind == "line":
        parts, height = _line(chart, plot_h or PLOT_H, x_axis)
    else:
        parts, height = _scatter(chart) if chart.kind == "scatter" else _bars(chart)
    cid = f"chart-{escape(chart.id)}"
    return (
        f'<svg id="{cid}" class="chart" width="100%" '
        f'height="{height:.0f}" role="img" aria-labelledby="{cid}-title {cid}-desc" '
        'font-size="12">'
        f'<title id="{cid}-title">{escape(chart.title)}</title>'
        f'<desc id="{cid}-desc">{escape(chart.note)}</desc>' + "".join(parts) + "</svg>"
    )
