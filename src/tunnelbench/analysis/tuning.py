"""The decisions of a tuning session, as pure functions of measured runs.

A candidate change is judged against the best configuration on the runs both got in the
same step (interleaved, so that drift falls on both): the two-sided rank test and the
bootstrap interval of the ratio of medians of :mod:`.significance`, at the step's level
(:data:`~.significance.ALPHA` divided among the step's candidates, Bonferroni, so that
trying four changes does not find a "gain" one time in five by chance). A change is

- **better** when the test is significant, the whole interval lies on the improving side
  and the median improves by at least the minimum gain; with the target
  ``throughput-keeping-latency`` its loaded round trip must also not be significantly
  longer (else **raised latency**);
- **too small** when it is significantly better by less than the minimum gain;
- **worse** when it is significantly worse;
- **no difference** when the interval lies within ± the minimum gain (equivalent);
- **not decided** when both sides reached the most runs and the evidence shows neither
  a difference nor equivalence (an interval reaching past the minimum gain is not
  "equal"), or when a guarded gain's other metric was not measured;
- **undecided** otherwise: more runs are needed.

No verdict is given on fewer runs a side than the rank test needs to reach the step's
level at all (:func:`~.significance.repetitions_needed`).

The best configuration is diagnosed (its advice gives the next step's candidates) on
the runs that nothing outside the lab disturbed (:func:`for_diagnosis`): one run with
outside load made the verdict "outside load", whose advice names no setting, and ended
sessions with "nothing to improve". The start is measured until it has enough such runs
(:func:`start_measured`). On a machine disturbed in every run, the candidates come from
the configuration's own findings, the disturbance told after them (:func:`own_advice`).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median

from tunnelbench.analysis import noise
from tunnelbench.analysis.advice import Advice, advise
from tunnelbench.analysis.diagnosis import Diagnosis, Subject
from tunnelbench.analysis.disturbance import DISTURBANCES
from tunnelbench.analysis.significance import ALPHA, compare, format_p, repetitions_needed
from tunnelbench.analysis.steadiness import unsteady
from tunnelbench.analysis.summary import ConfigSummary, where
from tunnelbench.model import metrics as metric
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import flatten
from tunnelbench.model.records import TrialRecord, TrialStatus
from tunnelbench.model.tuning import LOADED_P95, Candidate, End, Outcome, Step, Target, show

Runs = Sequence[dict[str, float]]

#: The fewest undisturbed runs a configuration is diagnosed on; with fewer the machine
#: was busy throughout, and every run is diagnosed (its verdict then says so). 3: fewer
#: give no usable spread (:data:`~.noise.MIN_RUNS`).
CLEAN_RUNS_MIN = noise.MIN_RUNS


def step_level(candidates: int) -> float:
    """The significance level of each of a step's comparisons."""
    return ALPHA / max(candidates, 1)


def runs_needed(candidates: int) -> int:
    """The fewest runs a side with which a comparison of the step can be significant."""
    return repetitions_needed(step_level(candidates))


@dataclass(frozen=True)
class Proposal:
    """A value the advice proposes for a setting."""

    setting: str
    value: object
    suggestion: str


def proposals(
    advice: Iterable[Advice], current: dict[str, object], target: Target
) -> list[Proposal]:
    """Every (setting, value) the advice proposes for ``target``, in the advice's order,
    once each, leaving out the values ``current`` (the configuration's flattened
    settings) has. Advice for the loaded round trip alone (a shorter queue) is for the
    latency target; advice for goodput alone is not."""
    goals = {"latency", "both"} if target is Target.LATENCY else {"throughput", "both"}
    found: list[Proposal] = []
    seen: set[tuple[str, str]] = set()
    for item in advice:
        if item.setting is None or item.refuted or item.goal not in goals:
            continue
        for value in item.candidates:
            mark = (item.setting, repr(value))
            if mark in seen or current.get(item.setting) == value:
                continue
            seen.add(mark)
            found.append(Proposal(item.setting, value, item.suggestion))
    return found


def disturbed(metrics: dict[str, float]) -> tuple[str, ...]:
    """What outside the lab took CPU from one run's measured window (outside processes,
    the hypervisor's steal, the VM host's load), in words; empty for a clean run. A
    window that was not yet steady is no disturbance of the machine's: it is left to the
    diagnosis."""
    moving = set(unsteady(metrics))
    return tuple(what for what in noise.disturbances(metrics) if what not in moving)


def for_diagnosis(trials: Sequence[TrialRecord]) -> tuple[list[TrialRecord], list[str]]:
    """The successful runs to diagnose a configuration on, and each run left out with
    why (``trial 3: outside processes 16% of a core``): the undisturbed ones when there
    are at least :data:`CLEAN_RUNS_MIN`, else all of them."""
    ok = [t for t in trials if t.status is TrialStatus.OK]
    clean = [t for t in ok if not disturbed(t.metrics)]
    if len(clean) == len(ok) or len(clean) < CLEAN_RUNS_MIN:
        return ok, []
    kept = {t.seq for t in clean}
    left = [f"trial {t.seq}: {', '.join(disturbed(t.metrics))}" for t in ok if t.seq not in kept]
    return clean, left


