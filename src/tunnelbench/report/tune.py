"""A tuning session's path for the reports: where it started, what each step tried and
what the measurements decided, how it ended, and the final configuration as a plan."""

from typing import Any

from tunnelbench.analysis.tuning import describe, figure, signed_pct
from tunnelbench.bench.progress import describe as label
from tunnelbench.bench.progress import format_duration
from tunnelbench.model.records import RunRecord
from tunnelbench.model.tuning import TuneRecord, plan_snippet, show


def record_of(run: RunRecord) -> TuneRecord | None:
    return run.tune


def design(record: TuneRecord) -> str:
    """How the session measured, for a report's header."""
    return (
        f"tuning session for {record.target}: each step's candidates against the best"
        f" configuration in interleaved rounds, up to {record.max_runs} runs a side, gains"
        f" under {record.min_gain_pct:g}% not kept; budget {format_duration(record.budget_s)}"
    )


def headline(record: TuneRecord) -> str:
    """``throughput 251 Mbit/s → 1,412 Mbit/s (+463%) in 1 kept change; ended: nothing
    helped (1m 40s of 15m)``."""
    target = record.target
    start = record.steps[0].best_median
    kept = record.kept()
    spent = f"{format_duration(record.spent_s)} of {format_duration(record.budget_s)}"
    ended = f"ended: {record.end}" if record.end else "not finished"
    if not kept:
        return f"{target} {figure(start, target)}: no change kept; {ended} ({spent})"
    final = kept[-1][1].median
    change = f" ({signed_pct(100 * (final / start - 1))})" if start and final else ""
    changes = f"{len(kept)} kept change{'s' if len(kept) > 1 else ''}"
    return (
        f"{target} {figure(start, target)} → {figure(final, target)}{change} in {changes};"
        f" {ended} ({spent})"
    )


def answer(record: TuneRecord) -> list[str]:
    """A session's answer for a report's summary: its headline, and the configuration it
    kept (not the fastest it measured: a gain under the minimum is not kept)."""
    kept = record.kept()
    out = [headline(record) + "."]
    if kept:
        changes = ", ".join(f"{c.setting} = {show(c.value)}" for _, c in kept)
        out.append(f"Kept: {label(record.best)}, after {changes}.")
    return out


def step_lines(record: TuneRecord) -> list[list[str]]:
    """Per step, its lines: what it started from, its candidates' verdicts (the kept one
    marked) and what it could not try."""
    steps = []
    for step in record.steps:
        config = step.best_config
        if step.number == 0:
            runs = f" ({step.best_runs} runs)" if step.best_runs else ""
            head = (
                f"step 0: start: {label(config)}, {figure(step.best_median, record.target)}{runs}"
            )
        else:
            head = f"step {step.number}: from {label(config)}"
        lines = [head]
        if step.diagnosis:
            lines.append(f"diagnosis: {step.diagnosis}")
        if step.left_out:
            lines.append(f"diagnosed without the disturbed runs: {'; '.join(step.left_out)}")
        # The candidates come from the advice of every finding, not only the diagnosis's
        # headline: say which advice each was, so the two are read together.
        advice = list(dict.fromkeys(c.suggestion for c in step.candidates if c.suggestion))
        if advice:
            lines.append(f"candidates from the advice: {'; '.join(advice)}")
        for candidate in step.candidates:
            mark = "kept: " if candidate.key == step.winner else ""
            lines.append(mark + describe(step, candidate, record.target, record.end))
        for excluded in step.excluded:
            lines.append(
                f"not tried: {excluded.setting} = {show(excluded.value)}: {excluded.reason}"
            )
        if step.number > 0 and not step.candidates:
            lines.append(step.why_no_candidate)
        steps.append(lines)
    return steps


def final_plan(record: TuneRecord) -> str:
    kept = record.kept()
    config = kept[-1][1].config if kept else record.start
    return plan_snippet(config)


def terminal(record: TuneRecord) -> str:
    lines = [f"tuning: {headline(record)}"]
    for step in step_lines(record):
        lines.append(f"  {step[0]}")
        lines += [f"      {line}" for line in step[1:]]
    lines += ["final configuration, as a plan:", *final_plan(record).splitlines()]
    return "\n".join(lines)


def json_section(record: TuneRecord) -> dict[str, Any]:
    # Every configuration whole, as it ran: one recorded before a setting existed was
    # read with the value it ran with (model.plan.LEGACY).
    return record.to_dict() | {"headline": headline(record), "plan": final_plan(record)}
