"""What a running tuning session tells its user: each step's diagnosis and candidates,
each trial with the budget spent, and each step's verdicts. Lines for a person, JSON
lines for a program (``--json``), or nothing (``--quiet``), as ``run``'s progress."""

import json
import statistics
import sys
import time
from typing import Any, TextIO

from tunnelbench.analysis.tuning import describe, disturbed, figure
from tunnelbench.bench.planfile import trial_seconds
from tunnelbench.bench.progress import describe as label
from tunnelbench.bench.progress import format_duration
from tunnelbench.bench.runner import TrialOutcome
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import Trial, TrialConfig
from tunnelbench.model.records import RunStatus, TrialStatus
from tunnelbench.model.tuning import Step, Target, TuneRecord, show


def _candidate_of(step: Step, trial: Trial) -> str:
    key = trial.config.key()
    if key == step.best_key:
        return "best" if step.number else "start"
    return next(c.change for c in step.candidates if c.key == key)


class TuneProgress:
    """The silent rendering; the base of the others."""

    def started(self, run_id: int, record: TuneRecord) -> None: ...

    def step_started(self, step: Step, record: TuneRecord) -> None: ...

    def trial_started(self, trial: Trial, step: Step) -> None: ...

    def trial_finished(self, trial: Trial, outcome: TrialOutcome, record: TuneRecord) -> None: ...

    def step_decided(self, step: Step, target: Target) -> None: ...

    def ended(self, run_id: int, record: TuneRecord, status: RunStatus) -> None: ...


class TuneLines(TuneProgress):
    """One line per trial with the budget spent; each step's diagnosis, candidates and
    the trials it will take (between the rounds the test needs and the most)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.walls: list[float] = []  # the trials' wall times seen so far
        self.began = 0.0

    def _each(self, config: TrialConfig) -> float:
        return statistics.mean(self.walls) if self.walls else trial_seconds(config)

    def _say(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self.out, flush=True)

    def started(self, run_id: int, record: TuneRecord) -> None:
        spent = f", {format_duration(record.spent_s)} spent" if record.spent_s else ""
        self._say(
            f"tune {run_id}: {record.target} of {label(record.start)}; budget"
            f" {format_duration(record.budget_s)}{spent}, at most {record.max_runs} runs a"
            f" side, gains under {record.min_gain_pct:g}% not kept"
        )
        start = record.steps[0]
        if len(record.steps) == 1 and not start.done:
            each = self._each(record.start)
            self._say(
                f"step 0: {start.runs_needed} runs of the start configuration, about"
                f" {format_duration(start.runs_needed * each)}"
            )

    def step_started(self, step: Step, record: TuneRecord) -> None:
        self._say(f"step {step.number}: {label(step.best_config)}")
        if step.diagnosis:
            self._say(f"  diagnosis: {step.diagnosis}")
        if step.left_out:
            self._say(f"  diagnosed without the disturbed runs: {'; '.join(step.left_out)}")
        for excluded in step.excluded:
            self._say(
                f"  not tried: {excluded.setting} = {show(excluded.value)}: {excluded.reason}"
            )
        if step.candidates:
            changes = "; ".join(c.change for c in step.candidates)
            self._say(
                f"  candidates: {changes} (each at p < {step.alpha:.3g}, at least"
                f" {step.runs_needed} runs a side)"
            )
            k, carried = len(step.candidates), record.carried_runs(step)
            need, most_runs = step.runs_needed, max(record.max_runs, step.runs_needed)
            least = k * need + max(0, need - carried)
            most = k * most_runs + max(0, most_runs - carried)
            each = self._each(step.best_config)
            self._say(
                f"  this step: {least}-{most} trials, about {format_duration(least * each)} to"
                f" {format_duration(most * each)}"
            )
        elif step.done:
            self._say(f"  {step.why_no_candidate}: nothing to improve")

    def trial_started(self, trial: Trial, step: Step) -> None:
        self.began = time.monotonic()
        what = _candidate_of(step, trial)
        self._say(f"[{trial.seq}] step {step.number}, {what}, run {trial.repetition} ...", end="")

    def trial_finished(self, trial: Trial, outcome: TrialOutcome, record: TuneRecord) -> None:
        self.walls.append(time.monotonic() - self.began)
        if outcome.status is not TrialStatus.OK:
            self._say(f" FAILED: {outcome.error}")
            return
        value = outcome.metrics.get(record.target.metric)
        spent = f"{format_duration(record.spent_s)} of {format_duration(record.budget_s)}"
        # A disturbed start run is measured again (tuning.start_measured): say why.
        what = disturbed(outcome.metrics)
        note = f"; disturbed: {', '.join(what)}" if what else ""
        self._say(f" {figure(value, record.target)}  ({spent}{note})")

    def step_decided(self, step: Step, target: Target) -> None:
        for candidate in step.candidates:
            self._say(f"  {describe(step, candidate, target)}")
        kept = next((c for c in step.candidates if c.key == step.winner), None)
        self._say(f"  kept: {kept.change}" if kept else "  nothing kept")

    def ended(self, run_id: int, record: TuneRecord, status: RunStatus) -> None:
        if status is not RunStatus.COMPLETE:
            self._say(f"tune {run_id} {status}; `tunnelbench tune --resume {run_id}` goes on")


class TuneJson(TuneProgress):
    """One JSON object per line and event."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def _emit(self, event: str, **fields: Any) -> None:
        print(json.dumps({"event": event, **fields}), file=self.out, flush=True)

    def started(self, run_id: int, record: TuneRecord) -> None:
        self._emit("tune_started", run_id=run_id, target=record.target, budget_s=record.budget_s)

    def step_started(self, step: Step, record: TuneRecord) -> None:
        self._emit(
            "step_started",
            step=step.number,
            diagnosis=step.diagnosis,
            left_out=step.left_out,
            candidates=[{"setting": c.setting, "value": c.value} for c in step.candidates],
            excluded=[
                {"setting": e.setting, "value": e.value, "reason": e.reason} for e in step.excluded
            ],
        )

    def trial_finished(self, trial: Trial, outcome: TrialOutcome, record: TuneRecord) -> None:
        self._emit(
            "trial_finished",
            seq=trial.seq,
            step=record.steps[-1].number,
            status=outcome.status,
            goodput_bps=outcome.metrics.get(metric.GOODPUT.name),
            error=outcome.error,
            spent_s=round(record.spent_s, 1),
        )

    def step_decided(self, step: Step, target: Target) -> None:
        self._emit(
            "step_decided",
            step=step.number,
            winner=step.winner,
            candidates=[
                {"setting": c.setting, "value": c.value, "outcome": c.outcome, "p": c.p}
                for c in step.candidates
            ],
        )

    def ended(self, run_id: int, record: TuneRecord, status: RunStatus) -> None:
        self._emit("tune_finished", run_id=run_id, status=status, end=record.end)
