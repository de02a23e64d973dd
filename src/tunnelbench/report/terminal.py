"""A run as the terminal shows it: the results table and the diagnosis with its advice
(a tuning session's path instead, which holds them step by step);
after a run, also what failed or was skipped and the precision an adaptive run reached.

One text for both places that show it: the end of ``tunnelbench run`` and ``tunnelbench
report`` (which heads it with the run's line and shows only the table and the findings),
so they cannot drift apart.
"""

from tunnelbench.model.records import TrialStatus
from tunnelbench.report import findings, table, tune
from tunnelbench.report import precision as precision_report
from tunnelbench.report.view import RunView


def render(view: RunView, *, after_run: bool) -> str:
    """``after_run``: the end of ``tunnelbench run`` (no heading; the run's failures,
    skips and precision, which the user has just watched happen); otherwise ``report``."""
    run, trials = view.run, view.trials
    lines = [] if after_run else [f"run {run.id} ({run.status}): {run.command_line}"]
    lines.append(table.render(view.summaries))
    if after_run:
        failed = [t for t in trials if t.status is TrialStatus.FAILED]
        lines += [f"trial {t.seq} failed: {t.error}" for t in failed]
        lines += precision_report.lines(run, trials)
        skipped = [t for t in trials if t.status is TrialStatus.SKIPPED]
        for reason in sorted({t.error or "" for t in skipped}):
            count = sum(1 for t in skipped if t.error == reason)
            lines.append(f"skipped {count} trial(s): {reason}")
    if (record := tune.record_of(run)) is not None:
        # A tuning session's path holds each step's diagnosis and what its advice gave.
        lines += ["", tune.terminal(record)]
    elif verdicts := findings.terminal_lines(view.summaries):
        lines += ["", "diagnosis and advice:", *verdicts]
    return "\n".join(lines)
