"""Two runs side by side as pictures: the comparison's charts (both sides on one scale),
its HTML page, and its Markdown written with the charts beside it. Which format renders
a comparison how is :mod:`.formats`'s registry.

The table, its verdicts and the JSON are :mod:`.compare`'s; this module adds the charts
and the page around them, so every format says the same thing.
"""

from collections.abc import Callable
from html import escape
from pathlib import Path

from tunnelbench.analysis import significance
from tunnelbench.model import metrics as metric
from tunnelbench.model.records import TrialRecord
from tunnelbench.report import compare, compare_markdown, figures, files, html
from tunnelbench.report.charts import Chart, Reference, Series, ms_axis, spans_decades, spread
from tunnelbench.report.compare import Comparison
from tunnelbench.report.markdown import ChartFile, chart_lines, charts_dir
from tunnelbench.units import mbit

Reading = Callable[[TrialRecord], float | None]  # a trial -> one figure


def _pair_chart(
    comparison: Comparison,
    chart_id: str,
    title: str,
    unit: str,
    reading: Reading,
    *,
    round_trip: bool = False,
) -> Chart | None:
    """One bar per side per pair, on one scale; None when neither side has the figure.
    ``round_trip``: ``unit`` names a round trip in ms, on a log axis where its values
    span a decade (:func:`ms_axis`), as in a run's own charts."""
    series = [
        Series(f"A: {comparison.a.name}", *spread([row.a for row in comparison.rows], reading)),
        Series(f"B: {comparison.b.name}", *spread([row.b for row in comparison.rows], reading)),
    ]
    if not any(v is not None for s in series for v in s.values):
        return None
    log = False
    if round_trip:
        unit, log = ms_axis(unit, [v for s in series for v in (*s.values, *(s.high or ()))])
    return Chart(
        id=chart_id,
        title=title,
        kind="bar",
        x_label="configuration",
        y_label=unit,
        x_log=log,
        categories=tuple(compare.pair_name(comparison, row) for row in comparison.rows),
        series=tuple(series),
        note="Bars: the median of each side's runs; whiskers: min-max. Both runs on one scale.",
    )


def _ratios(
    rows: list[compare.Row], stats_of: Callable[[compare.Row], significance.Comparison | None]
) -> tuple[tuple[float | None, ...], tuple[float | None, ...], tuple[float | None, ...]]:
    """B ÷ A per pair with the ends of its 95% interval (None where it has none)."""
    found = [stats_of(row) for row in rows]
    return (
        tuple(None if st is None else st.ratio for st in found),
        tuple(None if st is None or st.ratio_ci is None else st.ratio_ci[0] for st in found),
        tuple(None if st is None or st.ratio_ci is None else st.ratio_ci[1] for st in found),
    )


def forest_chart(comparison: Comparison) -> Chart | None:
    """B ÷ A per pair with its 95% interval, goodput and loaded round trip on one ratio
    axis (a forest plot): which changes are real is where an interval misses 1."""
    series = [Series("goodput, B ÷ A", *_ratios(comparison.rows, lambda r: r.stats))]
    latency = _ratios(comparison.rows, lambda r: r.latency_stats)
    if any(v is not None for v in latency[0]):
        series.append(Series("round trip under load (p95), B ÷ A", *latency))
    if not any(v is not None for s in series for v in s.values):
        return None
    ends = [v for s in series for v in (*s.values, *(s.low or ()), *(s.high or ()))]
    return Chart(
        id="compare-forest",
        title="B against A, each pair's ratio with its 95% interval",
        kind="forest",
        x_label="configuration",
        y_label="B ÷ A (1: no change)",
        categories=tuple(compare.pair_name(comparison, row) for row in comparison.rows),
        series=tuple(series),
        reference_lines=(Reference("no change", 1.0),),
        x_log=spans_decades(ends),
        note="Points: the ratio of B's median to A's; whiskers: its bootstrap 95% interval"
        " (none with fewer than two runs a side). An interval that misses 1 is a change"
        " the runs show; above 1 is faster for goodput and a longer wait for the round trip.",
    )


def charts(comparison: Comparison) -> list[Chart]:
    """Each pair's ratio with its interval; goodput of both sides per pair; the loaded
    round trip too where both have it."""

    def goodput(t: TrialRecord) -> float | None:
        return mbit(t.metrics[metric.GOODPUT.name]) if metric.GOODPUT.name in t.metrics else None

    found = [
        forest_chart(comparison),
        _pair_chart(comparison, "compare-goodput", "Goodput, A and B", "goodput (Mbit/s)", goodput),
        _pair_chart(
            comparison,
            "compare-latency",
            "Round trip under load (95th percentile), A and B",
            "round trip",
            lambda t: t.metrics.get(metric.RTT_LOADED_P95.name),
            round_trip=True,
        ),
    ]
    return [c for c in found if c is not None]


def page(comparison: Comparison) -> str:
    """The comparison as one self-contained HTML page (no script, no fetch)."""
    header, body = compare.rows(comparison)
    numeric = [h in compare.NUMERIC for h in header]
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    cells = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{escape(c)}</td>' if num else f"<td>{escape(c)}</td>"
            for c, num in zip(row, numeric, strict=True)
        )
        + "</tr>"
        for row in body
    )
    environment = "".join(
        f"<li>{escape(line)}</li>" for line in compare.environment_lines(comparison)
    )
    notes = "".join(
        f'<p class="muted">{escape(line)}</p>' for line in compare.explanation(comparison)
    )
    drawn = "".join(
        f'<figure id="fig-{escape(c.id)}"><h3>{escape(c.title)}</h3>{figures.chart_svg(c)}'
        f"<figcaption>{escape(c.note)}</figcaption></figure>"
        for c in charts(comparison)
    )
    title = f"Comparison: {comparison.a.name} (A) and {comparison.b.name} (B)"
    pairing = "".join(f"<br>{escape(line)}" for line in compare.pairing_lines(comparison))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{html.CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{html.CSS}</style></head><body>"
        f"<header><h1>{escape(title)}</h1>"
        f'<p class="meta">A: {escape(comparison.a.describe())}<br>'
        f"B: {escape(comparison.b.describe())}{pairing}</p></header>"
        f'<section id="verdicts"><h2>Verdict per pair</h2><div class="scroll">'
        f'<table class="results"><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>'
        f"</div>{notes}</section>"
        f'<section id="charts"><h2>Charts</h2>{drawn}</section>'
        f'<section id="environment"><h2>Environment</h2><ul>{environment}</ul></section>'
        "</body></html>\n"
    )


def write_markdown(comparison: Comparison, path: Path) -> list[Path]:
    """The Markdown at ``path`` with its charts as PNG files in ``charts_dir(path)``;
    the paths written, the Markdown first."""
    directory = charts_dir(path)
    drawn = figures.write_charts(charts(comparison), directory)
    linked = [ChartFile(c, f"{directory.name}/{f.name}") for c, f in drawn]
    text = compare_markdown.render(comparison)
    if linked:
        text += "\n".join(chart_lines(linked)) + "\n"
    files.replace(path, text)  # last, and whole: it links only charts written
    return [path, *(f for _, f in drawn)]
