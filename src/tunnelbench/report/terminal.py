"""A run as the terminal shows it: the results table, one verdict line per
configuration, and each suggestion once (a tuning session's path instead of those two);
after a run, also what failed or was skipped and the precision an adaptive run reached.

Terse by design: every line fits the width it is given (the table folds its cells, and
leaves out its least needed columns only if folded it still cannot fit; every other line
wraps at word boundaries, never in a figure), the tunnel implementations' versions are one line
(without their paths), and the evidence behind each verdict and suggestion
is in the reports (``report --format md|html|json``), not repeated here.

One text for both places that show it: the end of ``tunnelbench run`` and ``tunnelbench
report`` (which heads it with the run's line), so they cannot drift apart.
"""

import shlex

from tunnelbench.model.records import TrialStatus
from tunnelbench.report import findings, fit, software, table, tune
from tunnelbench.report import precision as precision_report
from tunnelbench.report.view import RunView

# Verdicts that say the figure itself is suspect: shown in red where colour is wanted.
WARNINGS = tuple(
    table.LIMITED_BY[b]
    for b in ("above-ceiling", "outside-load", "steal", "emulated-cpu", "too-few-runs")
)


def render(
    view: RunView,
    *,
    after_run: bool,
    width: int | None = None,
    colour: bool = False,
    db: str | None = None,
) -> str:
    """``after_run``: the end of ``tunnelbench run`` (no heading; the run's failures,
    skips and precision, which the user has just watched happen); otherwise ``report``.
    ``width``: the most characters a line may have (None: no limit). ``db``: the
    database the run is in, for the command that shows the evidence (it works only with
    the database named)."""
    run, trials = view.run, view.trials
    limit = width or 10**6
    named = f" «{run.label}»" if run.label else ""
    heading = f"run {run.id}{named} ({run.status}): {run.command_line}"
    lines = [] if after_run else [heading]
    lines += [f"warning: {w}" for w in software.mismatched_ends(trials)]
    lines += table.render(view.summaries, width).splitlines()
    if after_run:
        failed = [t for t in trials if t.status is TrialStatus.FAILED]
        lines += [f"trial {t.seq} failed: {t.error}" for t in failed]
        lines += precision_report.lines(run, trials)
        skipped = [t for t in trials if t.status is TrialStatus.SKIPPED]
        for reason in sorted({t.error or "" for t in skipped}):
            count = sum(1 for t in skipped if t.error == reason)
            lines.append(f"skipped {count} trial(s): {reason}")
    if tunnels := software.tunnel_line(run, trials):
        lines.append(f"software: {tunnels}")
    lines += view.noise.lines(terse=True)
    if (record := tune.record_of(run)) is not None:
        # A tuning session's path holds each step's diagnosis and what its advice gave.
        lines += ["", *tune.terminal(record).splitlines()]
    elif verdicts := findings.terminal_verdicts(view.summaries):
        lines += ["", "limited by:", *(f"  {v}" for v in verdicts)]
        if advice := findings.terminal_advice(view.summaries):
            lines += ["", "advice:", *(f"  {a}" for a in advice)]
        where = f" --db {shlex.quote(db)}" if db else ""
        lines.append(f"(evidence: `tunnelbench report {run.id} --format md{where}`)")
    lines = fit.wrapped(lines, limit)
    return "\n".join(_painted(lines) if colour else lines)


def _painted(lines: list[str]) -> list[str]:
    """Bold headings, red suspect verdicts, green arrows: on the finished lines, so the
    escape codes never count against the width."""
    out = []
    for line in lines:
        if line in ("limited by:", "advice:") or line.startswith("tunnel "):
            line = fit.paint(line, fit.BOLD, True)
        for word in WARNINGS:
            line = line.replace(word, fit.paint(word, fit.RED, True))
        if line.lstrip().startswith("→"):
            line = line.replace("→", fit.paint("→", fit.GREEN, True), 1)
        out.append(line)
    return out
