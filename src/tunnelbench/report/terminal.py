"""A run as the terminal shows it: the results table, what failed or was skipped, the
precision an adaptive run reached, and the diagnosis with its advice.

One text for both places that show it: the end of ``tunnelbench run`` and ``tunnelbench
report`` (which adds the run's heading), so they cannot drift apart.
"""

from tunnelbench.model.records import TrialStatus
from tunnelbench.report import findings, table
from tunnelbench.report import precision as precision_report
from tunnelbench.report.view import RunView


def render(view: RunView, *, heading: bool) -> str:
    run, trials = view.run, view.trials
    lines = [f"run {run.id} ({run.status}): {run.command_line}"] if heading else []
    lines.append(table.render(view.summaries))
    lines += [f"trial {t.seq} failed: {t.error}" for t in trials if t.status is TrialStatus.FAILED]
    lines += precision_report.lines(run, trials)
    skipped = [t for t in trials if t.status is TrialStatus.SKIPPED]
    for reason in sorted({t.error or "" for t in skipped}):
        count = sum(1 for t in skipped if t.error == reason)
        lines.append(f"skipped {count} trial(s): {reason}")
    if verdicts := findings.terminal_lines(view.summaries):
        lines += ["", "diagnosis and advice:", *verdicts]
    return "\n".join(lines)
