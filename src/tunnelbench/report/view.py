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
from tunnelbench.analysis.summary import ConfigSummary, summarize_run
from tunnelbench.bench.store import Store
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
    def environment(self) -> dict[str, Any]:
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


def load(store: Store, ref: str) -> RunView:
    """The run ``ref`` (an id or ``latest``) of ``store``; an unknown run is the store's
    :class:`~tunnelbench.errors.UserError`."""
    run = store.run(ref)
    trials = store.trials(run.id)
    return RunView(
        run=run,
        trials=trials,
        summaries=summarize_run(trials, run.environment),
        trial_counts=store.trial_counts(run.id),
        store=store,
    )