def start_measured(trials: Sequence[TrialRecord], need: int, most: int) -> bool:
    """Whether the start configuration has its runs: ``need`` in all, of which
    :data:`CLEAN_RUNS_MIN` nothing disturbed (a disturbed run is measured again, so that
    the diagnosis has its clean runs); or, on a machine disturbed throughout, twice
    ``need`` (at most ``most``) in all, whatever they are."""
    ok = [t for t in trials if t.status is TrialStatus.OK]
    clean = [t for t in ok if not disturbed(t.metrics)]
    if len(ok) >= need and len(clean) >= min(CLEAN_RUNS_MIN, need):
        return True
    return len(ok) >= max(need, min(most, 2 * need))


def own_advice(summary: ConfigSummary, environment: Environment) -> tuple[str, list[Advice]]:
    """The verdict a step names and the advice its candidates come from, for one
    configuration diagnosed alone (``summary``, of the runs :func:`for_diagnosis` chose).

    Where a disturbance of the machine (outside load, steal) is the verdict, too few of
    its runs were clean to be diagnosed alone (:data:`CLEAN_RUNS_MIN`), and its advice
    names no setting: the session would end with nothing to try on a busy machine. The
    configuration's own findings still hold (a queue that dropped half of what it was
    offered, a saturated daemon), and a step measures their candidates interleaved with
    the configuration, under the same load: so the advice is theirs, with the disturbance
    told after them. Otherwise the summary's own."""
    diagnosis = summary.diagnosis
    if diagnosis is None or summary.goodput is None:
        return "", summary.advice
    own = [f for f in diagnosis.findings if f.bound not in DISTURBANCES]
    if diagnosis.verdict.bound not in DISTURBANCES or not own:
        return diagnosis.verdict.summary, summary.advice
    machine = [f for f in diagnosis.findings if f.bound in DISTURBANCES]
    runs = [t for t in summary.trials if t.status is TrialStatus.OK]
    subject = Subject(
        summary.config,
        summary.resolved,
        summary.metrics | {metric.GOODPUT.name: summary.goodput.median},
        summary.ceiling.goodput_bps if summary.ceiling else None,
        where(summary.config, environment),
        runs=tuple(t.metrics for t in runs),
        noise_pct=summary.noise_pct,
    )
    advice = advise(subject, Diagnosis(own[0], (*own[1:], *machine)), [])
    told = "; ".join(f.summary for f in machine)
    return f"{own[0].summary} (too few undisturbed runs to leave the load out: {told})", advice


def values(runs: Runs, name: str) -> list[float]:
    return [run[name] for run in runs if name in run]


def judge(
    candidate: Candidate,
    best: Runs,
    mine: Runs,
    *,
    target: Target,
    alpha: float,
    need: int,
    max_runs: int,
    min_gain_pct: float,
) -> Candidate:
    """``candidate`` with its figures and outcome from the best's and its own runs."""
    a, b = values(best, target.metric), values(mine, target.metric)
    candidate.runs, candidate.best_runs = len(b), len(a)
    candidate.median = float(median(b)) if b else None
    candidate.best_median = float(median(a)) if a else None
    latency = values(best, LOADED_P95), values(mine, LOADED_P95)
    if latency[0] and latency[1]:
        candidate.loaded_p95_ms = [float(median(latency[0])), float(median(latency[1]))]
    if min(len(a), len(b)) < need:
        candidate.outcome, candidate.note = Outcome.UNDECIDED, ""
        return candidate
    c = compare(a, b)
    candidate.p = c.p
    candidate.ratio_ci = list(c.ratio_ci) if c.ratio_ci else None
    gain = 1 + min_gain_pct / 100
    low, high = c.ratio_ci or (0.0, float("inf"))
    improving = (low > 1) if target.higher_is_better else (high < 1)
    worsening = (high < 1) if target.higher_is_better else (low > 1)
    ratio = c.ratio or 1.0
    improvement = ratio if target.higher_is_better else 1 / ratio
    outcome, note = Outcome.UNDECIDED, ""
    if c.p < alpha and improving:
        outcome = Outcome.BETTER if improvement >= gain else Outcome.TOO_SMALL
        if outcome is Outcome.TOO_SMALL:
            note = f"significant, but below the minimum gain of {min_gain_pct:g}%"
        elif target.guard is not None:
            outcome, note = _guarded(best, mine, target.guard, alpha, need, gain)
    elif c.p < alpha and worsening:
        outcome = Outcome.WORSE
    elif 1 / gain < low and high < gain:
        outcome = Outcome.NO_DIFFERENCE
        note = f"95% CI within ±{min_gain_pct:g}%"
    elif min(len(a), len(b)) >= max_runs:
        outcome = Outcome.NOT_DECIDED
        note = (
            f"neither a difference nor equivalence within ±{min_gain_pct:g}% shown after"
            f" {max_runs} runs each ({format_p(c.p)}, level {alpha:.3g})"
        )
    candidate.outcome, candidate.note = outcome, note
    return candidate


