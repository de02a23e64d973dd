"""What reports say about adaptive repetitions: which configurations reached the
precision target, and which stopped at the maximum without it.

Reads what the runner recorded with the run (``runs.precision``) when it made its last
decision, rather than recomputing it, so a report says what the run decided.
"""

from tunnelbench.analysis.precision import Precision, State
from tunnelbench.bench.progress import describe
from tunnelbench.model.records import RunRecord, TrialRecord


def standing(run: RunRecord) -> dict[str, Precision]:
    """Each configuration's standing against the target, by config key; empty for a
    run without adaptive repetitions (or one stopped before its first decision)."""
    return {key: Precision.from_dict(p) for key, p in (run.precision or {}).items()}


def lines(run: RunRecord, trials: list[TrialRecord]) -> list[str]:
    """``precision: 4 of 6 configurations within ±2%`` and a line for each of the
    others: ``wireguard, 1 stream, upload: target not met (±3.4% after 10 runs)``."""
    experiment = run.experiment
    by_key = standing(run)
    if experiment.adaptive is None or not by_key:
        return []
    configs = {t.config_key: t.config for t in trials}
    met = sum(1 for p in by_key.values() if p.state is State.MET)
    out = [
        f"precision: {met} of {len(by_key)} configuration(s) within"
        f" ±{experiment.adaptive.target_pct:g}%"
    ]
    for key, p in by_key.items():
        if p.state is not State.MET and key in configs:
            out.append(f"  {describe(configs[key])}: {p.text()}")
    return out
