"""A comparison as Markdown to paste into a forum post (``compare --format md``).

A forum's post column is about 100 characters, and a pipe table cannot wrap: the
terminal's 12 columns made a 237-character row. So the Markdown has a five-column table
(the pair, both medians, the goodput verdict, both loaded round trips, their verdict)
within ``width``, split into one table per combination of the other settings when wider
(as posts split results by MTU or stream count), left out when even that is wider; then
one list item a pair with every figure of its verdicts (interval, p-value, retransmits,
noise). As in the run's forum post (:mod:`.forum`), only tables are fitted: prose and
list items are one line each, since Discourse keeps a post's line breaks and a paragraph
wrapped at 100 columns reads ragged in its column. Every number stays in
``--format json``.
"""

import json
import re
from collections.abc import Collection

from tunnelbench.analysis import significance
from tunnelbench.report import compare
from tunnelbench.report.compare import Comparison, Row
from tunnelbench.report.markdown import escape, table
from tunnelbench.report.table import AXIS_HEADINGS, axis_value

#: Characters a line: a forum's post column (as the run's forum Markdown).
WIDTH = 100
COLUMNS = ("configuration", "Mbit/s A→B", "goodput", "RTT p95 ms A→B", "RTT p95")
NUMERIC = {1, 3}


def _both(a: str, b: str, arrow: str = " → ") -> str:
    return "-" if a == b == "-" else f"{a}{arrow}{b}"


def _brief(verdict: str) -> str:
    """A short verdict without its parenthesis (``not decided, within noise``): the
    figures are in the pair's list item below the table."""
    return re.sub(r" \([^)]*\)", "", verdict)


def common_changes(comparison: Comparison) -> dict[str, str]:
    """The settings every pair changed the same way (``streams: 1 → 4``), said once
    above the table instead of in every row."""
    paired = [r for r in comparison.rows if r.a is not None and r.b is not None]
    if not paired:
        return {}
    found = [
        {path: compare.changed_text(r, path) for path, _, _ in r.changed if path != "tunnel.kind"}
        for r in paired
    ]
    common = {p: t for p, t in found[0].items() if all(f.get(p) == t for f in found[1:])}
    return {p: t for p, t in common.items() if p != "tunnel.implementation"}


def _name(
    comparison: Comparison, row: Row, common: Collection[str], axes: list[str], group: list[str]
) -> str:
    """The pair's name without the settings said above its table: the changes every
    pair made (``common``, which a configuration on one side only did not) and the
    settings of its group's heading."""
    both = row.a is not None and row.b is not None
    return compare.pair_name(comparison, row, [*(common if both else ()), *group], axes)


def _heading(row: Row, paths: list[str]) -> str:
    """``queue pfifo · direction upload``: the group a row belongs to."""
    return " · ".join(
        f"{AXIS_HEADINGS[p]} {compare.either(row, lambda s, p=p: axis_value(s, p))}" for p in paths
    )


def _cells(row: Row, name: str) -> list[str]:
    return [
        name,
        _both(compare.median_cell(row.a), compare.median_cell(row.b), "→"),
        _brief(compare.short_verdict(row)),
        _both(compare.p95_cell(row.a), compare.p95_cell(row.b), "→"),
        _brief(compare.short_latency_verdict(row)),
    ]


def _tables(groups: dict[str, list[list[str]]], keep: list[int]) -> list[str]:
    """Each group's table under its heading (none for a single unnamed group)."""
    out: list[str] = []
    numeric = {k for k, i in enumerate(keep) if i in NUMERIC}
    for heading, body in groups.items():
        if heading:
            out += ["", f"**{escape(heading)}**"]
        out += [
            "",
            *table([COLUMNS[i] for i in keep], [[r[i] for i in keep] for r in body], numeric),
        ]
    return out


