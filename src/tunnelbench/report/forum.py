"""A run as Markdown to paste into a forum post: the field reports' shape.

Their tables have three to five columns (``Device | Single Stream | 4 Streams | Notes``)
and a screenshot. So this one has at most five: the configuration, its goodput with the
interval, % of the baseline, the round trip idle and under load, and the verdict; the
rest of each row follows as a list, every line of the document within ``width``
characters (prose and lists wrap; a Markdown renderer joins the lines again), and one
image, the run at a glance, is written beside it to upload with the post. Everything,
with every chart, is ``--format md-full`` (:mod:`tunnelbench.report.markdown`).
"""

from pathlib import Path
from urllib.parse import quote

from tunnelbench.analysis.stats import consistency
from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.model.plan import Experiment
from tunnelbench.report import figures, files, findings, markdown, precision, tune
from tunnelbench.report.charts import config_labels, label_axes, setting_parts, summary_charts
from tunnelbench.report.fit import wrap
from tunnelbench.report.markdown import escape
from tunnelbench.report.table import (
    limited_by,
    median_with_ci,
    retransmits_cell,
    rtt_cell,
    rtt_cells,
)
from tunnelbench.report.view import RunView
from tunnelbench.units import mbit

#: Characters a line, by default: a forum's post column, and plain text in a terminal.
WIDTH = 100
#: The narrowest and widest a user may ask for (``report --width``): a table row of a
#: long name, a 10 Gbit/s median with its interval and a verdict takes 75.
WIDTHS = range(80, 401)
COLUMNS = ("configuration", "Mbit/s (95% CI)", "% base", "RTT ms idle→p95", "limited by")
NUMERIC = {1, 2, 3}
#: What goes first when a table is still too wide: the round trip is what the goodput
#: cost, so it stays longest.
DROPPABLE = ("% base", "RTT ms idle→p95")


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


def _tables(groups: list[tuple[str | None, list[list[str]]]], left_out: list[str]) -> list[str]:
    """Each group's pipe table under its heading, without the ``left_out`` columns."""
    keep = [i for i, h in enumerate(COLUMNS) if h not in left_out]
    numeric = {k for k, i in enumerate(keep) if i in NUMERIC}
    out: list[str] = []
    for heading, rows in groups:
        if heading is not None:
            out += ["", f"**{escape(heading)}**", ""] if out else [f"**{escape(heading)}**", ""]
        out += markdown.table(
            [COLUMNS[i] for i in keep], [[r[i] for i in keep] for r in rows], numeric
        )
    return out


def results(summaries: list[ConfigSummary], width: int) -> list[str]:
    """The table in ``width`` columns: one table a row per configuration; if its rows are
    wider, one table per combination of the settings besides the tunnel (under it as a
    heading, the rows named by the tunnel), as posts split results by MTU or stream
    count; if those are still wider, without :data:`DROPPABLE` columns, in order, until
    they fit, saying which."""
    labels = config_labels(summaries)
    axes = label_axes(summaries)
    left_out = ["RTT ms idle→p95"] if all(s.latency is None for s in summaries) else []
    if all(s.pct_of_baseline is None for s in summaries):  # no baseline was measured
        left_out.append("% base")
    Groups = list[tuple[str | None, list[list[str]]]]
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
    dropped: list[str] = []
    while True:
        for groups in candidates:
            lines = _tables(groups, left_out)
            if max(map(len, lines)) <= width:
                break
        else:
            column = next((c for c in DROPPABLE if c not in left_out), None)
            if column is not None:
                left_out.append(column)
                dropped.append(column)
                continue
        break
    if dropped:
        lines += ["", *wrap(f"(left out to fit {width} columns: {', '.join(dropped)})", width)]
    return lines


