"""A run as one self-contained HTML page: summary, environment, results, charts.

The page fetches nothing: styles are inline, charts are inline SVG drawn by the one
renderer the PNGs have (:mod:`.figures`), there is no script, and a
Content-Security-Policy forbids every fetch should anything slip in. It reads on a
phone (no fixed widths; wide tables scroll inside their box), gives the results table
the whole width of a wide window, and prints (``@media
print``). Every string that comes from the store is HTML-escaped.
"""

import time
from collections.abc import Sequence
from html import escape
from pathlib import Path

from tunnelbench.analysis.summary import ConfigSummary
from tunnelbench.kinds import TunnelKind
from tunnelbench.model.records import GUESTS, RunRecord, TrialRecord
from tunnelbench.report import figures, files, findings, software, table, timeline, tune
from tunnelbench.report.charts import charts_for_run, config_labels
from tunnelbench.report.markdown import guest_line
from tunnelbench.report.view import RunView
from tunnelbench.units import mbit

# Medians closer than this ratio are reported as equal: no "fastest" among them.
SAME = 0.98
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
:root { --fg: #1a1a1a; --muted: #5a5a5a; --line: #d8d8d8; --bg-alt: #f5f6f8; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
       color: var(--fg); margin: 0 auto; padding: 16px; max-width: 1000px; }
h1 { font-size: 1.5em; margin: 0.2em 0; }
h2 { font-size: 1.2em; margin: 1.6em 0 0.5em; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05em; margin: 1.2em 0 0.3em; }
p.meta, figcaption, .muted { color: var(--muted); }
code { font: 0.9em ui-monospace, "DejaVu Sans Mono", monospace; overflow-wrap: anywhere; }
ul.answer li { margin: 0.3em 0; }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; }
table { border-collapse: collapse; font-size: 0.88em; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: left;
         vertical-align: top; }
th { background: var(--bg-alt); }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.results td.num { white-space: nowrap; }
tr.skipped td { color: var(--muted); }
table.env th { background: none; white-space: nowrap; }
figure { margin: 1em 0 2em; }
/* Drawn 9 in wide; narrower on a narrow screen, in proportion (its viewBox). */
svg.chart { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 0.88em; margin-top: 0.4em; }
/* The results table may take the whole window, not only the text's 1000 px: at a
   1300 px window its last columns (the verdict and its evidence) sat behind a
   scrollbar while 300 px stayed empty. 48 px: the page's padding and a scrollbar. */
@media screen and (min-width: 1048px) {
  .scroll.wide { width: calc(100vw - 48px); margin-left: calc(50% - 50vw + 16px); }
  .scroll.wide table { margin: 0 auto; }
}
@media (max-width: 600px) {
  body { padding: 10px; font-size: 14px; }
  table { font-size: 0.8em; }
  table.results td { white-space: nowrap; }  /* the table scrolls in its box */
}
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  .scroll { overflow: visible; }
  table.results th, table.results td { padding: 2px 4px; }
  h2, h3 { break-after: avoid; }
  tr, figcaption, ul.answer li { break-inside: avoid; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))


def _range(low: float, high: float, fmt: str) -> str:
    a, b = format(low, fmt), format(high, fmt)
    return a if a == b else f"{a}\u2013{b}"


def answer_sentences(summaries: Sequence[ConfigSummary]) -> list[str]:
    """The answer of the run in one plain-text sentence per tunnel kind."""
    labels = config_labels(summaries)
    kinds: dict[TunnelKind, list[ConfigSummary]] = {}
    for s in summaries:
        kinds.setdefault(s.config.tunnel.kind, []).append(s)
    out = []
    for kind, group in kinds.items():
        measured = [s for s in group if s.goodput is not None]
        skipped = [s for s in group if s.skipped is not None]
        name = measured[0].label if measured else group[0].label
        name = "No tunnel (the baseline)" if kind is TunnelKind.NONE else name
        if not measured:
            sentence = f"{name}: not measured"
        else:
            best = max(measured, key=lambda s: s.goodput.median)  # type: ignore[union-attr]
            medians = [mbit(s.goodput.median) for s in measured]  # type: ignore[union-attr]
            sentence = f"{name}: {_range(min(medians), max(medians), ',.0f')} Mbit/s"
            pcts = [s.pct_of_baseline for s in measured if s.pct_of_baseline is not None]
            if kind is not TunnelKind.NONE and pcts:
                sentence += f", {_range(min(pcts), max(pcts), '.0f')}% of the no-tunnel baseline"
            if len(measured) > 1:
                sentence += f" across {len(measured)} configurations"
                settings = labels[best.key].split(" · ")[1:]
                if settings and min(medians) < SAME * max(medians):
                    sentence += f"; fastest with {', '.join(settings)}"
            if best.busiest_core is not None:
                core = best.busiest_core
                sentence += f" (busiest core cpu{core.core} {core.busy:.0f}% busy)"
        failed = [s for s in group if s.skipped is None and s.goodput is None]
        if skipped:
            plural = "s" if len(skipped) > 1 else ""
            sentence += f"; {len(skipped)} configuration{plural} skipped on this machine"
        if failed:
            sentence += f"; {len(failed)} failed"
        out.append(sentence + ".")
    return out