def tables(
    comparison: Comparison, common: dict[str, str], width: int
) -> tuple[list[str], list[str]]:
    """The pairs' tables within ``width`` and each pair's name: one table; if wider, one
    table per combination of the settings besides the tunnel's (as a heading, the rows
    named by the tunnel), as posts split results; if still wider, none (the list below
    says everything). Columns no pair has a figure for are left out."""
    axes = compare.table_axes(comparison)
    names = [_name(comparison, row, common, axes, []) for row in comparison.rows]
    keep = list(range(len(COLUMNS)))
    if all(r.latency_stats is None and not compare.p95_runs(r.a) and not compare.p95_runs(r.b)
           for r in comparison.rows):  # fmt: skip
        keep = keep[:3]
    one = {"": [_cells(row, n) for row, n in zip(comparison.rows, names, strict=True)]}
    lines = _tables(one, keep)
    if max(map(len, lines)) <= width:
        return lines, names
    outer = [a for a in axes if not a.startswith("tunnel.") and a not in common]
    grouped: dict[str, list[list[str]]] = {}
    for row in comparison.rows:
        heading = _heading(row, outer)
        name = _name(comparison, row, common, axes, outer)
        grouped.setdefault(heading, []).append(_cells(row, name))
    lines = _tables(grouped, keep)
    if outer and max(map(len, lines)) <= width:
        return lines, names
    return ["", f"(No table: its rows would be wider than {width} characters.)"], names


def _too_few(short: str, stats: significance.Comparison) -> str:
    """``too few runs (3 vs 3); +50.0%, 95% CI +38.4%..+62.6%, p = 0.1``: the figures
    of a pair the test cannot decide (the full sentence is said once, below)."""
    return f"{short}; {stats.change_text()}{significance.format_p(stats.p)}"


def _details(row: Row, name: str) -> str:
    """Every figure of the pair's verdicts in one sentence."""
    if row.a is None or row.b is None:
        side = row.a or row.b
        assert side is not None
        figure = compare.median_cell(side)
        figure += " Mbit/s" if figure[:1].isdigit() else ""
        return f"**{escape(name)}**: {compare.short_verdict(row)}: {figure}"
    goodput = _both(compare.median_cell(row.a), compare.median_cell(row.b))
    # Too few runs is said once below, in full; a pair says it in short.
    verdict = row.verdict
    if row.stats is not None and row.stats.direction is significance.Change.UNDECIDABLE:
        verdict = _too_few(compare.short_verdict(row), row.stats)
    parts = [f"goodput {goodput} Mbit/s: {verdict}"]
    if (stats := row.latency_stats) is not None:
        said = compare.latency_verdict(stats)
        if stats.direction is significance.Change.UNDECIDABLE:
            said = _too_few(compare.short_latency_verdict(row), stats)
        parts.append(
            f"loaded RTT p95 {_both(compare.p95_cell(row.a), compare.p95_cell(row.b))} ms: {said}"
        )
    retransmits = _both(compare.retransmits_text(row.a), compare.retransmits_text(row.b))
    if retransmits != "-":
        parts.append(f"retransmits {retransmits}")
    return f"**{escape(name)}**: {escape('; '.join(parts))}"


def render(comparison: Comparison, width: int = WIDTH) -> str:
    """The Markdown text, its tables within ``width`` characters."""
    out = [f"# Comparison: {comparison.a.name} (A) and {comparison.b.name} (B)", ""]

    def item(text: str) -> None:
        out.append(f"- {text}")

    item(f"**A:** {escape(comparison.a.describe())}")
    item(f"**B:** {escape(comparison.b.describe())}")
    for line in compare.pairing_lines(comparison):
        item(f"**Pairing:** {escape(line)}")
    common = common_changes(comparison)
    if common:
        changes = ", ".join(f"{AXIS_HEADINGS.get(p, p)} {t}" for p, t in common.items())
        item(f"**Changed in every pair (A → B):** {escape(changes)}")
    if comparison.environment_changes:
        out.append("- **Environment differences (A → B):**")
        for key, a, b in comparison.environment_changes:
            out.append(f"  - {key}: `{json.dumps(a)}` → `{json.dumps(b)}`")
    else:
        item("**Environment:** the same in both runs")
    lines, names = tables(comparison, common, width)
    out += [*lines, ""]
    for row, name in zip(comparison.rows, names, strict=True):
        item(_details(row, name))
    for paragraph in compare.explanation(comparison):
        out += ["", paragraph]
    return "\n".join(out) + "\n"