def details(summaries: list[ConfigSummary], width: int) -> list[str]:
    """The rest of each row: spread, consistency, retransmits, ceiling, round trips and the
    busiest core, one list item a configuration."""
    labels = config_labels(summaries)
    out: list[str] = []
    for s in summaries:
        g = s.goodput
        if g is None:  # said under "Skipped on this machine" or "Failed"
            continue
        parts = [
            f"{g.n} runs, min-max {mbit(g.minimum):,.0f}-{mbit(g.maximum):,.0f} Mbit/s",
            "CV -" if g.cv is None else f"CV {100 * g.cv:.1f}% ({consistency(g)})",
            f"retransmits {retransmits_cell(s)}",
        ]
        if s.pct_of_baseline is not None:
            parts.append(f"{s.pct_of_baseline:.0f}% of the baseline")
        if s.pct_of_ceiling is not None:
            parts.append(f"{s.pct_of_ceiling:.1f}% of the ceiling")
        if s.latency is not None:
            idle, loaded, increase = rtt_cells(s.latency)
            parts.append(f"RTT ms idle {idle}, loaded median/p95 {loaded}, increase {increase}")
        if (c := s.busiest_core) is not None:
            parts.append(
                f"busiest core cpu{c.core} {c.busy:.0f}%"
                f" (user/sys/softirq {c.user:.0f}/{c.system:.0f}/{c.softirq:.0f})"
            )
        text = f"**{escape(labels[s.key])}**: {escape('; '.join(parts))}"
        out += wrap(text, width, indent="- ", hanging="  ")
    return out


def _bullets(lines: list[str], width: int) -> list[str]:
    return [w for line in lines for w in wrap(escape(line), width, indent="- ", hanging="  ")]


def document(view: RunView, image: str | None = None, width: int = WIDTH) -> str:
    """The Markdown text; ``image``: the summary image's name, linked under the table."""
    run, trials, summaries = view.run, view.trials, view.summaries
    head = markdown.header_lines(run, trials, summaries)
    lines = [head[0], ""]
    for line in head[1:]:
        if line:
            lines += wrap(line, width, hanging="  ")
    lines += ["", "## Results", "", *results(summaries, width)]
    if image is not None:
        lines += ["", f"![{escape(view_title(view))}]({quote(image)})", ""]
        lines += wrap(f"(The image is `{image}`, beside this file: upload it with the post.)",
                      width)  # fmt: skip
    lines += ["", *details(summaries, width)]
    lines += ["", *wrap(markdown.explanation(summaries), width)]
    if precise := precision.lines(run, trials):
        lines += ["", *_bullets([p.strip() for p in precise], width)]
    if missing := markdown.not_measured(summaries):
        lines += [w for line in missing for w in (wrap(line, width, hanging="  ") or [""])]
    if said := view.noise.lines():
        lines += ["", "## This machine's noise", "", *_bullets(said, width)]
    if (record := tune.record_of(run)) is not None:
        lines += _fit(markdown.tuning_lines(record), width)
    else:
        for heading, found in (("Diagnosis", findings.findings(summaries)),
                               ("Advice", findings.advice(summaries))):  # fmt: skip
            if found:
                lines += ["", f"## {heading}", "", *_bullets(found, width)]
    return "\n".join(lines) + "\n"


def _fit(lines: list[str], width: int) -> list[str]:
    """Lines within ``width``: list items wrap under their marker, prose wraps; headings
    and code (a tuning session's final plan) are left whole, as a cut line could not be
    pasted back."""
    out: list[str] = []
    code = False
    for line in lines:
        if line.startswith("```"):
            code = not code
        if code or line.startswith(("#", "```")) or len(line) <= width:
            out.append(line)
            continue
        body = line.lstrip()
        lead = line[: len(line) - len(body)]
        if body.startswith("- "):
            out += wrap(body[2:], width, indent=f"{lead}- ", hanging=f"{lead}  ")
        else:
            out += wrap(body, width, indent=lead, hanging=lead)
    return out


def view_title(view: RunView) -> str:
    name = Experiment.from_dict(view.run.experiment).name or "benchmark"
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
