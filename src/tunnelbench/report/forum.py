"""A run as Markdown to paste into a forum post: the field reports' shape.

Their tables have three to five columns (``Device | Single Stream | 4 Streams | Notes``)
and a screenshot. So this one opens with the result: a one-line title, a table of at most
five columns (the configuration, its goodput with the interval, % of the baseline, the
round trip idle and under load, and the verdict), the image of the run at a glance, the
verdicts with their evidence and the advice; then the rest of each row as a list, and last
the environment (command, machine, software) folded in a ``<details>`` block, which
Discourse and GitHub show collapsed.

Only the tables are fitted to ``width`` characters (a pipe table cannot wrap: its rows
are split into tables by setting, then its cells are shortened). Prose and list items
are one line each and never hard-wrapped: Discourse keeps a post's line breaks, so a
paragraph wrapped at 80 columns reads ragged in its wider column. Everything, with every
chart, is ``--format md-full`` (:mod:`tunnelbench.report.markdown`); the same post for
phpBB forums is :mod:`tunnelbench.report.bbcode`.
"""

from pathlib import Path
from urllib.parse import quote

from tunnelbench.analysis.stats import consistency
from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.report import figures, files, findings, markdown, precision, tune
from tunnelbench.report.charts import config_labels, label_axes, setting_parts, summary_charts
from tunnelbench.report.markdown import escape
from tunnelbench.report.table import (
    ABOVE_MARK,
    ceiling_cell,
    limited_by,
    median_with_ci,
    retransmits_cell,
    rtt_cell,
    rtt_cells,
)
from tunnelbench.report.view import RunView
from tunnelbench.units import mbit

#: Characters a table line, by default: a forum's post column.
WIDTH = 100
#: The narrowest and widest a user may ask for (``report --width``).
WIDTHS = range(80, 401)
COLUMNS = ("configuration", "Mbit/s (95% CI)", "% base", "RTT ms idle→p95", "limited by")
#: The goodput column when its cells are shortened to the median (the interval is in
#: the list under the table).
SHORT_GOODPUT = "Mbit/s"
NUMERIC = {1, 2, 3}
#: The summary that the environment is folded under.
ENVIRONMENT = "Environment: run, command, machine, software"


def summary_path(path: Path) -> Path:
    """Where the image of the report at ``path`` goes: ``<name>-summary.png`` beside it."""
    return path.with_name(f"{path.stem}-summary.png")


def _row(s: ConfigSummary, label: str) -> list[str]:
    if s.skipped is not None or s.goodput is None:
        return [label, "skipped" if s.skipped is not None else "failed", "-", "-", "-"]
    if s.failed:
        label += f" [{len(s.failed)}/{len(s.trials)} failed]"
    return [
        label,
        median_with_ci(s.goodput),
        "-" if s.pct_of_baseline is None else f"{s.pct_of_baseline:.0f}%",
        rtt_cell(s.latency),
        limited_by(s.diagnosis.verdict) if s.diagnosis else "-",
    ]


Groups = list[tuple[str | None, list[list[str]]]]


def _tables(groups: Groups, left_out: list[str], short: bool = False) -> list[str]:
    """Each group's pipe table under its heading, without the ``left_out`` columns (those
    that no row has a figure for); ``short``: the goodput as the median alone."""
    header = [SHORT_GOODPUT if short and h == COLUMNS[1] else h for h in COLUMNS]
    keep = [i for i, h in enumerate(COLUMNS) if h not in left_out]
    numeric = {k for k, i in enumerate(keep) if i in NUMERIC}
    out: list[str] = []
    for heading, rows in groups:
        if heading is not None:
            out += ["", f"**{escape(heading)}**", ""] if out else [f"**{escape(heading)}**", ""]
        if short:
            rows = [[r[0], r[1].split(" (")[0], *r[2:]] for r in rows]
        out += markdown.table(
            [header[i] for i in keep], [[r[i] for i in keep] for r in rows], numeric
        )
    return out


def elided(label: str, room: int) -> str:
    """``label`` in at most ``room`` characters, its middle replaced by an ellipsis: the
    start names the tunnel and the end its implementation or setting, which tell rows
    apart."""
    if len(label) <= room:
        return label
    tail = (room - 1) // 2
    return label[: room - 1 - tail].rstrip() + "…" + label[len(label) - tail :].lstrip()


def _cut_labels(groups: Groups, left_out: list[str], width: int) -> list[str]:
    """The short tables with the configurations' names elided to the room the other
    columns leave (the names are whole in the list under the table)."""
    lines = _tables(groups, left_out, short=True)
    room = max(len(r[0]) for _, rows in groups for r in rows)
    while max(map(len, lines)) > width and room > len(COLUMNS[0]):
        room -= max(1, max(map(len, lines)) - width)
        room = max(room, len(COLUMNS[0]))
        cut = [(h, [[elided(r[0], room), *r[1:]] for r in rows]) for h, rows in groups]
        lines = _tables(cut, left_out, short=True)
    return lines