def _guarded(
    best: Runs, mine: Runs, guard: str, alpha: float, need: int, gain: float
) -> tuple[Outcome, str]:
    """A gain is kept unless it worsens the guarded metric (the loaded round trip of a
    throughput gain, the goodput of a latency gain) significantly and by more than the
    minimum gain."""
    a, b = values(best, guard), values(mine, guard)
    latency = guard == LOADED_P95
    if min(len(a), len(b)) < need:
        missing = "loaded round trip" if latency else "goodput"
        return Outcome.NOT_DECIDED, f"better, but its {missing} was not measured"
    c = compare(a, b)
    ratio, ci = c.ratio or 1.0, c.ratio_ci
    if latency and c.p < alpha and ci is not None and ci[0] > 1 and ratio > gain:
        figures = f"{ms(float(median(a)))} → {ms(float(median(b)))} ms"
        return Outcome.LATENCY, f"loaded RTT p95 {figures} ({format_p(c.p)})"
    if not latency and c.p < alpha and ci is not None and ci[1] < 1 and 1 / ratio > gain:
        figures = f"{median(a) / 1e6:,.0f} → {median(b) / 1e6:,.0f} Mbit/s"
        return Outcome.LOST_THROUGHPUT, f"goodput {figures} ({format_p(c.p)})"
    return Outcome.BETTER, ""


def winner(
    candidates: Iterable[Candidate], target: Target, min_gain_pct: float
) -> Candidate | None:
    """The better candidate that improves the target most, if any. Candidates whose
    medians are within the minimum gain of the best one are a tie (one run cannot tell
    them apart): for a throughput target the one with the shortest loaded round trip
    wins it (a queue of 16 packets rather than 64 at the same goodput)."""
    better = [c for c in candidates if c.outcome is Outcome.BETTER and c.median is not None]
    if not better:
        return None
    sign = 1 if target.higher_is_better else -1
    top = max(better, key=lambda c: sign * (c.median or 0.0))
    if target is Target.LATENCY:
        return top
    least = (top.median or 0.0) / (1 + min_gain_pct / 100)
    tied = [c for c in better if (c.median or 0.0) >= least]
    timed = [c for c in tied if c.loaded_p95_ms is not None]
    return min(timed, key=lambda c: (c.loaded_p95_ms or [0, 0])[1]) if timed else top


def signed_pct(value: float) -> str:
    """``+29%``, or one decimal below 1% (``-0.3%``, never ``-0%``); exactly 0 is ``0%``."""
    if value == 0:
        return "0%"
    return f"{value:+.1f}%" if abs(value) < 1 else f"{value:+.0f}%"


def ms(value: float) -> str:
    """A round trip in ms: 0.1 ms resolution, and two digits below 1 ms (a veth lab's
    round trips are tens of microseconds)."""
    return f"{value:.2f}" if value < 1 else f"{value:,.1f}"


def figure(value: float | None, target: Target) -> str:
    if value is None:
        return "-"
    return f"{ms(value)} ms" if target is Target.LATENCY else f"{value / 1e6:,.0f} Mbit/s"


def describe(step: Step, candidate: Candidate, target: Target, end: End | None = None) -> str:
    """``lab.wan.queue_limit 4 → 64: +33% (95% CI +26..+36%, p = 0.008), loaded RTT p95
    21.0 → 4.1 ms: better``: the change, its effect and the verdict."""
    before = show(flatten(step.best_config.to_dict()).get(candidate.setting))
    head = f"{candidate.setting} {before} → {show(candidate.value)}"
    if candidate.outcome is Outcome.FAILED:
        return f"{head}: failed ({candidate.note})"
    if candidate.median is None or candidate.best_median is None:
        return f"{head}: {candidate.outcome} (not measured)"
    figures = f"{figure(candidate.best_median, target)} → {figure(candidate.median, target)}"
    if (change := candidate.change_pct) is not None:
        figures += f" ({signed_pct(change)}"
        if candidate.ratio_ci is not None:
            low, high = (100 * (end - 1) for end in candidate.ratio_ci)
            figures += f", 95% CI {signed_pct(low)[:-1]}..{signed_pct(high)}"
        if candidate.p is not None:
            figures += f", {format_p(candidate.p)}"
        figures += f", {candidate.best_runs} vs {candidate.runs} runs)"
    if candidate.loaded_p95_ms is not None and target is not Target.LATENCY:
        was, now = candidate.loaded_p95_ms
        figures += f", loaded RTT p95 {ms(was)} → {ms(now)} ms"
    verdict = str(candidate.outcome)
    if candidate.outcome is Outcome.UNDECIDED:
        verdict += (
            ": the budget ended first" if end is End.BUDGET else ": not measured to a verdict"
        )
    if candidate.note:
        verdict += f" ({candidate.note})"
    return f"{head}: {figures}: {verdict}"