def _environment(run: RunRecord, trials: Sequence[TrialRecord]) -> str:
    rows = []
    names = {
        "cpu_model": "CPU", "cores": "cores", "cpu_governor": "frequency governor",
        "kernel": "kernel", "kernel_build": "kernel build", "machine": "architecture",
    }  # fmt: skip
    for key, value in run.environment.to_dict().items():
        if key == "versions" and isinstance(value, dict):
            rows += [(str(tool), str(version)) for tool, version in value.items()]
            # Every implementation that ran, a guest's and the hosts' too (not only
            # what this machine resolved), each with its version.
            ran = software.entries(run, trials)
            rows += [(n, v) for n, v in ran if "/" in n and value.get(n) != v]
        elif key == GUESTS:
            for spec, facts in (run.environment.guests or {}).items():
                rows.append(("VM guest", guest_line(spec, facts)))
        elif isinstance(value, list | tuple):  # cpu_flags: a list, not its Python repr
            rows.append((names.get(key, key), ", ".join(map(str, value)) or "-"))
        else:
            rows.append((names.get(key, key), "-" if value is None else str(value)))
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<div class="scroll"><table class="env">{body}</table></div>'


def _note(sentence: str) -> str:
    return f" {escape(sentence)}" if sentence else ""


def _daemons(s: ConfigSummary) -> str:
    parts = [f"{name} {pct:.0f}%" for name, pct in s.processes_cpu.items() if "iperf" not in name]
    return ", ".join(parts) or "-"


