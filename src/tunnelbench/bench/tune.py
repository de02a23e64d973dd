"""A tuning session: measure one configuration, turn its advice into candidate changes,
measure each against it until the statistics decide, keep the largest significant gain,
and go on from the new best until nothing more helps, no advice is left, or the budget
ends.

Each step measures in rounds: one run of every undecided candidate and, while it has no
more runs than they do, one of the best configuration, in an order shuffled with the
session's seed, so that drift (heat, background work) falls on all of them alike. The
best configuration's runs of the step before count too (the start's measurement, or the
runs that made it the winner): they were taken moments before, interleaved with that
step's rounds, and reusing them saves a round of the control per step (as the winner's
best runs, they are if anything high, which makes a later gain harder to show, not
easier). After each round every candidate is judged on these runs and its own
(:func:`tunnelbench.analysis.tuning.judge`); decided ones leave the rounds.
Candidates come only from the advice, and only those the session's testbed can run (a
candidate that a run would skip, or a lab-only setting on real hosts, is listed with the
reason, never measured: :mod:`tunnelbench.bench.tune_benches`). The advice is the
best configuration's diagnosis on its runs that nothing outside the lab disturbed, and
the start is measured until it has enough of them
(:func:`tunnelbench.analysis.tuning.for_diagnosis`): a disturbed run does not end a
session.

The session is a run in the store: its trials as any run's, and its path (the
:class:`~tunnelbench.model.tuning.TuneRecord`) rewritten after every trial, so that
``tune --resume`` goes on from the last stored trial and every report can show the path.
"""

import random
import secrets
import statistics
import time
from dataclasses import dataclass

from tunnelbench.analysis import tuning
from tunnelbench.analysis.summary import summarize_run
from tunnelbench.bench import planfile, runner
from tunnelbench.bench.store import Store
from tunnelbench.bench.testbeds import hosts_plan
from tunnelbench.bench.tune_benches import Bench
from tunnelbench.bench.tune_progress import TuneProgress
from tunnelbench.errors import LabError, UserError
from tunnelbench.model.environment import Environment
from tunnelbench.model.lockrecord import LockRecord
from tunnelbench.model.plan import Experiment, Trial, TrialConfig, flatten
from tunnelbench.model.records import RunRecord, RunStatus, TrialRecord, TrialStatus
from tunnelbench.model.tuning import (
    Candidate,
    End,
    Excluded,
    Outcome,
    Step,
    Target,
    TuneRecord,
)
from tunnelbench.remote.hostsfile import HostsFile

DEFAULT_BUDGET_S = 15 * 60.0
DEFAULT_MAX_RUNS = 10
DEFAULT_MIN_GAIN_PCT = 2.0
DEFAULT_MAX_STEPS = 8
#: The most candidates measured in one step: each one more divides the level further
#: and adds a trial to every round.
MAX_CANDIDATES = 4
#: Failed trials after which a candidate is given up (the best configuration's stop the
#: session: nothing can be compared with it).
FAILURES_ALLOWED = 2


@dataclass(frozen=True)
class Request:
    start: TrialConfig
    target: Target = Target.THROUGHPUT
    budget_s: float = DEFAULT_BUDGET_S
    max_runs: int = DEFAULT_MAX_RUNS
    min_gain_pct: float = DEFAULT_MIN_GAIN_PCT
    max_steps: int = DEFAULT_MAX_STEPS


def prepare(request: Request) -> runner.Prepared:
    """The start configuration checked against this machine (an error names what it
    lacks) and the budget against the start's own measurement."""
    start = request.start
    if start.lab.in_vm:
        # A session measures trial by trial and decides between them: a guest would have
        # to stand between its steps (docs/kernels.md, "What is left out").
        raise UserError(
            f"lab.kernel: tune runs on this machine's kernel only, not {start.lab.kernel!r};"
            " run the plan's candidates with `tunnelbench run` on that kernel instead"
        )
    need = _affords_start(request)
    experiment = Experiment(configs=(start,), repetitions=need, name="tune")
    trials = [Trial(seq=i, repetition=i, config=start) for i in range(1, need + 1)]
    resolutions, skipped = runner.check(trials[:1])
    if skipped:
        raise UserError(next(iter(skipped.values())))
    return runner.Prepared(experiment, trials, resolutions, {})


