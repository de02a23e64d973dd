"""A stored run, loaded once, as every renderer receives it.

Renderers (terminal table, Markdown, HTML, JSON, CSV, a comparison's sides) do no I/O
of their own: the verb loads the run here and hands each the same view, so they cannot
disagree about what the run holds (each used to call ``store.run`` and ``summarize_run``
itself, and two of them left out the run's environment and with it the advice).
"""

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from tunnelbench.analysis import noise
from tunnelbench.analysis.summary import ConfigSummary, summarize_run, varying_axes
from tunnelbench.bench.store import Store
from tunnelbench.model.environment import Environment
from tunnelbench.model.plan import flatten
from tunnelbench.model.records import RunRecord, TrialRecord
from tunnelbench.report import findings


@dataclass(frozen=True)
class RunView:
    """One run with its trials, its per-configuration summaries (diagnosis and advice
    included) and where it is stored.

    Artifacts (a trial's per-second goodput, its probe series) are large and only some
    renderers use some of them: :attr:`store` stays open while the view is rendered and
    :meth:`artifact` reads one when it is asked for.
    """

    run: RunRecord
    trials: list[TrialRecord]
    summaries: list[ConfigSummary]
    trial_counts: dict[str, int]
    store: Store

    @property
    def environment(self) -> Environment:
        return self.run.environment

    @property
    def database(self) -> Path:
        return self.store.path

    def artifact(self, trial_id: int, name: str) -> Any:
        return self.store.artifact(trial_id, name)

    @cached_property
    def noise(self) -> noise.Noise:
        """The run's noise floor and disturbed trials, configurations named as the
        findings name them."""
        named = [
            (s.key, name, s.goodput, s.baseline_key is None)
            for name, s in findings.named(self.summaries)
        ]
        return noise.measure(named, self.trials)


def _sortable(value: Any) -> tuple[int, float, str]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, "" if value is None else str(value))


def in_setting_order(summaries: list[ConfigSummary]) -> list[ConfigSummary]:
    """Configurations ordered by the settings that vary between them, numbers as numbers:
    a tuning session stores them in the order it tried them (queue limits 4, 16, 64,
    1024, 256), which no table should be read in."""
    axes = varying_axes(summaries)

    def key(s: ConfigSummary) -> tuple[tuple[int, float, str], ...]:
        flat = flatten(s.config.to_dict())
        return tuple(_sortable(flat.get(axis)) for axis in axes)

    return sorted(summaries, key=key)


def load(store: Store, ref: str) -> RunView:
    """The run ``ref`` (an id or ``latest``) of ``store``; an unknown run is the store's
    :class:`~tunnelbench.errors.UserError`. A plan's configurations keep its order; a
    tuning session's are put in the order of their settings."""
    run = store.run(ref)
    trials = store.trials(run.id)
    summaries = summarize_run(trials, run.environment)
    return RunView(
        run=run,
        trials=trials,
        summaries=summaries if run.tune is None else in_setting_order(summaries),
        trial_counts=store.trial_counts(run.id),
        store=store,
    )