def _results(summaries: Sequence[ConfigSummary]) -> str:
    header, body = table.rows(list(summaries), detailed=True)
    daemons = any(_daemons(s) != "-" for s in summaries)
    if daemons:
        header = [*header, "tunnel daemons % of a core"]
        body = [[*row, _daemons(s)] for row, s in zip(body, summaries, strict=True)]
    text = table.TEXT_COLUMNS | {"tunnel daemons % of a core"}
    numeric = [h not in text for h in header]
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    rows = []
    for row, s in zip(body, summaries, strict=True):
        cells = "".join(
            f'<td class="num">{escape(c)}</td>' if num else f"<td>{escape(c)}</td>"
            for c, num in zip(row, numeric, strict=True)
        )
        css = ' class="skipped"' if s.goodput is None else ""
        rows.append(f"<tr{css}>{cells}</tr>")
    html = (
        f'<div class="scroll wide"><table class="results"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    labels = config_labels(summaries)
    reasons: dict[str, list[str]] = {}
    for s in summaries:
        if s.skipped is not None:
            reasons.setdefault(s.skipped, []).append(labels[s.key])
    notes = [
        f"<li>Skipped: {escape(', '.join(which))} — {escape(reason)}</li>"
        for reason, which in reasons.items()
    ]
    notes += [
        f"<li>{escape(labels[s.key])}: trial {t.id} (run {t.repetition}) failed — "
        f"{escape(t.error or 'no reason recorded')}</li>"
        for s in summaries
        for t in s.failed
    ]
    if notes:
        html += f'<ul class="muted">{"".join(notes)}</ul>'
    return html


def _list(title: str, items: Sequence[str], section: str) -> str:
    if not items:
        return ""
    lis = "".join(f"<li>{escape(i)}</li>" for i in items)
    return f'<section id="{section}"><h2>{escape(title)}</h2><ul>{lis}</ul></section>'


def _header(run: RunRecord, summaries: Sequence[ConfigSummary]) -> str:
    experiment = run.experiment
    name = experiment.name
    title = f"tunnelbench run {run.id}" + (f": {name}" if name else "")
    trials = sum(len(s.trials) for s in summaries)
    duration = (
        f", {(run.ended_at - run.started_at) / 60:.1f} min" if run.ended_at is not None else ""
    )
    repetitions = str(experiment.repetitions)
    if (adaptive := experiment.adaptive) is not None:
        repetitions = f"{repetitions}-{adaptive.max_repetitions}"
    design = f"{len(summaries)} configurations \u00d7 {repetitions} runs"
    design += f", {experiment.order.value} order"
    design += f" (seed {experiment.seed})" if experiment.seed is not None else ""
    if (record := tune.record_of(run)) is not None:
        design = tune.design(record)
    label = f" — {run.label}" if run.label else ""
    notes = f"<p>{escape(run.notes)}</p>" if run.notes else ""
    return (
        f"<header><h1>{escape(title + label)}</h1>{notes}"
        f'<p class="meta">Started {escape(_when(run.started_at))}{escape(duration)} · '
        f"status {escape(run.status)} · {trials} trials · {escape(design)}<br>"
        f"<code>{escape(run.command_line)}</code></p></header>"
    )


def _findings(run: RunRecord, summaries: list[ConfigSummary]) -> str:
    """The diagnosis and advice; a tuning session's path instead, which holds them."""
    if (record := tune.record_of(run)) is not None:
        steps = "".join(
            f"<li><strong>{escape(step[0])}</strong><ul>"
            + "".join(f"<li>{escape(line)}</li>" for line in step[1:])
            + "</ul></li>"
            for step in tune.step_lines(record)
        )
        return (
            f'<section id="tuning"><h2>Tuning path</h2><p>{escape(tune.headline(record))}</p>'
            f"<ol>{steps}</ol><p>Final configuration, as a plan:</p>"
            f"<pre>{escape(tune.final_plan(record))}</pre></section>"
        )
    return _list("Diagnosis", findings.findings(summaries), "diagnosis") + _list(
        "Advice", findings.advice(summaries), "advice"
    )


def _timelines(found: Sequence[timeline.Timeline]) -> str:
    """Each configuration's median run over its window: its panels stacked on one time
    axis; many configurations as small multiples in one drawing."""
    if not found:
        return ""
    compact = found[0].compact
    if compact:
        figures_html = (
            f'<figure id="fig-timelines">{figures.multiples_svg(found)}<figcaption>Each'
            " panel: the median run of its configuration.</figcaption></figure>"
        )
    else:
        figures_html = "".join(
            f'<figure id="fig-{escape(t.id)}"><h3>{escape(t.title)}</h3>'
            f"{figures.timeline_svg(t)}<figcaption>{escape(t.note)}</figcaption></figure>"
            for t in found
        )
    intro = (
        '<p class="muted">The median run of each configuration over its measured window, at'
        " the rate the instruments sample: the receivers' goodput (every 0.1 s where they"
        " reported so), each ping's round trip"
        + (
            ", and the busiest core's share"
            if compact
            else ", and the busiest cores' user, system and softirq shares"
        )
        + ".</p>"
    )
    return f'<section id="seconds"><h2>Over the window</h2>{intro}{figures_html}</section>'


def render(view: RunView) -> str:
    """The whole page for a run, as one string."""
    run, summaries = view.run, view.summaries
    charts = charts_for_run(summaries, view.artifact)
    drawn = "".join(
        f'<figure id="fig-{escape(c.id)}"><h3>{escape(c.title)}</h3>{figures.chart_svg(c)}'
        f"<figcaption>{escape(c.note)}</figcaption></figure>"
        for c in charts
    )
    seconds = _timelines(timeline.timelines(summaries, view.artifact))
    # A tuning session's answer is the configuration it kept, not its fastest row.
    record = tune.record_of(run)
    sentences = answer_sentences(summaries) if record is None else tune.answer(record)
    answer = "".join(f"<li>{escape(s)}</li>" for s in sentences)
    name = run.experiment.name
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tunnelbench run {run.id}{escape(f' — {name}' if name else '')}</title>"
        f"<style>{CSS}</style></head><body>"
        + _header(run, summaries)
        + f'<section id="summary"><h2>Summary</h2><ul class="answer">{answer}</ul>'
        '<p class="muted">Goodput is what the receiver counted, warm-up excluded; '
        "medians over the runs of each configuration, with the bootstrap 95% interval of "
        "the median in parentheses and the spread of the runs in words (very consistent: "
        "CV < 1%, consistent < 5%, variable < 10%, else inconsistent). “% of baseline” "
        "divides by the median of the same lab and traffic without a tunnel, measured in "
        f"the same run.{_note(table.retransmits_note(list(summaries)))}"
        f"{_note(table.ceiling_note(list(summaries)))}</p>"
        "</section>"
        + f'<section id="results"><h2>Results</h2>{_results(summaries)}</section>'
        + _list("This machine's noise", view.noise.lines(), "noise")
        + _findings(run, summaries)
        + f'<section id="charts"><h2>Charts</h2>{drawn}</section>'
        + seconds
        + f'<section id="environment"><h2>Environment</h2>{_environment(run, view.trials)}'
        "</section>" + '<footer class="muted"><p>Written by tunnelbench from the results database '
        f"<code>{escape(str(view.database))}</code>.</p></footer>"
        "</body></html>\n"
    )


def write(view: RunView, path: Path) -> Path:
    """Write the page for a run to ``path`` and return the path."""
    files.replace(path, render(view))
    return path
