"""Adaptive repetitions: is a configuration's median known well enough, and which
configurations need another round.

Pure functions on the goodputs of a run's trials. A configuration's precision is the
half-width of the bootstrap 95% interval of its median goodput, in percent of the median
(:attr:`tunnelbench.analysis.stats.Summary.ci_half_width_pct`), over its successful
trials. Every configuration, a baseline included, is judged on its own figures only:

- before the experiment's ``repetitions`` (the minimum) it always gets another run;
- it is done when the half-width is within the target (``met``);
- it is done, and flagged, when it has had ``max_repetitions`` attempts without meeting
  the target (``not met``). Failed trials count as attempts, so a configuration that
  keeps failing stops too, but add nothing to the interval;
- otherwise it needs another round (``more``).

A configuration this machine skipped has no attempts and is never repeated.
"""

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from tunnelbench.analysis.stats import summarize
from tunnelbench.model import metrics as metric
from tunnelbench.model.plan import Experiment, Trial, extra_round_order
from tunnelbench.model.records import TrialRecord, TrialStatus

#: Goodput (bit/s) of each attempt of one configuration, in order; None for a failure.
Attempts = Sequence[float | None]


class State(Enum):
    MORE = "more"  # another round is needed
    MET = "met"  # within the target
    NOT_MET = "not met"  # reached the maximum without meeting the target


@dataclass(frozen=True)
class Precision:
    """Where one configuration stands against an adaptive experiment's target."""

    state: State
    half_width_pct: float | None  # None with fewer than two successful runs, or median 0
    runs: int  # successful trials
    attempts: int  # trials run, failed ones included

    def figure(self) -> str:
        """The interval and what it rests on: ``±3.4% after 10 runs``."""
        after = f"after {self.runs} run{'s' if self.runs != 1 else ''}"
        failed = self.attempts - self.runs
        if failed:
            after += f", {failed} failed"
        if self.half_width_pct is None:
            return f"no interval {after}"
        return f"±{self.half_width_pct:.1f}% {after}"

    def text(self) -> str:
        """What a report says: ``target not met (±3.4% after 10 runs)``."""
        if self.state is State.MORE:
            return f"more runs needed ({self.figure()})"
        return f"target {self.state.value} ({self.figure()})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "half_width_pct": self.half_width_pct,
            "runs": self.runs,
            "attempts": self.attempts,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Precision":
        return cls(State(data["state"]), data["half_width_pct"], data["runs"], data["attempts"])


def assess(experiment: Experiment, attempts: Attempts) -> Precision:
    """One configuration's standing, from its attempts so far."""
    adaptive = experiment.adaptive
    if adaptive is None:
        raise ValueError("assess needs an experiment with adaptive repetitions")
    goodputs = [g for g in attempts if g is not None]
    summary = summarize(goodputs)
    half = summary.ci_half_width_pct if summary is not None else None
    if len(attempts) < experiment.repetitions:
        state = State.MORE
    elif half is not None and half <= adaptive.target_pct:
        state = State.MET
    elif len(attempts) >= adaptive.max_repetitions:
        state = State.NOT_MET
    else:
        state = State.MORE
    return Precision(state, half, len(goodputs), len(attempts))


def attempts_by_config(trials: Iterable[TrialRecord]) -> dict[str, list[float | None]]:
    """Each configuration's attempts, in run order. Skipped configurations are left out:
    they are never repeated."""
    grouped: dict[str, list[TrialRecord]] = {}
    for trial in sorted(trials, key=lambda t: t.seq):
        grouped.setdefault(trial.config_key, []).append(trial)
    return {
        key: [
            t.metrics.get(metric.GOODPUT.name) if t.status is TrialStatus.OK else None
            for t in group
        ]
        for key, group in grouped.items()
        if not any(t.status is TrialStatus.SKIPPED for t in group)
    }


def assess_all(experiment: Experiment, attempts: Mapping[str, Attempts]) -> dict[str, Precision]:
    """The standing of every configuration that has attempts, by config key."""
    return {key: assess(experiment, a) for key, a in attempts.items()}


def next_round(
    experiment: Experiment,
    attempts: Mapping[str, Attempts],
    *,
    next_seq: int,
    exclude: Collection[str] = (),
) -> list[Trial]:
    """The trials of the next round: the configurations that need another run, in the
    round's order (:func:`tunnelbench.model.plan.extra_round_order`), numbered from
    ``next_seq``; empty when every configuration is done.

    Computed from the stored attempts alone, so a resumed run continues exactly: the
    configurations still needing a run all have the same number of attempts after a
    whole round, and after an interrupted one the configurations the round did not
    reach (one attempt fewer) come first, in that round's order. ``exclude`` are
    configurations that cannot run here.
    """
    standing = assess_all(experiment, attempts)
    needing = {k: p.attempts for k, p in standing.items() if p.state is State.MORE}
    needing = {k: n for k, n in needing.items() if k not in exclude}
    if not needing:
        return []
    repetition = min(needing.values()) + 1
    configs = [
        c
        for c in extra_round_order(experiment, repetition)
        if needing.get(c.key()) == repetition - 1
    ]
    return [
        Trial(seq=next_seq + i, repetition=repetition, config=config)
        for i, config in enumerate(configs)
    ]


def repetitions_phrase(experiment: Experiment) -> str:
    """How often each configuration runs, in words: ``3 repetitions`` or ``3-10
    repetitions, until the median's 95% interval is within ±2%``."""
    adaptive = experiment.adaptive
    if adaptive is None:
        return f"{experiment.repetitions} repetition{'s' if experiment.repetitions != 1 else ''}"
    return (
        f"{experiment.repetitions}-{adaptive.max_repetitions} repetitions, until the median's"
        f" 95% interval is within ±{adaptive.target_pct:g}%"
    )