def prepare_hosts(request: Request, hosts: HostsFile) -> runner.Prepared:
    """The start configuration checked against the hosts file (as ``run --hosts`` checks
    a plan, before any host is contacted) and the budget against its measurement; the
    start is then fitted to the hosts by :func:`hosts_plan.connected` and
    :func:`start_trials`."""
    need = _affords_start(request)
    experiment = Experiment(configs=(request.start,), repetitions=need, name="tune")
    return start_trials(hosts_plan.plan(experiment, hosts))


def start_trials(prepared: runner.Prepared) -> runner.Prepared:
    """The start's measurement as a tuning session takes it: its configuration (as the
    testbed fitted it) repeated, with no baseline (tune compares changes, not tunnels)."""
    experiment = prepared.experiment
    start = experiment.configs[0]
    trials = [
        Trial(seq=i, repetition=i, config=start) for i in range(1, experiment.repetitions + 1)
    ]
    return runner.Prepared(experiment, trials, prepared.resolutions, {})


def _affords_start(request: Request) -> int:
    """The start's runs, checked to fit in the budget."""
    need = tuning.runs_needed(1)
    least = need * planfile.trial_seconds(request.start)
    if request.budget_s < least:
        raise UserError(
            f"--budget: {request.budget_s:g} s cannot even measure the start configuration"
            f" ({need} runs take about {least:.0f} s); give at least {least:.0f} s"
        )
    return need


def begin(
    request: Request,
    prepared: runner.Prepared,
    store: Store,
    *,
    command_line: str,
    lock: LockRecord | None,
    facts: Environment | None = None,
) -> tuple[int, TuneRecord]:
    """Record a new tuning session as a run; its id and its (empty) path. ``facts``: the
    environment a testbed other than the lab describes."""
    run_id = runner.start(prepared, store, command_line=command_line, lock=lock, facts=facts)
    start = prepared.trials[0].config  # as the testbed runs it
    record = TuneRecord(
        target=request.target,
        budget_s=request.budget_s,
        max_runs=request.max_runs,
        min_gain_pct=request.min_gain_pct,
        max_steps=request.max_steps,
        seed=secrets.randbelow(2**32),
        steps=[Step(0, start.key(), start, 1, runs_needed=len(prepared.trials))],
    )
    store.set_tune(run_id, record)
    return run_id, record


def resumable(store: Store, ref: str, hosts: HostsFile | None = None) -> tuple[int, TuneRecord]:
    """The stopped tuning session ``ref`` and its path so far, to go on where it ran: in
    the lab, or (``hosts``) on the hosts file it ran with (the same machines, layout and
    tunnel; :func:`hosts_plan.resumed` names another)."""
    run = runner.stopped(store, ref)
    if run.tune is None:
        raise UserError(f"--resume: run {run.id} is not a tuning session; `run --resume` it")
    if hosts is None and on_hosts(run):
        raise UserError(
            f"--resume: run {run.id} tuned real hosts; resume it with --hosts FILE (the hosts"
            " file it ran with)"
        )
    if hosts is not None:
        hosts_plan.resumed(run, hosts)
    return run.id, run.tune


def on_hosts(run: RunRecord) -> bool:
    """Whether ``run`` measured a hosts file's machines."""
    return run.environment.remote is not None