def results(summaries: list[ConfigSummary], width: int) -> list[str]:
    """The table in ``width`` columns: one table a row per configuration; if its rows are
    wider, one table per combination of the settings besides the tunnel (under it as a
    heading, the rows named by the tunnel), as posts split results by MTU or stream
    count; if those are still wider, the goodput as its median alone (the interval is in
    the list below); then the configurations' names elided in the middle. No column is
    left out for want of room."""
    labels = config_labels(summaries)
    axes = label_axes(summaries)
    left_out = ["RTT ms idle→p95"] if all(s.latency is None for s in summaries) else []
    if all(s.pct_of_baseline is None for s in summaries):  # no baseline was measured
        left_out.append("% base")
    one: Groups = [(None, [_row(s, labels[s.key]) for s in summaries])]
    # A tunnel's own settings (its MTU, cipher) name its row; the lab's and the traffic's
    # name the group, which a baseline shares with its tunnels.
    tunnel = [a for a in axes if a.startswith("tunnel.")]
    rest = [a for a in axes if a not in tunnel]
    grouped: dict[str, list[list[str]]] = {}
    for s in summaries:
        heading = " · ".join(setting_parts(s, rest)) or "all"
        named = " · ".join([s.label, *setting_parts(s, tunnel)])
        grouped.setdefault(heading, []).append(_row(s, named))
    split: Groups = list(grouped.items())
    candidates = [one, split] if len(grouped) > 1 else [one]
    for short in (False, True):
        for groups in candidates:
            lines = _tables(groups, left_out, short)
            if max(map(len, lines)) <= width:
                return lines
    return _cut_labels(candidates[-1], left_out, width)


def details(summaries: list[ConfigSummary]) -> list[str]:
    """The rest of each row: the interval, spread, consistency, retransmits, ceiling,
    round trips and the busiest core, one list item (one line) a configuration."""
    labels = config_labels(summaries)
    out: list[str] = []
    for s in summaries:
        g = s.goodput
        if g is None:  # said under "Skipped on this machine" or "Failed"
            continue
        interval = "" if g.ci is None else f", 95% CI {mbit(g.ci[0]):,.0f}-{mbit(g.ci[1]):,.0f}"
        parts = [
            f"median {mbit(g.median):,.0f} Mbit/s{interval}",
            f"{g.n} runs, min-max {mbit(g.minimum):,.0f}-{mbit(g.maximum):,.0f} Mbit/s",
            "CV -" if g.cv is None else f"CV {100 * g.cv:.1f}% ({consistency(g)})",
            f"retransmits {retransmits_cell(s)}",
        ]
        if s.pct_of_baseline is not None:
            parts.append(f"{s.pct_of_baseline:.0f}% of the baseline")
        if s.pct_of_ceiling is not None:
            lead = " (the shaper's burst lead)" if ceiling_cell(s).endswith(ABOVE_MARK) else ""
            parts.append(f"{s.pct_of_ceiling:.1f}% of the ceiling{lead}")
        if s.latency is not None:
            idle, loaded, increase = rtt_cells(s.latency)
            parts.append(f"RTT ms idle {idle}, loaded median/p95 {loaded}, increase {increase}")
        if (c := s.busiest_core) is not None:
            parts.append(
                f"busiest core cpu{c.core} {c.busy:.0f}%"
                f" (user/sys/softirq {c.user:.0f}/{c.system:.0f}/{c.softirq:.0f})"
            )
        out.append(f"- **{escape(labels[s.key])}**: {escape('; '.join(parts))}")
    return out


def _bullets(lines: list[str]) -> list[str]:
    return [f"- {escape(line)}" for line in lines]


#: The header lines that say what was measured: shown under "Details"; the others (the
#: run, its command, the machine and the software) are folded under :data:`ENVIRONMENT`.
SETUP = ("- **Experiment:**", "- **Common settings:**")


def environment(view: RunView) -> tuple[list[str], list[str]]:
    """The experiment's design and common settings, and, folded, the run's command,
    machine and software: a reader of the post wants the result first, and those lines
    hold local paths and versions."""
    head = markdown.header_lines(view.run, view.trials, view.summaries)[1:]
    setup = [line for line in head if line.startswith(SETUP)]
    rest = [line for line in head if line and not line.startswith(SETUP)]
    return setup, ["<details>", f"<summary>{ENVIRONMENT}</summary>", "", *rest, "", "</details>"]


def document(view: RunView, image: str | None = None, width: int = WIDTH) -> str:
    """The Markdown text; ``image``: the summary image's name, linked under the table."""
    run, trials, summaries = view.run, view.trials, view.summaries
    title = markdown.header_lines(run, trials, summaries)[0]
    lines = [title, "", *results(summaries, width)]
    if image is not None:
        lines += ["", f"![{escape(view_title(view))}]({quote(image)})"]
    if (record := tune.record_of(run)) is not None:
        lines += markdown.tuning_lines(record)
    else:
        for heading, found in (("Diagnosis", findings.findings(summaries)),
                               ("Advice", findings.advice(summaries))):  # fmt: skip
            if found:
                lines += ["", f"## {heading}", "", *_bullets(found)]
    setup, folded = environment(view)
    lines += ["", "## Details", "", *setup, *details(summaries)]
    lines += ["", markdown.explanation(summaries)]
    if precise := precision.lines(run, trials):
        lines += ["", *_bullets([p.strip() for p in precise])]
    lines += markdown.not_measured(summaries)
    if said := view.noise.lines():
        lines += ["", "## This machine's noise", "", *_bullets(said)]
    lines += ["", *folded]
    return "\n".join(lines) + "\n"


def view_title(view: RunView) -> str:
    name = view.run.experiment.name or "benchmark"
    return f"{name}: run {view.run.id} at a glance"


def render(view: RunView, width: int = WIDTH) -> str:
    """The report without its image (for standard output)."""
    return document(view, None, width)


def write(view: RunView, path: Path, width: int = WIDTH) -> list[Path]:
    """Write the report's image (:func:`summary_path`), where the run measured something
    to draw, and then the report to ``path``, each whole (:mod:`tunnelbench.report.files`):
    a report cut short never links an image that was not written. Return the paths
    written, the report first."""
    image = summary_path(path)
    panels = summary_charts(view.summaries, config_labels(view.summaries))
    drawn = figures.write_summary(view_title(view), panels, image)
    files.replace(path, document(view, image.name if drawn else None, width))
    return [path, image] if drawn else [path]