class Session:
    """One tuning session's loop over the store."""

    def __init__(
        self,
        store: Store,
        run_id: int,
        record: TuneRecord,
        progress: TuneProgress,
        bench: Bench | None = None,
    ):
        self.store, self.run_id, self.record, self.progress = store, run_id, record, progress
        self.environment = store.run(str(run_id)).environment
        self.resolutions: dict[str, runner.Resolution | None] = {}
        self.walls: list[float] = []  # this invocation's trials' wall times
        self.bench = bench or Bench()  # where it measures: the lab unless told

    def execute(self) -> RunStatus:
        self.progress.started(self.run_id, self.record)

        def ended(status: RunStatus) -> None:
            self.progress.ended(self.run_id, self.record, status)

        return runner.guarded(self.store, self.run_id, self._loop, ended)

    def _save(self) -> None:
        self.store.set_tune(self.run_id, self.record)

    def _loop(self) -> None:
        with self.bench.testbed:
            while self.record.end is None:
                step = self.record.steps[-1]
                if step.done:
                    self._next_step(step)
                else:
                    self._measure(step)

    # --- measuring a step ---

    def _step_trials(self, step: Step) -> dict[str, list[TrialRecord]]:
        """The step's trials by configuration; the best configuration's from the step
        before on (see the module's docstring)."""
        since = self.record.steps[step.number - 1].first_seq if step.number else step.first_seq
        groups: dict[str, list[TrialRecord]] = {}
        for trial in self.store.trials(self.run_id):
            if trial.seq >= step.first_seq or (
                trial.seq >= since and trial.config_key == step.best_key
            ):
                groups.setdefault(trial.config_key, []).append(trial)
        return groups

    def _measure(self, step: Step) -> None:
        """Run rounds until every candidate of ``step`` is decided (or, in step 0, the
        start has its runs), or the budget ends the session."""
        if step.number > 0 and not any(c.runs or c.best_runs for c in step.candidates):
            self.progress.step_started(step, self.record)
        while True:
            groups = self._step_trials(step)
            best = groups.get(step.best_key, [])
            _give_up_if_failing(step, best)
            if step.number == 0:
                most = max(self.record.max_runs, step.runs_needed)
                if tuning.start_measured(best, step.runs_needed, most):
                    break
                round_ = [step.best_config]
            else:
                undecided = self._judge(step, _ok(best), groups)
                if not undecided:
                    break
                round_ = [c.config for c in undecided]
                most = max(len(_ok(groups.get(c.key, []))) for c in undecided)
                if len(_ok(best)) <= most:
                    round_.append(step.best_config)
                seed = f"{self.record.seed}/{step.number}/{len(groups.get(undecided[0].key, []))}"
                random.Random(seed).shuffle(round_)
            self._save()
            if not self._affordable(round_):
                self.record.end = End.BUDGET
                self.record.final_key = step.best_key
                self._save()
                return
            self._run_round(step, round_, groups)
        figures = tuning.values([t.metrics for t in _ok(best)], self.record.target.metric)
        step.best_runs = len(figures)
        step.best_median = float(statistics.median(figures)) if figures else None
        if step.number > 0:
            found = tuning.winner(step.candidates, self.record.target, self.record.min_gain_pct)
            step.winner = found.key if found else None
            self.progress.step_decided(step, self.record.target)
        step.done = True
        self._save()

    def _judge(
        self, step: Step, best: list[TrialRecord], groups: dict[str, list[TrialRecord]]
    ) -> list[Candidate]:
        undecided = []
        for candidate in step.candidates:
            if candidate.outcome is not Outcome.UNDECIDED:
                continue
            trials = groups.get(candidate.key, [])
            failed = [t for t in trials if t.status is TrialStatus.FAILED]
            if len(failed) >= FAILURES_ALLOWED:
                candidate.outcome, candidate.note = Outcome.FAILED, failed[-1].error or ""
                continue
            tuning.judge(
                candidate,
                [t.metrics for t in best],
                [t.metrics for t in _ok(trials)],
                target=self.record.target,
                alpha=step.alpha,
                need=step.runs_needed,
                max_runs=max(self.record.max_runs, step.runs_needed),
                min_gain_pct=self.record.min_gain_pct,
            )
            if candidate.outcome is Outcome.UNDECIDED:
                undecided.append(candidate)
        return undecided

    def _affordable(self, round_: list[TrialConfig]) -> bool:
        each = statistics.mean(self.walls) if self.walls else planfile.trial_seconds(round_[0])
        return self.record.spent_s + each * len(round_) <= self.record.budget_s

    def _run_round(
        self, step: Step, round_: list[TrialConfig], groups: dict[str, list[TrialRecord]]
    ) -> None:
        seq = max((t.seq for t in self.store.trials(self.run_id)), default=0)
        for config in round_:
            seq += 1
            key = config.key()
            trial = Trial(seq, len(groups.get(key, [])) + 1, config)
            self.progress.trial_started(trial, step)
            began = time.monotonic()
            outcome = runner.run_trial(
                self.store, self.run_id, trial, self._resolution(config), self.bench.testbed
            )
            wall = time.monotonic() - began
            self.walls.append(wall)
            self.record.spent_s += wall
            self._save()
            self.progress.trial_finished(trial, outcome, self.record)

    def _resolution(self, config: TrialConfig) -> runner.Resolution | None:
        key = config.key()
        if key not in self.resolutions:
            # A refusal is possible here when the step began, but no longer.
            self.resolutions[key] = self.bench.admit(config)
        return self.resolutions[key]

    # --- the next step ---

    def _next_step(self, step: Step) -> None:
        record = self.record
        best = step.best_config if step.winner is None else step.candidate(step.winner).config
        record.final_key = best.key()
        if step.number > 0 and step.winner is None:
            record.end = End.NOTHING_HELPED
        elif step.number >= record.max_steps:
            record.end = End.MAX_STEPS
        if record.end is not None:
            self._save()
            return
        runs = [t for t in self._step_trials(step).get(best.key(), []) if t.seq >= step.first_seq]
        diagnosed, left_out = tuning.for_diagnosis(runs)
        (summary,) = summarize_run(diagnosed, self.environment)
        verdict, advice = tuning.own_advice(summary, self.environment)
        proposals = tuning.proposals(advice, flatten(best.to_dict()), record.target)
        following = Step(
            step.number + 1,
            best.key(),
            best,
            first_seq=max(t.seq for t in self.store.trials(self.run_id)) + 1,
            diagnosis=verdict,
            left_out=left_out,
        )
        measured = record.measured_keys()
        for proposal in proposals:
            self._consider(following, proposal, best, measured)
        if not following.candidates:
            following.done = True
            record.steps.append(following)
            record.end = End.NOTHING_TO_IMPROVE
            self.progress.step_started(following, record)
            self._save()
            return
        following.alpha = tuning.step_level(len(following.candidates))
        following.runs_needed = tuning.runs_needed(len(following.candidates))
        record.steps.append(following)
        self._save()

    def _consider(
        self, step: Step, proposal: tuning.Proposal, best: TrialConfig, measured: set[str]
    ) -> None:
        """Add ``proposal`` to ``step``'s candidates, or to its exclusions with why."""
        try:
            config = self.bench.derive(best, proposal.setting, proposal.value)
        except UserError as exc:
            step.excluded.append(Excluded(proposal.setting, proposal.value, str(exc)))
            return
        key = config.key()
        if key in measured or any(c.key == key for c in step.candidates):
            return  # measured already in this session: its verdict stands
        if len(step.candidates) >= MAX_CANDIDATES:
            reason = f"at most {MAX_CANDIDATES} candidates a step"
            step.excluded.append(Excluded(proposal.setting, proposal.value, reason))
            return
        try:
            self.resolutions[key] = self.bench.admit(config)
        except UserError as exc:
            step.excluded.append(Excluded(proposal.setting, proposal.value, str(exc)))
            return
        step.candidates.append(
            Candidate(proposal.setting, proposal.value, key, config, proposal.suggestion)
        )


def _ok(trials: list[TrialRecord]) -> list[TrialRecord]:
    return [t for t in trials if t.status is TrialStatus.OK]


def _give_up_if_failing(step: Step, best: list[TrialRecord]) -> None:
    failed = [t for t in best if t.status is TrialStatus.FAILED]
    if len(failed) >= FAILURES_ALLOWED:
        raise LabError(
            f"the best configuration failed {len(failed)} times in step {step.number}, so"
            f" nothing can be compared with it: {failed[-1].error}"
        )
